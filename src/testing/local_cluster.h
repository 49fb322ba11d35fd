// LocalCluster: a single-node ROS2 cluster started the way users start one,
// with `ros2ctl cluster up` on a data directory, and stopped with `ros2ctl
// cluster down` (forced after a timeout) when the object dies, also when a
// test or benchmark returns early. The one cluster harness of the tests
// (TestCluster, test_cluster.h, wraps it with the build's binaries) and of
// ros2-bench's end-to-end suites (obj, md, posix, offload); the multi-host
// harness builds on it. Also runs any ros2ctl command against the cluster.
// One thread; failures are Status values quoting the tool's stderr.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "testing/subprocess.h"

namespace ros2::testing {

// "<build>/<relative>" for the build tree the running binary lives in, taken
// as two directories above it ("<build>/bench/ros2-bench",
// "<build>/src/x/x_test" one level deeper: use the compile definitions there);
// empty when unknown.
std::string BuildTreeBinaryPath(const std::string& relative);

struct LocalClusterOptions {
  std::string ros2ctl;  // the ros2ctl binary
  std::string engine;   // empty: ros2ctl's default
  std::string storage_class = "nvme";
  std::string transport = "shm";  // "ofi-tcp", "ofi-shm": that kind on the libfabric provider
  int targets = 2;
  std::string shard_size = "256MiB";
  std::string name = "cluster";  // Up(): the data directory is <scratch>/<name>
  std::vector<int> target_cpus;  // engine target_cpus; empty: unpinned
  bool agent = false;            // also start ros2-agent (`cluster up --agent`)
  std::string metrics;           // `cluster up --metrics` (host:port or off); empty: ros2ctl's default
  int timeout_s = 60;            // `cluster up --timeout`
  std::vector<std::string> extra_up_args;
  // Every ros2ctl command runs under this prefix, e.g. {"ip", "netns", "exec",
  // "h1"} for a cluster in a network namespace of its own.
  std::vector<std::string> command_prefix;
};

class LocalCluster {
 public:
  // A cluster on `data_dir` (made 0700 when missing: the engine requires a
  // private one and, started as root, takes it for its own user); ros2ctl's
  // captured output goes to files in `scratch`. Nothing is started yet.
  LocalCluster(LocalClusterOptions options, std::string data_dir, std::string scratch);
  // Made and started: data directory `<scratch>/<options.name>`.
  static Result<std::unique_ptr<LocalCluster>> Up(const std::string& scratch, const LocalClusterOptions& options);
  ~LocalCluster();  // `cluster down --force` when running
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // `ros2ctl --json cluster up ...`; also starts it again after KillEngine.
  Status Start();
  // SIGKILLs the engine (no shutdown of any kind) and waits (up to 10 s) until
  // it is gone (it is not our child: `cluster up` started it).
  Status KillEngine();

  // `ros2ctl --data-dir DIR args...`, to completion.
  CommandResult Run(const std::vector<std::string>& args) const;
  // `ros2ctl args...` (no --data-dir).
  CommandResult RunBare(const std::vector<std::string>& args) const;
  // Run; stdout on success, an error quoting stderr otherwise.
  Result<std::string> Ctl(const std::vector<std::string>& args) const;

  const std::string& data_dir() const { return data_dir_; }
  const std::string& scratch() const { return scratch_; }
  bool running() const { return running_; }
  // From `cluster up --json` (empty before the first Start).
  const std::string& control() const { return control_; }
  const std::string& admin_secret_file() const { return admin_secret_file_; }
  // The ros2-agent socket when started with an agent (empty otherwise).
  const std::string& agent_socket() const { return agent_socket_; }
  // The running engine's / agent's pid (from the cluster's pid files), or an error.
  Result<pid_t> engine_pid() const;
  Result<pid_t> agent_pid() const;

 private:
  std::vector<std::string> UpArgs() const;
  LocalClusterOptions options_;
  std::string data_dir_;
  std::string scratch_;
  bool running_ = false;
  std::string control_;
  std::string admin_secret_file_;
  std::string agent_socket_;
};

}  // namespace ros2::testing
