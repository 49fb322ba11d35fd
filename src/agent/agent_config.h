// AgentConfig: what `ros2-agent` is told at start, from a YAML file
// (docs/agent.md, "Running it"). Every key but `control` and `tenants` is
// optional:
//   socket: /run/ros2/agent.sock     # Unix socket (SOCK_SEQPACKET) hosts connect to
//   socket_mode: 0666                # its permission bits (callers are told apart by SO_PEERCRED)
//   control: unix:/path/control.sock # the engine's control endpoint
//   transport: auto                  # auto | shm | tcp | rdma, agent <-> engine
//   provider: ucx                    # ucx | ofi (libfabric), as the engines' transport.provider
//   net_devices: lo
//   log_level: info
//   spin: 50us                       # how long a session thread polls its ring before it sleeps
//   client_spin: 0us                 # how long the tenants' clients poll the data plane before they sleep
//   io_timeout: 30s                  # each data-plane request of the agent's clients
//   max_sessions: 256
//   max_sessions_per_tenant: 64
//   max_ring_entries: 4096           # largest submission ring a host may bring
//   max_arena: 1GiB                  # largest arena a host may bring
//   metrics: { listen: 127.0.0.1:9465 }  # Prometheus endpoint (docs/observability.md); absent: none
//   process: { user: ros2, capabilities: [dac_override, sys_ptrace] }  # started as root
//   tenants:                         # caller -> tenant, first match by uid, then by gid
//     - { name: admin, secret_file: /path/admin.secret, uids: [0], gids: [],
//         qos: { bandwidth: 50MiB, iops: 1000 } }  # optional; 0 or absent = unlimited
// A value type; parsing is a free function, safe from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "agent/token_bucket.h"
#include "common/privileges.h"
#include "common/status.h"

namespace ros2::agent {

struct TenantMapping {
  std::string name;
  std::string secret_file;  // first line: the tenant's secret (never sent to a host)
  std::vector<uid_t> uids;
  std::vector<gid_t> gids;
  // Keys of encrypted containers (docs/dfs.md, "Encrypted files"), held here
  // and never sent to a host: one file per container label, else the
  // tenant's key file for every encrypted container it mounts.
  std::string key_file;
  std::map<std::string, std::string> container_keys;
  // The key file for container `label`; empty when the agent holds none.
  const std::string& KeyFileFor(const std::string& label) const {
    auto it = container_keys.find(label);
    return it != container_keys.end() ? it->second : key_file;
  }
  QosLimits qos;  // the tenant's starting limits (changed live with `ros2ctl agent qos`)
};

struct AgentConfig {
  std::string socket = "/run/ros2/agent.sock";
  uint32_t socket_mode = 0666;
  std::string control;
  std::string transport = "auto";
  std::string provider = "ucx";  // ucx | ofi: the data plane's fabric library, as the engines'

  std::string net_devices = "lo";
  std::string log_level = "info";
  std::chrono::microseconds spin{50};
  // The tenants' clients' transport poll budget (ClientOptions::spin_budget).
  // 0: an agent waiting on the engine yields its CPU at once, which is what
  // lets an engine sharing that CPU (the local cluster's "DPU") serve it.
  std::chrono::microseconds client_spin{0};
  std::chrono::milliseconds io_timeout{30000};
  uint32_t max_sessions = 256;
  uint32_t max_sessions_per_tenant = 64;
  uint32_t max_ring_entries = 4096;
  uint64_t max_arena = uint64_t{1} << 30;
  std::vector<TenantMapping> tenants;
  std::string metrics_listen;  // metrics.listen: "host:port" (port 0: any free port); empty: no endpoint
  // The user and capabilities to keep when started as root.
  ProcessConfig process{.capabilities = AgentCapabilities()};
  std::string origin = "defaults";
};

// Applies the keys of `root` on top of `config`; errors name `origin` and the
// key ("agent.yaml: tenants[1].uids: ...").
Status ApplyAgentConfig(const YAML::Node& root, std::string_view origin, AgentConfig* config);
// Loads a YAML file on top of the defaults and checks it (control set, at
// least one tenant, tenant names unique, secret files readable).
Result<AgentConfig> LoadAgentConfig(const std::string& path);
Status FinalizeAgentConfig(AgentConfig* config);

// The tenant of a caller: the first tenant listing `uid`, else the first
// listing `gid`; nullptr when none does.
const TenantMapping* FindTenant(const AgentConfig& config, uid_t uid, gid_t gid);

}  // namespace ros2::agent
