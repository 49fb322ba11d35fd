// Engine configuration: defaults, YAML keys, overrides and cross-field checks.
#include "engine/engine_config.h"

#include <algorithm>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <spdlog/spdlog.h>

#include "common/config.h"
#include "metrics/exporter.h"
#include "common/privileges.h"
#include "vos/vos_config.h"

namespace ros2::engine {
namespace {

constexpr uint64_t kDefaultShardDataSize = uint64_t{256} << 20;
constexpr uint32_t kMaxTargets = 64;

Status ApplyTransport(const YAML::Node& node, const std::string& where, transport::TransportOptions* t) {
  ROS2_RETURN_IF_ERROR(
      CheckKnownKeys(node, where,
                     {"provider", "ofi_provider", "kind", "inline_limit", "batch_flush", "net_devices", "tcp_seg_size", "spin", "timeout",
                      "keepalive", "max_connections", "max_connections_per_peer", "unauthenticated_timeout",
                      "max_segment_size", "max_segment_bytes_per_connection", "cma_tokens_per_process"}));
  std::string provider(transport::ProviderName(t->provider));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "provider", &provider));
  auto parsed_provider = transport::ParseProvider(provider);
  if (!parsed_provider.ok()) return parsed_provider.status().WithContext(where + ".provider");
  t->provider = *parsed_provider;
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "ofi_provider", &t->ofi_provider));
  std::string kind(transport::TransportKindName(t->kind));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "kind", &kind));
  auto parsed = transport::ParseTransportKind(kind);
  if (!parsed.ok()) return parsed.status().WithContext(where + ".kind");
  t->kind = *parsed;
  ROS2_RETURN_IF_ERROR(ReadSize(node, where, "inline_limit", &t->inline_limit));
  if (t->inline_limit > (uint64_t{1} << 20)) {
    return Status::InvalidArgument(fmt::format("{}.inline_limit: {} exceeds 1 MiB", where, t->inline_limit));
  }
  ROS2_RETURN_IF_ERROR(ReadSize(node, where, "batch_flush", &t->batch_flush_bytes));
  if (t->batch_flush_bytes == 0) {
    return Status::InvalidArgument(fmt::format("{}.batch_flush: must be at least 1 byte", where));
  }
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "net_devices", &t->net_devices));
  ROS2_RETURN_IF_ERROR(ReadSize(node, where, "tcp_seg_size", &t->tcp_seg_size));
  // "50us" is accepted besides the millisecond forms of ParseDuration.
  ROS2_RETURN_IF_ERROR(ReadMicros(node, where, "spin", &t->spin_budget));
  ROS2_RETURN_IF_ERROR(ReadDuration(node, where, "timeout", &t->default_timeout));
  ROS2_RETURN_IF_ERROR(ReadDuration(node, where, "keepalive", &t->keepalive_interval));
  if (t->keepalive_interval < std::chrono::milliseconds(10)) {
    return Status::InvalidArgument(fmt::format("{}.keepalive: must be at least 10ms", where));
  }
  // Resource limits a client cannot push the engine past (docs/transport.md, "Limits").
  for (auto [key, field] : {std::pair<const char*, uint32_t*>{"max_connections", &t->max_connections},
                            {"max_connections_per_peer", &t->max_connections_per_peer},
                            {"cma_tokens_per_process", &t->cma_tokens_per_process}}) {
    uint64_t v = *field;
    ROS2_RETURN_IF_ERROR(ReadUint(node, where, key, &v));
    if (v == 0 || v > (uint64_t{1} << 20)) {
      return Status::InvalidArgument(fmt::format("{}.{}: {} is not between 1 and 1048576", where, key, v));
    }
    *field = static_cast<uint32_t>(v);
  }
  ROS2_RETURN_IF_ERROR(ReadDuration(node, where, "unauthenticated_timeout", &t->unauthenticated_timeout));
  ROS2_RETURN_IF_ERROR(ReadSize(node, where, "max_segment_size", &t->max_segment_size));
  ROS2_RETURN_IF_ERROR(ReadSize(node, where, "max_segment_bytes_per_connection", &t->max_segment_bytes_per_connection));
  if (t->max_segment_size == 0 || t->max_segment_bytes_per_connection < t->max_segment_size) {
    return Status::InvalidArgument(fmt::format(
        "{}: max_segment_size must be at least 1 byte and at most max_segment_bytes_per_connection", where));
  }
  return Status::Ok();
}

