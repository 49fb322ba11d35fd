#include "placement/placement.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

namespace ros2 {
namespace {

PoolMap MakeMap(uint32_t engines, uint32_t targets_per_engine) {
  PoolMap map;
  map.version = 1;
  for (uint32_t e = 0; e < engines; ++e) {
    for (uint32_t t = 0; t < targets_per_engine; ++t) map.targets.push_back({e, t, TargetState::kUp});
  }
  return map;
}

std::string ChunkDkey(uint64_t chunk) {
  std::string k(8, '\0');
  for (int i = 0; i < 8; ++i) k[i] = static_cast<char>(chunk >> (56 - 8 * i));
  return k;
}

TEST(JumpHashTest, StaysInRangeAndIsStable) {
  for (uint64_t key = 0; key < 1000; ++key) {
    for (uint32_t n : {1u, 2u, 7u, 64u}) ASSERT_LT(JumpConsistentHash(key, n), n);
  }
  // Pinned values: placement is part of the on-disk layout and must never drift.
  EXPECT_EQ(JumpConsistentHash(0, 10), 0u);
  EXPECT_EQ(JumpConsistentHash(PlacementHash(std::string_view("dkey")), 1), 0u);
  EXPECT_EQ(JumpConsistentHash(123456789ULL, 1000), 294u);
  EXPECT_EQ(PlacementHash(std::string_view("dkey")), 0x205cab8ec8d0bcfcULL);
  EXPECT_EQ(JumpConsistentHash(PlacementHash(std::string_view("dkey")), 64), 24u);
  EXPECT_EQ(JumpConsistentHash(PlacementHash(ObjectId{1, 2}), 1000), 22u);
}

TEST(JumpHashTest, GrowingMovesAboutOneOverN) {
  const int keys = 20000;
  int moved = 0;
  for (int k = 0; k < keys; ++k) {
    uint64_t h = PlacementHash(ObjectId{0, static_cast<uint64_t>(k)});
    uint32_t before = JumpConsistentHash(h, 8), after = JumpConsistentHash(h, 9);
    if (before != after) {
      ++moved;
      EXPECT_EQ(after, 8u) << "a key may only move to the new bucket";
    }
  }
  // Expected 1/9 of the keys; allow generous slack.
  EXPECT_GT(moved, keys / 9 * 0.8);
  EXPECT_LT(moved, keys / 9 * 1.2);
}

TEST(PlacementTest, S1ObjectsSpreadEvenlyOverTargets) {
  PoolMap map = MakeMap(2, 4);
  std::map<uint32_t, int> count;
  for (uint64_t i = 0; i < 8000; ++i) {
    auto layout = ComputeLayout(map, ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 0, i));
    ASSERT_TRUE(layout.ok());
    ASSERT_EQ(layout->places.size(), 1u);
    ++count[layout->places[0].target];
  }
  ASSERT_EQ(count.size(), 8u);
  for (auto& [t, c] : count) EXPECT_NEAR(c, 1000, 200) << "target " << t;
}

TEST(PlacementTest, SXSpreadsChunksOfOneFileOverAllTargets) {
  PoolMap map = MakeMap(2, 2);
  ObjectId oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kSX, 0, 42);
  std::map<uint32_t, int> count;
  for (uint64_t chunk = 0; chunk < 400; ++chunk) {
    auto t = TargetForDkey(map, oid, ChunkDkey(chunk));
    ASSERT_TRUE(t.ok());
    ++count[*t];
  }
  ASSERT_EQ(count.size(), 4u);
  for (auto& [t, c] : count) EXPECT_NEAR(c, 100, 40) << "target " << t;
}

TEST(PlacementTest, SameInputsSameAnswerInEveryProcess) {
  PoolMap map = MakeMap(3, 2);
  ObjectId oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kSX, 7, 99);
  auto a = TargetForDkey(map, oid, "x");
  PoolMap copy = map;
  auto b = TargetForDkey(copy, oid, "x");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

// The engines of a group's places.
std::set<uint32_t> EnginesOf(const PoolMap& map, const std::vector<ReplicaPlace>& places) {
  std::set<uint32_t> engines;
  for (const auto& p : places) engines.insert(map.targets[p.target].engine_rank);
  return engines;
}

