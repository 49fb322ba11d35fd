// The checks of an administrator's target state change (`ros2ctl pool
// exclude|drain|reintegrate`, Management.SetTargetState): DOWNOUT is set by
// rebuild alone, and no change is made while a rebuild of the pool runs
// (docs/replication.md, "Target states"). Thread-safe.
#pragma once

#include "common/status.h"
#include "control/tenant_registry.h"
#include "ros2/mgmt.pb.h"

namespace ros2::control {

class ControlPlane;

// InvalidArgument for a DOWNOUT request or a pool that does not hold the
// target; Busy (naming the pool) while a rebuild of the pool, or with no pool
// named of any pool, runs.
Status CheckTargetStateChange(ControlPlane* plane, const Principal& who, const rpc::SetTargetStateRequest& req);

}  // namespace ros2::control