Status ApplyControl(const YAML::Node& node, const std::string& where, ControlConfig* c) {
  ROS2_RETURN_IF_ERROR(CheckKnownKeys(node, where,
                                      {"socket",
                                       "listen",
                                       "join",
                                       "join_tenant",
                                       "join_secret_file",
                                       "address",
                                       "capability_lifetime",
                                       "sync_interval",
                                       "revocation_sync",
                                       "fail_closed_after",
                                       "pbkdf2_iterations",
                                       "max_sessions_per_tenant",
                                       "tls_cert",
                                       "tls_key",
                                       "tls_ca",
                                       "join_tls_name",
                                       "insecure_tcp",
                                       "store",
                                       "cluster_key_file",
                                       "etcd_namespace",
                                       "lease_ttl"}));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "store", &c->store));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "cluster_key_file", &c->cluster_key_file));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "etcd_namespace", &c->etcd_namespace));
  ROS2_RETURN_IF_ERROR(ReadDuration(node, where, "lease_ttl", &c->lease_ttl));
  if (c->store != "embedded" && !c->store.starts_with("etcd://")) {
    return Status::InvalidArgument(
        fmt::format("{}.store: '{}': expected embedded or etcd://host:port[,host:port...]", where, c->store));
  }
  if (c->store.starts_with("etcd://") && c->cluster_key_file.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}.cluster_key_file: required with an etcd store (64 hex digits, the same file on every engine)", where));
  }
  if (c->lease_ttl < std::chrono::seconds(1) ||
      c->lease_ttl % std::chrono::seconds(1) != std::chrono::milliseconds(0)) {
    return Status::InvalidArgument(fmt::format("{}.lease_ttl: must be a whole number of seconds, at least 1s", where));
  }
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "tls_cert", &c->tls_cert));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "tls_key", &c->tls_key));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "tls_ca", &c->tls_ca));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "join_tls_name", &c->join_tls_name));
  ROS2_RETURN_IF_ERROR(ReadBool(node, where, "insecure_tcp", &c->insecure_tcp));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "socket", &c->socket));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "listen", &c->listen));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "join", &c->join));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "join_tenant", &c->join_tenant));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "join_secret_file", &c->join_secret_file));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "address", &c->address));
  ROS2_RETURN_IF_ERROR(ReadDuration(node, where, "capability_lifetime", &c->capability_lifetime));
  ROS2_RETURN_IF_ERROR(ReadDuration(node, where, "sync_interval", &c->sync_interval));
  ROS2_RETURN_IF_ERROR(ReadDuration(node, where, "revocation_sync", &c->revocation_sync));
  ROS2_RETURN_IF_ERROR(ReadDuration(node, where, "fail_closed_after", &c->fail_closed_after));
  uint64_t iterations = c->pbkdf2_iterations;
  ROS2_RETURN_IF_ERROR(ReadUint(node, where, "pbkdf2_iterations", &iterations));
  if (iterations < 1000 || iterations > 10'000'000) {
    return Status::InvalidArgument(
        fmt::format("{}.pbkdf2_iterations: {} is outside [1000, 10000000]", where, iterations));
  }
  c->pbkdf2_iterations = static_cast<uint32_t>(iterations);
  uint64_t sessions = c->max_sessions_per_tenant;
  ROS2_RETURN_IF_ERROR(ReadUint(node, where, "max_sessions_per_tenant", &sessions));
  if (sessions == 0 || sessions > 1'000'000) {
    return Status::InvalidArgument(
        fmt::format("{}.max_sessions_per_tenant: {} is outside [1, 1000000]", where, sessions));
  }
  c->max_sessions_per_tenant = static_cast<uint32_t>(sessions);
  if (c->revocation_sync < std::chrono::milliseconds(10)) {
    return Status::InvalidArgument(fmt::format("{}.revocation_sync: must be at least 10ms", where));
  }
  if (c->fail_closed_after < 2 * c->revocation_sync) {
    return Status::InvalidArgument(
        fmt::format("{}.fail_closed_after: {} ms must be at least twice revocation_sync ({} ms)", where,
                    c->fail_closed_after.count(), c->revocation_sync.count()));
  }
  if (c->sync_interval < std::chrono::milliseconds(100)) {
    return Status::InvalidArgument(fmt::format("{}.sync_interval: must be at least 100ms", where));
  }
  if (c->capability_lifetime < std::chrono::seconds(1)) {
    return Status::InvalidArgument(fmt::format("{}.capability_lifetime: must be at least 1s", where));
  }
  return Status::Ok();
}