TEST(PlacementTest, ReplicasLandOnDistinctEngines) {
  PoolMap map = MakeMap(3, 4);
  for (ObjectClass oc : {ObjectClass::kRP2G1, ObjectClass::kRP3G1, ObjectClass::kRP2GX, ObjectClass::kRP3GX}) {
    for (uint64_t i = 0; i < 200; ++i) {
      auto layout = ComputeLayout(map, ObjectId::Make(ObjectType::kKeyValue, oc, 0, i));
      ASSERT_TRUE(layout.ok());
      const uint32_t r = ReplicaCount(oc);
      ASSERT_EQ(layout->replicas, r);
      ASSERT_EQ(layout->groups, SpreadsOverTargets(oc) ? 12u / r : 1u) << ObjectClassName(oc);
      ASSERT_EQ(layout->places.size(), size_t{layout->groups} * r);
      for (uint32_t g = 0; g < layout->groups; ++g) {
        std::vector<ReplicaPlace> group(layout->places.begin() + g * r, layout->places.begin() + (g + 1) * r);
        EXPECT_EQ(EnginesOf(map, group).size(), r) << ObjectClassName(oc) << " object " << i << " group " << g;
        for (const auto& p : group) EXPECT_FALSE(p.fallback || p.down);
      }
    }
  }
}

TEST(PlacementTest, ReplicasGoToDistinctHostsWhenHostsAreKnown) {
  // Four engines on two hosts (0, 1 on host 7; 2, 3 on host 9): the two
  // replicas of every RP_2 group must sit on the two hosts, not just on two engines.
  PoolMap map = MakeMap(4, 2);
  for (auto& t : map.targets) t.host = t.engine_rank < 2 ? 7 : 9;
  for (uint64_t i = 0; i < 300; ++i) {
    auto places = ReplicasForDkey(map, ObjectId::Make(ObjectType::kArray, ObjectClass::kRP2GX, 0, i), ChunkDkey(i));
    ASSERT_TRUE(places.ok());
    ASSERT_EQ(places->size(), 2u);
    EXPECT_NE(map.targets[(*places)[0].target].host, map.targets[(*places)[1].target].host) << "object " << i;
  }
  // Three replicas over two hosts: distinct engines still (the next domain down).
  for (uint64_t i = 0; i < 100; ++i) {
    auto places = ReplicasForDkey(map, ObjectId::Make(ObjectType::kArray, ObjectClass::kRP3G1, 0, i), "d");
    ASSERT_TRUE(places.ok());
    EXPECT_EQ(EnginesOf(map, *places).size(), 3u);
  }
}

TEST(PlacementTest, ReplicatedLayoutIsAPureFunctionOfObjectAndMap) {
  PoolMap map = MakeMap(3, 4);
  map.targets[5].state = TargetState::kDown;
  for (uint64_t i = 0; i < 100; ++i) {
    ObjectId oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kRP3GX, 3, i);
    auto a = ComputeLayout(map, oid);
    PoolMap copy = map;
    auto b = ComputeLayout(copy, oid);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->places, b->places);
    // The per-dkey form computes the same group as the whole layout.
    auto group = ReplicasForDkey(map, oid, ChunkDkey(i));
    ASSERT_TRUE(group.ok());
    uint32_t g = GroupForDkey(*a, ChunkDkey(i));
    EXPECT_EQ(*group, std::vector<ReplicaPlace>(a->places.begin() + g * 3, a->places.begin() + (g + 1) * 3));
  }
  // Pinned: the replica order is part of the on-disk layout.
  auto pinned = ReplicasForDkey(MakeMap(3, 4), ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kRP3G1, 0, 1), "d");
  ASSERT_TRUE(pinned.ok());
  std::vector<uint32_t> targets;
  for (const auto& p : *pinned) targets.push_back(p.target);
  EXPECT_EQ(targets, (std::vector<uint32_t>{11, 5, 2}));
}

