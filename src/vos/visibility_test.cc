#include "vos/visibility.h"

#include <gtest/gtest.h>

#include <random>

namespace ros2::vos {
namespace {

TEST(VisibilityTest, NewestEpochWinsPerRecord) {
  //  epoch 1: [0, 10)   epoch 3: [2, 4)   epoch 2: [3, 8)
  auto pieces = ResolveVisible({{0, 10, 1, 0}, {2, 4, 3, 1}, {3, 8, 2, 2}}, 0, 12);
  std::vector<std::tuple<uint64_t, uint64_t, size_t>> got;
  for (auto& p : pieces) got.emplace_back(p.begin, p.end, p.id);
  std::vector<std::tuple<uint64_t, uint64_t, size_t>> want = {{0, 2, 0}, {2, 4, 1}, {4, 8, 2}, {8, 10, 0}};
  EXPECT_EQ(got, want);
}

TEST(VisibilityTest, ClipsToTheRequestedRangeAndLeavesHoles) {
  auto pieces = ResolveVisible({{0, 4, 1, 0}, {6, 9, 1, 1}}, 2, 8);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].begin, 2u);
  EXPECT_EQ(pieces[0].end, 4u);
  EXPECT_EQ(pieces[1].begin, 6u);
  EXPECT_EQ(pieces[1].end, 8u);
}

TEST(VisibilityTest, MatchesABruteForceModel) {
  std::mt19937 rng(3);
  for (int round = 0; round < 200; ++round) {
    std::vector<ExtentCandidate> c;
    for (size_t i = 0; i < 12; ++i) {
      uint64_t b = rng() % 60;
      c.push_back({b, b + 1 + rng() % 20, 1 + rng() % 1000, i});
    }
    std::vector<int> owner(64, -1);
    std::vector<Epoch> best(64, 0);
    for (const auto& x : c) {
      for (uint64_t r = x.begin; r < x.end && r < 64; ++r) {
        if (x.epoch > best[r]) best[r] = x.epoch, owner[r] = static_cast<int>(x.id);
      }
    }
    std::vector<int> got(64, -1);
    for (auto& p : ResolveVisible(c, 0, 64)) {
      for (uint64_t r = p.begin; r < p.end; ++r) got[r] = static_cast<int>(p.id);
    }
    for (int r = 0; r < 64; ++r) {
      if (owner[r] >= 0)
        ASSERT_EQ(c[owner[r]].epoch, c[got[r]].epoch) << "round " << round << " record " << r;
      else
        ASSERT_EQ(got[r], -1);
    }
  }
}

TEST(VisibilityTest, PunchIndexFindsTheNewestCoveringPunch) {
  PunchIndex idx;
  std::string obj(16, 'o');
  std::string dkey = obj + "dk";
  std::string akey = dkey + "ak";
  idx.Add(obj, 10);
  idx.Add(akey, 20);
  idx.Add(dkey, 15);
  EXPECT_EQ(idx.LatestCovering(akey, dkey.size(), 9), 0u);
  EXPECT_EQ(idx.LatestCovering(akey, dkey.size(), 12), 10u);
  EXPECT_EQ(idx.LatestCovering(akey, dkey.size(), 16), 15u);
  EXPECT_EQ(idx.LatestCovering(akey, dkey.size(), 100), 20u);
  EXPECT_EQ(idx.LatestCovering(dkey + "other", dkey.size(), 100), 15u);
  idx.Remove(akey, 20);
  EXPECT_EQ(idx.LatestCovering(akey, dkey.size(), 100), 15u);
  EXPECT_EQ(idx.All().size(), 2u);
}

}  // namespace
}  // namespace ros2::vos
