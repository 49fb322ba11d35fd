// Space accounting: stores sharing a SpaceBudget (the engine's pool space),
// charged for extent blocks and inline bytes, NoSpace exactly at the limit with
// nothing half-written, space returned by aggregation and by closing or
// destroying a store, and the same usage found again after a restart.
#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <string>

#include "vos/fault_injection_env.h"
#include "vos/space_budget.h"
#include "vos/vos_test_util.h"

namespace ros2::vos {
namespace {

using namespace testing;  // the VOS test helpers (vos_test_util.h)

constexpr uint64_t kMiB = uint64_t{1} << 20;

class VosSpaceTest : public ::testing::TestWithParam<StorageClass> {
 protected:
  std::unique_ptr<Vos> OpenStore(const testing::TempDir& dir) {
    VosOptions o = testing::SmallOptions(dir.path(), GetParam());
    o.data_size = uint64_t{1} << 30;  // the budget, not the address space, is the limit
    o.budget = budget_;
    o.env = &env_;
    auto v = Vos::Open(o);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? std::move(*v) : nullptr;
  }
  bool durable() const { return GetParam() == StorageClass::kNvme; }

  FaultInjectionEnv env_;
  std::shared_ptr<SpaceBudget> budget_ = std::make_shared<SpaceBudget>(4 * kMiB);
  testing::TempDir dir_a_, dir_b_;
};

TEST_P(VosSpaceTest, SharedBudgetIsExactAndTheUpdateThatDoesNotFitChangesNothing) {
  auto a = OpenStore(dir_a_);
  auto b = OpenStore(dir_b_);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(budget_->used(), 0u);
  ASSERT_TRUE(PutArray(a.get(), TestOid(1), "d", "x", 10, 0, 1, Pattern(2 * kMiB, 1)).ok());
  ASSERT_TRUE(PutSingle(b.get(), TestOid(2), "d", "small", 11, Pattern(1000, 2)).ok());  // inline: 1000 bytes
  EXPECT_EQ(budget_->used(), 2 * kMiB + 1000);
  EXPECT_EQ(b->Space().inline_bytes, 1000u);
  EXPECT_EQ(b->Space().charged(), 1000u);
  // 2 MiB more do not fit (1000 bytes short): refused whole, nothing visible.
  Status st = PutArray(b.get(), TestOid(2), "d", "big", 12, 0, 1, Pattern(2 * kMiB, 3));
  EXPECT_TRUE(st.IsNoSpace()) << st.ToString();
  EXPECT_NE(st.message().find("out of space"), std::string::npos) << st.ToString();
  EXPECT_EQ(budget_->used(), 2 * kMiB + 1000);
  EXPECT_EQ(b->Space().data_used, 0u);
  EXPECT_EQ(*GetArray(b.get(), TestOid(2), "d", "big", kEpochMax, 0, 16, 1), std::vector<std::byte>(16));
  // Exactly what is left fits: the last block, then one inline byte is refused.
  const uint64_t left = budget_->free();
  ASSERT_EQ(left, 2 * kMiB - 1000);
  ASSERT_TRUE(PutArray(b.get(), TestOid(2), "d", "big", 13, 0, 1, Pattern(2 * kMiB - 4096, 4)).ok());
  ASSERT_TRUE(PutSingle(b.get(), TestOid(2), "d", "tail", 14, Pattern(4096 - 1000, 5)).ok());
  EXPECT_EQ(budget_->used(), budget_->limit());
  EXPECT_TRUE(PutSingle(b.get(), TestOid(2), "d", "one", 15, Pattern(1, 6)).IsNoSpace());
  EXPECT_TRUE(PutSingle(a.get(), TestOid(1), "d", "one", 15, Pattern(1, 6)).IsNoSpace());
  EXPECT_EQ(budget_->used(), budget_->limit());
  // Aggregation of a punched akey gives its space back to every sharer.
  ASSERT_TRUE(a->PunchAkey(TestOid(1), "d", "x", 16).ok());
  auto agg = a->Aggregate(kEpochMax);
  ASSERT_TRUE(agg.ok());
  EXPECT_EQ(agg->bytes_freed, 2 * kMiB);
  EXPECT_EQ(budget_->used(), 2 * kMiB);
  ASSERT_TRUE(PutSingle(b.get(), TestOid(2), "d", "one", 17, Pattern(1, 6)).ok());
  // Inline versions aggregated away are returned too.
  ASSERT_TRUE(b->PunchAkey(TestOid(2), "d", "small", 18).ok());
  agg = b->Aggregate(kEpochMax);
  ASSERT_TRUE(agg.ok());
  EXPECT_EQ(agg->inline_bytes_freed, 1000u);
  EXPECT_EQ(budget_->used(), 2 * kMiB + 1 - 1000);
  EXPECT_EQ(b->Space().charged(), budget_->used());
}

TEST_P(VosSpaceTest, ReplayedInlineValueSwapsItsChargeAndFailedUpdatesReturnTheirs) {
  auto a = OpenStore(dir_a_);
  ASSERT_TRUE(a);
  ASSERT_TRUE(PutSingle(a.get(), TestOid(3), "d", "v", 10, Pattern(3000, 1)).ok());
  ASSERT_TRUE(PutSingle(a.get(), TestOid(3), "d", "v", 10, Pattern(100, 2)).ok());  // same key and epoch
  EXPECT_EQ(budget_->used(), 100u);
  if (durable()) {
    env_.FailNthWrite(env_.writes() + 1, EIO);
    EXPECT_TRUE(PutSingle(a.get(), TestOid(3), "d", "ext", 11, Pattern(kMiB, 3)).IsIOError());
    EXPECT_EQ(budget_->used(), 100u) << "a failed extent write kept its charge";
  }
  // A checksum mismatch fails an inline update before its commit.
  UpdateOp op;
  op.oid = TestOid(3);
  op.dkey = "d";
  op.akey = "bad";
  op.epoch = 12;
  auto data = Pattern(200, 4);
  op.data = data;
  op.csum.type = ChecksumType::kCrc32c;
  op.csum.chunk_size = 4096;
  op.csum.values = {12345};
  EXPECT_TRUE(a->Update(op).IsCorruption());
  EXPECT_EQ(budget_->used(), 100u);
}

TEST_P(VosSpaceTest, ClosingReleasesAndReopeningRechargesWhatTheStoreHolds) {
  auto a = OpenStore(dir_a_);
  ASSERT_TRUE(a);
  ASSERT_TRUE(PutArray(a.get(), TestOid(4), "d", "x", 10, 0, 1, Pattern(kMiB + 5, 1)).ok());  // 1 MiB + 1 block
  ASSERT_TRUE(PutSingle(a.get(), TestOid(4), "d", "s", 11, Pattern(700, 2)).ok());
  const uint64_t held = kMiB + 4096 + 700;
  EXPECT_EQ(budget_->used(), held);
  a.reset();
  EXPECT_EQ(budget_->used(), 0u) << "a closed store still counted";
  if (!durable()) return;  // a ram store is empty once closed
  a = OpenStore(dir_a_);
  ASSERT_TRUE(a);
  EXPECT_EQ(budget_->used(), held) << "the usage found at open differs from what was written";
  EXPECT_EQ(a->Space().inline_bytes, 700u);
  // Over the limit after a restart (the limit shrank): reads work, writes are refused.
  budget_->set_limit(kMiB);
  EXPECT_EQ(*GetSingle(a.get(), TestOid(4), "d", "s", kEpochMax), Pattern(700, 2));
  EXPECT_TRUE(PutSingle(a.get(), TestOid(4), "d", "t", 12, Pattern(10, 3)).IsNoSpace());
  a.reset();
  ASSERT_TRUE(Vos::Destroy(dir_a_.path()).ok());
  EXPECT_EQ(budget_->used(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Classes, VosSpaceTest, ::testing::Values(StorageClass::kNvme, StorageClass::kRam),
                         [](const auto& info) { return std::string(StorageClassName(info.param)); });

}  // namespace
}  // namespace ros2::vos
