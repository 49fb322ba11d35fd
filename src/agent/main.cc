// ros2-agent: the offload agent (docs/agent.md). Reads its YAML config,
// listens for host sessions, prints the ready line, and shuts down cleanly on
// SIGTERM or SIGINT (exit 0). Started as root, it switches to its dedicated
// user first (LeaveRoot).
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "agent/agent.h"
#include "common/log.h"
#include "common/privileges.h"

namespace {

int Fail(const ros2::Status& st) {
  std::cerr << "ros2-agent: " << st.ToString() << std::endl;
  return 1;
}

// Started as root: makes the socket's directory when missing (for
// process.user), switches to that user keeping process.capabilities, and
// checks it may create the socket (docs/security.md, "Privileges"). The
// tenants' secret and key files are checked afterwards, as that user, by
// FinalizeAgentConfig. Runs before any thread starts; returns what happened.
ros2::Result<std::string> LeaveRoot(const ros2::agent::AgentConfig& config) {
  if (!ros2::SwitchesUser(config.process)) {
    return ::geteuid() == 0 ? std::string("runs as root (process.user: root)") : std::string();
  }
  ROS2_ASSIGN_OR_RETURN(ros2::ServiceUser user, ros2::LookUpServiceUser(config.process, "ros2-agent"));
  const std::string dir = std::filesystem::path(config.socket).parent_path().string();
  if (!dir.empty() && !std::filesystem::exists(dir)) {
    ROS2_RETURN_IF_ERROR(ros2::GiveDirectoryTo(dir, 0755, user).WithContext("agent: socket"));
  }
  ROS2_RETURN_IF_ERROR(ros2::SwitchToUser(user, config.process.capabilities));
  if (!dir.empty()) {
    ROS2_RETURN_IF_ERROR(ros2::CheckAccessAsUser(dir, W_OK | X_OK, "agent: socket's directory", user));
  }
  std::vector<std::string> names;
  for (int cap : config.process.capabilities) names.push_back(ros2::CapabilityName(cap));
  return fmt::format("switched to user {} (uid {}, gid {}) keeping capabilities [{}]", user.name, user.uid, user.gid,
                     fmt::join(names, ", "));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ros2-agent: the ROS2 offload agent (host sessions on shared-memory rings)"};
  std::string config_path, socket, log_level;
  app.add_option("-c,--config", config_path, "YAML configuration file")->required()->check(CLI::ExistingFile);
  app.add_option("--socket", socket, "Unix socket to listen on (overrides socket)");
  app.add_option("--log-level", log_level, "trace | debug | info | warn | error");
  CLI11_PARSE(app, argc, argv);
  // The agent is the direct-mode client: a ROS2_AGENT_SOCKET inherited from
  // the shell that started it must not turn its own clients into offload ones.
  ::unsetenv("ROS2_AGENT_SOCKET");

  auto loaded = ros2::agent::LoadAgentConfig(config_path);
  if (!loaded.ok()) return Fail(loaded.status());
  ros2::agent::AgentConfig config = std::move(*loaded);
  if (!socket.empty()) config.socket = socket;
  if (!log_level.empty()) config.log_level = log_level;
  auto identity = LeaveRoot(config);
  if (!identity.ok()) return Fail(identity.status());
  if (auto st = ros2::agent::FinalizeAgentConfig(&config); !st.ok()) return Fail(st);
  if (auto st = ros2::InitLogging("ros2-agent", config.log_level); !st.ok()) return Fail(st);
  if (!identity->empty()) ROS2_LOG_INFO("ros2-agent: {}", *identity);

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  int stop_fd = ::signalfd(-1, &stop_signals, SFD_CLOEXEC);
  if (stop_fd < 0) return Fail(ros2::Status::FromErrno(errno, "ros2-agent: signalfd"));

  auto agent = ros2::agent::Agent::Start(config);
  if (!agent.ok()) return Fail(agent.status());
  std::cout << (*agent)->ReadyLine() << std::endl;
  (*agent)->Run(stop_fd);
  agent->reset();
  ::close(stop_fd);
  return 0;
}
