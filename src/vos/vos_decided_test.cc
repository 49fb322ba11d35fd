// Decided transaction records (docs/vos.md, "Decided transactions"): written
// with the update or punch that carries them, kept across a reopen, absent
// when the operation failed, and bounded by age and count.
#include <gtest/gtest.h>

#include "testing/status_assert.h"
#include "testing/vos_fixture.h"
#include "vos/vos_test_util.h"

namespace ros2::vos {
namespace {

using namespace testing;  // the VOS test helpers (vos_test_util.h)

class VosDecidedTest : public ros2::testing::VosFixture<> {
 protected:
  VosOptions Options() override {
    VosOptions o = SmallOptions(dir_.path(), Class());
    o.decided_keep = keep_;
    return o;
  }
  Status Decide(const ObjectId& oid, const std::string& dkey, Epoch epoch, std::span<const std::byte> data) {
    UpdateOp u;
    u.oid = oid;
    u.dkey = dkey;
    u.akey = "a";
    u.epoch = epoch;
    u.data = data;
    u.decided = true;
    return vos_->Update(u);
  }
  Epoch DecidedOf(const ObjectId& oid, const std::string& dkey, const std::string& akey = "a") {
    auto e = vos_->DecidedEpoch(oid, dkey, akey);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? *e : 0;
  }
  uint32_t keep_ = 4096;
};

TEST_F(VosDecidedTest, RecordsRideWithTheirOperationAndSurviveAReopen) {
  const ObjectId oid = TestOid(1);
  const auto data = Pattern(100, 1);
  const Epoch base = MakeEpoch(HybridClock::WallMillis(), 0);
  ROS2_ASSERT_OK(Decide(oid, "created", base + 1, data));
  ROS2_ASSERT_OK(PutSingle(vos_.get(), oid, "plain", "a", base + 2, data));  // not decided: no record
  PunchOp punch{PunchScope::kDkey, oid, "punched", {}, base + 3};
  punch.decided = true;
  ROS2_ASSERT_OK(PutSingle(vos_.get(), oid, "punched", "a", base + 2, data));
  ROS2_ASSERT_OK(vos_->Punch(punch));
  // A decided update that fails (its checksums do not match) records nothing.
  UpdateOp bad;
  bad.oid = oid;
  bad.dkey = "failed";
  bad.akey = "a";
  bad.epoch = base + 4;
  bad.data = data;
  bad.csum.type = ChecksumType::kCrc32c;
  bad.csum.chunk_size = 4096;
  bad.csum.values = {12345};
  bad.decided = true;
  EXPECT_FALSE(vos_->Update(bad).ok());
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "before the reopen" : "after the reopen");
    EXPECT_EQ(DecidedOf(oid, "created"), base + 1);
    EXPECT_EQ(DecidedOf(oid, "plain"), 0u);
    EXPECT_EQ(DecidedOf(oid, "punched", ""), base + 3);
    EXPECT_EQ(DecidedOf(oid, "punched"), 0u) << "a dkey punch records the dkey, not its akeys";
    EXPECT_EQ(DecidedOf(oid, "failed"), 0u);
    ASSERT_NO_FATAL_FAILURE(Reopen());
  }
  // A later decision of the same key replaces the record.
  ROS2_ASSERT_OK(Decide(oid, "created", base + 9, data));
  EXPECT_EQ(DecidedOf(oid, "created"), base + 9);
}

TEST_F(VosDecidedTest, SweepDropsExpiredThenOldestBeyondTheBound) {
  keep_ = 4;
  ASSERT_NO_FATAL_FAILURE(Reopen());
  const ObjectId oid = TestOid(2);
  const auto data = Pattern(10, 2);
  const uint64_t now = HybridClock::WallMillis();
  // Two records past the retention, then six recent ones: eight records, the
  // sweep's threshold (2 x keep), reached once all are committed.
  ROS2_ASSERT_OK(Decide(oid, "old0", MakeEpoch(now - 700'000, 0), data));
  ROS2_ASSERT_OK(Decide(oid, "old1", MakeEpoch(now - 650'000, 0), data));
  for (int i = 0; i < 6; ++i) ROS2_ASSERT_OK(Decide(oid, "new" + std::to_string(i), MakeEpoch(now, i), data));
  EXPECT_EQ(DecidedOf(oid, "old0"), MakeEpoch(now - 700'000, 0)) << "no sweep below 2 x keep";
  // The next commit sweeps: the two expired go, then the oldest two of the
  // six recent ones (four kept); its own record stays.
  ROS2_ASSERT_OK(Decide(oid, "last", MakeEpoch(now, 100), data));
  EXPECT_EQ(DecidedOf(oid, "old0"), 0u);
  EXPECT_EQ(DecidedOf(oid, "old1"), 0u);
  EXPECT_EQ(DecidedOf(oid, "new0"), 0u);
  EXPECT_EQ(DecidedOf(oid, "new1"), 0u);
  for (int i = 2; i < 6; ++i) EXPECT_EQ(DecidedOf(oid, "new" + std::to_string(i)), MakeEpoch(now, i));
  EXPECT_EQ(DecidedOf(oid, "last"), MakeEpoch(now, 100));
  // The values themselves are untouched.
  auto got = GetSingle(vos_.get(), oid, "old0", "a", kEpochMax);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, data);
}

}  // namespace
}  // namespace ros2::vos
