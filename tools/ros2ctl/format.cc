#include "format.h"

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "common/config.h"
#include "control/rights.h"

namespace ros2::ctl {

namespace {
std::string LayoutName(rpc::ContainerLayout layout) {
  switch (layout) {
    case rpc::LAYOUT_POSIX: return "POSIX";
    case rpc::LAYOUT_PLAIN: return "plain";
    default: return "unspecified";
  }
}
std::string EncryptionText(const rpc::ContainerProperties& pr) {
  if (!pr.encryption()) return "off";
  return pr.encryption_key_id().empty() ? "aes-256-gcm"
                                        : fmt::format("aes-256-gcm (key id {})", pr.encryption_key_id());
}
}  // namespace

std::string TargetStateText(rpc::TargetState state) {
  switch (state) {
    case rpc::TARGET_UP: return "up";
    case rpc::TARGET_DOWN: return "down";
    case rpc::TARGET_DRAIN: return "drain";
    case rpc::TARGET_DOWNOUT: return "downout";
    case rpc::TARGET_REINT: return "reint";
    default: return "unspecified";
  }
}

nlohmann::json AclToJson(const google::protobuf::RepeatedPtrField<rpc::AclEntry>& acl) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : acl) {
    out.push_back({{"tenant", e.tenant()},
                   {"rights", control::RightsToString(static_cast<control::Rights>(e.rights()))},
                   {"rights_mask", e.rights()}});
  }
  return out;
}

nlohmann::json PoolToJson(const rpc::PoolInfo& p) {
  return {{"uuid", p.uuid()},
          {"label", p.label()},
          {"size_bytes", p.size_bytes()},
          {"target_count", p.target_count()},
          {"used_bytes", p.used_bytes()},
          {"free_bytes", p.free_bytes()},
          {"owner", p.owner()},
          {"map_version", p.map_version()},
          {"created_ms", p.created_ms()},
          {"container_count", p.container_count()},
          {"acl", AclToJson(p.acl())},
          {"rebuild", RebuildToJson(p.rebuild())}};
}

nlohmann::json ContainerToJson(const rpc::ContainerInfo& c) {
  const auto& pr = c.properties();
  return {{"uuid", c.uuid()},
          {"label", c.label()},
          {"pool_uuid", c.pool_uuid()},
          {"owner", c.owner()},
          {"created_ms", c.created_ms()},
          {"properties",
           {{"oclass", pr.object_class()},
            {"rd_fac", pr.rd_fac()},
            {"checksum", pr.checksum()},
            {"chunk_size", pr.chunk_size()},
            {"encryption", pr.encryption() ? "aes-256-gcm" : "off"},
            {"encryption_key_id", pr.encryption_key_id()},
            {"layout", LayoutName(pr.layout())}}},
          {"acl", AclToJson(c.acl())}};
}

namespace {
// Wall-clock milliseconds as UTC "YYYY-MM-DD HH:MM:SS".
std::string FormatTimeMs(uint64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return std::string(buf) + " UTC";
}
}  // namespace

nlohmann::json EngineStatusToJson(const rpc::EngineStatus& s) {
  nlohmann::json engines = nlohmann::json::array();
  for (const auto& e : s.engines()) {
    engines.push_back({{"uuid", e.uuid()},
                       {"address", e.address()},
                       {"capacity_bytes", e.capacity_bytes()},
                       {"target_count", e.target_count()},
                       {"registered_ms", e.registered_ms()}});
  }
  nlohmann::json targets = nlohmann::json::array();
  for (const auto& t : s.targets()) {
    targets.push_back({{"engine_uuid", t.engine_uuid()},
                       {"index", t.index()},
                       {"state", TargetStateText(t.state())},
                       {"capacity_bytes", t.capacity_bytes()}});
  }
  nlohmann::json j = {{"map_version", s.map_version()},
                      {"engines", engines},
                      {"targets", targets},
                      {"pool_count", s.pool_count()},
                      {"tenant_count", s.tenant_count()},
                      {"uptime_ms", s.uptime_ms()},
                      {"version", s.version()},
                      {"store", s.store()}};
  if (s.members_size() > 0) {
    nlohmann::json members = nlohmann::json::array();
    for (const auto& m : s.members()) {
      members.push_back({{"engine_uuid", m.engine_uuid()},
                         {"endpoint", m.endpoint()},
                         {"state", m.up() ? "up" : "down"},
                         {"leader", m.leader()},
                         {"since_ms", m.since_ms()},
                         {"lease_ttl_s", m.lease_ttl_s()},
                         {"lease_age_s", m.up() ? m.lease_ttl_s() - m.lease_remaining_s() : 0}});
    }
    j["members"] = members;
    j["leader"] = s.leader();
    j["fenced"] = s.fenced();
    j["held"] = s.held();
    j["lease_age_ms"] = s.lease_age_ms();
  }
  return j;
}

