// What the end-to-end suites (obj, md, posix) run against: a single-node
// cluster started with `ros2ctl cluster up` in a scratch directory, and a
// ros2-fuse mount of one of its containers.
//
// LocalCluster owns the data directory's cluster: `cluster down` (forced
// after a timeout) on destruction, also when a suite returns early. FuseMount
// owns a ros2-fuse process running in the foreground (the process is the
// mount): unmounted with fusermount3, then the process is reaped (killed if it
// does not exit). Both are used from a suite's main thread; failures are Status
// values quoting the tool's stderr.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/process_bench_util.h"
#include "common/status.h"

namespace ros2::bench {

// "<build>/<relative>" for the build tree this ros2-bench binary lives in
// ("tools/ros2ctl/ros2ctl", "src/engine/ros2-engine", ...); empty when unknown.
std::string BuildTreeBinaryPath(const std::string& relative);

struct LocalClusterOptions {
  std::string ros2ctl;  // the ros2ctl binary
  std::string engine;   // empty: ros2ctl's default
  std::string storage_class = "nvme";
  std::string transport = "shm";
  int targets = 2;
  std::string shard_size = "256MiB";
  std::string name = "cluster";  // data directory: <scratch>/<name>
  std::vector<int> target_cpus;  // engine target_cpus; empty: unpinned
  bool agent = false;            // also start ros2-agent (`cluster up --agent`; socket <data_dir>/agent.sock)
  std::string metrics;           // `cluster up --metrics` (host:port or off); empty: ros2ctl's default
};

class LocalCluster {
 public:
  static Result<std::unique_ptr<LocalCluster>> Up(const std::string& scratch, const LocalClusterOptions& options);
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // Runs `ros2ctl --data-dir DIR args...`; returns its stdout.
  Result<std::string> Ctl(const std::vector<std::string>& args) const;
  const std::string& data_dir() const { return data_dir_; }
  std::string agent_socket() const { return data_dir_ + "/agent.sock"; }
  // The running engine's / agent's pid (from the cluster's pid files), or an error.
  Result<pid_t> engine_pid() const;
  Result<pid_t> agent_pid() const;

 private:
  LocalCluster(std::string ros2ctl, std::string scratch, std::string data_dir)
      : ros2ctl_(std::move(ros2ctl)), scratch_(std::move(scratch)), data_dir_(std::move(data_dir)) {}
  std::string ros2ctl_;
  std::string scratch_;
  std::string data_dir_;
  bool up_ = false;
};

class FuseMount {
 public:
  // Starts `binary -f -d <data_dir> --transport <transport> [extra...] pool cont
  // mountpoint` and waits until the mountpoint is a FUSE mount (up to `timeout_s`).
  static Result<std::unique_ptr<FuseMount>> Start(const std::string& binary, const std::string& data_dir,
                                                  const std::string& transport, const std::string& pool,
                                                  const std::string& cont, const std::string& mountpoint,
                                                  const std::string& log_path,
                                                  const std::vector<std::string>& extra = {}, double timeout_s = 60);
  ~FuseMount();
  FuseMount(const FuseMount&) = delete;
  FuseMount& operator=(const FuseMount&) = delete;
  const std::string& mountpoint() const { return mountpoint_; }

 private:
  FuseMount(ChildProcess process, std::string mountpoint)
      : process_(std::move(process)), mountpoint_(std::move(mountpoint)) {}
  ChildProcess process_;
  std::string mountpoint_;
};

// True when `path` is currently the mountpoint of a FUSE file system.
bool IsFuseMountpoint(const std::string& path);

}  // namespace ros2::bench
