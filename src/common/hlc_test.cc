#include "common/hlc.h"

#include <algorithm>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ros2 {
namespace {

TEST(HlcTest, StrictlyIncreasingWhenWallClockStands) {
  HybridClock clock([] { return uint64_t{1000}; });
  Epoch a = clock.Now(), b = clock.Now();
  EXPECT_LT(a, b);
  EXPECT_EQ(EpochMillis(a), 1000u);
}

TEST(HlcTest, FollowsWallClock) {
  uint64_t now = 1000;
  HybridClock clock([&] { return now; });
  Epoch a = clock.Now();
  now = 2000;
  Epoch b = clock.Now();
  EXPECT_EQ(b, MakeEpoch(2000, 0));
  EXPECT_LT(a, b);
}

TEST(HlcTest, RemoteEpochAheadIsRespected) {
  HybridClock clock([] { return uint64_t{1000}; });
  Epoch remote = MakeEpoch(5000, 3);
  clock.Update(remote);
  EXPECT_GT(clock.Now(), remote);
}

TEST(HlcTest, ConcurrentCallersGetDistinctEpochs) {
  HybridClock clock([] { return uint64_t{42}; });
  std::vector<std::vector<Epoch>> seen(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) seen[t].push_back(clock.Now());
    });
  }
  for (auto& th : threads) th.join();
  std::vector<Epoch> all;
  for (auto& v : seen) {
    for (size_t i = 1; i < v.size(); ++i) ASSERT_LT(v[i - 1], v[i]);
    all.insert(all.end(), v.begin(), v.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
}

TEST(HlcTest, SaturatesInsteadOfWrapping) {
  HybridClock clock([] { return uint64_t{1000}; });
  clock.Update(kEpochMax - 3);
  Epoch prev = clock.Now();
  for (int i = 0; i < 10; ++i) {
    Epoch e = clock.Now();
    ASSERT_GE(e, prev) << "the clock went backwards (wrapped) after " << i << " epochs";
    ASSERT_LE(e, kMaxClockEpoch);
    prev = e;
  }
  EXPECT_EQ(prev, kMaxClockEpoch);
  clock.Update(kEpochMax);  // never above kMaxClockEpoch, never back to 0
  EXPECT_EQ(clock.Now(), kMaxClockEpoch);
  EXPECT_EQ(clock.Last(), kMaxClockEpoch);
}

TEST(HlcTest, WithinDriftBoundsRemoteEpochs) {
  HybridClock clock([] { return uint64_t{1'000'000}; });
  EXPECT_TRUE(clock.WithinDrift(MakeEpoch(1'000'000, 5), 0));
  EXPECT_TRUE(clock.WithinDrift(MakeEpoch(1'010'000, 0), 10'000));
  EXPECT_FALSE(clock.WithinDrift(MakeEpoch(1'010'001, 0), 10'000));
  EXPECT_FALSE(clock.WithinDrift(kEpochMax - 1024, 10'000));
  EXPECT_TRUE(clock.WithinDrift(kEpochMax - 1024, ~uint64_t{0}));  // no overflow of the limit
  EXPECT_TRUE(clock.WithinDrift(MakeEpoch(1, 0), 0));              // the past is always within
}

}  // namespace
}  // namespace ros2
