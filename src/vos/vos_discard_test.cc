// A discard takes back exactly what one operation wrote under a dkey, durably,
// and gives its space back; aggregation bounded below an operation's epoch
// keeps what its discard brings back.
#include <gtest/gtest.h>

#include "testing/vos_fixture.h"
#include "vos/vos_test_util.h"

namespace ros2::vos {
namespace {

using namespace testing;  // the VOS test helpers (vos_test_util.h)

class VosDiscardTest : public ros2::testing::VosFixture<::testing::TestWithParam<StorageClass>> {
 protected:
  bool Durable() const { return GetParam() == StorageClass::kNvme; }
};

TEST_P(VosDiscardTest, TheOlderVersionsComeBackAndStayBackAcrossAReopen) {
  const ObjectId oid = TestOid(1);
  const auto old_single = Pattern(100, 1);
  const auto old_extent = Pattern(64 << 10, 2);  // external (above the inline threshold)
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "s", 10, old_single).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "x", 10, 0, 1, old_extent).ok());
  // The operation to take back at epoch 20: a new single value, an extent over
  // the old one, and a new akey; another dkey written at the same epoch stays.
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "s", 20, Pattern(100, 3)).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "x", 20, 4096, 1, Pattern(64 << 10, 4)).ok());
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "new", 20, Pattern(10, 5)).ok());
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "other", "s", 20, Pattern(10, 6)).ok());

  ASSERT_TRUE(vos_->Discard({oid, "d", "", 20}).ok());
  auto check = [&] {
    EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "s", kEpochMax), old_single);
    EXPECT_EQ(*GetArray(vos_.get(), oid, "d", "x", kEpochMax, 0, old_extent.size(), 1), old_extent);
    EXPECT_TRUE(GetSingle(vos_.get(), oid, "d", "new", kEpochMax)->empty());
    ListAnchor anchor;
    auto akeys = vos_->ListAkeys(oid, "d", kEpochMax, &anchor, 10);
    ASSERT_TRUE(akeys.ok());
    EXPECT_EQ(*akeys, (std::vector<std::string>{"s", "x"}));
    EXPECT_EQ(*GetSingle(vos_.get(), oid, "other", "s", kEpochMax), Pattern(10, 6));
  };
  check();
  if (Durable()) {
    Reopen();
    check();
  }
  // The akey left empty can hold another type (its header went with it).
  EXPECT_TRUE(PutArray(vos_.get(), oid, "d", "new", 30, 0, 1, Pattern(10, 7)).ok());
}

TEST_P(VosDiscardTest, ADiscardedPunchNoLongerHides) {
  const ObjectId oid = TestOid(2);
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a", 10, Pattern(50, 1)).ok());
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "e", "a", 10, Pattern(50, 2)).ok());
  ASSERT_TRUE(vos_->PunchDkey(oid, "d", 20).ok());
  PunchOp akey_punch{PunchScope::kAkey, oid, "e", "a", 20};
  akey_punch.decided = true;
  ASSERT_TRUE(vos_->Punch(akey_punch).ok());
  ASSERT_EQ(*vos_->DecidedEpoch(oid, "e", "a"), 20u);
  ASSERT_TRUE(GetSingle(vos_.get(), oid, "d", "a", kEpochMax)->empty());

  ASSERT_TRUE(vos_->Discard({oid, "d", "", 20}).ok());
  ASSERT_TRUE(vos_->Discard({oid, "e", "", 20}).ok());
  auto check = [&] {
    EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "a", kEpochMax), Pattern(50, 1));
    EXPECT_EQ(*GetSingle(vos_.get(), oid, "e", "a", kEpochMax), Pattern(50, 2));
    // The decided record went with the punch: a resend decides it again.
    EXPECT_EQ(*vos_->DecidedEpoch(oid, "e", "a"), 0u);
  };
  check();
  if (Durable()) {
    Reopen();
    check();
  }
}

TEST_P(VosDiscardTest, AnAkeysDiscardLeavesTheOtherAkeysAtTheSameEpoch) {
  const ObjectId oid = TestOid(8);
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a", 10, Pattern(50, 1)).ok());
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a", 20, Pattern(50, 2)).ok());
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "b", 20, Pattern(50, 3)).ok());
  ASSERT_TRUE(vos_->Discard({oid, "d", "a", 20}).ok());
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "a", kEpochMax), Pattern(50, 1));
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "b", kEpochMax), Pattern(50, 3));
}