TEST(PlacementTest, DownReplicaMovesToAStableFallbackAndNothingElseMoves) {
  PoolMap map = MakeMap(4, 3);
  PoolMap down = map;
  for (auto& t : down.targets) {
    if (t.engine_rank == 1) t.state = TargetState::kDown;  // engine 1 died
  }
  down.version++;
  int moved = 0;
  for (uint64_t i = 0; i < 400; ++i) {
    ObjectId oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kRP2GX, 0, i);
    auto before = ReplicasForDkey(map, oid, ChunkDkey(i));
    auto after = ReplicasForDkey(down, oid, ChunkDkey(i));
    ASSERT_TRUE(before.ok() && after.ok());
    ASSERT_EQ(after->size(), 2u);
    for (size_t j = 0; j < 2; ++j) {
      const ReplicaPlace& b = (*before)[j];
      const ReplicaPlace& a = (*after)[j];
      if (map.targets[b.target].engine_rank != 1) {
        EXPECT_EQ(a, b) << "a live replica must stay where it was (object " << i << ")";
        continue;
      }
      ++moved;
      EXPECT_TRUE(a.fallback) << "object " << i;
      EXPECT_FALSE(a.down);
      EXPECT_NE(down.targets[a.target].engine_rank, 1u);
    }
    EXPECT_EQ(EnginesOf(down, *after).size(), 2u) << "the fallback keeps the group on distinct engines";
    // Reads skip the fallback (it holds nothing older than the failure); writes reach it.
    auto reads = ReadTargets(down, oid, ChunkDkey(i));
    auto writes = WriteTargets(down, oid, ChunkDkey(i));
    ASSERT_TRUE(reads.ok() && writes.ok());
    EXPECT_EQ(writes->size(), 2u);
    for (uint32_t t : *reads) EXPECT_NE(down.targets[t].engine_rank, 1u);
    // The leader (the first write target) holds the data, wherever the
    // fallback stands in the group: it decides conditional updates.
    EXPECT_EQ(writes->front(), reads->front()) << "object " << i;
    EXPECT_NE(down.targets[writes->front()].engine_rank, 1u);
    // Every client computes the same fallback: the same map copied gives the same answer.
    PoolMap copy = down;
    EXPECT_EQ(*after, *ReplicasForDkey(copy, oid, ChunkDkey(i)));
  }
  EXPECT_GT(moved, 400 * 2 / 4 / 2) << "about a quarter of the replicas were on engine 1";
}

TEST(PlacementTest, DownOutKeepsTheFallbackAndMakesItReadable) {
  PoolMap map = MakeMap(4, 3);
  PoolMap down = map, out = map;
  for (size_t t = 0; t < map.targets.size(); ++t) {
    if (map.targets[t].engine_rank != 1) continue;
    down.targets[t].state = TargetState::kDown;
    out.targets[t].state = TargetState::kDownOut;  // rebuilt: its data is whole on the fallbacks
  }
  for (uint64_t i = 0; i < 400; ++i) {
    ObjectId oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kRP2GX, 0, i);
    auto d = ReplicasForDkey(down, oid, ChunkDkey(i));
    auto o = ReplicasForDkey(out, oid, ChunkDkey(i));
    ASSERT_TRUE(d.ok() && o.ok());
    for (size_t j = 0; j < d->size(); ++j) {
      EXPECT_EQ((*d)[j].target, (*o)[j].target) << "DOWN and DOWNOUT choose the same fallback (object " << i << ")";
      EXPECT_FALSE((*o)[j].fallback) << "a DOWNOUT replica's fallback is a full copy";
      EXPECT_FALSE((*o)[j].down);
    }
    // Both copies are read again, the rebuilt one included.
    auto reads = ReadTargets(out, oid, ChunkDkey(i));
    ASSERT_TRUE(reads.ok());
    EXPECT_EQ(reads->size(), 2u);
  }
  // A later failure of the engine holding a rebuilt copy: where the DOWNOUT
  // replica's fallback moves, the new one is a plain fallback (not read)
  // until its own rebuild; where it stays, it is still read.
  PoolMap later = out;
  for (auto& t : later.targets) {
    if (t.engine_rank == 2) t.state = TargetState::kDown;
  }
  int moved = 0;
  for (uint64_t i = 0; i < 400; ++i) {
    ObjectId oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kRP2GX, 0, i);
    auto o = ReplicasForDkey(out, oid, ChunkDkey(i));
    auto l = ReplicasForDkey(later, oid, ChunkDkey(i));
    ASSERT_TRUE(o.ok() && l.ok());
    for (size_t j = 0; j < l->size(); ++j) {
      if (later.targets[(*l)[j].target].state != TargetState::kUp) continue;
      // A rebuilt copy: the fallback of a DOWNOUT replica (it differs from the ideal member).
      const bool was_rebuilt_copy = (*o)[j].target != ReplicasForDkey(map, oid, ChunkDkey(i))->at(j).target;
      if (was_rebuilt_copy && (*l)[j].target != (*o)[j].target) {
        ++moved;
        EXPECT_TRUE((*l)[j].fallback) << "a moved fallback holds nothing yet (object " << i << ")";
      } else if (was_rebuilt_copy) {
        EXPECT_FALSE((*l)[j].fallback) << "an unmoved rebuilt copy is still read (object " << i << ")";
      }
    }
  }
  EXPECT_GT(moved, 0) << "some rebuilt copies were on engine 2";
  // A non-replicated shard on a DOWNOUT target stays unavailable.
  for (uint64_t i = 0; i < 50; ++i) {
    ObjectId oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kS1, 0, i);
    auto t = TargetForDkey(map, oid, "d");
    ASSERT_TRUE(t.ok());
    if (map.targets[*t].engine_rank == 1) {
      EXPECT_TRUE(TargetForDkey(out, oid, "d").status().IsNotFound());
    }
  }
}

