#include "placement/placement.h"

#include <algorithm>

#include <fmt/format.h>

namespace ros2 {

uint32_t JumpConsistentHash(uint64_t key, uint32_t buckets) {
  // Each step jumps forward to the next bucket count at which the key would move;
  // the linear congruential step is the one from the paper.
  int64_t b = -1, j = 0;
  while (j < static_cast<int64_t>(buckets)) {
    b = j;
    key = key * 2862933555777941757ULL + 1;
    j = static_cast<int64_t>(static_cast<double>(b + 1) *
                             (static_cast<double>(1LL << 31) / static_cast<double>((key >> 33) + 1)));
  }
  return static_cast<uint32_t>(b);
}

namespace {

// The 64-bit finaliser of MurmurHash3 (fmix64): spreads every input bit over
// every output bit, so sequential ids and short keys land far apart.
uint64_t Mix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

}  // namespace

uint64_t PlacementHash(std::string_view bytes) {
  // FNV-1a over the bytes, then a full-avalanche mix: FNV alone leaves the high
  // bits of short keys (8-byte chunk indices) poorly mixed.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return Mix64(h ^ bytes.size());
}

uint64_t PlacementHash(const ObjectId& oid) { return Mix64(oid.hi ^ Mix64(oid.lo)); }

Result<ObjectLayout> ComputeLayout(const PoolMap& map, const ObjectId& oid) {
  if (map.targets.empty()) {
    return Status::InvalidArgument(fmt::format("placement of {}: pool map v{} has no targets", oid.ToString(), map.version));
  }
  const auto n = static_cast<uint32_t>(map.targets.size());
  const uint32_t home = JumpConsistentHash(PlacementHash(oid), n);
  ObjectLayout layout;
  switch (oid.object_class()) {
    case ObjectClass::kS1:
      layout.shards.push_back(home);
      return layout;
    case ObjectClass::kSX:
      layout.shards.reserve(n);
      for (uint32_t i = 0; i < n; ++i) layout.shards.push_back((home + i) % n);
      return layout;
    case ObjectClass::kRP2G1:
    case ObjectClass::kRP3G1: {
      uint32_t replicas = oid.object_class() == ObjectClass::kRP2G1 ? 2 : 3;
      if (replicas > n) {
        return Status::InvalidArgument(fmt::format("placement of {}: class {} needs {} targets, pool has {}",
                                                   oid.ToString(), ObjectClassName(oid.object_class()), replicas, n));
      }
      layout.replicated = true;
      // First pass: walk from the home target, taking targets on engines not yet
      // used; second pass fills up with any remaining targets (one engine pools).
      std::vector<uint32_t> used_engines;
      for (int pass = 0; pass < 2 && layout.shards.size() < replicas; ++pass) {
        for (uint32_t i = 0; i < n && layout.shards.size() < replicas; ++i) {
          uint32_t t = (home + i) % n;
          if (std::find(layout.shards.begin(), layout.shards.end(), t) != layout.shards.end()) continue;
          uint32_t engine = map.targets[t].engine_rank;
          bool engine_used = std::find(used_engines.begin(), used_engines.end(), engine) != used_engines.end();
          if (pass == 0 && engine_used) continue;
          layout.shards.push_back(t);
          used_engines.push_back(engine);
        }
      }
      return layout;
    }
  }
  return Status::InvalidArgument(fmt::format("placement of {}: unknown object class {}", oid.ToString(),
                                             static_cast<int>(oid.object_class())));
}

uint32_t ShardForDkey(const ObjectLayout& layout, std::string_view dkey) {
  if (layout.replicated || layout.shards.size() <= 1) return 0;
  return JumpConsistentHash(PlacementHash(dkey), static_cast<uint32_t>(layout.shards.size()));
}

Result<uint32_t> TargetForDkey(const PoolMap& map, const ObjectId& oid, std::string_view dkey) {
  ROS2_ASSIGN_OR_RETURN(ObjectLayout layout, ComputeLayout(map, oid));
  uint32_t target = layout.shards[ShardForDkey(layout, dkey)];
  if (map.targets[target].state == TargetState::kDown) {
    return Status::NotFound(fmt::format("object {} dkey shard is on target {} (engine {}, index {}), which is DOWN in pool map v{}",
                                        oid.ToString(), target, map.targets[target].engine_rank,
                                        map.targets[target].engine_index, map.version));
  }
  return target;
}

}  // namespace ros2