TEST_P(VosDiscardTest, TheDiscardedSpaceIsGivenBack) {
  const ObjectId oid = TestOid(3);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "x", 10, 0, 1, Pattern(1 << 20, 1)).ok());
  const SpaceInfo before = vos_->Space();
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "x", 20, 0, 1, Pattern(1 << 20, 2)).ok());
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "s", 20, Pattern(100, 3)).ok());
  ASSERT_GT(vos_->Space().charged(), before.charged());
  ASSERT_TRUE(vos_->Discard({oid, "d", "", 20}).ok());
  EXPECT_EQ(vos_->Space().data_used, before.data_used);
  EXPECT_EQ(vos_->Space().inline_bytes, before.inline_bytes);
  if (Durable()) {
    Reopen();
    EXPECT_EQ(vos_->Space().data_used, before.data_used);
    EXPECT_EQ(vos_->Space().inline_bytes, before.inline_bytes);
  }
}

TEST_P(VosDiscardTest, ADiscardOfNothingIsOkAndChangesNothing) {
  const ObjectId oid = TestOid(4);
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a", 10, Pattern(50, 1)).ok());
  EXPECT_TRUE(vos_->Discard({oid, "d", "", 11}).ok());
  EXPECT_TRUE(vos_->Discard({oid, "never", "", 10}).ok());
  EXPECT_TRUE(vos_->Discard({TestOid(5), "d", "", 10}).ok());
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "a", kEpochMax), Pattern(50, 1));
  // Twice: the second finds nothing.
  ASSERT_TRUE(vos_->Discard({oid, "d", "", 10}).ok());
  EXPECT_TRUE(vos_->Discard({oid, "d", "", 10}).ok());
  EXPECT_TRUE(GetSingle(vos_.get(), oid, "d", "a", kEpochMax)->empty());
  EXPECT_EQ(vos_->Discard({oid, "", "", 10}).code(), Status::Code::kInvalidArgument);
}

TEST_P(VosDiscardTest, ADiscardSubmittedWithItsUpdateInFlightLandsAfterIt) {
  const ObjectId oid = TestOid(6);
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a", 10, Pattern(50, 1)).ok());
  const auto data = Pattern(64 << 10, 2);
  const UpdateOp u = SingleUpdate(oid, "d", "a", 20, data);
  std::optional<Status> stored;
  std::optional<Status> discarded;
  vos_->SubmitUpdate(u, [&](Status st) { stored = st; });
  vos_->SubmitDiscard({oid, "d", "", 20}, [&](Status st) {
    EXPECT_TRUE(stored.has_value());  // the update's callback ran first
    discarded = st;
  });
  while (!discarded) vos_->Progress(/*wait=*/true);
  ASSERT_TRUE(stored->ok());
  ASSERT_TRUE(discarded->ok());
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "a", kEpochMax), Pattern(50, 1));
}

// What the engine does for an operation it may still discard: aggregation
// stops below its epoch, so the version it hides is there to come back.
TEST_P(VosDiscardTest, AggregationBelowAnOpenEpochKeepsWhatItsDiscardBringsBack) {
  const ObjectId oid = TestOid(7);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "x", 10, 0, 1, Pattern(1 << 20, 1)).ok());
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "s", 10, Pattern(50, 1)).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "x", 20, 0, 1, Pattern(1 << 20, 2)).ok());
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "s", 20, Pattern(50, 2)).ok());
  auto stats = vos_->Aggregate(19);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->versions_removed, 0u);
  ASSERT_TRUE(vos_->Discard({oid, "d", "", 20}).ok());
  EXPECT_EQ(*GetArray(vos_.get(), oid, "d", "x", kEpochMax, 0, 1 << 20, 1), Pattern(1 << 20, 1));
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "s", kEpochMax), Pattern(50, 1));
  // Unbounded, it would have removed them (why the bound is needed).
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "x", 30, 0, 1, Pattern(1 << 20, 3)).ok());
  EXPECT_EQ(vos_->Aggregate(kEpochMax)->versions_removed, 1u);
}

INSTANTIATE_TEST_SUITE_P(Classes, VosDiscardTest, ::testing::Values(StorageClass::kNvme, StorageClass::kRam),
                         [](const auto& info) { return std::string(StorageClassName(info.param)); });

}  // namespace
}  // namespace ros2::vos
