// EngineConfig: everything `ros2-engine` is told at start, from a YAML file,
// from embedded defaults, and from command-line overrides.
//
// File layout (every key optional; docs/engine.md has the reference):
//   data_dir: /var/lib/ros2          # required unless given with --data-dir
//   log_level: info
//   targets: 2                       # target threads (1 .. 64)
//   target_cpus: [0, 1]              # optional: target i runs on CPU target_cpus[i % n]
//   vos: { class: nvme, ... }   # every container shard (vos_config.h); pools size them
//   transport: { kind: auto, inline_limit: 16KiB, net_devices: lo, spin: 50us, keepalive: 2s }
//              (provider: ucx | ofi, ofi_provider: "tcp;ofi_rxm" | shm | ...: the fabric library)
//   control:
//     socket: <data_dir>/control.sock  # Unix socket of the embedded control plane
//     listen: 127.0.0.1:0              # optional extra TCP listener
//     join: unix:/other/control.sock   # register with another engine's control plane
//     join_secret_file: /other/admin.secret
//     tls_cert, tls_key: engine.crt/.key   # required with listen (or insecure_tcp: true, tests only)
//     tls_ca: ca.crt                      # required with a TCP join (or insecure_tcp: true)
//     address: host name shown in the pool map
//     capability_lifetime: 1h          # how long issued capabilities stay valid
//     revocation_sync: 200ms           # joined: how often revocations are fetched
//     fail_closed_after: 1s            # joined: refuse capabilities after this long without a fetch
//     pbkdf2_iterations: 10000         # embedded: rounds for stored tenant secrets
//     max_sessions_per_tenant: 1024    # embedded: open sessions per tenant
//     store: embedded                  # or etcd://h:p,h:p (docs/cluster.md)
//     cluster_key_file: cluster.key    # etcd: seals the capability key in etcd
//     etcd_namespace: ros2/            # etcd: the prefix of every key
//     lease_ttl: 3s                    # etcd: membership lease; DOWN within 2 x this
//   metrics: { listen: 127.0.0.1:9464 }  # Prometheus endpoint (docs/observability.md); absent: none
//   shutdown_grace: 5s               # how long in-flight requests may finish
//   limits:                          # request limits (request_budget.h)
//     max_epoch_drift: 10s           # client epochs at most this far ahead of wall time
//     max_io_size: 1GiB              # largest update or fetch
//     connection_bytes_in_flight: 1GiB
//     connection_requests_in_flight: 8192
//     target_bytes_in_flight: 2GiB
//     target_requests_in_flight: 32768
//   process:                         # started as root (common/privileges.h)
//     user: ros2                     # switch to this user; root: stay root
//     capabilities: [dac_override, ipc_owner, sys_ptrace]   # kept after the switch
// A value type; parsing is a free function, safe from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/privileges.h"
#include "common/status.h"
#include "engine/request_budget.h"
#include "transport/transport.h"
#include "vos/vos.h"

namespace ros2::engine {

struct ControlConfig {
  std::string socket;  // "unix:/path" or a bare path; empty: <data_dir>/control.sock
  std::string listen;  // optional "host:port" TCP listener (port 0: any)
  std::string join;    // management endpoint to register with; empty: embed one
  // TLS of the TCP control endpoints: the certificate and key of `listen`
  // (signed by the cluster CA, `ros2ctl cert engine`), and the CA certificate
  // a TCP `join` endpoint must present a certificate of. `join_tls_name`
  // overrides the name checked in that certificate (default: the join host).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  std::string join_tls_name;
  // Tests only: a TCP listener without TLS and a TCP join without tls_ca.
  // Without it the engine refuses both at start.
  bool insecure_tcp = false;
  std::string join_tenant = "admin";
  std::string join_secret_file;                                          // secret of join_tenant (required with join)
  std::string address;                                                   // informative host name; empty: gethostname()
  std::chrono::milliseconds capability_lifetime{std::chrono::hours(1)};  // expiry of issued capabilities
  // Joined mode: how often destroyed pools/containers are fetched from the
  // management endpoint.
  std::chrono::milliseconds sync_interval{2000};
  // Joined mode: how often revocations are fetched, and how long the engine
  // keeps accepting capabilities without a successful fetch (then it refuses
  // every capability until one succeeds: fail closed). A revocation takes
  // effect on this engine within fail_closed_after.
  std::chrono::milliseconds revocation_sync{200};
  std::chrono::milliseconds fail_closed_after{1000};
  // Embedded mode: PBKDF2 rounds of newly stored tenant secrets, and the open
  // sessions one tenant may hold.
  uint32_t pbkdf2_iterations = 10000;
  uint32_t max_sessions_per_tenant = 1024;
  // Where the management state lives (docs/cluster.md): "embedded" (RocksDB in
  // data_dir, one engine) or "etcd://host:port,..." (shared by the engines of
  // a cluster, each holding an etcd lease of lease_ttl with its membership).
  std::string store = "embedded";
  std::string cluster_key_file;  // etcd: 64 hex digits, the same on every engine
  std::string etcd_namespace = "ros2/";
  std::chrono::milliseconds lease_ttl{3000};
};

// The Prometheus endpoint (docs/observability.md). Empty listen: none (the
// counters are kept either way; only the HTTP listener is optional).
struct MetricsConfig {
  std::string listen;  // "host:port", port 0: any free port (the ready file says which)
};

// Rebuild of replicated objects (docs/replication.md, "Rebuild"), in a
// cluster on etcd.
struct RebuildConfig {
  // How long a target stays DOWN before the leader starts its rebuild (an
  // engine back within it rebuilds nothing).
  std::chrono::milliseconds delay{5000};
  // The share of the engine's time, in percent, that rebuild leaves to client
  // I/O while clients use the puller's or the source's targets: then the
  // puller does one batch at a time and, after a batch that took t, pauses
  // t x share / (100 - share). Without client requests it does not pause.
  uint32_t client_share_percent = 50;
};

struct EngineConfig {
  std::string data_dir;
  std::string log_level = "info";
  uint32_t targets = 2;
  // CPUs the target threads are pinned to, target i on target_cpus[i % size];
  // empty: not pinned (the scheduler places them).
  std::vector<int> target_cpus;
  vos::VosOptions vos;  // template for every container shard; `path` is set per shard
  transport::TransportOptions transport;
  ControlConfig control;
  std::chrono::milliseconds shutdown_grace{5000};
  EngineLimits limits;
  MetricsConfig metrics;
  RebuildConfig rebuild;
  // The user and capabilities to keep when started as root.
  ProcessConfig process{.capabilities = EngineCapabilities()};
  // Where the config came from, for error messages ("engine.yaml", "defaults").
  std::string origin = "defaults";
};

// The embedded defaults: 2 targets, nvme class with 256 MiB per container
// shard, transport auto, control plane on <data_dir>/control.sock.
EngineConfig DefaultEngineConfig();

// Applies the keys of `root` on top of `config`. Errors name `origin` and the
// key ("engine.yaml: transport.kind: ...").
Status ApplyEngineConfig(const YAML::Node& root, std::string_view origin, EngineConfig* config);

// Loads a YAML file on top of the defaults.
Result<EngineConfig> LoadEngineConfig(const std::string& path);

// Checks cross-field rules after overrides (data_dir set, targets in range,
// target_cpus allowed to this process, join with a secret file).
Status FinalizeEngineConfig(EngineConfig* config);

// The Unix socket address ("unix:/...") of the control plane in `config`.
std::string ControlSocketAddress(const EngineConfig& config);

}  // namespace ros2::engine
