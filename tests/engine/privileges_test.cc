// Least privilege (docs/security.md, "Privileges"): started as root, as the
// tests run, ros2-engine and ros2-agent switch to the ros2 user keeping exactly
// the documented capabilities, and still serve clients over shared memory and
// tcp; a missing user is a clear error at start; process.user: root keeps root.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/privileges.h"
#include "engine_cluster.h"
#include "object_session.h"
#include "testing/engine_process.h"
#include "testing/pattern.h"
#include "testing/test_cluster.h"

namespace ros2::testing {
namespace {

using transport::TransportKind;

const ObjectId kOid = ObjectId::Make(ObjectType::kArray, ObjectClass::kS1, 0, 36);

// The fields of /proc/<pid>/status, tabs between values kept.
std::map<std::string, std::string> ProcStatus(int pid) {
  std::map<std::string, std::string> fields;
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == '\t' || value.front() == ' ')) value.erase(0, 1);
    while (!value.empty() && (value.back() == '\t' || value.back() == ' ')) value.pop_back();
    fields[line.substr(0, colon)] = value;
  }
  return fields;
}

// The account the daemons switch to; skips when the test does not run as root.
bool ServiceUser(passwd* out) {
  if (::geteuid() != 0) return false;
  passwd* pw = ::getpwnam("ros2");
  if (pw == nullptr) {
    ADD_FAILURE() << "no user ros2: scripts/install-deps.sh creates it";
    return false;
  }
  *out = *pw;
  return true;
}

// Real, effective, saved and file-system ids are the service user's, its only
// group is its own, and the capability sets are exactly the documented ones.
void ExpectRunsAsServiceUser(int pid, const passwd& pw, const std::vector<int>& caps, const char* what) {
  auto s = ProcStatus(pid);
  ASSERT_FALSE(s.empty()) << what << " (pid " << pid << ") is gone";
  EXPECT_EQ(s["Uid"], fmt::format("{0}\t{0}\t{0}\t{0}", pw.pw_uid)) << what;
  EXPECT_EQ(s["Gid"], fmt::format("{0}\t{0}\t{0}\t{0}", pw.pw_gid)) << what;
  EXPECT_EQ(s["Groups"], std::to_string(pw.pw_gid)) << what;
  const std::string keep = fmt::format("{:016x}", CapabilityMask(caps));
  EXPECT_EQ(s["CapEff"], keep) << what;
  EXPECT_EQ(s["CapPrm"], keep) << what;
  EXPECT_EQ(s["CapBnd"], keep) << what;
  EXPECT_EQ(s["CapInh"], "0000000000000000") << what;
  EXPECT_EQ(s["CapAmb"], "0000000000000000") << what;
  EXPECT_EQ(s["NoNewPrivs"], "1") << what;
}

class EnginePrivileges : public ::testing::TestWithParam<std::string> {};

TEST_P(EnginePrivileges, RootStartedEngineRunsAsTheServiceUserAndServes) {
  passwd pw{};
  if (!ServiceUser(&pw)) GTEST_SKIP() << "needs root";
  EngineCluster c;
  EngineOptions options;
  options.transport = GetParam();
  options.storage_class = "nvme";
  ASSERT_NO_FATAL_FAILURE(c.Start(options));
  ExpectRunsAsServiceUser(c.engine->pid(), pw, EngineCapabilities(), "ros2-engine");

  // The data directory and what the engine made in it are the user's.
  const std::string data_dir = c.dir.path() + "/engine0";
  for (const char* name : {"", "/engine.id", "/admin.secret", "/targets"}) {
    struct stat st {};
    ASSERT_EQ(::stat((data_dir + name).c_str(), &st), 0) << data_dir << name;
    EXPECT_EQ(st.st_uid, pw.pw_uid) << data_dir << name;
  }

  // A root client writes and reads back, small and bulk, over this transport.
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{64} << 20));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "c"));
  const TransportKind kind = GetParam() == "shm" ? TransportKind::kShm : TransportKind::kTcp;
  auto s = ObjectSession::Open(c.engine->control(), c.admin, "p", "c", kind);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const auto& info = (*s)->endpoint(0).info();
  if (kind == TransportKind::kShm) {
    EXPECT_TRUE(info.IsSharedMemoryOnly()) << info.ucx_report;
  } else {
    EXPECT_TRUE(info.UsesTcp()) << info.ucx_report;
  }
  for (size_t size : {size_t{4096}, size_t{1} << 20}) {
    const auto data = Pattern(size, size);
    ROS2_ASSERT_OK((*s)->UpdateArray(kOid, fmt::format("d{}", size), "a", 0, data));
    auto f = (*s)->FetchArray(kOid, fmt::format("d{}", size), "a", 0, size);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->data, data) << size << " bytes read back differ";
  }
  ExpectRunsAsServiceUser(c.engine->pid(), pw, EngineCapabilities(), "ros2-engine after serving");
}

