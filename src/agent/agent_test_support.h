// The offload-mode test fixture shared by the agent_test sources: a real
// engine (`ros2ctl cluster up`), a real ros2-agent process per transport, and
// host sessions through ros2_host in this process and in forked children
// (other uids). Tests by topic: agent_io_test.cc (namespace and data),
// agent_tenant_test.cc (uids, tenants, QoS, ros2ctl with the socket only),
// agent_protocol_test.cc (what the agent refuses), agent_lifecycle_test.cc
// (killed hosts and agents, start and stop).
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "client/offload/host_session.h"
#include "dfs/file_crypto.h"
#include "offload/wire.h"
#include "testing/engine_process.h"
#include "testing/pattern.h"
#include "testing/subprocess.h"
#include "testing/test_cluster.h"

namespace ros2::agent::test {

using ros2::testing::Pattern;
using ros2::testing::ReadWholeFile;
using ros2::testing::TestCluster;
using Clock = std::chrono::steady_clock;

inline constexpr uid_t kBobUid = 4242;
inline constexpr uid_t kNobodyUid = 4343;

// A ros2-agent child process with its config, socket and log in `dir`.
class AgentProcess {
 public:
  static std::unique_ptr<AgentProcess> Start(const std::string& dir, const std::string& name, const std::string& config,
                                             std::string* error) {
    auto a = std::unique_ptr<AgentProcess>(new AgentProcess());
    a->socket_ = dir + "/" + name + ".sock";
    a->log_ = dir + "/" + name + ".log";
    const std::string config_path = dir + "/" + name + ".yaml";
    std::ofstream(config_path) << "socket: " << a->socket_ << "\n" << config;
    ::unlink(a->log_.c_str());  // a restart must not see the last run's ready line
    ros2::testing::SpawnOptions so;
    so.argv = {ROS2_AGENT_PATH, "--config", config_path, "--log-level", "info"};
    so.stdout_path = a->log_;
    so.stderr_path = a->log_;
    auto child = ros2::testing::ChildProcess::Spawn(so);
    if (!child.ok()) {
      *error = "ros2-agent did not start: " + child.status().ToString();
      return nullptr;
    }
    a->process_ = std::move(*child);
    for (int i = 0; i < 3000; ++i) {
      if (a->Log().find("ros2-agent ready") != std::string::npos) return a;
      if (a->process_.Wait(std::chrono::milliseconds(0)).ok()) break;  // exited (reaped)
      ::usleep(10'000);
    }
    *error = "ros2-agent did not start: " + a->Log();
    return nullptr;
  }
  ~AgentProcess() { process_.Stop(std::chrono::seconds(10)); }
  // SIGTERM; the exit status (or -1 when it did not exit within `timeout`).
  int Stop(std::chrono::seconds timeout) {
    process_.Signal(SIGTERM);
    auto code = process_.Wait(timeout);
    return code.ok() ? *code : -1;
  }
  void Kill() { process_.Kill(); }
  std::string Log() const { return ReadWholeFile(log_); }
  const std::string& socket() const { return socket_; }

 private:
  AgentProcess() = default;
  ros2::testing::ChildProcess process_;
  std::string socket_;
  std::string log_;
};

// One cluster and agent per transport, shared by the tests.
struct AgentSetup {
  std::unique_ptr<TestCluster> cluster;
  std::string dir;  // world-traversable: other uids reach the agent socket in it
  std::string bob_secret;
  std::unique_ptr<AgentProcess> agent;
  std::string agent_config;
};

class AgentTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void TearDownTestSuite() { setups_.clear(); }

