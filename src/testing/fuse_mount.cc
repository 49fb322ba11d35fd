#include "testing/fuse_mount.h"

#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/mountinfo.h"

namespace ros2::testing {

bool IsFuseMountpoint(const std::string& path) {
  const std::optional<std::string> type = MountedFsType(path);
  return type && type->rfind("fuse", 0) == 0;
}

bool IsMounted(const std::string& path) {
  return MountedFsType(path).has_value();
}

Result<std::unique_ptr<FuseMount>> FuseMount::Start(const FuseMountOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(o.mountpoint, ec);
  if (ec) return Status::IOError(fmt::format("mkdir {}: {}", o.mountpoint, ec.message()));
  SpawnOptions so;
  so.argv = {o.binary, "-f", "--data-dir", o.data_dir};
  so.argv.insert(so.argv.end(), o.args.begin(), o.args.end());
  so.argv.insert(so.argv.end(), {o.pool, o.cont, o.mountpoint});
  so.env = o.env;
  so.stdout_path = o.log_path.empty() ? o.mountpoint + ".log" : o.log_path;
  so.stderr_path = so.stdout_path;
  so.append = true;
  ROS2_ASSIGN_OR_RETURN(auto child, ChildProcess::Spawn(so));
  const auto deadline = std::chrono::steady_clock::now() + o.timeout;
  while (!IsFuseMountpoint(o.mountpoint)) {
    auto exited = child.Wait(std::chrono::milliseconds(20));
    if (exited.ok()) {
      return Status::Internal(fmt::format("{} exited {} before mounting: {}", fmt::join(so.argv, " "), *exited,
                                          ReadWholeFile(so.stdout_path)));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::TimedOut(fmt::format("{} did not mount {} within {} s: {}", o.binary, o.mountpoint,
                                          o.timeout.count(), ReadWholeFile(so.stdout_path)));
    }
  }
  return std::unique_ptr<FuseMount>(new FuseMount(std::move(child), o.mountpoint, so.stdout_path));
}

Result<std::unique_ptr<FuseMount>> FuseMount::Start(const std::string& binary, const std::string& data_dir,
                                                    const std::string& transport, const std::string& pool,
                                                    const std::string& cont, const std::string& mountpoint,
                                                    const std::string& log_path, const std::vector<std::string>& extra) {
  FuseMountOptions o;
  o.binary = binary;
  o.data_dir = data_dir;
  o.pool = pool;
  o.cont = cont;
  o.mountpoint = mountpoint;
  o.log_path = log_path;
  o.args = {"--transport", transport};
  o.args.insert(o.args.end(), extra.begin(), extra.end());
  return Start(o);
}

int FuseMount::Stop() {
  if (!process_.running()) return exit_code_;
  const std::string scratch = std::filesystem::path(mountpoint_).parent_path().string();
  if (IsMounted(mountpoint_)) RunCommand({"fusermount3", "-u", mountpoint_}, scratch, std::chrono::seconds(30));
  auto code = process_.Wait(std::chrono::seconds(30));
  exit_code_ = code.ok() ? *code : -1;
  if (!code.ok()) {
    std::fprintf(stderr, "ros2-fuse on %s did not exit after unmount; stopping it\n", mountpoint_.c_str());
    process_.Stop(std::chrono::seconds(10));
  }
  if (IsMounted(mountpoint_)) RunCommand({"umount", "-l", mountpoint_}, scratch, std::chrono::seconds(30));
  return exit_code_;
}

int FuseMount::SignalAndWait(int sig) {
  if (!process_.running()) return exit_code_;
  process_.Signal(sig);
  auto code = process_.Wait(std::chrono::seconds(30));
  if (code.ok()) exit_code_ = *code;
  return code.ok() ? *code : -1;
}

}  // namespace ros2::testing
