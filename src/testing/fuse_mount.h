// FuseMount: one ros2-fuse process serving a mount point of a cluster's
// container, started in the foreground (the process is the mount) and always
// unmounted by its destructor: fusermount3 -u, then SIGTERM, `umount -l` and
// SIGKILL if it does not go. Used by the FUSE tests and ros2-bench's posix
// suite. One thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "testing/subprocess.h"

namespace ros2::testing {

// True when `path` is currently the mount point of a FUSE file system.
bool IsFuseMountpoint(const std::string& path);
// True when `path` is a mount point of any kind.
bool IsMounted(const std::string& path);

struct FuseMountOptions {
  std::string binary;  // ros2-fuse
  std::string data_dir;
  std::string pool;
  std::string cont;
  std::string mountpoint;  // made when missing
  std::string log_path;    // empty: <mountpoint>.log
  std::vector<std::string> args;                         // more options, e.g. {"--transport", "shm"}
  std::vector<std::pair<std::string, std::string>> env;  // added to its environment
  std::chrono::seconds timeout = std::chrono::seconds(60);
};

class FuseMount {
 public:
  // Starts `binary -f --data-dir D [args...] POOL CONT MOUNTPOINT` and waits
  // until the mount point is a FUSE mount; the error quotes its log.
  static Result<std::unique_ptr<FuseMount>> Start(const FuseMountOptions& options);
  // The same with `--transport transport [extra...]` as its options.
  static Result<std::unique_ptr<FuseMount>> Start(const std::string& binary, const std::string& data_dir,
                                                  const std::string& transport, const std::string& pool,
                                                  const std::string& cont, const std::string& mountpoint,
                                                  const std::string& log_path,
                                                  const std::vector<std::string>& extra = {});
  ~FuseMount() { Stop(); }
  FuseMount(const FuseMount&) = delete;
  FuseMount& operator=(const FuseMount&) = delete;

  // Unmounts the way a user would and waits for the process to end; escalates
  // so that nothing stays mounted. The daemon's exit code (-1 when it had to
  // be killed or was stopped already).
  int Stop();
  // Sends `sig` to the daemon; its exit code (-1: still running after 30 s).
  int SignalAndWait(int sig);

  const std::string& mountpoint() const { return mountpoint_; }
  const std::string& path() const { return mountpoint_; }
  std::string log() const { return ReadWholeFile(log_path_); }

 private:
  FuseMount(ChildProcess process, std::string mountpoint, std::string log_path)
      : process_(std::move(process)), mountpoint_(std::move(mountpoint)), log_path_(std::move(log_path)) {}
  ChildProcess process_;
  std::string mountpoint_;
  std::string log_path_;
  int exit_code_ = -1;
};

}  // namespace ros2::testing

// For the FUSE test binaries (compile definition ROS2_FUSE_PATH, beside
// TestCluster's ROS2CTL_PATH and ROS2_ENGINE_PATH): a mount of a TestCluster's
// container p1/c1, and a cluster that has one.
#ifdef ROS2_FUSE_PATH
#include "testing/test_cluster.h"

namespace ros2::testing {

// `ros2-fuse -f --data-dir <cluster> --log-level info [options...] p1 c1 DIR`;
// null with the failure in *error.
inline std::unique_ptr<FuseMount> StartTestMount(const TestCluster& cluster, const std::string& dir,
                                                 const std::vector<std::string>& options, std::string* error,
                                                 const std::vector<std::pair<std::string, std::string>>& env = {}) {
  FuseMountOptions o;
  o.binary = ROS2_FUSE_PATH;
  o.data_dir = cluster.dir();
  o.pool = "p1";
  o.cont = "c1";
  o.mountpoint = dir;
  o.args = {"--log-level", "info"};
  o.args.insert(o.args.end(), options.begin(), options.end());
  o.env = env;
  auto m = FuseMount::Start(o);
  if (!m.ok()) {
    *error = m.status().ToString();
    return nullptr;
  }
  return std::move(*m);
}

// A single-node nvme cluster (two targets, 2 GiB shards; TestCluster::Start
// with `extra_up_args`, e.g. "--agent") with pool p1 (3 GiB) and container c1;
// null with the failure in *error.
inline std::unique_ptr<TestCluster> StartNvmeClusterWithContainer(std::string* error,
                                                                  const std::vector<std::string>& extra_up_args = {}) {
  auto cluster = TestCluster::Start("auto", 2, error, "nvme", "2GiB", extra_up_args);
  if (!cluster) return nullptr;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"pool", "create", "p1", "--size", "3GiB"}, {"cont", "create", "p1", "c1"}}) {
    auto r = cluster->Ctl(args);
    if (r.exit_code != 0) {
      *error = args[0] + " " + args[1] + ": " + r.err + r.out;
      return nullptr;
    }
  }
  return cluster;
}

}  // namespace ros2::testing
#endif  // ROS2_FUSE_PATH
