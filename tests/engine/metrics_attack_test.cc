// Hostile HTTP clients of a real ros2-engine's metrics endpoint
// (`metrics.listen`, prometheus-cpp on civetweb): headers far beyond any
// scrape, paths other than /metrics, connections that trickle a request
// byte by byte, and a flood of connections. Each checks that the endpoint
// answers with an error or closes, serves nothing but the metrics page, never
// holds an idle connection beyond its request timeout, and that the engine
// keeps serving data (read back) and /metrics. docs/security.md, "Metrics
// endpoint".
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <functional>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "engine_cluster.h"
#include "metrics/exporter.h"
#include "metrics/scrape.h"
#include "object_session.h"
#include "testing/free_port.h"
#include "testing/pattern.h"
#include "testing/proc_status.h"
#include "testing/status_assert.h"

namespace ros2::testing {
namespace {

using Clock = std::chrono::steady_clock;

// A loopback port free right now (testing/free_port.h); -1 when none could be had.
int FreePort() {
  auto port = ros2::testing::FreeLoopbackPort();
  return port.ok() ? *port : -1;
}

// A TCP connection to 127.0.0.1:port, or -1 when it is refused or not
// established within `timeout` (a full accept queue leaves a connect waiting).
int Dial(int port, std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (errno != EINPROGRESS || ::poll(&p, 1, static_cast<int>(timeout.count())) != 1 ||
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      ::close(fd);
      return -1;
    }
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

// Sends what it can of `bytes` (the server may close early) and reads the
// answer until the server closes or `timeout` passes.
std::string Exchange(int port, const std::string& bytes, std::chrono::milliseconds timeout) {
  const int fd = Dial(port);
  if (fd < 0) return "<refused>";
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string out;
  const auto end = Clock::now() + timeout;
  char buf[4096];
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// Whether the server closed `fd` (reading gives end of file or an error)
// within `within`.
bool ClosedWithin(int fd, std::chrono::milliseconds within, const std::function<void()>& between = nullptr) {
  const auto end = Clock::now() + within;
  char buf[512];
  while (Clock::now() < end) {
    if (between) between();
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) return true;
  }
  return false;
}

std::string StatusLine(const std::string& answer) { return answer.substr(0, answer.find("\r\n")); }

class MetricsAttack : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = FreePort();
    ASSERT_GT(port_, 0);
    ASSERT_NO_FATAL_FAILURE(
        cluster_.Start({.transport = "shm", .targets = 1, .metrics_listen = fmt::format("127.0.0.1:{}", port_)}));
    ROS2_ASSERT_OK(cluster_.mgmt->CreatePool("p", uint64_t{8} << 20));
    ROS2_ASSERT_OK(cluster_.mgmt->CreateContainer("p", "c"));
    auto s = ObjectSession::Open(cluster_.engine->control(), cluster_.admin, "p", "c", transport::TransportKind::kShm);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    session_ = std::move(*s);
    ROS2_ASSERT_OK(session_->UpdateArray(oid_, "d", "a", 0, data_));
    ASSERT_NO_FATAL_FAILURE(ExpectServing());
  }
  std::string Address() const { return fmt::format("127.0.0.1:{}", port_); }
  // The engine runs, serves its data (read back) and its metrics page.
  void ExpectServing() {
    ASSERT_EQ(::kill(cluster_.engine->pid(), 0), 0) << "the engine is gone";
    auto f = session_->FetchArray(oid_, "d", "a", 0, data_.size());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->data, data_);
    auto page = metrics::HttpGet(Address(), "/metrics", std::chrono::milliseconds(5000));
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    EXPECT_NE(page->find("ros2_"), std::string::npos) << page->substr(0, 400);
  }

  int port_ = -1;
  EngineCluster cluster_;
  std::unique_ptr<ObjectSession> session_;
  const ObjectId oid_ = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 0, 5);
  const std::vector<std::byte> data_ = Pattern(16 * 1024, 21);
};

TEST_F(MetricsAttack, HugeHeadersAreRefusedWithoutGrowingTheEngine) {
  const uint64_t rss_before = ProcStatusBytes(cluster_.engine->pid(), "VmRSS");
  for (const size_t size : {size_t{64} << 10, size_t{4} << 20}) {
    SCOPED_TRACE(size);
    std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Fill: ";
    request.append(size, 'a');
    request += "\r\n\r\n";
    const std::string answer = Exchange(port_, request, std::chrono::milliseconds(5000));
    EXPECT_EQ(answer.find(" 200 "), std::string::npos) << "a " << size << "-byte header was served: "
                                                        << StatusLine(answer);
    // Many headers, each short.
    std::string many = "GET /metrics HTTP/1.1\r\n";
    for (size_t i = 0; many.size() < size; ++i) many += fmt::format("X-H{}: v\r\n", i);
    many += "\r\n";
    const std::string answer2 = Exchange(port_, many, std::chrono::milliseconds(5000));
    EXPECT_EQ(answer2.find(" 200 "), std::string::npos) << StatusLine(answer2);
  }
  EXPECT_LT(ProcStatusBytes(cluster_.engine->pid(), "VmRSS"), rss_before + (uint64_t{64} << 20));
  ASSERT_NO_FATAL_FAILURE(ExpectServing());
}

