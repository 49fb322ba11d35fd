#include "vos/akey_cache.h"

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

AkeyCache::Extents OneExtent(uint64_t offset, size_t checksums) {
  AkeyCache::Extents x;
  x.emplace(ExtentSlot{12, 0, 5}, External(offset, checksums));
  return x;
}

TEST(AkeyCacheTest, KeepsRocksDbKeyOrder) {
  AkeyCache::Extents x;
  x.emplace(ExtentSlot{20, 0, 3}, External(1, 1));
  x.emplace(ExtentSlot{12, 8, 4}, External(2, 1));
  x.emplace(ExtentSlot{12, 8, 9}, External(3, 1));
  x.emplace(ExtentSlot{12, 0, 1}, External(4, 1));
  std::vector<uint64_t> offsets;
  for (const auto& [slot, e] : x) offsets.push_back(e.rec.offset);
  // Class first, then start index, then newest epoch first.
  EXPECT_EQ(offsets, (std::vector<uint64_t>{4, 3, 2, 1}));
}

const AkeyCache::Extents* ExtentsOf(AkeyCache& cache, std::string_view scope) {
  AkeyCache::Akey* a = cache.Find(scope);
  return a ? a->extents() : nullptr;
}

const AkeyCache::Extents* Load(AkeyCache& cache, std::string_view scope, AkeyCache::Extents x) {
  return cache.SetExtents(cache.FindOrAdd(scope), std::move(x));
}

TEST(AkeyCacheTest, AddFollowsLoadedAkeysOnlyAndReplacesTheSameSlot) {
  AkeyCache cache(1 << 20);
  AkeyCache::Akey& a = cache.FindOrAdd("a");
  cache.AddExtent(a, ExtentSlot{12, 0, 5}, External(1, 1));  // extents not loaded: ignored
  EXPECT_EQ(ExtentsOf(cache, "a"), nullptr);
  ASSERT_NE(cache.SetExtents(a, OneExtent(1, 1)), nullptr);
  cache.AddExtent(a, ExtentSlot{12, 0, 5}, External(2, 1));  // same slot: replaces
  cache.AddExtent(a, ExtentSlot{12, 4096, 6}, External(3, 1));
  const AkeyCache::Extents* x = ExtentsOf(cache, "a");
  ASSERT_NE(x, nullptr);
  ASSERT_EQ(x->size(), 2u);
  EXPECT_EQ(x->begin()->second.rec.offset, 2u);
  cache.Erase("a");
  EXPECT_EQ(cache.Find("a"), nullptr);
  EXPECT_EQ(cache.bytes(), 0u);
}

TEST(AkeyCacheTest, HeaderAndExtentsShareOneEntryAndAreDroppedSeparately) {
  AkeyCache cache(1 << 20);
  AkeyHeader h{ValueType::kArray, 4096, 1, uint64_t{1} << 12};
  cache.SetHeader(cache.FindOrAdd("a"), h);
  ASSERT_NE(Load(cache, "a", OneExtent(1, 1)), nullptr);
  EXPECT_EQ(cache.akeys(), 1u);
  AkeyCache::Akey* a = cache.Find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(a->header(), nullptr);
  EXPECT_EQ(*a->header(), h);
  ASSERT_NE(a->extents(), nullptr);

  // Aggregation that deletes versions drops the extents and keeps the header.
  size_t with_extents = cache.bytes();
  cache.DropExtents("a");
  a = cache.Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->extents(), nullptr);
  ASSERT_NE(a->header(), nullptr);
  EXPECT_LT(cache.bytes(), with_extents);

  // The header deleted too: nothing is left of the akey.
  cache.DropHeader("a");
  EXPECT_EQ(cache.Find("a"), nullptr);
  EXPECT_EQ(cache.bytes(), 0u);

  // Extents without a header (loaded while the header came from an update in
  // flight) survive a header drop.
  ASSERT_NE(Load(cache, "b", OneExtent(1, 1)), nullptr);
  cache.DropHeader("b");
  ASSERT_NE(ExtentsOf(cache, "b"), nullptr);
  EXPECT_EQ(cache.Find("b")->header(), nullptr);
}

TEST(AkeyCacheTest, EvictsAkeysNotUsedSinceTheLastSweepToStayInBudget) {
  AkeyCache cache(64 << 10);
  // Each akey costs a little over 8 KiB (1,000 checksums of 8 bytes).
  for (int i = 0; i < 7; ++i) ASSERT_NE(Load(cache, "k" + std::to_string(i), OneExtent(i, 1000)), nullptr);
  ASSERT_NE(cache.Find("k0"), nullptr);  // k0 is referenced: the sweep passes it over once
  for (int i = 7; i < 12; ++i) ASSERT_NE(Load(cache, "k" + std::to_string(i), OneExtent(i, 1000)), nullptr);
  EXPECT_LE(cache.bytes(), size_t{64} << 10);
  EXPECT_NE(ExtentsOf(cache, "k0"), nullptr);
  EXPECT_EQ(cache.Find("k1"), nullptr);
  EXPECT_NE(ExtentsOf(cache, "k11"), nullptr);
}

TEST(AkeyCacheTest, NeverEvictsTheAkeyBeingFilled) {
  AkeyCache cache(64 << 10);
  for (int i = 0; i < 7; ++i) ASSERT_NE(Load(cache, "k" + std::to_string(i), OneExtent(i, 1000)), nullptr);
  for (int i = 0; i < 7; ++i) ASSERT_NE(cache.Find("k" + std::to_string(i)), nullptr);  // all referenced
  AkeyCache::Akey& a = cache.FindOrAdd("new");
  const AkeyCache::Extents* x = cache.SetExtents(a, OneExtent(99, 1000));
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->begin()->second.rec.offset, 99u);
  EXPECT_EQ(ExtentsOf(cache, "new"), x);
  EXPECT_LE(cache.bytes(), size_t{64} << 10);
}

TEST(AkeyCacheTest, AnAkeyTooLargeIsRememberedAsUncacheableUntilItsExtentsAreDropped) {
  AkeyCache cache(64 << 10);
  AkeyCache::Akey& a = cache.FindOrAdd("big");
  cache.SetHeader(a, AkeyHeader{ValueType::kArray, 4096, 1, 1});
  EXPECT_EQ(cache.SetExtents(a, OneExtent(0, 4000)), nullptr);  // over a quarter of the budget
  ASSERT_NE(cache.Find("big"), nullptr);
  EXPECT_TRUE(cache.Find("big")->uncacheable());
  cache.DropExtents("big");
  ASSERT_NE(cache.Find("big"), nullptr);  // the header stays
  EXPECT_FALSE(cache.Find("big")->uncacheable());
  cache.Erase("big");
  EXPECT_EQ(cache.bytes(), 0u);
}

}  // namespace
}  // namespace ros2::vos