// `target_cpus: [0, 1]`: a list of CPU numbers (checked against the CPUs this
// process may use by FinalizeEngineConfig).
Status ApplyTargetCpus(const YAML::Node& node, const std::string& where, EngineConfig* config) {
  if (!node.IsSequence() || node.size() == 0 || node.size() > kMaxTargets) {
    return Status::InvalidArgument(
        fmt::format("{}: target_cpus: expected a list of 1 to {} CPU numbers, e.g. [0, 1]", where, kMaxTargets));
  }
  std::vector<int> cpus;
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string text = node[i].IsScalar() ? node[i].as<std::string>() : std::string("(not a number)");
    const std::optional<int> cpu = transport::ParseCpu(text);
    if (!cpu)
      return Status::InvalidArgument(fmt::format("{}: target_cpus[{}]: '{}' is not a CPU number", where, i, text));
    cpus.push_back(*cpu);
  }
  config->target_cpus = std::move(cpus);
  return Status::Ok();
}

// `limits: { ... }`: request limits, consistent with each other (a request
// that may be admitted alone must fit every in-flight budget).
Status ApplyLimits(const YAML::Node& node, const std::string& where, EngineLimits* l) {
  ROS2_RETURN_IF_ERROR(
      CheckKnownKeys(node, where,
                     {"max_epoch_drift", "max_io_size", "connection_bytes_in_flight", "connection_requests_in_flight",
                      "target_bytes_in_flight", "target_requests_in_flight"}));
  ROS2_RETURN_IF_ERROR(ReadDuration(node, where, "max_epoch_drift", &l->max_epoch_drift));
  ROS2_RETURN_IF_ERROR(ReadSize(node, where, "max_io_size", &l->max_io_size));
  ROS2_RETURN_IF_ERROR(ReadSize(node, where, "connection_bytes_in_flight", &l->connection_bytes_in_flight));
  ROS2_RETURN_IF_ERROR(ReadUint(node, where, "connection_requests_in_flight", &l->connection_requests_in_flight));
  ROS2_RETURN_IF_ERROR(ReadSize(node, where, "target_bytes_in_flight", &l->target_bytes_in_flight));
  ROS2_RETURN_IF_ERROR(ReadUint(node, where, "target_requests_in_flight", &l->target_requests_in_flight));
  if (l->max_io_size == 0 || l->max_io_size > (uint64_t{1} << 30)) {
    return Status::InvalidArgument(fmt::format("{}.max_io_size: {} not in [1, 1 GiB]", where, l->max_io_size));
  }
  if (l->connection_bytes_in_flight < l->max_io_size) {
    return Status::InvalidArgument(fmt::format("{}.connection_bytes_in_flight: {} is below max_io_size {}", where,
                                               l->connection_bytes_in_flight, l->max_io_size));
  }
  if (l->target_bytes_in_flight < l->connection_bytes_in_flight) {
    return Status::InvalidArgument(fmt::format("{}.target_bytes_in_flight: {} is below connection_bytes_in_flight {}",
                                               where, l->target_bytes_in_flight, l->connection_bytes_in_flight));
  }
  if (l->connection_requests_in_flight == 0) {
    return Status::InvalidArgument(fmt::format("{}.connection_requests_in_flight: must be at least 1", where));
  }
  if (l->target_requests_in_flight < l->connection_requests_in_flight) {
    return Status::InvalidArgument(
        fmt::format("{}.target_requests_in_flight: {} is below connection_requests_in_flight {}", where,
                    l->target_requests_in_flight, l->connection_requests_in_flight));
  }
  return Status::Ok();
}