// DRAIN: the draining replica keeps its place (read and written) and the
// fallback it will have as DOWNOUT is written too; REINT: placed as DOWNOUT
// (its fallback read) and written too. Once settled, the extra copy is the
// group's place.
TEST(PlacementTest, DrainAndReintegrateWriteBothTheOldAndTheNewCopies) {
  PoolMap map = MakeMap(4, 2);
  int drained = 0, reintegrated = 0;
  for (uint64_t i = 0; i < 400; ++i) {
    const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kRP2G1, 0, i);
    map.targets[2].state = TargetState::kUp;
    auto up = ReplicasForDkey(map, oid, "d");
    ASSERT_TRUE(up.ok());
    const bool member = (*up)[0].target == 2 || (*up)[1].target == 2;
    map.targets[2].state = TargetState::kDownOut;
    auto out = ReplicasForDkey(map, oid, "d");
    map.targets[2].state = TargetState::kDrain;
    auto drain = ReplicasForDkey(map, oid, "d");
    map.targets[2].state = TargetState::kReint;
    auto reint = ReplicasForDkey(map, oid, "d");
    ASSERT_TRUE(out.ok() && drain.ok() && reint.ok());
    auto layout = ComputeLayout(map, oid);
    ASSERT_TRUE(layout.ok());
    if (!member) {
      EXPECT_EQ(*drain, *up) << "object " << i << ": a group without the target does not change";
      EXPECT_EQ(*reint, *up) << "object " << i;
      EXPECT_TRUE(layout->extra.empty());
      continue;
    }
    // DRAIN: the UP places, then the DOWNOUT fallback, write-only.
    ASSERT_EQ(drain->size(), 3u) << "object " << i;
    EXPECT_EQ((*drain)[0], (*up)[0]);
    EXPECT_EQ((*drain)[1], (*up)[1]);
    const uint32_t future = (*up)[0].target == 2 ? (*out)[0].target : (*out)[1].target;
    EXPECT_EQ((*drain)[2], (ReplicaPlace{future, true, false})) << "object " << i;
    map.targets[2].state = TargetState::kDrain;
    auto reads = ReadTargets(map, oid, "d");
    auto writes = WriteTargets(map, oid, "d");
    ASSERT_TRUE(reads.ok() && writes.ok());
    EXPECT_EQ(reads->size(), 2u) << "the draining target is still read";
    EXPECT_EQ(writes->size(), 3u) << "and written, with its future fallback";
    ++drained;
    // REINT: the DOWNOUT places, then the target itself, write-only.
    ASSERT_EQ(reint->size(), 3u) << "object " << i;
    EXPECT_EQ((*reint)[0], (*out)[0]);
    EXPECT_EQ((*reint)[1], (*out)[1]);
    EXPECT_EQ((*reint)[2], (ReplicaPlace{2, true, false}));
    ASSERT_EQ(layout->extra.size(), 1u);
    EXPECT_EQ(GroupCopies(*layout, 0), *reint);
    map.targets[2].state = TargetState::kReint;
    reads = ReadTargets(map, oid, "d");
    ASSERT_TRUE(reads.ok());
    EXPECT_EQ(std::count(reads->begin(), reads->end(), 2u), 0) << "a REINT target is not read";
    ++reintegrated;
  }
  EXPECT_GT(drained, 40);
  EXPECT_EQ(drained, reintegrated);
}

