// Aggregation reclaims versions no view can see, and only those.
#include <gtest/gtest.h>

#include "testing/vos_fixture.h"
#include "vos/vos_test_util.h"

namespace ros2::vos {
namespace {

using namespace testing;  // the VOS test helpers (vos_test_util.h)

class VosAggregateTest : public ros2::testing::VosFixture<::testing::TestWithParam<StorageClass>> {};

TEST_P(VosAggregateTest, OverwrittenExtentsAreReclaimed) {
  ObjectId oid = TestOid(1);
  std::vector<std::byte> last;
  for (int i = 0; i < 10; ++i) {
    last = Pattern(1 << 20, i);
    ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 10 + i, 0, 1, last).ok());
  }
  // A partly hidden extent survives: [512 KiB, 1.5 MiB) written last keeps the tail of the epoch-19 one.
  auto tail = Pattern(1 << 20, 99);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 30, 512 << 10, 1, tail).ok());
  EXPECT_EQ(vos_->Space().data_used, 11u << 20);
  auto stats = vos_->Aggregate(kEpochMax);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->versions_removed, 9u);
  EXPECT_EQ(stats->bytes_freed, 9u << 20);
  EXPECT_EQ(vos_->Space().data_used, 2u << 20);
  auto got = *GetArray(vos_.get(), oid, "d", "a", kEpochMax, 0, 3 << 19, 1);
  EXPECT_TRUE(std::equal(last.begin(), last.begin() + (512 << 10), got.begin()));
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), got.begin() + (512 << 10)));
  if (GetParam() == StorageClass::kNvme) {
    Reopen();
    EXPECT_EQ(vos_->Space().data_used, 2u << 20);
  }
  // A second pass finds nothing more.
  EXPECT_EQ(vos_->Aggregate(kEpochMax)->versions_removed, 0u);
}

TEST_P(VosAggregateTest, SnapshotsAndUptoProtectVersions) {
  ObjectId oid = TestOid(2);
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a", i * 10, Pattern(8192, i)).ok());
  ASSERT_TRUE(vos_->CreateSnapshot(25).ok());  // sees epoch 20
  auto stats = vos_->Aggregate(35);            // view at 35 sees epoch 30; 40 and 50 are above upto
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->versions_removed, 1u);  // epoch 10 only
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "a", 25), Pattern(8192, 2));
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "a", 35), Pattern(8192, 3));
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "a", kEpochMax), Pattern(8192, 5));
  ASSERT_TRUE(vos_->DestroySnapshot(25).ok());
  stats = vos_->Aggregate(kEpochMax);
  EXPECT_EQ(stats->versions_removed, 3u);
  EXPECT_EQ(vos_->Space().data_used, 8192u);
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "a", kEpochMax), Pattern(8192, 5));
}

TEST_P(VosAggregateTest, PunchedDataAndTheTombstoneGo) {
  ObjectId oid = TestOid(3);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 10, 0, 1, Pattern(1 << 20, 1)).ok());
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "s", 10, Pattern(100, 2)).ok());
  ASSERT_TRUE(vos_->PunchObject(oid, 20).ok());
  auto stats = vos_->Aggregate(kEpochMax);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->versions_removed, 3u);  // two versions and the tombstone
  EXPECT_EQ(vos_->Space().data_used, 0u);
  ListAnchor anchor;
  EXPECT_TRUE(vos_->ListObjects(kEpochMax, &anchor, 10)->empty());
  // Old epochs are gone too (no snapshot protected them).
  EXPECT_EQ(*GetArray(vos_.get(), oid, "d", "a", 15, 0, 16, 1), std::vector<std::byte>(16));
  // The akey can be reused with another type once nothing of it is left.
  EXPECT_TRUE(PutArray(vos_.get(), oid, "d", "s", 30, 0, 1, Pattern(10, 3)).ok());
}

INSTANTIATE_TEST_SUITE_P(Classes, VosAggregateTest, ::testing::Values(StorageClass::kNvme, StorageClass::kRam),
                         [](const auto& info) { return std::string(StorageClassName(info.param)); });

}  // namespace
}  // namespace ros2::vos
