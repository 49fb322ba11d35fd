// What `ros2-bench md` runs against besides the local file system: a
// single-node cluster started with `ros2ctl cluster up` in a scratch directory
// (stopped with `cluster down` on destruction, also on early returns), and a
// ros2-fuse mount of one of its containers (ros2-fuse in the foreground as a
// child process; unmounted with fusermount3 and reaped on destruction). Both
// are owned by the suite's main thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/process_bench_util.h"
#include "common/status.h"

namespace ros2::bench {

// "<build>/<relative>" for the build tree this ros2-bench binary lives in.
std::string BuildTreeBinaryPath(const std::string& relative);

struct MdClusterOptions {
  std::string ros2ctl;
  std::string engine;  // empty: ros2ctl's default
  std::string storage_class = "nvme";
  std::string transport = "shm";
  int targets = 2;
  std::string shard_size = "256MiB";
};

class MdCluster {
 public:
  static Result<std::unique_ptr<MdCluster>> Up(const std::string& scratch, const MdClusterOptions& options);
  ~MdCluster();
  MdCluster(const MdCluster&) = delete;
  MdCluster& operator=(const MdCluster&) = delete;

  // Runs `ros2ctl --data-dir DIR args...`; returns its stdout or an error
  // quoting its stderr.
  Result<std::string> Ctl(const std::vector<std::string>& args) const;
  const std::string& data_dir() const { return data_dir_; }

 private:
  MdCluster(std::string scratch, std::string data_dir, std::string ros2ctl)
      : scratch_(std::move(scratch)), data_dir_(std::move(data_dir)), ros2ctl_(std::move(ros2ctl)) {}
  Result<std::string> Run(const std::vector<std::string>& args) const;
  std::string scratch_;
  std::string data_dir_;
  std::string ros2ctl_;
  bool up_ = false;
};

class FuseMount {
 public:
  // Starts `ros2-fuse -f -d DATA_DIR --transport T POOL CONT MOUNTPOINT` and
  // waits (up to 60 s) until the mountpoint is a different file system.
  static Result<std::unique_ptr<FuseMount>> Start(const std::string& binary, const std::string& data_dir,
                                                  const std::string& pool, const std::string& container,
                                                  const std::string& mountpoint, const std::string& transport,
                                                  const std::string& log_path);
  ~FuseMount();
  FuseMount(const FuseMount&) = delete;
  FuseMount& operator=(const FuseMount&) = delete;
  const std::string& mountpoint() const { return mountpoint_; }

 private:
  FuseMount(ChildProcess daemon, std::string mountpoint)
      : daemon_(std::move(daemon)), mountpoint_(std::move(mountpoint)) {}
  ChildProcess daemon_;
  std::string mountpoint_;
};

}  // namespace ros2::bench
