#include "testing/local_cluster.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ros2::testing {

std::string BuildTreeBinaryPath(const std::string& relative) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return (self.parent_path().parent_path() / relative).string();
}

LocalCluster::LocalCluster(LocalClusterOptions options, std::string data_dir, std::string scratch)
    : options_(std::move(options)), data_dir_(std::move(data_dir)), scratch_(std::move(scratch)) {
  std::error_code ec;
  std::filesystem::create_directories(scratch_, ec);
  ::mkdir(data_dir_.c_str(), 0700);  // an existing one keeps its mode
}

Result<std::unique_ptr<LocalCluster>> LocalCluster::Up(const std::string& scratch, const LocalClusterOptions& options) {
  auto c = std::make_unique<LocalCluster>(options, scratch + "/" + options.name, scratch);
  ROS2_RETURN_IF_ERROR(c->Start());
  return c;
}

std::vector<std::string> LocalCluster::UpArgs() const {
  const LocalClusterOptions& o = options_;
  const bool ofi = o.transport.rfind("ofi-", 0) == 0;
  std::vector<std::string> args = {"--json",       "cluster",   "up",        "--class",
                                   o.storage_class, "--transport", ofi ? o.transport.substr(4) : o.transport, "--targets",
                                   std::to_string(o.targets), "--shard-size", o.shard_size, "--timeout",
                                   std::to_string(o.timeout_s)};
  if (ofi) args.insert(args.end(), {"--provider", "ofi"});
  if (!o.engine.empty()) args.insert(args.end(), {"--engine", o.engine});
  if (!o.target_cpus.empty()) args.insert(args.end(), {"--target-cpus", fmt::format("{}", fmt::join(o.target_cpus, ","))});
  if (o.agent) args.push_back("--agent");
  if (!o.metrics.empty()) args.insert(args.end(), {"--metrics", o.metrics});
  args.insert(args.end(), o.extra_up_args.begin(), o.extra_up_args.end());
  return args;
}

Status LocalCluster::Start() {
  CommandResult up = Run(UpArgs());
  auto j = up.Json();
  if (up.exit_code != 0 || j.is_discarded() || !j.contains("control")) {
    return Status::Internal(fmt::format("cluster up on {} failed (exit {}): {}{}", data_dir_, up.exit_code, up.err, up.out));
  }
  control_ = j["control"].get<std::string>();
  admin_secret_file_ = j.value("admin_secret_file", std::string());
  agent_socket_ = j.value("agent_socket", std::string());
  running_ = true;
  return Status::Ok();
}

Status LocalCluster::KillEngine() {
  ROS2_ASSIGN_OR_RETURN(pid_t pid, engine_pid());
  if (::kill(pid, SIGKILL) != 0) return Status::FromErrno(errno, fmt::format("kill engine {}", pid));
  for (int i = 0; i < 1000; ++i) {
    if (ProcessExited(pid)) {
      running_ = false;
      return Status::Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Status::TimedOut(fmt::format("engine {} still there 10 s after SIGKILL", pid));
}

LocalCluster::~LocalCluster() {
  if (!running_) return;
  CommandResult down = Run({"cluster", "down", "--timeout", "30", "--force"});
  if (down.exit_code != 0) std::fprintf(stderr, "cluster down on %s: %s\n", data_dir_.c_str(), down.err.c_str());
}

CommandResult LocalCluster::Run(const std::vector<std::string>& args) const {
  std::vector<std::string> with_dir = {"--data-dir", data_dir_};
  with_dir.insert(with_dir.end(), args.begin(), args.end());
  return RunBare(with_dir);
}

CommandResult LocalCluster::RunBare(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = options_.command_prefix;
  argv.push_back(options_.ros2ctl);
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, scratch_, std::chrono::seconds(300));
}

Result<std::string> LocalCluster::Ctl(const std::vector<std::string>& args) const {
  CommandResult r = Run(args);
  if (r.exit_code != 0) {
    return Status::Internal(fmt::format("ros2ctl {} exited {}: {}", fmt::join(args, " "), r.exit_code, r.err));
  }
  return r.out;
}

Result<pid_t> LocalCluster::engine_pid() const {
  return RunningPidFromFile(data_dir_ + "/engine.pid");
}

Result<pid_t> LocalCluster::agent_pid() const {
  return RunningPidFromFile(data_dir_ + "/agent.pid");
}

}  // namespace ros2::testing
