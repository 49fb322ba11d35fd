// SystemMapWatch: how an engine of an etcd cluster learns the pool maps other
// engines write. Pool maps are views of the system map and share its version
// (catalog.h), so one etcd watch of the system map's key (etcd's own Watch
// service, EtcdWatch) tells this engine of every new pool map version: each
// event's value is handed to SystemMap::Observe, which publishes it to the
// engine's targets and to the WatchPoolMap streams this engine serves.
//
// Start reads the key and its revision first and watches from the next
// revision, so no change between the read and the watch is missed; the watch
// re-opens itself on another etcd endpoint after a failure (EtcdWatch).
//
// Owned by ControlPlane (after JoinCluster). Thread-safe; the destructor stops
// the watch's thread.
#pragma once

#include <memory>

#include "common/status.h"
#include "control/etcd_client.h"
#include "control/etcd_store.h"
#include "control/system_map.h"

namespace ros2::control {

class SystemMapWatch {
 public:
  // REQUIRES: store and map outlive the watch.
  static Result<std::unique_ptr<SystemMapWatch>> Start(EtcdStore* store, SystemMap* map);
  ~SystemMapWatch();
  SystemMapWatch(const SystemMapWatch&) = delete;
  SystemMapWatch& operator=(const SystemMapWatch&) = delete;

 private:
  SystemMapWatch() = default;
  std::unique_ptr<EtcdWatch> watch_;
};

}  // namespace ros2::control
