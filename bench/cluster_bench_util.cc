#include "bench/cluster_bench_util.h"

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/mountinfo.h"

namespace ros2::bench {

std::string BuildTreeBinaryPath(const std::string& relative) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  // <build>/bench/ros2-bench -> <build>/<relative>
  return (self.parent_path().parent_path() / relative).string();
}

namespace {

// Runs `argv`, waits up to `limit`; stdout on success, an error quoting stderr otherwise.
Result<std::string> RunTool(const std::vector<std::string>& argv, const std::string& scratch,
                            std::chrono::seconds limit) {
  SpawnOptions so;
  so.argv = argv;
  so.stdout_path = scratch + "/tool.out";
  so.stderr_path = scratch + "/tool.err";
  ROS2_ASSIGN_OR_RETURN(auto child, ChildProcess::Spawn(so));
  ROS2_ASSIGN_OR_RETURN(int rc, child.Wait(limit));
  auto out = ReadWholeFile(so.stdout_path);
  if (rc != 0) {
    auto err = ReadWholeFile(so.stderr_path);
    return Status::Internal(
        fmt::format("{} exited {}: {}", fmt::join(argv, " "), rc, err.ok() ? *err : std::string("(no stderr)")));
  }
  return out.ok() ? *out : std::string();
}

}  // namespace

Result<std::unique_ptr<LocalCluster>> LocalCluster::Up(const std::string& scratch, const LocalClusterOptions& o) {
  auto c = std::unique_ptr<LocalCluster>(new LocalCluster(o.ros2ctl, scratch, scratch + "/" + o.name));
  std::vector<std::string> args = {"cluster",      "up",        "--class",   o.storage_class,
                                   "--transport",  o.transport, "--targets", std::to_string(o.targets),
                                   "--shard-size", o.shard_size};
  if (!o.engine.empty()) {
    args.push_back("--engine");
    args.push_back(o.engine);
  }
  if (!o.target_cpus.empty()) {
    args.push_back("--target-cpus");
    args.push_back(fmt::format("{}", fmt::join(o.target_cpus, ",")));
  }
  if (o.agent) args.push_back("--agent");
  if (!o.metrics.empty()) {
    args.push_back("--metrics");
    args.push_back(o.metrics);
  }
  ROS2_RETURN_IF_ERROR(c->Ctl(args).status());
  c->up_ = true;
  return c;
}

namespace {
Result<pid_t> PidFromFile(const std::string& path) {
  ROS2_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  const long pid = std::strtol(text.c_str(), nullptr, 10);
  if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) != 0) {
    return Status::NotFound(fmt::format("no running process for pid file {} ('{}')", path, text));
  }
  return static_cast<pid_t>(pid);
}
}  // namespace

Result<pid_t> LocalCluster::engine_pid() const {
  return PidFromFile(data_dir_ + "/engine.pid");
}

Result<pid_t> LocalCluster::agent_pid() const {
  return PidFromFile(data_dir_ + "/agent.pid");
}

LocalCluster::~LocalCluster() {
  if (!up_) return;
  auto down = Ctl({"cluster", "down", "--timeout", "30", "--force"});
  if (!down.ok()) std::fprintf(stderr, "bench: cluster down: %s\n", down.status().ToString().c_str());
}

Result<std::string> LocalCluster::Ctl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {ros2ctl_, "--data-dir", data_dir_};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunTool(argv, scratch_, std::chrono::seconds(300));
}

bool IsFuseMountpoint(const std::string& path) {
  const std::optional<std::string> type = MountedFsType(path);
  return type && type->rfind("fuse", 0) == 0;
}

Result<std::unique_ptr<FuseMount>> FuseMount::Start(const std::string& binary, const std::string& data_dir,
                                                    const std::string& transport, const std::string& pool,
                                                    const std::string& cont, const std::string& mountpoint,
                                                    const std::string& log_path, const std::vector<std::string>& extra,
                                                    double timeout_s) {
  std::error_code ec;
  std::filesystem::create_directories(mountpoint, ec);
  if (ec) return Status::IOError(fmt::format("bench: mkdir {}: {}", mountpoint, ec.message()));
  SpawnOptions so;
  so.argv = {binary, "-f", "-d", data_dir, "--transport", transport};
  so.argv.insert(so.argv.end(), extra.begin(), extra.end());
  so.argv.insert(so.argv.end(), {pool, cont, mountpoint});
  so.stdout_path = log_path;
  so.stderr_path = log_path + ".err";
  ROS2_ASSIGN_OR_RETURN(auto child, ChildProcess::Spawn(so));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!IsFuseMountpoint(mountpoint)) {
    auto exited = child.Wait(std::chrono::milliseconds(50));
    if (exited.ok()) {
      auto err = ReadWholeFile(so.stderr_path);
      return Status::Internal(fmt::format("bench: {} exited {} before mounting: {}", fmt::join(so.argv, " "), *exited,
                                          err.ok() ? *err : std::string()));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::TimedOut(fmt::format("bench: {} did not mount {} within {:.0f}s", binary, mountpoint, timeout_s));
    }
  }
  return std::unique_ptr<FuseMount>(new FuseMount(std::move(child), mountpoint));
}

FuseMount::~FuseMount() {
  if (!process_.running()) return;
  auto fusermount = FindOnPath("fusermount3");
  if (fusermount.ok()) {
    SpawnOptions so;
    so.argv = {*fusermount, "-u", mountpoint_};
    if (auto u = ChildProcess::Spawn(so); u.ok()) (void)u->Wait(std::chrono::seconds(30));
  }
  if (!process_.Wait(std::chrono::seconds(30)).ok()) {
    std::fprintf(stderr, "bench: ros2-fuse on %s did not exit after unmount; killing it\n", mountpoint_.c_str());
    process_.Kill();
  }
  if (IsFuseMountpoint(mountpoint_) && fusermount.ok()) {
    SpawnOptions so;
    so.argv = {*fusermount, "-u", "-z", mountpoint_};
    if (auto u = ChildProcess::Spawn(so); u.ok()) (void)u->Wait(std::chrono::seconds(10));
  }
}

}  // namespace ros2::bench
