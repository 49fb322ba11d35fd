// Agent configuration: YAML keys, defaults and checks.
#include "agent/agent_config.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "offload/ring.h"
#include "common/config.h"
#include "metrics/exporter.h"

namespace ros2::agent {
namespace {

template <typename T>
Status ReadIdList(const YAML::Node& node, const std::string& where, const char* key, std::vector<T>* out) {
  YAML::Node list = node[key];
  if (!list) return Status::Ok();
  if (!list.IsSequence()) return Status::InvalidArgument(fmt::format("{}.{}: expected a list of ids", where, key));
  for (size_t i = 0; i < list.size(); ++i) {
    try {
      int64_t v = list[i].as<int64_t>();
      if (v < 0 || v > 0xfffffffe) throw YAML::Exception(YAML::Mark(), "range");
      out->push_back(static_cast<T>(v));
    } catch (const YAML::Exception&) {
      return Status::InvalidArgument(fmt::format("{}.{}[{}]: expected a uid/gid number, got '{}'", where, key, i,
                                                 list[i].IsScalar() ? list[i].Scalar() : "(not a scalar)"));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ApplyAgentConfig(const YAML::Node& root, std::string_view origin, AgentConfig* config) {
  const std::string where(origin);
  if (!root || root.IsNull()) return Status::Ok();
  ROS2_RETURN_IF_ERROR(CheckKnownKeys(
      root, where,
      {"socket", "socket_mode", "control", "transport", "provider", "net_devices", "log_level", "spin", "client_spin", "io_timeout",
       "max_sessions", "max_sessions_per_tenant", "max_ring_entries", "max_arena", "tenants", "metrics",
       "process"}));
  ROS2_RETURN_IF_ERROR(ApplyProcessConfig(root, where, &config->process));
  ROS2_RETURN_IF_ERROR(ReadString(root, where, "socket", &config->socket));
  if (root["socket_mode"]) {
    // Octal text ("0666") or a number.
    const std::string text = root["socket_mode"].Scalar();
    char* end = nullptr;
    unsigned long v = std::strtoul(text.c_str(), &end, 8);
    if (text.empty() || *end != '\0' || v > 0777) {
      return Status::InvalidArgument(
          fmt::format("{}.socket_mode: expected octal permission bits, got '{}'", where, text));
    }
    config->socket_mode = static_cast<uint32_t>(v);
  }
  ROS2_RETURN_IF_ERROR(ReadString(root, where, "control", &config->control));
  ROS2_RETURN_IF_ERROR(ReadString(root, where, "transport", &config->transport));
  if (config->transport != "auto" && config->transport != "shm" && config->transport != "tcp" &&
      config->transport != "rdma") {
    return Status::InvalidArgument(
        fmt::format("{}.transport: expected auto, shm, tcp or rdma, got '{}'", where, config->transport));
  }
  ROS2_RETURN_IF_ERROR(ReadString(root, where, "provider", &config->provider));
  if (config->provider != "ucx" && config->provider != "ofi") {
    return Status::InvalidArgument(fmt::format("{}.provider: expected ucx or ofi, got '{}'", where, config->provider));
  }
  ROS2_RETURN_IF_ERROR(ReadString(root, where, "net_devices", &config->net_devices));
  ROS2_RETURN_IF_ERROR(ReadString(root, where, "log_level", &config->log_level));
  if (const YAML::Node m = root["metrics"]) {
    ROS2_RETURN_IF_ERROR(CheckKnownKeys(m, where + ".metrics", {"listen"}));
    ROS2_RETURN_IF_ERROR(ReadString(m, where + ".metrics", "listen", &config->metrics_listen));
    if (!config->metrics_listen.empty()) {
      ROS2_RETURN_IF_ERROR(metrics::CheckListenAddress(config->metrics_listen, where + ".metrics.listen"));
    }
  }
  if (root["spin"]) {
    ROS2_RETURN_IF_ERROR(ReadMicros(root, where, "spin", &config->spin));
    if (config->spin > std::chrono::seconds(1)) {
      return Status::InvalidArgument(fmt::format("{}.spin: at most 1s", where));
    }
  }
  if (root["client_spin"]) {
    ROS2_RETURN_IF_ERROR(ReadMicros(root, where, "client_spin", &config->client_spin));
    if (config->client_spin > std::chrono::seconds(1)) {
      return Status::InvalidArgument(fmt::format("{}.client_spin: at most 1s", where));
    }
  }
  ROS2_RETURN_IF_ERROR(ReadDuration(root, where, "io_timeout", &config->io_timeout));
  uint64_t v = config->max_sessions;
  ROS2_RETURN_IF_ERROR(ReadUint(root, where, "max_sessions", &v));
  if (v == 0 || v > 65536) return Status::InvalidArgument(fmt::format("{}.max_sessions: 1 .. 65536", where));
  config->max_sessions = static_cast<uint32_t>(v);
  v = config->max_sessions_per_tenant;
  ROS2_RETURN_IF_ERROR(ReadUint(root, where, "max_sessions_per_tenant", &v));
  if (v == 0 || v > 65536) {
    return Status::InvalidArgument(fmt::format("{}.max_sessions_per_tenant: 1 .. 65536", where));
  }
  config->max_sessions_per_tenant = static_cast<uint32_t>(v);
  v = config->max_ring_entries;
  ROS2_RETURN_IF_ERROR(ReadUint(root, where, "max_ring_entries", &v));
  if (v < kMinRingEntries || v > kMaxRingEntries || !IsPowerOfTwo(static_cast<uint32_t>(v))) {
    return Status::InvalidArgument(
        fmt::format("{}.max_ring_entries: a power of two in {} .. {}", where, kMinRingEntries, kMaxRingEntries));
  }
  config->max_ring_entries = static_cast<uint32_t>(v);
  ROS2_RETURN_IF_ERROR(ReadSize(root, where, "max_arena", &config->max_arena));
  if (config->max_arena < 4096 || config->max_arena > kMaxArenaSize) {
    return Status::InvalidArgument(fmt::format("{}.max_arena: 4KiB .. 16GiB", where));
  }
  if (YAML::Node tenants = root["tenants"]) {
    if (!tenants.IsSequence()) return Status::InvalidArgument(fmt::format("{}.tenants: expected a list", where));
    config->tenants.clear();
    for (size_t i = 0; i < tenants.size(); ++i) {
      const std::string w = fmt::format("{}.tenants[{}]", where, i);
      ROS2_RETURN_IF_ERROR(
          CheckKnownKeys(tenants[i], w, {"name", "secret_file", "uids", "gids", "key_file", "container_keys", "qos"}));
      TenantMapping t;
      ROS2_RETURN_IF_ERROR(ReadString(tenants[i], w, "name", &t.name));
      ROS2_RETURN_IF_ERROR(ReadString(tenants[i], w, "secret_file", &t.secret_file));
      ROS2_RETURN_IF_ERROR(ReadIdList(tenants[i], w, "uids", &t.uids));
      ROS2_RETURN_IF_ERROR(ReadIdList(tenants[i], w, "gids", &t.gids));
      ROS2_RETURN_IF_ERROR(ReadString(tenants[i], w, "key_file", &t.key_file));
      if (YAML::Node keys = tenants[i]["container_keys"]) {
        if (!keys.IsMap()) {
          return Status::InvalidArgument(fmt::format("{}.container_keys: expected a map of container: key file", w));
        }
        for (const auto& kv : keys) t.container_keys[kv.first.Scalar()] = kv.second.Scalar();
      }
      if (YAML::Node qos = tenants[i]["qos"]) {
        const std::string wq = w + ".qos";
        ROS2_RETURN_IF_ERROR(CheckKnownKeys(qos, wq, {"bandwidth", "iops"}));
        ROS2_RETURN_IF_ERROR(ReadSize(qos, wq, "bandwidth", &t.qos.bandwidth));
        ROS2_RETURN_IF_ERROR(ReadUint(qos, wq, "iops", &t.qos.iops));
      }
      if (t.name.empty()) return Status::InvalidArgument(fmt::format("{}.name: required", w));
      if (t.secret_file.empty()) return Status::InvalidArgument(fmt::format("{}.secret_file: required", w));
      if (t.uids.empty() && t.gids.empty()) {
        return Status::InvalidArgument(fmt::format("{}: names no uid and no gid (nobody could use it)", w));
      }
      config->tenants.push_back(std::move(t));
    }
  }
  return Status::Ok();
}

namespace {

// Why a file may be unreadable when the agent switched from root to
// process.user (docs/security.md, "Privileges").
std::string RunsAsHint(int err) {
  if (err != EACCES || ::geteuid() == 0) return std::string();
  return fmt::format(" (the agent runs as uid {}, process.user: the file must be readable by that user)", ::geteuid());
}

}  // namespace

Status FinalizeAgentConfig(AgentConfig* config) {
  const std::string& o = config->origin;
  if (config->control.empty()) return Status::InvalidArgument(fmt::format("{}: control: required", o));
  if (config->socket.empty()) return Status::InvalidArgument(fmt::format("{}: socket: required", o));
  if (config->socket.size() >= 108) {
    return Status::InvalidArgument(
        fmt::format("{}: socket: '{}' is longer than a Unix socket path may be", o, config->socket));
  }
  if (config->tenants.empty()) return Status::InvalidArgument(fmt::format("{}: tenants: at least one is required", o));
  std::set<std::string> names;
  for (const auto& t : config->tenants) {
    if (!names.insert(t.name).second) {
      return Status::InvalidArgument(fmt::format("{}: tenants: '{}' is listed twice", o, t.name));
    }
    if (::access(t.secret_file.c_str(), R_OK) != 0) {
      const int err = errno;
      return Status::FromErrno(
          err, fmt::format("{}: tenant {}: secret_file {}{}", o, t.name, t.secret_file, RunsAsHint(err)));
    }
    std::vector<std::string> keys;
    if (!t.key_file.empty()) keys.push_back(t.key_file);
    for (const auto& [label, file] : t.container_keys) keys.push_back(file);
    for (const std::string& file : keys) {
      if (::access(file.c_str(), R_OK) != 0) {
        const int err = errno;
        return Status::FromErrno(err, fmt::format("{}: tenant {}: key file {}{}", o, t.name, file, RunsAsHint(err)));
      }
    }
  }
  return Status::Ok();
}

Result<AgentConfig> LoadAgentConfig(const std::string& path) {
  ROS2_ASSIGN_OR_RETURN(YAML::Node root, LoadYamlFile(path));
  AgentConfig config;
  config.origin = path;
  ROS2_RETURN_IF_ERROR(ApplyAgentConfig(root, path, &config));
  return config;
}

const TenantMapping* FindTenant(const AgentConfig& config, uid_t uid, gid_t gid) {
  for (const auto& t : config.tenants) {
    if (std::find(t.uids.begin(), t.uids.end(), uid) != t.uids.end()) return &t;
  }
  for (const auto& t : config.tenants) {
    if (std::find(t.gids.begin(), t.gids.end(), gid) != t.gids.end()) return &t;
  }
  return nullptr;
}

}  // namespace ros2::agent