// REINT back from DOWN (no rebuild filled a fallback): the target keeps its
// slot, written and not read; the group is read from its other replicas and
// the DOWN fallback is dropped. A group whose other replicas are all out or
// back from DOWN too reads them: nothing holds more.
TEST(PlacementTest, BackFromDownIsWrittenInItsOwnSlotAndNotRead) {
  PoolMap map = MakeMap(4, 2);
  int members = 0, orphans = 0;
  for (uint64_t i = 0; i < 400; ++i) {
    const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kRP2G1, 0, i);
    map.targets[2] = {1, 0, TargetState::kUp};
    auto up = ReplicasForDkey(map, oid, "d");
    ASSERT_TRUE(up.ok());
    const auto slot = std::find_if(up->begin(), up->end(), [](const ReplicaPlace& p) { return p.target == 2; });
    if (slot == up->end()) continue;
    const uint32_t other = (*up)[slot == up->begin() ? 1 : 0].target;
    map.targets[2].state = TargetState::kReint;
    map.targets[2].back_from_down = true;
    auto back = ReplicasForDkey(map, oid, "d");
    ASSERT_TRUE(back.ok());
    ASSERT_EQ(back->size(), 2u) << "object " << i << ": no fallback beside the target back from DOWN";
    for (size_t j = 0; j < 2; ++j) {
      EXPECT_EQ((*back)[j].target, (*up)[j].target) << "object " << i;
      EXPECT_EQ((*back)[j].fallback, (*up)[j].target == 2) << "object " << i << ": only its slot is write-only";
    }
    auto reads = ReadTargets(map, oid, "d");
    auto writes = WriteTargets(map, oid, "d");
    ASSERT_TRUE(reads.ok() && writes.ok());
    EXPECT_EQ(*reads, std::vector<uint32_t>{other}) << "object " << i << ": read from the other replica only";
    EXPECT_EQ(*writes, (std::vector<uint32_t>{other, 2})) << "object " << i << ": the other leads, both written";
    ++members;
    // The other replica back from DOWN as well (a cold start after both
    // failed): both are read, as nothing else holds the group's data.
    const TargetInfo saved = map.targets[other];
    map.targets[other].state = TargetState::kReint;
    map.targets[other].back_from_down = true;
    reads = ReadTargets(map, oid, "d");
    ASSERT_TRUE(reads.ok()) << reads.status().ToString();
    EXPECT_EQ(reads->size(), 2u) << "object " << i;
    // The other DOWN: the target back from DOWN is the only copy, and read.
    map.targets[other].state = TargetState::kDown;
    map.targets[other].back_from_down = false;
    reads = ReadTargets(map, oid, "d");
    ASSERT_TRUE(reads.ok()) << reads.status().ToString();
    EXPECT_EQ(std::count(reads->begin(), reads->end(), 2u), 1) << "object " << i;
    map.targets[other] = saved;
    ++orphans;
  }
  EXPECT_GT(members, 40);
  EXPECT_EQ(members, orphans);
}

