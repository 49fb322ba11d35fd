// `ros2ctl cluster up --hosts N` as a test and bench harness.
#include "testing/host_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace ros2::testing {

namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Gone(pid_t pid) {
  std::string stat = ReadAll(fmt::format("/proc/{}/stat", pid));
  auto paren = stat.rfind(')');
  return stat.empty() || (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

}  // namespace

bool HostCluster::Supported(std::string* why) {
  if (::geteuid() != 0) {
    *why = "needs root (network, IPC, PID and mount namespaces)";
    return false;
  }
  if (!FindOnPath("ip").ok()) {
    *why = "needs `ip` (iproute2) on PATH";
    return false;
  }
  if (!std::filesystem::exists("/proc/self/ns/net")) {
    *why = "needs network namespaces";
    return false;
  }
  return true;
}

Result<std::unique_ptr<HostCluster>> HostCluster::Up(const HostClusterOptions& options) {
  if (options.ros2ctl.empty() || options.data_dir.empty()) {
    return Status::InvalidArgument("HostCluster: ros2ctl and data_dir are required");
  }
  std::unique_ptr<HostCluster> c(new HostCluster(options));
  std::vector<std::string> args = {"--json",
                                   "cluster",
                                   "up",
                                   "--hosts",
                                   std::to_string(options.hosts),
                                   "--targets",
                                   std::to_string(options.targets),
                                   "--class",
                                   options.storage_class,
                                   "--transport",
                                   options.transport,
                                   "--timeout",
                                   std::to_string(options.timeout_s)};
  if (!options.engine.empty()) {
    args.push_back("--engine");
    args.push_back(options.engine);
  }
  if (options.etcd) args.push_back("--etcd");
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir, ec);
  CommandResult up = c->Ctl(args);
  auto j = up.Json();
  if (up.exit_code != 0 || j.is_discarded() || !j.contains("hosts")) {
    return Status::IOError(fmt::format("`ros2ctl cluster up --hosts {}` failed (exit {}): {}{}", options.hosts,
                                       up.exit_code, up.err, up.out));
  }
  c->info_ = std::move(j);
  c->up_ = true;
  return c;
}

HostCluster::~HostCluster() {
  (void)Down();
}

Status HostCluster::Down() {
  if (!up_) return Status::Ok();
  CommandResult down = Ctl({"cluster", "down"});
  if (down.exit_code != 0) {
    return Status::IOError(fmt::format("`ros2ctl cluster down` failed (exit {}): {}", down.exit_code, down.err));
  }
  up_ = false;
  return Status::Ok();
}

CommandResult HostCluster::Ctl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {options_.ros2ctl, "--data-dir", options_.data_dir};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, options_.data_dir);
}

CommandResult HostCluster::InHost(int host, const std::vector<std::string>& argv) const {
  std::vector<std::string> args = {"cluster", "exec", std::to_string(host), "--"};
  args.insert(args.end(), argv.begin(), argv.end());
  return Ctl(args);
}

Status HostCluster::Partition(int host) const {
  CommandResult r = Ctl({"cluster", "partition", std::to_string(host)});
  return r.exit_code == 0 ? Status::Ok() : Status::IOError("cluster partition: " + r.err);
}

Status HostCluster::Heal(int host) const {
  CommandResult r = Ctl({"cluster", "heal", std::to_string(host)});
  return r.exit_code == 0 ? Status::Ok() : Status::IOError("cluster heal: " + r.err);
}

Status HostCluster::KillEngine(int host) const {
  const pid_t pid = engine_pid(host);
  const std::string cmdline = ReadAll(fmt::format("/proc/{}/cmdline", pid));
  if (pid <= 0 || cmdline.find(this->host(host)["data_dir"].get<std::string>()) == std::string::npos) {
    return Status::NotFound(fmt::format("the engine of host {} (pid {}) does not run", host, pid));
  }
  if (::kill(pid, SIGKILL) != 0) return Status::FromErrno(errno, fmt::format("kill {}", pid));
  for (int i = 0; i < 1000 && !Gone(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return Gone(pid) ? Status::Ok() : Status::TimedOut(fmt::format("engine {} still runs after SIGKILL", pid));
}

}  // namespace ros2::testing
