#include "vos/akey_cache.h"

namespace ros2::vos {

size_t AkeyCache::Cost(const CachedExtent& e) {
  // A std::map node (about four pointers and a colour) plus the payload.
  constexpr size_t kNodeOverhead = 48;
  return kNodeOverhead + sizeof(ExtentSlot) + sizeof(CachedExtent) + e.rec.csum.values.size() * sizeof(uint64_t) +
         e.inline_data.size();
}

size_t AkeyCache::EntryCost(std::string_view akey_scope) {
  // The hash node (next pointer, cached hash, key, entry), the clock's list node, the key's heap copy.
  constexpr size_t kNodeOverhead = 2 * sizeof(void*) + sizeof(std::string) + 3 * sizeof(void*);
  return kNodeOverhead + sizeof(Akey) + akey_scope.size();
}

AkeyCache::Akey* AkeyCache::Find(std::string_view akey_scope) {
  auto it = by_scope_.find(akey_scope);
  if (it == by_scope_.end()) return nullptr;
  it->second.referenced_ = true;
  return &it->second;
}

AkeyCache::Akey& AkeyCache::FindOrAdd(std::string_view akey_scope) {
  auto [it, inserted] = by_scope_.try_emplace(std::string(akey_scope));
  Akey& a = it->second;
  if (!inserted) {
    a.referenced_ = true;
    return a;
  }
  a.scope_ = &it->first;
  clock_.push_front(&a);
  a.clock_ = clock_.begin();
  a.bytes_ = EntryCost(akey_scope);
  bytes_ += a.bytes_;
  EvictToBudget(&a);
  return a;
}

void AkeyCache::SetHeader(Akey& akey, const AkeyHeader& h) {
  akey.header_ = h;
  akey.has_header_ = true;
}

const AkeyCache::Extents* AkeyCache::SetExtents(Akey& akey, Extents extents) {
  ClearExtents(akey);
  size_t cost = 0;
  for (const auto& [slot, e] : extents) cost += Cost(e);
  if (extents.size() > kMaxExtentsPerAkey || cost > budget_ / 4) {
    akey.state_ = Akey::ExtentState::kUncacheable;
    return nullptr;
  }
  akey.extents_ = std::move(extents);
  akey.state_ = Akey::ExtentState::kLoaded;
  akey.bytes_ += cost;
  bytes_ += cost;
  EvictToBudget(&akey);
  return &akey.extents_;
}

void AkeyCache::MarkUncacheable(Akey& akey) {
  ClearExtents(akey);
  akey.state_ = Akey::ExtentState::kUncacheable;
}

void AkeyCache::AddExtent(Akey& akey, const ExtentSlot& slot, CachedExtent extent) {
  if (akey.state_ != Akey::ExtentState::kLoaded) return;
  size_t cost = Cost(extent);
  auto [pos, inserted] = akey.extents_.try_emplace(slot);
  if (!inserted) {
    size_t old = Cost(pos->second);
    akey.bytes_ -= old;
    bytes_ -= old;
  }
  pos->second = std::move(extent);
  akey.bytes_ += cost;
  bytes_ += cost;
  if (akey.extents_.size() > kMaxExtentsPerAkey) {
    MarkUncacheable(akey);
    return;
  }
  EvictToBudget(&akey);
}

void AkeyCache::DropExtents(std::string_view akey_scope) {
  auto it = by_scope_.find(akey_scope);
  if (it == by_scope_.end()) return;
  ClearExtents(it->second);
  EraseIfEmpty(it->second);
}

void AkeyCache::DropHeader(std::string_view akey_scope) {
  auto it = by_scope_.find(akey_scope);
  if (it == by_scope_.end()) return;
  it->second.has_header_ = false;
  EraseIfEmpty(it->second);
}

void AkeyCache::Erase(std::string_view akey_scope) {
  auto it = by_scope_.find(akey_scope);
  if (it != by_scope_.end()) EraseEntry(it->second);
}

void AkeyCache::ClearExtents(Akey& akey) {
  size_t extents_bytes = akey.bytes_ - EntryCost(*akey.scope_);
  akey.bytes_ -= extents_bytes;
  bytes_ -= extents_bytes;
  akey.extents_.clear();
  akey.state_ = Akey::ExtentState::kNotLoaded;
}

void AkeyCache::EraseIfEmpty(Akey& akey) {
  if (!akey.has_header_ && akey.state_ == Akey::ExtentState::kNotLoaded) EraseEntry(akey);
}

void AkeyCache::EraseEntry(Akey& akey) {
  bytes_ -= akey.bytes_;
  clock_.erase(akey.clock_);
  std::string_view scope = *akey.scope_;
  by_scope_.erase(by_scope_.find(scope));
}

void AkeyCache::EvictToBudget(const Akey* keep) {
  // Each entry other than `keep` is passed over at most once before it goes,
  // so the sweep ends.
  while (bytes_ > budget_ && clock_.size() > 1) {
    Akey* a = clock_.back();
    if (a == keep || a->referenced_) {
      a->referenced_ = false;
      clock_.splice(clock_.begin(), clock_, a->clock_);
      continue;
    }
    EraseEntry(*a);
  }
}

}  // namespace ros2::vos
