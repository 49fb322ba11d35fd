#include "vos/extent_cache.h"

namespace ros2::vos {

size_t ExtentCache::Cost(const CachedExtent& e) {
  // A std::map node (about four pointers and a colour) plus the payload.
  constexpr size_t kNodeOverhead = 48;
  return kNodeOverhead + sizeof(ExtentSlot) + sizeof(CachedExtent) + e.rec.csum.values.size() * sizeof(uint64_t) +
         e.inline_data.size();
}

const ExtentCache::Extents* ExtentCache::Find(std::string_view akey_scope) {
  auto it = by_scope_.find(akey_scope);
  if (it == by_scope_.end()) return nullptr;
  if (it->second.lru != lru_.begin()) lru_.splice(lru_.begin(), lru_, it->second.lru);
  return &it->second.extents;
}

const ExtentCache::Extents* ExtentCache::Insert(std::string_view akey_scope, Extents extents) {
  Erase(akey_scope);
  size_t cost = 0;
  for (const auto& [slot, e] : extents) cost += Cost(e);
  if (extents.size() > kMaxExtentsPerAkey || cost > budget_ / 4) {
    MarkUncacheable(akey_scope);
    return nullptr;
  }
  lru_.emplace_front(akey_scope);
  auto [it, inserted] = by_scope_.try_emplace(lru_.front());
  it->second.extents = std::move(extents);
  it->second.bytes = cost;
  it->second.lru = lru_.begin();
  bytes_ += cost;
  EvictToBudget();
  return &it->second.extents;
}

void ExtentCache::Add(std::string_view akey_scope, const ExtentSlot& slot, CachedExtent extent) {
  auto it = by_scope_.find(akey_scope);
  if (it == by_scope_.end()) return;
  Akey& a = it->second;
  size_t cost = Cost(extent);
  auto [pos, inserted] = a.extents.try_emplace(slot);
  if (!inserted) {
    size_t old = Cost(pos->second);
    a.bytes -= old;
    bytes_ -= old;
  }
  pos->second = std::move(extent);
  a.bytes += cost;
  bytes_ += cost;
  if (a.extents.size() > kMaxExtentsPerAkey) {
    Erase(akey_scope);
    MarkUncacheable(akey_scope);
    return;
  }
  EvictToBudget();
}

void ExtentCache::MarkUncacheable(std::string_view akey_scope) {
  constexpr size_t kMaxUncacheable = 1 << 12;
  if (uncacheable_.size() >= kMaxUncacheable) uncacheable_.clear();  // they are retried, which is only slower
  uncacheable_.emplace(akey_scope);
}

void ExtentCache::Erase(std::string_view akey_scope) {
  if (auto u = uncacheable_.find(akey_scope); u != uncacheable_.end()) uncacheable_.erase(u);
  auto it = by_scope_.find(akey_scope);
  if (it == by_scope_.end()) return;
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  by_scope_.erase(it);
}

void ExtentCache::EvictToBudget() {
  // Never evicts the most recently used akey, which callers may be holding.
  while (bytes_ > budget_ && lru_.size() > 1) {
    auto it = by_scope_.find(lru_.back());
    bytes_ -= it->second.bytes;
    by_scope_.erase(it);
    lru_.pop_back();
  }
}

}  // namespace ros2::vos
