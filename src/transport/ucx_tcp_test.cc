// The installed UCX's tcp transport when the peer of a new endpoint exits
// between the connection's establishment and the endpoint's first message
// (docs/transport.md, "Failure handling"). The scenario runs in its own
// process, ucx_tcp_lost_connect (src/transport/testing), whose send() closes
// the peer's listener at that moment: with UCX 1.13 as packaged it aborts on
// an assertion in its first round (exit 134), as engines did when a client
// exited while the engine connected back to it.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <sstream>
#include <string>

#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace ros2::transport {
namespace {

using namespace std::chrono_literals;

// Every endpoint whose connection was lost that way fails to be created, as
// one whose first connect() is refused, and leaves nothing behind: no
// descriptor, no connection attempt the interface would wait for on flush;
// the interface then connects and sends to a live peer.
TEST(UcxTcpLostConnectionTest, EndpointCreateFailsAndTheInterfaceServesOn) {
  ros2::testing::TempDir tmp{"ucx-lost"};
  constexpr int kRounds = 20;
  const ros2::testing::CommandResult r = ros2::testing::RunCommand({UCX_TCP_LOST_CONNECT_PATH, std::to_string(kRounds)},
                                                                   tmp.path(), 120s, {{"UCX_TCP_CONN_NB", "n"}});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::map<std::string, std::string> results;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("RESULT ", 0) != 0) continue;
    const size_t sp = line.find(' ', 7);
    results[line.substr(7, sp - 7)] = sp == std::string::npos ? "" : line.substr(sp + 1);
  }
  EXPECT_EQ(results["create_status"], "Destination is unreachable") << r.out;
  EXPECT_EQ(results["created"], "0");
  EXPECT_EQ(results["failed"], std::to_string(kRounds));
  EXPECT_EQ(results["fds_left"], "0");
  EXPECT_EQ(results["iface_flush"], "Success");
  EXPECT_EQ(results["live_received"], "1") << r.out;
}

}  // namespace
}  // namespace ros2::transport
