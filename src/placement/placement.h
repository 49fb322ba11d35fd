// Placement: which target holds which part of an object, computed from the pool
// map and the object id alone — no metadata lookup on the data path.
//
// Algorithm (docs/placement.md):
//  - S1: one shard on the object's "home" target, chosen by Lamping and
//    Veach's jump consistent hash of the object id over the pool's targets (so
//    growing the pool by one target moves only about 1/(n+1) of the objects).
//  - SX: one shard per target, round-robin from the home target; a dkey picks
//    its shard by hash, so a file's chunks (one dkey each) spread out.
//  - RP_<r>G1 / RP_<r>GX: one group (G1) or max(1, n / r) groups (GX, the dkey
//    picks the group by jump hash). The object orders the targets by
//    rendezvous (highest-random-weight) hashing of (object, target); group g
//    walks that order from position g * r and takes r replicas on distinct
//    hosts when the map knows hosts, else on distinct engines, else (too few
//    engines) on distinct targets.
// The ideal layout ignores target states. A replica whose target is DOWN is
// replaced by a fallback: the best-ranked target that is not DOWN, not in the
// group yet, and in a fault domain the group's other members do not use. Only
// the DOWN replicas move, so every client with the same map computes the same
// group. A fallback holds no data until rebuild copies it there: writes go to
// it, reads do not. Once rebuild is done the map says DOWNOUT for the lost
// target (DOWN and DOWNOUT choose the same fallback) and its fallback is a
// full copy (`fallback` false): read like any replica. A DRAIN target keeps
// its slot while the fallback it will have as DOWNOUT is written as an extra
// copy; a REINT target is placed as DOWNOUT and written as an extra copy
// (docs/replication.md, "Target states"). A non-replicated shard on a DOWN target has no fallback
// (its data exists nowhere else): it is reported unavailable (NotFound).
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

// One copy of a group (a non-replicated shard is a group of one).
struct ReplicaPlace {
  uint32_t target = 0;    // global target index
  bool fallback = false;  // stands in for a DOWN target: takes writes, holds no older data
  bool down = false;      // the target is DOWN and no fallback could be found
  friend bool operator==(const ReplicaPlace&, const ReplicaPlace&) = default;
};

// The layout of one object under one map: `groups` groups of `replicas`
// copies; group g's copy j is places[g * replicas + j], in ideal-rank order.
struct ObjectLayout {
  uint32_t groups = 1;
  uint32_t replicas = 1;
  std::vector<ReplicaPlace> places;
  // Per group (empty when no group has any): the write-only copies of a move
  // in progress, after the group's r places (a DRAIN member's future
  // fallback, a REINT member; see ReplicasForDkey).
  std::vector<std::vector<ReplicaPlace>> extra;
  bool replicated() const { return replicas > 1; }
};

// Layout of `oid` over `map`. InvalidArgument for an unknown class or an empty
// map; InvalidArgument when a group needs more targets than the pool has.
Result<ObjectLayout> ComputeLayout(const PoolMap& map, const ObjectId& oid);

// Group `group`'s places followed by its extra copies.
std::vector<ReplicaPlace> GroupCopies(const ObjectLayout& layout, uint32_t group);

// The group a dkey of `oid` goes to (0 for S1 and G1 classes).
uint32_t GroupForDkey(const ObjectLayout& layout, std::string_view dkey);

// The copies of the group that serves `dkey` of `oid` (only that group is
// computed): the r slots, then the extra write-only copies while a target
// of the group is DRAIN (its future fallback) or REINT (the target itself).
// InvalidArgument as ComputeLayout.
Result<std::vector<ReplicaPlace>> ReplicasForDkey(const PoolMap& map, const ObjectId& oid, std::string_view dkey);

// The copies a read may use, in order of preference: the group's replicas that
// are neither DOWN nor fallbacks. NotFound (naming the targets) when none is.
Result<std::vector<uint32_t>> ReadTargets(const PoolMap& map, const ObjectId& oid, std::string_view dkey);
// The copies an update must reach: every replica that is not DOWN, those that
// hold data first (in ReadTargets' order) and fallbacks after, so the first
// (the update's leader, which decides conditions) is never a fallback while a
// copy with data is up. NotFound when none is, or when a non-replicated shard
// is DOWN.
Result<std::vector<uint32_t>> WriteTargets(const PoolMap& map, const ObjectId& oid, std::string_view dkey);

// ReadTargets(map, oid, dkey)[(first + replica) % n] (n readable copies),
// with the same errors, and NotFound when `replica` is n or more: a reader
// spreads its reads over the copies with `first` (every copy serves reads,
// docs/replication.md "Read rule") and moves on with `replica`. A
// non-replicated class is placed without building the lists (the per-I/O
// routing of a client).
Result<uint32_t> ReadTarget(const PoolMap& map, const ObjectId& oid, std::string_view dkey, uint32_t replica,
                            uint32_t first = 0);

// The target that serves `dkey` of `oid`: the first of ReadTargets. NotFound
// (naming the target) when it is DOWN.
Result<uint32_t> TargetForDkey(const PoolMap& map, const ObjectId& oid, std::string_view dkey);

}  // namespace ros2