Status ApplyRebuild(const YAML::Node& node, const std::string& where, RebuildConfig* r) {
  ROS2_RETURN_IF_ERROR(CheckKnownKeys(node, where, {"delay", "client_share"}));
  ROS2_RETURN_IF_ERROR(ReadDuration(node, where, "delay", &r->delay));
  uint64_t share = r->client_share_percent;
  ROS2_RETURN_IF_ERROR(ReadUint(node, where, "client_share", &share));
  if (share > 95) {
    return Status::InvalidArgument(
        fmt::format("{}.client_share: {} percent; at most 95 (rebuild must keep some of the engine)", where, share));
  }
  r->client_share_percent = static_cast<uint32_t>(share);
  return Status::Ok();
}

}  // namespace

EngineConfig DefaultEngineConfig() {
  EngineConfig c;
  c.vos.data_size = kDefaultShardDataSize;
  return c;
}

Status ApplyEngineConfig(const YAML::Node& root, std::string_view origin, EngineConfig* config) {
  config->origin = std::string(origin);
  if (!root || root.IsNull()) return Status::Ok();
  const std::string where(origin);
  ROS2_RETURN_IF_ERROR(CheckKnownKeys(root, where,
                                      {"data_dir", "log_level", "targets", "target_cpus", "vos", "transport", "control",
                                       "shutdown_grace", "limits", "metrics", "process", "rebuild"}));
  try {
    ROS2_RETURN_IF_ERROR(ReadString(root, where, "data_dir", &config->data_dir));
    ROS2_RETURN_IF_ERROR(ReadString(root, where, "log_level", &config->log_level));
    uint64_t targets = config->targets;
    ROS2_RETURN_IF_ERROR(ReadUint(root, where, "targets", &targets));
    if (targets == 0 || targets > kMaxTargets) {
      return Status::InvalidArgument(fmt::format("{}: targets: {} not in [1, {}]", where, targets, kMaxTargets));
    }
    config->targets = static_cast<uint32_t>(targets);
    if (const YAML::Node cpus = root["target_cpus"]) ROS2_RETURN_IF_ERROR(ApplyTargetCpus(cpus, where, config));
    if (const YAML::Node vos_node = root["vos"]) {
      const std::string vos_where = where + ": vos";
      if (!vos_node.IsMap()) return Status::InvalidArgument(vos_where + ": expected a map");
      if (vos_node["path"] || vos_node["block_device"]) {
        return Status::InvalidArgument(vos_where +
                                       ".path/block_device: the engine places every container shard under data_dir");
      }
      // ParseVosOptions starts from VosOptions' defaults: carry ours over and
      // give it a placeholder path (the real one is chosen per shard).
      YAML::Node copy = YAML::Clone(vos_node);
      copy["path"] = "per-shard";
      if (!copy["data_size"]) copy["data_size"] = std::to_string(config->vos.data_size);
      auto parsed = vos::ParseVosOptions(copy, vos_where);
      if (!parsed.ok()) return parsed.status();
      config->vos = *parsed;
      config->vos.path.clear();
    }
    if (const YAML::Node t = root["transport"])
      ROS2_RETURN_IF_ERROR(ApplyTransport(t, where + ": transport", &config->transport));
    if (const YAML::Node c = root["control"])
      ROS2_RETURN_IF_ERROR(ApplyControl(c, where + ": control", &config->control));
    ROS2_RETURN_IF_ERROR(ReadDuration(root, where, "shutdown_grace", &config->shutdown_grace));
    if (const YAML::Node l = root["limits"]) ROS2_RETURN_IF_ERROR(ApplyLimits(l, where + ": limits", &config->limits));
    if (const YAML::Node m = root["metrics"]) {
      ROS2_RETURN_IF_ERROR(CheckKnownKeys(m, where + ": metrics", {"listen"}));
      ROS2_RETURN_IF_ERROR(ReadString(m, where + ": metrics", "listen", &config->metrics.listen));
      if (!config->metrics.listen.empty()) {
        ROS2_RETURN_IF_ERROR(metrics::CheckListenAddress(config->metrics.listen, where + ": metrics.listen"));
      }
    }
    if (const YAML::Node r = root["rebuild"]) ROS2_RETURN_IF_ERROR(ApplyRebuild(r, where + ": rebuild", &config->rebuild));
    ROS2_RETURN_IF_ERROR(ApplyProcessConfig(root, where, &config->process));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}: {}", where, e.what()));
  }
  return Status::Ok();
}