TEST_F(MetricsAttack, PathsOtherThanMetricsServeNothing) {
  std::string secret;
  std::getline(std::ifstream(cluster_.engine->admin_secret_file()), secret);
  ASSERT_FALSE(secret.empty());
  for (const char* request :
       {"GET / HTTP/1.0\r\n\r\n", "GET /admin.secret HTTP/1.0\r\n\r\n", "GET /../admin.secret HTTP/1.0\r\n\r\n",
        "GET /metrics/../../engine.yaml HTTP/1.0\r\n\r\n", "GET /%2e%2e/admin.secret HTTP/1.0\r\n\r\n",
        "GET /etc/passwd HTTP/1.0\r\n\r\n", "GET http://x/../admin.secret HTTP/1.0\r\n\r\n",
        "PUT /metrics HTTP/1.0\r\nContent-Length: 4\r\n\r\nabcd", "DELETE /metrics HTTP/1.0\r\n\r\n",
        "BREW /metrics HTCPCP/1.0\r\n\r\n", "\x16\x03\x01\x02"}) {
    SCOPED_TRACE(request);
    const std::string answer = Exchange(port_, request, std::chrono::milliseconds(3000));
    EXPECT_EQ(answer.find(" 200 "), std::string::npos) << StatusLine(answer);
    EXPECT_EQ(answer.find(secret), std::string::npos) << "the admin secret was served";
    EXPECT_EQ(answer.find("root:"), std::string::npos) << "a host file was served";
  }
  ASSERT_NO_FATAL_FAILURE(ExpectServing());
}

TEST_F(MetricsAttack, AConnectionTricklingItsRequestIsClosedWithinTheRequestTimeout) {
  // A slowloris client: a byte of a request every 300 ms, never finishing.
  // Its connections are closed (each read resets no clock: the whole
  // request must arrive within the endpoint's request timeout), and the
  // endpoint answers scrapes meanwhile.
  std::vector<int> fds;
  for (int i = 0; i < 4; ++i) {
    fds.push_back(Dial(port_));
    ASSERT_GE(fds.back(), 0);
  }
  const std::string partial = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  const auto start = Clock::now();
  size_t at = 0;
  auto trickle = [&] {
    const char c = at < partial.size() ? partial[at] : 'z';
    ++at;
    for (int fd : fds) (void)::send(fd, &c, 1, MSG_NOSIGNAL);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  };
  // Two request threads take two connections at a time: all four are closed
  // after about two request timeouts (civetweb's default of 30 s would hold
  // each pair for that long).
  const auto limit = std::chrono::milliseconds(4 * metrics::MetricsExporter::kRequestTimeoutMs);
  for (int fd : fds) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(start + limit - Clock::now());
    EXPECT_TRUE(ClosedWithin(fd, std::max(left, std::chrono::milliseconds(0)), trickle))
        << "a trickling connection was held open beyond the request timeout";
  }
  const auto held = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  for (int fd : fds) ::close(fd);
  EXPECT_LT(held, limit);
  ASSERT_NO_FATAL_FAILURE(ExpectServing());
}

TEST_F(MetricsAttack, AConnectionFloodLeavesTheEngineServingAndTheEndpointRecovers) {
  // 512 connections that send nothing, opened at once and held, while the
  // victim's I/O runs: the data plane does not notice; once they close, the
  // endpoint answers at once.
  std::vector<int> fds;
  for (int i = 0; i < 512; ++i) {
    const int fd = Dial(port_, std::chrono::milliseconds(50));
    if (fd >= 0) fds.push_back(fd);
  }
  EXPECT_GT(fds.size(), 0u);
  for (int i = 0; i < 20; ++i) {
    auto f = session_->FetchArray(oid_, "d", "a", 0, data_.size());
    ASSERT_TRUE(f.ok()) << "the engine stopped serving data under the flood: " << f.status().ToString();
    EXPECT_EQ(f->data, data_);
  }
  ASSERT_EQ(::kill(cluster_.engine->pid(), 0), 0);
  for (int fd : fds) ::close(fd);
  const auto start = Clock::now();
  Status page = Status::Internal("no scrape yet");
  while (Clock::now() - start < std::chrono::seconds(15)) {
    auto got = metrics::HttpGet(Address(), "/metrics", std::chrono::milliseconds(1000));
    page = got.ok() ? Status::Ok() : got.status();
    if (page.ok()) break;
  }
  EXPECT_TRUE(page.ok()) << "the endpoint did not recover after the flood: " << page.ToString();
  ASSERT_NO_FATAL_FAILURE(ExpectServing());
}

}  // namespace
}  // namespace ros2::testing
