#include "placement/placement.h"

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
    ASSERT_EQ(layout->shards.size(), 1u);
    ++count[layout->shards[0]];
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

TEST(PlacementTest, ReplicasLandOnDistinctEngines) {
  PoolMap map = MakeMap(3, 4);
  for (uint64_t i = 0; i < 200; ++i) {
    auto layout = ComputeLayout(map, ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kRP3G1, 0, i));
    ASSERT_TRUE(layout.ok());
    ASSERT_EQ(layout->shards.size(), 3u);
    std::set<uint32_t> engines;
    for (uint32_t t : layout->shards) engines.insert(map.targets[t].engine_rank);
    EXPECT_EQ(engines.size(), 3u);
  }
}

TEST(PlacementTest, ReplicasOnOneEngineUseDistinctTargets) {
  PoolMap map = MakeMap(1, 2);
  auto layout = ComputeLayout(map, ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kRP2G1, 0, 5));
  ASSERT_TRUE(layout.ok());
  ASSERT_EQ(layout->shards.size(), 2u);
  EXPECT_NE(layout->shards[0], layout->shards[1]);
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

TEST(PlacementTest, BadInputsAreRejected) {
  PoolMap empty;
  EXPECT_TRUE(ComputeLayout(empty, ObjectId{}).status().IsInvalidArgument());
  EXPECT_TRUE(empty.Validate().IsInvalidArgument());
  PoolMap map = MakeMap(1, 1);
  ObjectId bad{uint64_t{0x7f} << 48, 1};  // class 0x7f does not exist
  EXPECT_TRUE(ComputeLayout(map, bad).status().IsInvalidArgument());
}

}  // namespace
}  // namespace ros2
