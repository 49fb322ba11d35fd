// EngineProcess: one ros2-engine process started straight from an engine.yaml
// the test writes (EngineOptions), for the tests of the engine itself: its
// configuration keys, limits, restarts, several engines joining one control
// plane. It creates the data directory (0700: the engine refuses one other
// users may enter; started as root, the engine hands it to its own user), writes the YAML into it, starts the binary
// (ROS2_ENGINE_PATH, the build's ros2-engine), waits for its ready file and
// stops or kills it. Tests of what runs on top of an engine start one the way
// users do, with `ros2ctl cluster up` (TestCluster, test_cluster.h); the two
// share no code path but the engine binary. Test thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "testing/status_assert.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace ros2::testing {

struct EngineOptions {
  std::string data_dir;
  std::string transport = "tcp";      // engine transport kind; "ofi-tcp", "ofi-shm": on libfabric
  std::string storage_class = "ram";  // vos.class of container shards
  std::string data_size = "16MiB";    // per container shard
  uint32_t targets = 2;
  std::string join;  // management endpoint to join (empty: embedded control plane)
  std::string join_secret_file;
  std::string capability_lifetime;  // e.g. "2s"; empty: the default
  std::string sync_interval;        // joined engines, e.g. "200ms"; empty: the default
  std::string shutdown_grace = "3s";
  std::string keepalive;       // transport.keepalive, e.g. "10ms"; empty: the default
  std::string target_cpus;     // target_cpus, e.g. "[1, 0]"; empty: unpinned
  std::string limits;          // the limits map, e.g. "{ max_io_size: 1MiB }"; empty: the defaults
  std::string metrics_listen;  // metrics.listen, e.g. "127.0.0.1:0"; empty: no endpoint
  std::string rebuild;         // the rebuild map, e.g. "{ delay: 1s }"; empty: the defaults

  // More keys of the transport map, e.g. "max_connections: 8".
  std::string transport_extra;
  // Extra lines of the control section, each "key: value" without indentation.
  std::vector<std::string> control_extra;
  // The process map, e.g. "{ user: root }"; empty: the defaults (started as
  // root, the engine switches to the ros2 user).
  std::string process;
};

// Gives `path` (a directory with everything in it, or a file) to the user an
// engine or agent started as root switches to (`ros2`, docs/security.md,
// "Privileges"), so it can use what the test made for it: certificates, keys,
// secret files, a directory for its socket. Does nothing when the test does not run as root.
Status GiveToServiceUser(const std::string& path);

// The cluster key engines on one etcd store share (`control.cluster_key_file`):
// a fixed test key written to <dir>/keys/cluster.key, mode 0600 in a 0700
// directory given to the service user. Returns the file's path.
Result<std::string> WriteTestClusterKey(const std::string& dir);

class EngineProcess {
 public:
  // Starts the engine and waits (up to 30 s) for its ready file. The error
  // carries the tail of the engine's log when it exits or never gets ready.
  static Result<std::unique_ptr<EngineProcess>> Start(const EngineOptions& options);
  ~EngineProcess();  // kills the process if it still runs

  // SIGTERM, then waits up to 20 s; returns the exit status (or TimedOut).
  Result<int> Terminate();
  // SIGKILL and reap.
  void Kill();

  pid_t pid() const { return process_.pid(); }
  const std::string& control() const { return control_; }  // "unix:/.../control.sock" or the joined endpoint
  const std::string& engine_id() const { return engine_id_; }
  const std::string& tcp() const { return tcp_; }          // the TCP control listener "host:port", if any
  const std::string& metrics() const { return metrics_; }  // the bound metrics endpoint "host:port", if any
  std::string admin_secret_file() const { return options_.data_dir + "/admin.secret"; }
  std::string LogTail() const;
  // Ok while the engine runs or after Kill/Terminate; once it has exited on
  // its own (a crash, an abort, a fatal error), an error naming its exit code
  // (128 + signal) with the tail of its log, every time it is asked.
  Status CheckNotDied();

 private:
  explicit EngineProcess(EngineOptions options) : options_(std::move(options)) {}
  EngineOptions options_;
  ChildProcess process_;
  std::string control_;
  std::string engine_id_;
  std::string tcp_;
  std::string metrics_;
  Status died_;
};

}  // namespace ros2::testing
