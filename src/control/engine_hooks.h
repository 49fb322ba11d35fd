// EngineHooks: the small interface through which the control plane tells the
// engine that embeds it about pool and container lifecycle, and asks it for
// space usage. Every method has a harmless default, so an engine overrides only
// what it needs (and tests pass nullptr for no engine at all).
//
// Called from gRPC handler threads, with the catalog's lock held: implementations
// must be thread-safe, quick, and must not call back into the control plane.
// A non-OK status from an On*Create hook aborts the creation (nothing is
// stored); OnContainerCreated runs once the container's records are stored (to
// start work, not to wait for it); On*Destroy hooks run after the records are
// gone, errors are logged.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "common/uuid.h"
#include "ros2/common.pb.h"

namespace ros2::control {

class EngineHooks {
 public:
  virtual ~EngineHooks() = default;

  virtual Status OnPoolCreate(const rpc::PoolInfo& /*pool*/, const rpc::PoolMap& /*map*/) { return Status::Ok(); }
  virtual Status OnPoolDestroy(const Uuid& /*pool*/) { return Status::Ok(); }
  virtual Status OnContainerCreate(const rpc::ContainerInfo& /*container*/) { return Status::Ok(); }
  virtual void OnContainerCreated(const rpc::ContainerInfo& /*container*/, const rpc::PoolMap& /*map*/) {}
  virtual Status OnContainerDestroy(const Uuid& /*pool*/, const Uuid& /*container*/) { return Status::Ok(); }
  // Bytes the pool occupies on this engine's targets (pool query: used/free).
  virtual uint64_t PoolUsedBytes(const Uuid& /*pool*/) { return 0; }
};

}  // namespace ros2::control
