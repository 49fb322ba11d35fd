// PoolSpaceTable: what this engine knows about the pools its targets serve —
// each pool's size and target set (its layout, from the control plane) and the
// SpaceBudget every container shard of the pool on this engine charges.
//
// A pool's space on an engine is its size times the engine's share of the
// pool's targets (all of it for a pool on one engine), shared by all the
// pool's containers on all this engine's targets: ENOSPC comes when the pool
// is full, whichever container or target the data went to (docs/engine.md,
// "Pool space"). Thread-safe: shard openers set layouts, target threads charge
// budgets, gRPC threads read usage.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/uuid.h"
#include "vos/space_budget.h"

namespace ros2::engine {

// A pool as the control plane describes it, seen from one engine.
struct PoolLayout {
  uint64_t size_bytes = 0;
  uint32_t pool_targets = 0;            // targets in the pool map, all engines
  std::vector<uint32_t> local_targets;  // this engine's target indices in the map
  uint64_t map_version = 0;

  bool HasTarget(uint32_t index) const;
  // The pool's space on this engine: size * local / pool targets.
  uint64_t LocalShare() const;
};

class PoolSpaceTable {
 public:
  // The pool's budget on this engine (unlimited until a layout is known).
  std::shared_ptr<vos::SpaceBudget> Budget(const Uuid& pool);
  // Records a freshly resolved layout and sets the budget's limit from it.
  void SetLayout(const Uuid& pool, const PoolLayout& layout);
  // The layout resolved at most `max_age` ago, if any.
  std::optional<PoolLayout> RecentLayout(const Uuid& pool, std::chrono::steady_clock::duration max_age);
  // Bytes the pool's shards on this engine hold (0 for an unknown pool).
  uint64_t Used(const Uuid& pool);
  // Every pool's space on this engine: used bytes and the limit (0 while the
  // layout is unknown), for the metrics endpoint.
  struct Space {
    Uuid pool;
    uint64_t used = 0;
    uint64_t limit = 0;
  };
  std::vector<Space> Snapshot();

 private:
  struct Entry {
    std::shared_ptr<vos::SpaceBudget> budget = std::make_shared<vos::SpaceBudget>();
    std::optional<PoolLayout> layout;
    std::chrono::steady_clock::time_point resolved{};
  };
  std::mutex mu_;
  std::map<Uuid, Entry> pools_;  // GUARDED_BY(mu_)
};

// The message of a request refused because its target is not in its pool.
std::string NotInPoolMessage(uint32_t target, const Uuid& engine, const Uuid& pool, const PoolLayout& layout);

}  // namespace ros2::engine
