#include "bench/md_cluster.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ros2::bench {

std::string BuildTreeBinaryPath(const std::string& relative) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  // <build>/bench/ros2-bench -> <build>/<relative>
  return (self.parent_path().parent_path() / relative).string();
}

Result<std::string> MdCluster::Run(const std::vector<std::string>& args) const {
  SpawnOptions so;
  so.argv.push_back(ros2ctl_);
  so.argv.insert(so.argv.end(), args.begin(), args.end());
  so.stdout_path = scratch_ + "/ctl.out";
  so.stderr_path = scratch_ + "/ctl.err";
  ROS2_ASSIGN_OR_RETURN(auto child, ChildProcess::Spawn(so));
  ROS2_ASSIGN_OR_RETURN(int rc, child.Wait(std::chrono::seconds(180)));
  auto out = ReadWholeFile(so.stdout_path);
  if (rc != 0) {
    auto err = ReadWholeFile(so.stderr_path);
    return Status::Internal(fmt::format("ros2ctl {} exited {}: {}", fmt::join(args, " "), rc,
                                        err.ok() ? *err : std::string("(no stderr)")));
  }
  return out.ok() ? *out : std::string();
}

Result<std::string> MdCluster::Ctl(const std::vector<std::string>& args) const {
  std::vector<std::string> all = {"--data-dir", data_dir_};
  all.insert(all.end(), args.begin(), args.end());
  return Run(all);
}

Result<std::unique_ptr<MdCluster>> MdCluster::Up(const std::string& scratch, const MdClusterOptions& o) {
  auto c = std::unique_ptr<MdCluster>(new MdCluster(scratch, scratch + "/cluster", o.ros2ctl));
  std::vector<std::string> args = {"cluster",      "up",        "--class",   o.storage_class,
                                   "--transport",  o.transport, "--targets", std::to_string(o.targets),
                                   "--shard-size", o.shard_size};
  if (!o.engine.empty()) {
    args.push_back("--engine");
    args.push_back(o.engine);
  }
  ROS2_RETURN_IF_ERROR(c->Ctl(args).status());
  c->up_ = true;
  return c;
}

MdCluster::~MdCluster() {
  if (!up_) return;
  auto down = Ctl({"cluster", "down", "--timeout", "30", "--force"});
  if (!down.ok()) std::fprintf(stderr, "md bench: cluster down: %s\n", down.status().ToString().c_str());
}

namespace {

bool IsMountPoint(const std::string& path) {
  struct stat here {
  }, parent{};
  if (::stat(path.c_str(), &here) != 0) return false;
  if (::stat((path + "/..").c_str(), &parent) != 0) return false;
  return here.st_dev != parent.st_dev;
}

}  // namespace

Result<std::unique_ptr<FuseMount>> FuseMount::Start(const std::string& binary, const std::string& data_dir,
                                                    const std::string& pool, const std::string& container,
                                                    const std::string& mountpoint, const std::string& transport,
                                                    const std::string& log_path) {
  std::error_code ec;
  std::filesystem::create_directories(mountpoint, ec);
  if (ec) return Status::IOError(fmt::format("md: mkdir {}: {}", mountpoint, ec.message()));
  SpawnOptions so;
  so.argv = {binary, "-f", "-d", data_dir, "--transport", transport, pool, container, mountpoint};
  so.stdout_path = log_path;
  so.stderr_path = log_path + ".err";
  ROS2_ASSIGN_OR_RETURN(ChildProcess daemon, ChildProcess::Spawn(so));
  auto mount = std::unique_ptr<FuseMount>(new FuseMount(std::move(daemon), mountpoint));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!IsMountPoint(mountpoint)) {
    auto exited = mount->daemon_.Wait(std::chrono::milliseconds(50));
    if (exited.ok()) {
      auto err = ReadWholeFile(so.stderr_path);
      return Status::Internal(fmt::format("md: {} exited {} before mounting: {}", binary, *exited,
                                          err.ok() ? *err : std::string("(no stderr)")));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::TimedOut(fmt::format("md: {} did not mount {} within 60 s", binary, mountpoint));
    }
  }
  return mount;
}

FuseMount::~FuseMount() {
  SpawnOptions so;
  so.argv = {"fusermount3", "-u", mountpoint_};
  auto um = ChildProcess::Spawn(so);
  if (um.ok()) (void)um->Wait(std::chrono::seconds(30));
  // The daemon's session ends with the unmount; a stuck one is killed by ~ChildProcess.
  if (daemon_.running()) (void)daemon_.Wait(std::chrono::seconds(30));
}

}  // namespace ros2::bench