  void SetUp() override {
    auto& s = setups_[GetParam()];
    if (!s) {
      auto setup = std::make_unique<AgentSetup>();
      std::string error;
      setup->cluster = TestCluster::Start(GetParam(), 2, &error);
      ASSERT_NE(setup->cluster, nullptr) << error;
      TestCluster& c = *setup->cluster;
      for (std::vector<std::string> args : {std::vector<std::string>{"pool", "create", "p", "--size", "256MiB"},
                                            {"cont", "create", "p", "adminc"},
                                            {"cont", "create", "p", "bobc"},
                                            {"tenant", "add", "bob", "--secret-out", c.dir() + "/bob.secret"},
                                            {"acl", "set", "p", "--tenant", "bob", "--rights", "r"},
                                            {"acl", "set", "p", "bobc", "--tenant", "bob", "--rights", "rw"},
                                            {"key", "create", "--out", c.dir() + "/admin.key"},
                                            {"cont", "create", "p", "secretc", "-p", "encryption=aes-256-gcm"},
                                            {"cont", "create", "p", "secret2", "-p", "encryption=aes-256-gcm"}}) {
        auto r = c.Ctl(args);
        ASSERT_EQ(r.exit_code, 0) << args[0] << " " << args[1] << ": " << r.err << r.out;
      }
      setup->dir = c.dir() + "/agent";
      std::filesystem::create_directories(setup->dir);
      ::chmod(c.dir().c_str(), 0755);
      ::chmod(setup->dir.c_str(), 0755);
      // Started as root, the agent runs as the ros2 user: its socket's
      // directory and the tenants' files are that user's.
      for (const std::string& path : {setup->dir, c.dir() + "/bob.secret", c.dir() + "/admin.key"}) {
        ROS2_ASSERT_OK(ros2::testing::GiveToServiceUser(path));
      }
      setup->agent_config = fmt::format(
          "control: {}\ntransport: {}\nspin: 20us\nio_timeout: 20s\ntenants:\n"
          "  - {{ name: admin, secret_file: {}, uids: [0], container_keys: {{ secretc: {} }} }}\n"
          "  - {{ name: bob, secret_file: {}, uids: [{}] }}\n",
          c.control(), GetParam(), c.admin_secret_file(), c.dir() + "/admin.key", c.dir() + "/bob.secret", kBobUid);
      setup->agent = AgentProcess::Start(setup->dir, "agent", setup->agent_config, &error);
      ASSERT_NE(setup->agent, nullptr) << error;
      s = std::move(setup);
    }
    setup_ = s.get();
  }

  Result<std::unique_ptr<HostSession>> Connect(uint64_t arena = uint64_t{32} << 20) {
    HostOptions o;
    o.socket = setup_->agent->socket();
    o.arena_size = arena;
    o.ring_entries = 64;
    o.timeout = std::chrono::seconds(30);
    return HostSession::Connect(o);
  }

  nlohmann::json AgentStatus() {
    auto s = QueryAgentStatus(setup_->agent->socket(), std::chrono::seconds(5));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? nlohmann::json::parse(*s) : nlohmann::json();
  }

  static inline std::map<std::string, std::unique_ptr<AgentSetup>> setups_;
  AgentSetup* setup_ = nullptr;
};

// A child process: runs `body` (returns an exit code and writes a line to
// `out`), after switching to `uid` when nonzero. The parent gets the code and
// the line.
inline std::pair<int, std::string> RunChild(uid_t uid, const std::function<int(std::string*)>& body) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return {-1, "pipe"};
  auto child = ros2::testing::ChildProcess::Fork([&]() {
    ::close(pipefd[0]);
    std::string out;
    int code = 0;
    if (uid != 0 && (::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0)) {
      out = "setresuid failed";
      code = 99;
    } else {
      code = body(&out);
    }
    (void)!::write(pipefd[1], out.data(), out.size());
    return code;
  });
  ::close(pipefd[1]);
  if (!child.ok()) {
    ::close(pipefd[0]);
    return {-1, child.status().ToString()};
  }
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipefd[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  auto code = child->Wait(std::chrono::hours(24));
  return {code.ok() ? *code : -1, out};
}

}  // namespace ros2::agent::test
