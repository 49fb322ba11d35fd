// HostCluster: `ros2ctl cluster up --hosts N` — N simulated hosts on this
// machine, one engine each, as docs/cluster.md ("The host harness")
// describes.
//
// Every host is a network namespace on a private bridge plus its own IPC,
// PID and mount namespaces (host_namespaces.h, host_network.h), so UCX picks
// tcp between hosts and shared memory inside one. Host 1's engine holds the
// management state and listens on 10.213.0.1:7400 with TLS (a cluster CA and
// its certificate in DIR/host1/tls); the others join it there, trusting the
// CA, as separate machines would. With `etcd`, hosts 1..min(N,3) also run an
// etcd member each (the cluster's replicated management store).
//
// Files: DIR/hosts.json (the state: every namespace, link, bridge and pid
// made, written before each is made, so `cluster down` removes them after a
// failed or interrupted start too), DIR/cluster.json (what clients need:
// host 1's control socket, the admin secret, the hosts' device), and per host
// DIR/host<i>/ (engine.yaml, engine.log, the engine's data; etcd/ and
// etcd.log with a member). Needs root (namespaces, links). Single-threaded
// helpers of ros2ctl.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace ros2::ctl {

// The state file of a host cluster inside its data directory.
inline constexpr const char* kHostsFileName = "hosts.json";
// Host 1's TCP control endpoint port (on its own address).
inline constexpr int kHostControlPort = 7400;

struct HostClusterOptions {
  std::string data_dir;
  int hosts = 3;
  uint32_t targets = 2;
  std::string storage_class = "ram";
  std::string transport = "auto";  // every engine's transport.kind
  std::string engine_binary;       // empty: as `cluster up` finds it
  std::chrono::seconds ready_timeout{60};
  // Run an etcd member in hosts 1..min(hosts, 3) (docs/cluster.md). Needs
  // the etcd binary (`etcd_binary`, else etcd on PATH).
  bool etcd = false;
  std::string etcd_binary;
};

struct HostInfo {
  int index = 0;         // 1-based
  std::string hostname;  // host<i>, the engine's control.address
  std::string netns;     // `ip netns exec <netns> ...` enters its network
  std::string veth;      // the bridge side of its link (partition target)
  std::string address;   // 10.213.0.<i>
  std::string data_dir;  // DIR/host<i>
  pid_t init_pid = 0;    // pid 1 of the host
  pid_t engine_pid = 0;
  pid_t etcd_pid = 0;       // 0: no member on this host
  std::string etcd_client;  // "10.213.0.<i>:2379" with a member
  bool link_up = true;      // filled by status
  nlohmann::json ToJson() const;
  static HostInfo FromJson(const nlohmann::json& j);
};

struct HostClusterInfo {
  std::string data_dir;
  std::string id;  // the names' cluster id
  std::string bridge;
  std::string control;  // host 1's Unix control socket (reachable from any namespace)
  std::string listen;   // host 1's TLS endpoint, 10.213.0.1:7400
  std::string tls_ca;
  std::string admin_secret_file;
  std::string net_devices;  // the device inside every host, for clients run there
  std::string etcd;         // "etcd://10.213.0.1:2379,..." with members; empty otherwise
  std::vector<HostInfo> hosts;
  nlohmann::json ToJson() const;
};

// Starts the hosts and their engines and waits until host 1's management
// service sees every engine's targets up. On failure everything made so far
// is removed (HostClusterDown) and the error names the step.
Result<HostClusterInfo> HostClusterUp(const HostClusterOptions& options);

// Whether `data_dir` holds a host cluster's state file.
bool IsHostCluster(const std::string& data_dir);

// Stops every host (their engines get SIGTERM, SIGKILL after a grace) and
// removes the namespaces, links and bridge of DIR/hosts.json, then the file.
// Tolerates what is already gone.
Status HostClusterDown(const std::string& data_dir);

// The state, with each host's link and processes checked now.
Result<HostClusterInfo> HostClusterStatus(const std::string& data_dir);

// `host` (1-based, or "host<i>") of the cluster in `data_dir`.
Result<HostInfo> FindHost(const std::string& data_dir, const std::string& host);

// Partition (link down) or heal (link up) one host.
Status SetHostPartitioned(const std::string& data_dir, const std::string& host, bool partitioned);

}  // namespace ros2::ctl
