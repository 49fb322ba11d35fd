// HostCluster: N simulated hosts on this machine, each with its own engine,
// for tests and ros2-bench, started the way users start them: `ros2ctl
// cluster up --hosts N` in a directory of the caller's, removed with `ros2ctl
// cluster down` (docs/cluster.md, "The host harness"). Every host has its own
// network, IPC, PID and mount namespaces on a private bridge, so the data
// plane between hosts is what it would be between machines (tcp) and inside
// a host what it is on one machine (shared memory).
//
// Runs commands inside a host (`cluster exec`), partitions and heals hosts,
// and kills an engine with SIGKILL. Needs root, iproute2 and network
// namespaces (Supported() says why not). No GoogleTest in here: benches link
// it too. One thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "testing/subprocess.h"

namespace ros2::testing {

struct HostClusterOptions {
  std::string ros2ctl;   // the ros2ctl binary (required)
  std::string engine;    // the ros2-engine binary; empty: ros2ctl's default
  std::string data_dir;  // the cluster's directory (required; keep it short: Unix socket paths)
  int hosts = 3;
  int targets = 2;
  std::string storage_class = "ram";
  std::string transport = "auto";
  bool etcd = false;  // an etcd member in hosts 1..3 (`cluster up --etcd`)
  int timeout_s = 60;
};

class HostCluster {
 public:
  // Root, `ip` on PATH and network namespaces: true, or false with the reason.
  static bool Supported(std::string* why);

  // `ros2ctl cluster up --hosts N`; the error quotes its output.
  static Result<std::unique_ptr<HostCluster>> Up(const HostClusterOptions& options);
  ~HostCluster();  // Down(), its error ignored
  HostCluster(const HostCluster&) = delete;
  HostCluster& operator=(const HostCluster&) = delete;

  // `ros2ctl cluster down`: every host, namespace, link and the bridge go.
  Status Down();

  // `ros2ctl --data-dir DIR args...` from this (the caller's) namespace.
  CommandResult Ctl(const std::vector<std::string>& args) const;
  // `argv` run inside host `host` (1-based): `ros2ctl cluster exec`.
  CommandResult InHost(int host, const std::vector<std::string>& argv) const;
  // `ros2ctl cluster partition|heal host`.
  Status Partition(int host) const;
  Status Heal(int host) const;
  // SIGKILL to the engine of `host`; waits until it is gone.
  Status KillEngine(int host) const;

  int hosts() const { return static_cast<int>(info_["hosts"].size()); }
  // What `cluster up --json` reported (hosts.json's fields).
  const nlohmann::json& info() const { return info_; }
  const nlohmann::json& host(int host) const { return info_["hosts"].at(static_cast<size_t>(host - 1)); }
  std::string address(int host) const { return this->host(host)["address"]; }
  pid_t engine_pid(int host) const { return this->host(host)["engine_pid"]; }
  const std::string& data_dir() const { return options_.data_dir; }
  const std::string& ros2ctl() const { return options_.ros2ctl; }

 private:
  explicit HostCluster(HostClusterOptions options) : options_(std::move(options)) {}
  HostClusterOptions options_;
  nlohmann::json info_;
  bool up_ = false;
};


}  // namespace ros2::testing
