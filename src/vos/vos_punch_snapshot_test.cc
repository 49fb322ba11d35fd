// Punch at object, dkey and akey level; snapshots pin older epochs.
#include <gtest/gtest.h>

#include <algorithm>

#include "testing/vos_fixture.h"
#include "vos/vos_test_util.h"

namespace ros2::vos {
namespace {

using namespace testing;  // the VOS test helpers (vos_test_util.h)

class VosPunchTest : public ros2::testing::VosFixture<> {};

TEST_F(VosPunchTest, PunchAkeyHidesFromItsEpochOnAndOlderReadsStillSee) {
  ObjectId oid = TestOid(1);
  auto v = Pattern(10000, 1);
  auto arr = Pattern(8192, 2);
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "s", 10, v).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "x", 10, 0, 1, arr).ok());
  ASSERT_TRUE(vos_->PunchAkey(oid, "d", "s", 20).ok());
  ASSERT_TRUE(vos_->PunchAkey(oid, "d", "x", 20).ok());
  EXPECT_TRUE(GetSingle(vos_.get(), oid, "d", "s", 20)->empty());
  EXPECT_TRUE(GetSingle(vos_.get(), oid, "d", "s", kEpochMax)->empty());
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "s", 19), v);
  EXPECT_EQ(*GetArray(vos_.get(), oid, "d", "x", kEpochMax, 0, 8192, 1), std::vector<std::byte>(8192));
  EXPECT_EQ(*GetArray(vos_.get(), oid, "d", "x", 15, 0, 8192, 1), arr);
  // A later update is visible again, and only it.
  auto w = Pattern(100, 3);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "x", 30, 100, 1, w).ok());
  auto got = *GetArray(vos_.get(), oid, "d", "x", kEpochMax, 0, 8192, 1);
  std::vector<std::byte> want(8192);
  std::copy(w.begin(), w.end(), want.begin() + 100);
  EXPECT_EQ(got, want);
  EXPECT_EQ(*vos_->QueryArrayEnd(oid, "d", "x", kEpochMax), 200u);
  EXPECT_EQ(*vos_->QueryArrayEnd(oid, "d", "x", 15), 8192u);
}

// Punches submitted together go into one commit group; each becomes visible
// when its callback runs (not before) and survives a reopen; a bad one fails
// alone, naming what was wrong.
TEST_F(VosPunchTest, AsyncPunchesAreVisibleOnceAcknowledgedAndDurable) {
  ObjectId oid = TestOid(4);
  auto v = Pattern(300, 7);
  for (std::string d : {"d1", "d2", "d3"}) ASSERT_TRUE(PutSingle(vos_.get(), oid, d, "a", 5, v).ok());
  std::vector<Status> results(4);
  std::vector<bool> done(4, false);
  int i = 0;
  for (std::string d : {"d1", "d2", "d3"}) {
    const int k = i++;
    vos_->SubmitPunch({PunchScope::kDkey, oid, d, {}, static_cast<Epoch>(10 + k)}, [&, k](Status st) {
      results[k] = st;
      done[k] = true;
    });
  }
  vos_->SubmitPunch({PunchScope::kAkey, oid, "d1", "", 20}, [&](Status st) {
    results[3] = st;
    done[3] = true;
  });
  EXPECT_EQ(vos_->in_flight(), 4u);
  // Not acknowledged yet, so not visible yet.
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d1", "a", kEpochMax), v);
  while (std::find(done.begin(), done.end(), false) != done.end()) vos_->Progress(/*wait=*/true);
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(results[k].ok()) << results[k].ToString();
  EXPECT_TRUE(results[3].IsInvalidArgument()) << results[3].ToString();
  EXPECT_NE(results[3].message().find("empty akey"), std::string::npos) << results[3].ToString();
  EXPECT_EQ(vos_->in_flight(), 0u);
  Reopen();
  for (std::string d : {"d1", "d2", "d3"}) {
    EXPECT_TRUE(GetSingle(vos_.get(), oid, d, "a", kEpochMax)->empty()) << d;
    EXPECT_EQ(*GetSingle(vos_.get(), oid, d, "a", 9), v) << d;
  }
}

TEST_F(VosPunchTest, PunchDkeyAndObjectCoverEverythingBelowAndPersist) {
  ObjectId oid = TestOid(2);
  auto v = Pattern(50, 1);
  for (std::string d : {"d1", "d2"}) {
    for (std::string a : {"a1", "a2"}) ASSERT_TRUE(PutSingle(vos_.get(), oid, d, a, 5, v).ok());
  }
  ASSERT_TRUE(vos_->PunchDkey(oid, "d1", 10).ok());
  EXPECT_TRUE(GetSingle(vos_.get(), oid, "d1", "a1", 10)->empty());
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d2", "a1", 10), v);
  ASSERT_TRUE(vos_->PunchObject(oid, 12).ok());
  Reopen();
  EXPECT_TRUE(GetSingle(vos_.get(), oid, "d1", "a2", kEpochMax)->empty());
  EXPECT_TRUE(GetSingle(vos_.get(), oid, "d2", "a2", kEpochMax)->empty());
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d2", "a2", 11), v);
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d1", "a2", 9), v);
  EXPECT_TRUE(vos_->PunchDkey(oid, "", 1).IsInvalidArgument());
  EXPECT_TRUE(vos_->PunchObject(oid, 0).IsInvalidArgument());
}

TEST_F(VosPunchTest, SnapshotsPersistAndReadOlderEpochs) {
  ObjectId oid = TestOid(3);
  auto v1 = Pattern(6000, 1);
  auto v2 = Pattern(6000, 2);
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a", 10, v1).ok());
  ASSERT_TRUE(vos_->CreateSnapshot(15).ok());
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a", 20, v2).ok());
  Reopen();
  EXPECT_EQ(vos_->ListSnapshots(), std::vector<Epoch>{15});
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "a", 15), v1);
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "a", kEpochMax), v2);
  ASSERT_TRUE(vos_->DestroySnapshot(15).ok());
  EXPECT_TRUE(vos_->DestroySnapshot(15).IsNotFound());
  EXPECT_TRUE(vos_->ListSnapshots().empty());
}

}  // namespace
}  // namespace ros2::vos
