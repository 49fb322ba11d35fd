#include "placement/pool_map.h"

#include <fmt/format.h>

namespace ros2 {

std::string_view TargetStateName(TargetState s) {
  switch (s) {
    case TargetState::kUp: return "UP";
    case TargetState::kDown: return "DOWN";
    case TargetState::kDrain: return "DRAIN";
    case TargetState::kDownOut: return "DOWNOUT";
    case TargetState::kReint: return "REINT";
  }
  return "UNKNOWN";
}

Status PoolMap::Validate() const {
  if (targets.empty()) return Status::InvalidArgument(fmt::format("pool map v{} has no targets", version));
  for (size_t i = 0; i < targets.size(); ++i) {
    auto s = static_cast<uint8_t>(targets[i].state);
    if (s > static_cast<uint8_t>(TargetState::kReint)) {
      return Status::InvalidArgument(fmt::format("pool map v{}: target {} has unknown state {}", version, i, s));
    }
  }
  return Status::Ok();
}

}  // namespace ros2