INSTANTIATE_TEST_SUITE_P(Transports, EnginePrivileges, ::testing::Values("shm", "tcp"));

TEST(EnginePrivilegesStart, MissingUserIsAClearError) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  TempDir dir;
  EngineOptions options;
  options.data_dir = dir.path() + "/engine0";
  options.process = "{ user: ros2-no-such-user }";
  auto e = EngineProcess::Start(options);
  ASSERT_FALSE(e.ok()) << "the engine started without its user";
  const std::string m = e.status().ToString();
  EXPECT_NE(m.find("'ros2-no-such-user'"), std::string::npos) << m;
  EXPECT_NE(m.find("useradd --system"), std::string::npos) << m;
  EXPECT_NE(m.find("process.user: root"), std::string::npos) << m;
}

TEST(EnginePrivilegesStart, RootIsKeptOnlyWhenConfigured) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  EngineCluster c;
  EngineOptions options;
  options.process = "{ user: root }";
  ASSERT_NO_FATAL_FAILURE(c.Start(options));
  auto s = ProcStatus(c.engine->pid());
  EXPECT_EQ(s["Uid"], "0\t0\t0\t0");
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{64} << 20));
}

class AgentPrivileges : public ::testing::TestWithParam<std::string> {};

TEST_P(AgentPrivileges, RootStartedAgentRunsAsTheServiceUserAndServes) {
  passwd pw{};
  if (!ServiceUser(&pw)) GTEST_SKIP() << "needs root";
  std::string error;
  auto c = TestCluster::Start(GetParam(), 2, &error, "ram", "64MiB", {"--agent"});
  ASSERT_NE(c, nullptr) << error;
  ExpectRunsAsServiceUser(c->EnginePid(), pw, EngineCapabilities(), "ros2-engine");
  const int agent_pid = std::atoi(ReadWholeFile(c->dir() + "/agent.pid").c_str());
  ExpectRunsAsServiceUser(agent_pid, pw, AgentCapabilities(), "ros2-agent");

  // ros2ctl fs (root) through the agent, whose client reaches the engine over
  // this transport: a file written and read back byte-exact.
  ASSERT_EQ(c->Ctl({"pool", "create", "p", "--size", "128MiB"}).exit_code, 0);
  ASSERT_EQ(c->Ctl({"cont", "create", "p", "c"}).exit_code, 0);
  const std::string local = c->scratch() + "/in.bin";
  const auto data = Pattern(3 << 20, 36);
  {
    std::ofstream out(local, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  }
  ASSERT_EQ(::setenv("ROS2_AGENT_SOCKET", c->agent_socket().c_str(), 1), 0);
  CommandResult put = c->Ctl({"fs", "put", "p", "c", local, "/f"});
  CommandResult cat = c->Ctl({"fs", "cat", "p", "c", "/f"});
  ::unsetenv("ROS2_AGENT_SOCKET");
  ASSERT_EQ(put.exit_code, 0) << put.err;
  ASSERT_EQ(cat.exit_code, 0) << cat.err;
  EXPECT_TRUE(cat.out.size() == data.size() &&
              std::equal(data.begin(), data.end(), reinterpret_cast<const std::byte*>(cat.out.data())))
      << "the file read back through the agent differs (" << cat.out.size() << " bytes)";
  const std::string log = ReadWholeFile(c->dir() + "/agent.log");
  EXPECT_NE(log.find("switched to user ros2"), std::string::npos) << log;
  ExpectRunsAsServiceUser(agent_pid, pw, AgentCapabilities(), "ros2-agent after serving");
}

INSTANTIATE_TEST_SUITE_P(Transports, AgentPrivileges, ::testing::Values("shm", "tcp"));

}  // namespace
}  // namespace ros2::testing
