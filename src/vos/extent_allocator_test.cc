#include "vos/extent_allocator.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace ros2::vos {
namespace {

TEST(ExtentAllocatorTest, AllocatesSequentiallyAndRoundsToBlocks) {
  ExtentAllocator a(1 << 20);
  auto x = a.Allocate(100);
  auto y = a.Allocate(8192);
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(*x, 0u);
  EXPECT_EQ(*y, 4096u);
  EXPECT_EQ(a.used(), 4096u + 8192u);
}

TEST(ExtentAllocatorTest, FullStoreIsNoSpaceAndFreeCoalesces) {
  ExtentAllocator a(64 << 10);
  std::vector<uint64_t> offs;
  for (int i = 0; i < 16; ++i) {
    auto o = a.Allocate(4096);
    ASSERT_TRUE(o.ok());
    offs.push_back(*o);
  }
  auto full = a.Allocate(4096);
  ASSERT_FALSE(full.ok());
  EXPECT_TRUE(full.status().IsNoSpace());
  EXPECT_EQ(a.used(), 64u << 10);
  for (uint64_t o : offs) a.Free(o, 4096);
  EXPECT_EQ(a.used(), 0u);
  EXPECT_EQ(a.free_runs(), 1u);
  EXPECT_EQ(a.largest_free(), 64u << 10);
}

TEST(ExtentAllocatorTest, FragmentedSpaceReportsNoSpaceForLargeRequests) {
  ExtentAllocator a(64 << 10);
  std::vector<uint64_t> offs;
  for (int i = 0; i < 16; ++i) offs.push_back(*a.Allocate(4096));
  for (int i = 0; i < 16; i += 2) a.Free(offs[i], 4096);
  auto big = a.Allocate(8192);
  EXPECT_TRUE(big.status().IsNoSpace());
  EXPECT_TRUE(a.Allocate(4096).ok());
}

TEST(ExtentAllocatorTest, MarkAllocatedRebuildsStateAndRejectsOverlaps) {
  ExtentAllocator a(1 << 20);
  EXPECT_TRUE(a.MarkAllocated(8192, 4096).ok());
  EXPECT_TRUE(a.MarkAllocated(0, 4096).ok());
  EXPECT_TRUE(a.MarkAllocated(8192, 4096).IsCorruption());
  EXPECT_TRUE(a.MarkAllocated(4096, 8192).IsCorruption());
  EXPECT_TRUE(a.MarkAllocated(1 << 20, 4096).IsCorruption());
  EXPECT_EQ(a.used(), 8192u);
  // New allocations avoid recovered ones.
  for (int i = 0; i < 10; ++i) {
    uint64_t o = *a.Allocate(4096);
    EXPECT_NE(o, 0u);
    EXPECT_NE(o, 8192u);
  }
}

TEST(ExtentAllocatorTest, RandomAllocFreeKeepsAccountingExact) {
  ExtentAllocator a(4 << 20);
  std::mt19937 rng(7);
  std::vector<std::pair<uint64_t, uint64_t>> live;
  uint64_t expect_used = 0;
  for (int i = 0; i < 5000; ++i) {
    if (live.empty() || rng() % 3 != 0) {
      uint64_t len = (1 + rng() % 16) * 4096;
      auto o = a.Allocate(len);
      if (!o.ok()) {
        ASSERT_TRUE(o.status().IsNoSpace());
        continue;
      }
      for (auto& [lo, ll] : live) ASSERT_TRUE(*o + len <= lo || lo + ll <= *o) << "overlap";
      live.emplace_back(*o, len);
      expect_used += len;
    } else {
      size_t k = rng() % live.size();
      a.Free(live[k].first, live[k].second);
      expect_used -= live[k].second;
      live.erase(live.begin() + static_cast<long>(k));
    }
    ASSERT_EQ(a.used(), expect_used);
  }
}

TEST(ExtentAllocatorTest, HolesAreFilledBeforeTheTailGrows) {
  // A growing data file only grows when no hole fits: after frees below the
  // high-water mark, the next allocations go there even though the cursor
  // sits at the tail.
  ExtentAllocator a(uint64_t{1} << 40);
  auto x = a.Allocate(1 << 20);
  auto y = a.Allocate(1 << 20);
  auto z = a.Allocate(1 << 20);
  ASSERT_TRUE(x.ok() && y.ok() && z.ok());
  a.Free(*y, 1 << 20);
  auto small = a.Allocate(256 << 10);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(*small, *y);
  auto rest = a.Allocate(768 << 10);  // next fit in the hole
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(*rest, *y + (256 << 10));
  auto next = a.Allocate(4096);  // no hole left: the tail
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, *z + (1 << 20));
}

}  // namespace
}  // namespace ros2::vos