TEST(PlacementTest, FallbacksSpreadOverTheSurvivors) {
  PoolMap map = MakeMap(4, 3);
  for (auto& t : map.targets) {
    if (t.engine_rank == 0) t.state = TargetState::kDown;
  }
  std::map<uint32_t, int> fallback_count;
  for (uint64_t i = 0; i < 3000; ++i) {
    auto places = ReplicasForDkey(map, ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kRP2G1, 0, i), "d");
    ASSERT_TRUE(places.ok());
    for (const auto& p : *places) {
      if (p.fallback) ++fallback_count[p.target];
    }
  }
  // The fallbacks of engine 0's replicas land on all 9 surviving targets, none
  // taking more than twice its share.
  ASSERT_EQ(fallback_count.size(), 9u);
  int total = 0;
  for (auto& [t, c] : fallback_count) total += c;
  for (auto& [t, c] : fallback_count) EXPECT_LT(c, 2 * total / 9) << "target " << t;
}

TEST(PlacementTest, ReplicatedGroupsSpreadOverAllTargets) {
  PoolMap map = MakeMap(3, 4);
  std::map<uint32_t, int> count;
  ObjectId file = ObjectId::Make(ObjectType::kArray, ObjectClass::kRP2GX, 0, 77);
  for (uint64_t chunk = 0; chunk < 1200; ++chunk) {
    auto places = ReplicasForDkey(map, file, ChunkDkey(chunk));
    ASSERT_TRUE(places.ok());
    for (const auto& p : *places) ++count[p.target];
  }
  // Six groups of two over 12 targets: the groups start two apart in one
  // order of the targets, so they cover nearly all of them (a group skips a
  // target on its first member's engine), and none takes much over its share.
  EXPECT_GE(count.size(), 10u) << "the chunks of one RP_2GX file use (nearly) every target";
  std::set<uint32_t> engines;
  for (auto& [t, c] : count) {
    engines.insert(map.targets[t].engine_rank);
    EXPECT_LT(c, 2 * 200 + 100) << "target " << t;
  }
  EXPECT_EQ(engines.size(), 3u);
}

TEST(PlacementTest, AGroupWithEveryCopyDownIsUnavailable) {
  PoolMap map = MakeMap(2, 1);
  map.targets[0].state = map.targets[1].state = TargetState::kDown;
  ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kRP2G1, 0, 9);
  auto places = ReplicasForDkey(map, oid, "d");
  ASSERT_TRUE(places.ok());
  for (const auto& p : *places) EXPECT_TRUE(p.down);
  EXPECT_TRUE(WriteTargets(map, oid, "d").status().IsNotFound());
  EXPECT_TRUE(ReadTargets(map, oid, "d").status().IsNotFound());
  // One survivor in a two-target pool: it is read and written; no fallback exists.
  map.targets[1].state = TargetState::kUp;
  auto writes = WriteTargets(map, oid, "d");
  ASSERT_TRUE(writes.ok());
  EXPECT_EQ(*writes, std::vector<uint32_t>{1});
}

TEST(PlacementTest, ReplicasOnOneEngineUseDistinctTargets) {
  PoolMap map = MakeMap(1, 2);
  auto layout = ComputeLayout(map, ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kRP2G1, 0, 5));
  ASSERT_TRUE(layout.ok());
  ASSERT_EQ(layout->places.size(), 2u);
  EXPECT_NE(layout->places[0].target, layout->places[1].target);
  auto too_many = ComputeLayout(map, ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kRP3G1, 0, 5));
  EXPECT_TRUE(too_many.status().IsInvalidArgument());
}

TEST(PlacementTest, DownTargetIsReportedNotSilentlyRemapped) {
  PoolMap map = MakeMap(1, 4);
  ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 0, 1234);
  auto t = TargetForDkey(map, oid, "d");
  ASSERT_TRUE(t.ok());
  map.targets[*t].state = TargetState::kDown;
  map.version++;
  auto down = TargetForDkey(map, oid, "d");
  ASSERT_FALSE(down.ok());
  EXPECT_TRUE(down.status().IsNotFound());
  EXPECT_NE(down.status().message().find("DOWN"), std::string::npos);
}

