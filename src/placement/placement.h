// Placement: which target holds which part of an object, computed from the pool
// map and the object id alone — no metadata lookup on the data path.
//
// Algorithm (docs/placement.md): an object's "home" is chosen by Lamping and
// Veach's jump consistent hash of the object id over the pool's targets, so
// growing the pool by one target moves only about 1/(n+1) of the objects.
//  - S1: one shard, on the home target.
//  - SX: one shard per target, laid out round-robin from the home target; a dkey
//    picks its shard by hash, so a file's chunks (one dkey each) spread out.
//  - RP_2G1 / RP_3G1: two or three replicas on distinct targets starting at the
//    home target, preferring distinct engines (replication itself comes later).
// A shard whose target is DOWN is reported as unavailable (NotFound naming the
// target) until rebuild exists; nothing silently moves to another target.
// Pure functions of their inputs; safe from any thread.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/object_id.h"
#include "common/status.h"
#include "placement/pool_map.h"

namespace ros2 {

// Lamping & Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm" (2014):
// maps `key` to a bucket in [0, buckets). REQUIRES: buckets > 0.
uint32_t JumpConsistentHash(uint64_t key, uint32_t buckets);

// A 64-bit hash of a byte string (used for dkeys and object ids): stable across
// processes, architectures and releases — it is part of the on-disk layout.
uint64_t PlacementHash(std::string_view bytes);
uint64_t PlacementHash(const ObjectId& oid);

// The layout of one object: shard i lives on target `shards[i]`; a replicated
// object has one group whose replicas are all in `shards`.
struct ObjectLayout {
  std::vector<uint32_t> shards;  // global target indices
  bool replicated = false;
};

// Layout of `oid` over `map`. InvalidArgument for an unknown class or an empty
// map; InvalidArgument when replicas cannot fit on distinct targets.
Result<ObjectLayout> ComputeLayout(const PoolMap& map, const ObjectId& oid);

// The shard index a dkey of `oid` goes to (0 for S1 and replicated classes).
uint32_t ShardForDkey(const ObjectLayout& layout, std::string_view dkey);

// The target that serves `dkey` of `oid`: ComputeLayout + ShardForDkey + a
// state check. NotFound (naming the target) when that target is DOWN.
Result<uint32_t> TargetForDkey(const PoolMap& map, const ObjectId& oid, std::string_view dkey);

}  // namespace ros2
