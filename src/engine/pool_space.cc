#include "engine/pool_space.h"

#include <algorithm>

#include <fmt/format.h>

namespace ros2::engine {

bool PoolLayout::HasTarget(uint32_t index) const {
  return std::find(local_targets.begin(), local_targets.end(), index) != local_targets.end();
}

uint64_t PoolLayout::LocalShare() const {
  if (pool_targets == 0) return 0;
  // size * local / total without overflow: (size / total) * local + (size % total) * local / total.
  const uint64_t local = local_targets.size();
  return size_bytes / pool_targets * local + size_bytes % pool_targets * local / pool_targets;
}

std::shared_ptr<vos::SpaceBudget> PoolSpaceTable::Budget(const Uuid& pool) {
  std::lock_guard lock(mu_);
  return pools_[pool].budget;
}

void PoolSpaceTable::SetLayout(const Uuid& pool, const PoolLayout& layout) {
  std::lock_guard lock(mu_);
  Entry& e = pools_[pool];
  e.layout = layout;
  e.resolved = std::chrono::steady_clock::now();
  e.budget->set_limit(layout.LocalShare());
}

std::optional<PoolLayout> PoolSpaceTable::RecentLayout(const Uuid& pool, std::chrono::steady_clock::duration max_age) {
  std::lock_guard lock(mu_);
  auto it = pools_.find(pool);
  if (it == pools_.end() || !it->second.layout) return std::nullopt;
  if (std::chrono::steady_clock::now() - it->second.resolved > max_age) return std::nullopt;
  return it->second.layout;
}

uint64_t PoolSpaceTable::Used(const Uuid& pool) {
  std::lock_guard lock(mu_);
  auto it = pools_.find(pool);
  return it == pools_.end() ? 0 : it->second.budget->used();
}

std::vector<PoolSpaceTable::Space> PoolSpaceTable::Snapshot() {
  std::lock_guard lock(mu_);
  std::vector<Space> out;
  for (const auto& [pool, entry] : pools_) {
    out.push_back(Space{pool, entry.budget->used(), entry.layout ? entry.layout->LocalShare() : 0});
  }
  return out;
}

std::string NotInPoolMessage(uint32_t target, const Uuid& engine, const Uuid& pool, const PoolLayout& layout) {
  return fmt::format(
      "engine target {} (engine {}) is not a target of pool {}: the pool map (version {}) has {} targets, {} of them "
      "on this engine",
      target, engine.ToString(), pool.ToString(), layout.map_version, layout.pool_targets, layout.local_targets.size());
}

}  // namespace ros2::engine