// ReadTarget (the client's per-I/O routing, which skips the lists for a
// non-replicated class) answers what ReadTargets does, target and error alike.
TEST(PlacementTest, ReadTargetIsReadTargetsIndexed) {
  PoolMap map = MakeMap(3, 4);
  map.targets[2].state = TargetState::kDown;
  map.targets[7].state = TargetState::kDown;
  int down_seen = 0;
  for (ObjectClass oc : {ObjectClass::kS1, ObjectClass::kSX, ObjectClass::kRP2G1, ObjectClass::kRP3GX}) {
    for (uint64_t lo = 0; lo < 64; ++lo) {
      const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, oc, 0, lo);
      for (uint64_t chunk = 0; chunk < 4; ++chunk) {
        const std::string dkey = ChunkDkey(chunk);
        auto all = ReadTargets(map, oid, dkey);
        for (uint32_t replica = 0; replica < 4; ++replica) {
          auto one = ReadTarget(map, oid, dkey, replica);
          if (!all.ok()) {
            ASSERT_FALSE(one.ok());
            EXPECT_EQ(one.status().code(), all.status().code());
            EXPECT_EQ(one.status().message(), all.status().message());
            ++down_seen;
          } else if (replica < all->size()) {
            ASSERT_TRUE(one.ok()) << one.status().ToString();
            EXPECT_EQ(*one, (*all)[replica]);
          } else {
            ASSERT_FALSE(one.ok());
            EXPECT_TRUE(one.status().IsNotFound());
            EXPECT_NE(one.status().message().find("no replica left"), std::string::npos);
          }
        }
      }
    }
  }
  EXPECT_GT(down_seen, 0);  // the DOWN targets were met by some non-replicated shard
  EXPECT_FALSE(ReadTarget(PoolMap{}, ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 0, 1), "d", 0).ok());
}

// Reads spread over every readable copy (docs/replication.md, "Read rule"):
// successive `first` values start at successive copies, and moving on from
// any of them (`replica`) visits each copy once before running out.
TEST(PlacementTest, ReadsSpreadOverEveryReadableCopy) {
  PoolMap map = MakeMap(3, 4);
  map.targets[5].state = TargetState::kDown;
  for (ObjectClass oc : {ObjectClass::kRP2G1, ObjectClass::kRP3G1, ObjectClass::kRP3GX}) {
    for (uint64_t lo = 0; lo < 32; ++lo) {
      const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, oc, 0, lo);
      auto all = ReadTargets(map, oid, "d");
      ASSERT_TRUE(all.ok()) << all.status().ToString();
      std::set<uint32_t> firsts;
      for (uint32_t first = 0; first < 2 * all->size(); ++first) {
        auto one = ReadTarget(map, oid, "d", 0, first);
        ASSERT_TRUE(one.ok()) << one.status().ToString();
        firsts.insert(*one);
        std::set<uint32_t> visited;
        for (uint32_t replica = 0; replica < all->size(); ++replica) {
          auto next = ReadTarget(map, oid, "d", replica, first);
          ASSERT_TRUE(next.ok()) << next.status().ToString();
          visited.insert(*next);
        }
        EXPECT_EQ(visited, std::set<uint32_t>(all->begin(), all->end()));
        EXPECT_TRUE(ReadTarget(map, oid, "d", static_cast<uint32_t>(all->size()), first).status().IsNotFound());
      }
      EXPECT_EQ(firsts, std::set<uint32_t>(all->begin(), all->end())) << "reads do not use every copy";
    }
  }
}

TEST(PlacementTest, BadInputsAreRejected) {
  PoolMap empty;
  EXPECT_TRUE(ComputeLayout(empty, ObjectId{}).status().IsInvalidArgument());
  EXPECT_TRUE(empty.Validate().IsInvalidArgument());
  PoolMap map = MakeMap(1, 1);
  ObjectId bad{uint64_t{0x7f} << 48, 1};  // class 0x7f does not exist
  EXPECT_TRUE(ComputeLayout(map, bad).status().IsInvalidArgument());
  EXPECT_TRUE(ReplicasForDkey(map, bad, "d").status().IsInvalidArgument());
}

}  // namespace
}  // namespace ros2
