// The environment of `ros2-bench posix`: a local cluster started through
// ros2ctl, a ros2-fuse mount of one of its containers, and fio runs with
// arbitrary arguments whose JSON report is parsed by ParseFioJson.
//
// PosixCluster owns a `ros2ctl cluster up` data directory: `cluster down`
// (forced after a timeout) on destruction. FuseMount owns a running ros2-fuse
// process and its mountpoint: unmounted (fusermount3 -u, then SIGKILL if the
// process does not exit) on destruction. Both are used from the suite's main
// thread, and neither throws: failures are Status values quoting the tool's
// stderr.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/fio_bench_util.h"
#include "bench/process_bench_util.h"
#include "common/status.h"

// Own namespace: other suites have helpers of the same names.
namespace ros2::bench::posix {

class PosixCluster {
 public:
  // `cluster up --data-dir <scratch>/cluster --class cls --transport t ...`.
  static Result<std::unique_ptr<PosixCluster>> Up(const std::string& ros2ctl, const std::string& engine,
                                                  const std::string& scratch, const std::string& cls,
                                                  const std::string& transport, int targets,
                                                  const std::string& shard_size);
  ~PosixCluster();
  PosixCluster(const PosixCluster&) = delete;
  PosixCluster& operator=(const PosixCluster&) = delete;

  // Runs `ros2ctl --data-dir <dir> args...`; returns its stdout.
  Result<std::string> Ctl(const std::vector<std::string>& args) const;
  const std::string& data_dir() const { return data_dir_; }

 private:
  PosixCluster(std::string ros2ctl, std::string scratch, std::string data_dir)
      : ros2ctl_(std::move(ros2ctl)), scratch_(std::move(scratch)), data_dir_(std::move(data_dir)) {}
  std::string ros2ctl_;
  std::string scratch_;
  std::string data_dir_;
  bool up_ = false;
};

class FuseMount {
 public:
  // Starts `binary -f -d <data_dir> --transport <transport> [extra...] pool cont
  // mountpoint` (in the foreground: the process is the mount) and waits until
  // the mountpoint is a FUSE mount (up to `timeout_s`).
  static Result<std::unique_ptr<FuseMount>> Start(const std::string& binary, const std::string& data_dir,
                                                  const std::string& transport, const std::string& pool,
                                                  const std::string& cont, const std::string& mountpoint,
                                                  const std::string& log_path, const std::vector<std::string>& extra,
                                                  double timeout_s = 30);
  ~FuseMount();
  FuseMount(const FuseMount&) = delete;
  FuseMount& operator=(const FuseMount&) = delete;
  const std::string& mountpoint() const { return mountpoint_; }

 private:
  FuseMount(ChildProcess process, std::string mountpoint, std::string log_path)
      : process_(std::move(process)), mountpoint_(std::move(mountpoint)), log_path_(std::move(log_path)) {}
  ChildProcess process_;
  std::string mountpoint_;
  std::string log_path_;
};

// True when `path` is currently the mountpoint of a FUSE file system.
bool IsFuseMountpoint(const std::string& path);

// Runs fio with `args` (everything but the output options) and parses its JSON
// report (written to a file in `scratch`, so library noise on stdout cannot
// corrupt it). `limit_s` bounds the run. IOError quotes fio's stderr.
Result<FioResult> RunFioArgs(const std::vector<std::string>& args, const std::string& scratch, double limit_s);

}  // namespace ros2::bench::posix