Result<EngineConfig> LoadEngineConfig(const std::string& path) {
  auto root = LoadYamlFile(path);
  if (!root.ok()) return root.status();
  EngineConfig config = DefaultEngineConfig();
  ROS2_RETURN_IF_ERROR(ApplyEngineConfig(*root, path, &config));
  return config;
}

Status FinalizeEngineConfig(EngineConfig* config) {
  if (config->data_dir.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: data_dir: required (set it in the file or with --data-dir)", config->origin));
  }
  if (config->targets == 0 || config->targets > kMaxTargets) {
    return Status::InvalidArgument(fmt::format("targets: {} not in [1, {}]", config->targets, kMaxTargets));
  }
  if (!config->target_cpus.empty()) {
    const std::vector<int> allowed = transport::CurrentThreadCpus();
    for (int cpu : config->target_cpus) {
      if (std::find(allowed.begin(), allowed.end(), cpu) == allowed.end()) {
        return Status::InvalidArgument(
            fmt::format("{}: target_cpus: CPU {} is not one this process may run on (allowed: {})", config->origin, cpu,
                        fmt::join(allowed, ", ")));
      }
    }
  }
  if (!config->control.join.empty() && config->control.store != "embedded") {
    return Status::InvalidArgument(fmt::format(
        "{}: control.join and control.store {}: give one (an etcd cluster's engines share the store, none joins)",
        config->origin, config->control.store));
  }
  if (!config->control.join.empty() && config->control.join_secret_file.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: control.join_secret_file: required with control.join (the secret of tenant '{}')",
                    config->origin, config->control.join_tenant));
  }
  const ControlConfig& c = config->control;
  if (c.tls_cert.empty() != c.tls_key.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: control.tls_cert and control.tls_key: give both or neither", config->origin));
  }
  if (!c.listen.empty() && c.tls_cert.empty() && !c.insecure_tcp) {
    return Status::InvalidArgument(fmt::format(
        "{}: control.listen {}: a TCP control listener needs TLS (tenant secrets and the capability key cross it): "
        "set control.tls_cert and control.tls_key (`ros2ctl cert engine`, or `ros2ctl cluster up --listen`), or "
        "control.insecure_tcp: true for tests",
        config->origin, c.listen));
  }
  if (!c.join.empty() && !c.join.starts_with("unix:") && c.tls_ca.empty() && !c.insecure_tcp) {
    return Status::InvalidArgument(fmt::format(
        "{}: control.join {}: refusing a cleartext join over TCP (the admin secret and the capability key would "
        "cross the network unencrypted): set control.tls_ca to the cluster CA certificate (`ros2ctl cert ca`), or "
        "control.insecure_tcp: true for tests",
        config->origin, c.join));
  }
  auto level = spdlog::level::from_str(config->log_level);
  if (level == spdlog::level::off && config->log_level != "off") {
    return Status::InvalidArgument(
        fmt::format("{}: log_level: '{}' is not trace|debug|info|warn|error|off", config->origin, config->log_level));
  }
  return Status::Ok();
}

std::string ControlSocketAddress(const EngineConfig& config) {
  const std::string& s = config.control.socket;
  if (s.empty()) return "unix:" + config.data_dir + "/control.sock";
  if (s.starts_with("unix:")) return s;
  return "unix:" + s;
}

}  // namespace ros2::engine