std::string AclToText(const google::protobuf::RepeatedPtrField<rpc::AclEntry>& acl, const std::string& indent) {
  if (acl.empty()) return indent + "(no entries)\n";
  std::string out;
  for (const auto& e : acl) {
    out += fmt::format("{}{:<24} {}\n", indent, e.tenant(),
                       control::RightsToString(static_cast<control::Rights>(e.rights())));
  }
  return out;
}

std::string PoolToText(const rpc::PoolInfo& p) {
  std::string out = fmt::format(
      "Pool {} ({})\n  size:        {}\n  targets:     {}\n  used:        {}\n  free:        {}\n"
      "  owner:       {}\n  containers:  {}\n  map version: {}\n  acl:\n",
      p.label(), p.uuid(), FormatSize(p.size_bytes()), p.target_count(), FormatSize(p.used_bytes()),
      FormatSize(p.free_bytes()), p.owner(), p.container_count(), p.map_version());
  return out + AclToText(p.acl(), "    ") + RebuildToText(p.rebuild());
}

std::string ContainerToText(const rpc::ContainerInfo& c) {
  const auto& pr = c.properties();
  std::string out = fmt::format(
      "Container {} ({}) in pool {}\n  oclass:      {}\n  rd_fac:      {}\n  checksum:    {}\n  chunk size:  {}\n"
      "  encryption:  {}\n  layout:      {}\n  owner:       {}\n  acl:\n",
      c.label(), c.uuid(), c.pool_uuid(), pr.object_class(), pr.rd_fac(), pr.checksum() ? "on" : "off",
      FormatSize(pr.chunk_size()),
      EncryptionText(pr), LayoutName(pr.layout()), c.owner());
  return out + AclToText(c.acl(), "    ");
}

std::string EngineStatusToText(const rpc::EngineStatus& s) {
  std::string out = fmt::format("Engines: {}  targets: {}  pools: {}  tenants: {}  map version: {}  uptime: {:.1f} s\n",
                                s.engines_size(), s.targets_size(), s.pool_count(), s.tenant_count(), s.map_version(),
                                static_cast<double>(s.uptime_ms()) / 1000.0);
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : s.targets()) {
    rows.push_back(
        {t.engine_uuid(), std::to_string(t.index()), TargetStateText(t.state()), FormatSize(t.capacity_bytes())});
  }
  out += Table({"ENGINE", "TARGET", "STATE", "CAPACITY"}, rows);
  if (s.members_size() == 0) return out;
  out += fmt::format("\nCluster ({}): leader {}{}\n", s.store(), s.leader().empty() ? "(none)" : s.leader(),
                     s.fenced() ? "; THIS ENGINE IS FENCED (lease not renewed), refusing writes"
                     : s.held()  ? "; etcd unreachable from every engine: writes go on under the last map"
                                 : "");
  std::vector<std::vector<std::string>> members;
  for (const auto& m : s.members()) {
    members.push_back(
        {m.engine_uuid(), m.up() ? (m.leader() ? "up (leader)" : "up") : "DOWN",
         m.since_ms() != 0 ? FormatTimeMs(m.since_ms()) : "-",
         m.up() ? fmt::format("{} s of {} s", m.lease_ttl_s() - m.lease_remaining_s(), m.lease_ttl_s()) : "-",
         m.endpoint()});
  }
  return out + Table({"ENGINE", "STATE", "SINCE", "LEASE AGE", "CONTROL"}, members);
}

std::string Table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size() && i < width.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t i = 0; i < cells.size() && i < width.size(); ++i) {
      s += (i + 1 == cells.size()) ? cells[i] : fmt::format("{:<{}}  ", cells[i], width[i]);
    }
    return s + "\n";
  };
  std::string out = line(header);
  for (const auto& r : rows) out += line(r);
  return out;
}

}  // namespace ros2::ctl
