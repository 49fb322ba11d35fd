#include "control/target_admin.h"

#include <fmt/format.h>

#include "control/control_plane.h"
#include "control/rebuild_state.h"

namespace ros2::control {

Status CheckTargetStateChange(ControlPlane* plane, const Principal& who, const rpc::SetTargetStateRequest& req) {
  const std::string target = fmt::format("target {} of engine {}", req.index(), req.engine_uuid());
  if (req.state() == rpc::TARGET_DOWNOUT) {
    return Status::InvalidArgument(fmt::format(
        "{}: DOWNOUT is set by rebuild once the target's data is whole elsewhere; exclude with DOWN", target));
  }
  if (req.state() == rpc::TARGET_REINT) {
    return Status::InvalidArgument(
        fmt::format("{}: REINT is set by reintegration (state UP on a DOWNOUT target); reintegrate with UP", target));
  }
  const char* what = req.state() == rpc::TARGET_DOWN    ? "exclude"
                     : req.state() == rpc::TARGET_DRAIN ? "drain"
                                                        : "reintegrate";
  if (!req.pool().empty()) {
    ROS2_ASSIGN_OR_RETURN(rpc::PoolInfo pool, plane->catalog().QueryPool(who, req.pool()));
    ROS2_ASSIGN_OR_RETURN(rpc::PoolMap map, plane->catalog().PoolMapFor(pool.uuid()));
    bool member = false;
    for (const auto& t : map.targets()) member |= t.engine_uuid() == req.engine_uuid() && t.index() == req.index();
    if (!member) return Status::InvalidArgument(fmt::format("{} is not a target of pool {}", target, req.pool()));
    return RefuseWhileRebuilding(plane->store(), pool.uuid(), fmt::format("{} of {}", what, target));
  }
  ROS2_ASSIGN_OR_RETURN(auto jobs, plane->store().Scan("rebuild/"));
  for (const auto& [key, value] : jobs) {
    ROS2_RETURN_IF_ERROR(RefuseWhileRebuilding(plane->store(), key.substr(8), fmt::format("{} of {}", what, target)));
  }
  return Status::Ok();
}

}  // namespace ros2::control
