// ros2-agent: the offload agent (docs/agent.md). Reads its YAML config,
// listens for host sessions, prints the ready line, and shuts down cleanly on
// SIGTERM or SIGINT (exit 0).
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>

#include "agent/agent.h"
#include "common/log.h"

namespace {

int Fail(const ros2::Status& st) {
  std::cerr << "ros2-agent: " << st.ToString() << std::endl;
  return 1;
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
  if (auto st = ros2::agent::FinalizeAgentConfig(&config); !st.ok()) return Fail(st);
  if (auto st = ros2::InitLogging("ros2-agent", config.log_level); !st.ok()) return Fail(st);

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
