// PoolMapFromProto: the control plane's rpc::PoolMap as placement sees it.
//
// Clients and engines place objects with the same function of the same map,
// so both convert the wire map here: engines rank in order of first mention
// (the map's engine list, then its targets), an engine's host is the host
// part of its address (engines of one host share an index; "unix:" addresses
// are all one host), and target states map one to one. Pure; any thread.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "placement/pool_map.h"
#include "ros2/common.pb.h"

namespace ros2 {

struct ConvertedPoolMap {
  PoolMap map;
  std::vector<std::string> engine_uuids;      // by engine rank
  std::vector<std::string> engine_addresses;  // by engine rank (empty: not in the engine list)
};

TargetState TargetStateFromProto(rpc::TargetState state);

// InvalidArgument when a target that is not out has no worker address, or the
// map fails PoolMap::Validate.
Result<ConvertedPoolMap> PoolMapFromProto(const rpc::PoolMap& map);

}  // namespace ros2
