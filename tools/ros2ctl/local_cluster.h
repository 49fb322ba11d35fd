// LocalCluster: a single-node ROS2 cluster kept in one data directory, as
// `ros2ctl cluster up|down|status` manage it.
//
// Files in the directory: engine.yaml (the generated engine configuration),
// engine.pid, engine.log (the daemon's stdout and stderr), cluster.json (what
// clients need: the control endpoint and the admin secret file), plus what the
// engine itself keeps there (control.sock, admin.secret, target data). Up
// starts `ros2-engine --config DIR/engine.yaml` in its own session, writes the
// pid file, and waits until the management service answers with every target
// registered. Down sends SIGTERM and waits for the process to exit.
// Single-threaded helper of ros2ctl.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace ros2::ctl {

struct ClusterUpOptions {
  std::string data_dir;
  uint32_t targets = 2;
  std::string storage_class = "nvme";  // nvme | ram
  std::string transport = "auto";      // tcp | shm | auto
  std::string provider = "ucx";        // ucx | ofi: transport.provider of the engine (and agent)
  std::string shard_size;        // ignored (old --shard-size): a pool's size is its capacity, shards grow on demand
  std::vector<int> target_cpus;  // engine target_cpus (target i on target_cpus[i % n]); empty: unpinned
  std::string engine_binary;     // empty: ROS2_ENGINE, the build tree, next to ros2ctl, PATH
  // Optional TCP control listener "host:port": served with TLS, with a cluster
  // CA and an engine certificate made in DIR/tls when missing (mode 0600).
  std::string listen;
  // The engine's (and agent's) Prometheus endpoint, metrics.listen
  // (docs/observability.md); "off": none.
  std::string metrics = "127.0.0.1:0";
  std::chrono::seconds ready_timeout{60};
  // Also start ros2-agent (offload mode, docs/agent.md) beside the engine:
  // socket DIR/agent.sock, config DIR/agent.yaml, log DIR/agent.log, the
  // admin tenant mapped for root and the current uid.
  bool agent = false;
  std::string agent_binary;  // empty: ROS2_AGENT, the build tree, next to ros2ctl, PATH
};

// Everything `cluster up` reports.
struct ClusterInfo {
  std::string data_dir;
  std::string control;            // "unix:DIR/control.sock"
  std::string admin_secret_file;  // DIR/admin.secret
  std::string log_file;
  std::string engine_binary;
  int pid = 0;
  uint32_t targets = 0;
  std::string storage_class;
  std::string transport;
  std::string listen;  // the TCP listener, when asked for
  std::string tls_ca;  // its CA certificate (DIR/tls/ca.crt)
  // With --agent: DIR/agent.sock, the agent's pid and log.
  std::string agent_socket;
  int agent_pid = 0;
  std::string agent_log;
  nlohmann::json ToJson() const;
};

// Starts the engine and waits until it is ready. AlreadyExists when an engine
// of this directory is running; the error of a failed start quotes the end of
// engine.log.
Result<ClusterInfo> ClusterUp(const ClusterUpOptions& options);

// Stops the agent when one runs (DIR/agent.pid), then the engine (SIGTERM,
// then waits up to `timeout`; SIGKILL afterwards when `force`). Returns false
// when no engine was running.
Result<bool> ClusterDown(const std::string& data_dir, std::chrono::seconds timeout, bool force);

// The ros2-engine binary: `requested` when given, else ROS2_ENGINE, the build
// tree, next to ros2ctl, PATH. NotFound says where it looked.
Result<std::string> FindEngineBinary(const std::string& requested);

// The pid of the running engine of `data_dir`, or 0.
int RunningEnginePid(const std::string& data_dir);

// The agent.yaml text `cluster up --agent` writes (docs/agent.md).
std::string AgentConfigYaml(const ClusterUpOptions& options);

// The engine.yaml text for these options (exposed for tests and docs).
std::string EngineConfigYaml(const ClusterUpOptions& options);

}  // namespace ros2::ctl
