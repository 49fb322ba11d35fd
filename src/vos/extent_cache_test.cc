#include "vos/extent_cache.h"

#include <gtest/gtest.h>

namespace ros2::vos {
namespace {

CachedExtent External(uint64_t offset, size_t checksums) {
  CachedExtent e;
  e.rec.length = 4096 * checksums;
  e.rec.external = true;
  e.rec.offset = offset;
  e.rec.csum.type = ChecksumType::kCrc32c;
  e.rec.csum.chunk_size = 4096;
  e.rec.csum.values.assign(checksums, 7);
  return e;
}

ExtentCache::Extents OneExtent(uint64_t offset, size_t checksums) {
  ExtentCache::Extents x;
  x.emplace(ExtentSlot{12, 0, 5}, External(offset, checksums));
  return x;
}

TEST(ExtentCacheTest, KeepsRocksDbKeyOrder) {
  ExtentCache::Extents x;
  x.emplace(ExtentSlot{20, 0, 3}, External(1, 1));
  x.emplace(ExtentSlot{12, 8, 4}, External(2, 1));
  x.emplace(ExtentSlot{12, 8, 9}, External(3, 1));
  x.emplace(ExtentSlot{12, 0, 1}, External(4, 1));
  std::vector<uint64_t> offsets;
  for (const auto& [slot, e] : x) offsets.push_back(e.rec.offset);
  // Class first, then start index, then newest epoch first.
  EXPECT_EQ(offsets, (std::vector<uint64_t>{4, 3, 2, 1}));
}

TEST(ExtentCacheTest, AddFollowsCachedAkeysOnlyAndReplacesTheSameSlot) {
  ExtentCache cache(1 << 20);
  cache.Add("a", ExtentSlot{12, 0, 5}, External(1, 1));  // not cached: ignored
  EXPECT_EQ(cache.Find("a"), nullptr);
  ASSERT_NE(cache.Insert("a", OneExtent(1, 1)), nullptr);
  cache.Add("a", ExtentSlot{12, 0, 5}, External(2, 1));  // same slot: replaces
  cache.Add("a", ExtentSlot{12, 4096, 6}, External(3, 1));
  const ExtentCache::Extents* x = cache.Find("a");
  ASSERT_NE(x, nullptr);
  ASSERT_EQ(x->size(), 2u);
  EXPECT_EQ(x->begin()->second.rec.offset, 2u);
  cache.Erase("a");
  EXPECT_EQ(cache.Find("a"), nullptr);
  EXPECT_EQ(cache.bytes(), 0u);
}

TEST(ExtentCacheTest, EvictsLeastRecentlyUsedAkeysToStayInBudget) {
  ExtentCache cache(64 << 10);
  // Each akey costs a little over 8 KiB (1,000 checksums of 8 bytes).
  for (int i = 0; i < 7; ++i) ASSERT_NE(cache.Insert("k" + std::to_string(i), OneExtent(i, 1000)), nullptr);
  ASSERT_NE(cache.Find("k0"), nullptr);  // k0 is now the most recently used
  for (int i = 7; i < 12; ++i) ASSERT_NE(cache.Insert("k" + std::to_string(i), OneExtent(i, 1000)), nullptr);
  EXPECT_LE(cache.bytes(), size_t{64} << 10);
  EXPECT_NE(cache.Find("k0"), nullptr);
  EXPECT_EQ(cache.Find("k1"), nullptr);
  EXPECT_NE(cache.Find("k11"), nullptr);
}

TEST(ExtentCacheTest, AnAkeyTooLargeIsRememberedAsUncacheableUntilErased) {
  ExtentCache cache(64 << 10);
  EXPECT_EQ(cache.Insert("big", OneExtent(0, 4000)), nullptr);  // over a quarter of the budget
  EXPECT_TRUE(cache.IsUncacheable("big"));
  EXPECT_EQ(cache.bytes(), 0u);
  cache.Erase("big");
  EXPECT_FALSE(cache.IsUncacheable("big"));
}

}  // namespace
}  // namespace ros2::vos
