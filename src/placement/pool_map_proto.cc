#include "placement/pool_map_proto.h"

#include <map>

#include <fmt/format.h>

namespace ros2 {
namespace {

// The host an engine address names ("host:port", "[v6]:port", "host", or
// "unix:/path"): engines with the same host part share an index (the
// replica placement's outer fault domain); an empty address is unknown.
uint32_t HostIndex(const std::string& address, std::map<std::string, uint32_t>& hosts) {
  if (address.empty()) return kUnknownHost;
  std::string host = address.rfind("unix:", 0) == 0 ? std::string("local") : address;
  if (auto colon = host.rfind(':'); colon != std::string::npos && host != "local") host.resize(colon);
  return hosts.emplace(host, static_cast<uint32_t>(hosts.size())).first->second;
}

}  // namespace

TargetState TargetStateFromProto(rpc::TargetState state) {
  switch (state) {
    case rpc::TARGET_DOWN: return TargetState::kDown;
    case rpc::TARGET_DRAIN: return TargetState::kDrain;
    case rpc::TARGET_DOWNOUT: return TargetState::kDownOut;
    case rpc::TARGET_REINT: return TargetState::kReint;
    default: return TargetState::kUp;
  }
}

Result<ConvertedPoolMap> PoolMapFromProto(const rpc::PoolMap& map) {
  ConvertedPoolMap out;
  out.map.version = map.version();
  std::map<std::string, uint32_t> ranks;
  for (const auto& e : map.engines()) {
    if (!ranks.emplace(e.uuid(), static_cast<uint32_t>(ranks.size())).second) continue;
    out.engine_uuids.push_back(e.uuid());
    out.engine_addresses.push_back(e.address());
  }
  std::map<std::string, uint32_t> hosts;
  for (int i = 0; i < map.targets_size(); ++i) {
    const auto& t = map.targets(i);
    auto [it, inserted] = ranks.emplace(t.engine_uuid(), static_cast<uint32_t>(ranks.size()));
    if (inserted) {
      out.engine_uuids.push_back(t.engine_uuid());
      out.engine_addresses.emplace_back();
    }
    TargetInfo info;
    info.engine_rank = it->second;
    info.host = HostIndex(out.engine_addresses[it->second], hosts);
    info.engine_index = t.index();
    info.state = TargetStateFromProto(t.state());
    info.back_from_down = info.state == TargetState::kReint && t.back_from_down();
    if (t.worker_address().empty() && !IsOut(info.state)) {
      return Status::InvalidArgument(fmt::format("pool map v{}: target {} (engine {} index {}) has no worker address",
                                                 map.version(), i, t.engine_uuid(), t.index()));
    }
    out.map.targets.push_back(info);
  }
  Status valid = out.map.Validate();
  if (!valid.ok()) return valid.WithContext(fmt::format("pool {} map", map.pool_uuid()));
  return out;
}

}  // namespace ros2
