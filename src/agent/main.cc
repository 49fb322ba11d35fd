// ros2-agent: the offload agent (docs/agent.md). Reads its YAML config,
// listens for host sessions, prints the ready line, and shuts down cleanly on
// SIGTERM or SIGINT (exit 0). Started as root, it switches to its dedicated
// user first (LeaveRoot).
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "agent/agent.h"
#include "common/daemon.h"
#include "common/log.h"

namespace {

int Fail(const ros2::Status& st) { return ros2::StartupFailure("ros2-agent", st); }

// Started as root: makes the socket's directory when missing (for
// process.user), switches to that user keeping process.capabilities, and
// checks it may create the socket (docs/security.md, "Privileges"). The
// tenants' secret and key files are checked afterwards, as that user, by
// FinalizeAgentConfig. Runs before any thread starts; returns what happened.
ros2::Result<std::string> LeaveRoot(const ros2::agent::AgentConfig& config) {
  const std::string dir = std::filesystem::path(config.socket).parent_path().string();
  return ros2::LeaveRoot(
      config.process, "ros2-agent",
      [&](const ros2::ServiceUser& user) {
        if (dir.empty() || std::filesystem::exists(dir)) return ros2::Status::Ok();
        return ros2::GiveDirectoryTo(dir, 0755, user).WithContext("agent: socket");
      },
      [&](const ros2::ServiceUser& user) {
        if (dir.empty()) return ros2::Status::Ok();
        return ros2::CheckAccessAsUser(dir, W_OK | X_OK, "agent: socket's directory", user);
      });
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

  sigset_t stop_signals = ros2::BlockStopSignals();
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
