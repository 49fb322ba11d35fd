// SystemMap: every engine registered with this management endpoint and its
// targets (UCX worker address, capacity, state UP/DOWN/DRAIN), with a version
// that increases on every change. Pool maps are views of it (Catalog).
//
// Persisted as one rpc::PoolMap record under the key "sysmap" (pool_uuid empty),
// rewritten on each change. Targets keep their position: engines in order of
// first registration, each engine's targets by index; a re-registering engine
// (restart, new worker addresses) is updated in place.
//
// In a shared store (etcd) several engines change the map: every change
// re-reads the record and writes it back only if it is unchanged (a compare on
// its value, retried), and Snapshot() re-reads it, falling back to the last
// map read when the store cannot be reached (data I/O goes on under it).
//
// Watching the map (docs/cluster.md, "Map versions"): every map this object
// writes or reads that is newer than the last one it knew is published —
// listeners run (AddListener; the engine's targets learn the version there)
// and WaitNewer returns. In a shared store another engine's changes arrive
// through Observe, fed by an etcd watch of the record (system_map_watch.h).
//
// Owned by ControlPlane. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/uuid.h"
#include "control/state_store.h"
#include "ros2/common.pb.h"

namespace ros2::control {

struct TargetRegistration {
  uint32_t index = 0;
  std::string worker_address;  // UCX worker address blob
  uint64_t capacity_bytes = 0;
};

// What an engine tells the management service about itself at start.
struct EngineRegistration {
  Uuid engine;
  std::string address;  // host or fabric name, informative
  uint64_t capacity_bytes = 0;
  std::vector<TargetRegistration> targets;
};

class SystemMap {
 public:
  // Loads the persisted map (an empty map at version 0 on first start).
  static Result<std::unique_ptr<SystemMap>> Load(StateStore* store);

  // Adds or updates the engine; every target of it becomes UP, but for one
  // that is DOWNOUT, DRAIN or REINT, which keeps its state, and one that is
  // DOWN while another engine's target takes writes, which becomes REINT
  // back from DOWN (it missed writes: caught up before it is read). Returns
  // the new version. InvalidArgument names a missing field or a duplicate
  // target index.
  Result<uint64_t> RegisterEngine(const EngineRegistration& reg);
  // NotFound for an unknown engine or target; returns the new version. UP on
  // a DOWNOUT target sets REINT (it catches up first); on a DOWN one it is
  // refused (Busy) until the rebuild made it DOWNOUT. A REINT target takes
  // only DOWN (Busy otherwise): it becomes UP once caught up.
  Result<uint64_t> SetTargetState(const Uuid& engine, uint32_t index, rpc::TargetState state);
  // Sets every target of `engine` to `state` in one write that also carries
  // `guard` (its compares and puts: the leader key, the engine's state
  // record). Returns the new version, or the current one when nothing changed.
  Result<uint64_t> SetEngineState(const Uuid& engine, rpc::TargetState state, const StoreBatch& guard);

  // A rebuild, drain or catch-up done (docs/replication.md): each target of
  // `moves` still in its `from` state goes to `to`, in one write carrying
  // `guard`. Returns the new version, or the current one when nothing changed.
  struct TargetMove {
    std::string engine;
    uint32_t index = 0;
    rpc::TargetState from = rpc::TARGET_DOWN;
    rpc::TargetState to = rpc::TARGET_DOWNOUT;
  };
  Result<uint64_t> SettleTargets(const std::vector<TargetMove>& moves, const StoreBatch& guard);
  // A copy of the map (pool_uuid empty).
  rpc::PoolMap Snapshot() const;
  uint64_t version() const;

  // Adopts `map` (read from the store elsewhere: an etcd watch) when it is
  // newer than the one known, and publishes it.
  void Observe(const rpc::PoolMap& map);
  // The version of the last map known, without reading the store.
  uint64_t known_version() const;
  // Runs `listener(version)` after every newer map is known (on the thread
  // that learned it; it must not call back into this object's writers).
  // Listeners are never removed: they must outlive the map.
  void AddListener(std::function<void(uint64_t version)> listener);
  // Blocks until a map newer than `known` is known, at most `max_wait`, or
  // until StopWaiters; returns the version known then.
  uint64_t WaitNewer(uint64_t known, std::chrono::milliseconds max_wait) const;
  // Runs `listener()` once StopWaiters is called (at once if it was). Never
  // removed, like AddListener's.
  void AddStopListener(std::function<void()> listener);
  // Wakes every WaitNewer for good (the services are stopping).
  void StopWaiters();
  bool stopped() const;

 private:
  explicit SystemMap(StateStore* store) : store_(store) {}
  // Reads the current record (shared store) or the cached one; applies
  // `change` (false: nothing to change) and writes the result with a version
  // one higher, compared against the record read, with `guard`'s contents.
  Result<uint64_t> Mutate(const std::function<Result<bool>(rpc::PoolMap*)>& change, const StoreBatch& guard);

  // Publishes `version` when it is newer than the last published one.
  // REQUIRES: mu_ not held.
  void Publish(uint64_t version) const;

  StateStore* store_;
  mutable std::mutex mu_;
  mutable rpc::PoolMap map_;  // GUARDED_BY(mu_): the last map read or written
  mutable std::mutex publish_mu_;
  mutable std::condition_variable published_cv_;
  mutable uint64_t published_ = 0;                        // GUARDED_BY(publish_mu_)
  bool stopped_ = false;                                  // GUARDED_BY(publish_mu_)
  std::vector<std::function<void(uint64_t)>> listeners_;  // GUARDED_BY(publish_mu_)
  std::vector<std::function<void()>> stop_listeners_;     // GUARDED_BY(publish_mu_)
};

}  // namespace ros2::control
