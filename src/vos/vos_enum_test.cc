// Enumeration with anchors, and the max-dkey / array-end queries.
#include <gtest/gtest.h>

#include <set>

#include "vos/vos_test_util.h"

namespace ros2::vos {
namespace {

using testing::Pattern;
using testing::PutArray;
using testing::PutSingle;
using testing::TestOid;

class VosEnumTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto v = Vos::Open(testing::SmallOptions(dir_.path()));
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vos_ = std::move(*v);
  }
  testing::TempDir dir_;
  std::unique_ptr<Vos> vos_;
};

TEST_F(VosEnumTest, TenThousandDkeysEnumerateExactlyOnceWithAnchors) {
  ObjectId oid = TestOid(1);
  constexpr int kKeys = 10240;
  auto v = Pattern(1, 8);
  std::set<std::string> want;
  // Submitted asynchronously so that group commit keeps the test fast.
  int ok = 0;
  for (int i = 0; i < kKeys; ++i) {
    std::string dkey = "key-" + std::to_string(i * 7919 % kKeys);
    want.insert(dkey);
    UpdateOp op;
    op.oid = oid;
    op.dkey = dkey;
    op.akey = "a";
    op.epoch = 100;
    op.data = v;
    vos_->SubmitUpdate(op, [&ok](Status s) { ok += s.ok(); });
    if (vos_->in_flight() >= 256) vos_->Progress(true);
  }
  while (vos_->in_flight() > 0) vos_->Progress(true);
  ASSERT_EQ(ok, kKeys);
  ASSERT_TRUE(vos_->PunchDkey(oid, "key-5", 200).ok());

  ListAnchor anchor;
  std::vector<std::string> got;
  int calls = 0;
  while (!anchor.eof) {
    auto batch = vos_->ListDkeys(oid, kEpochMax, &anchor, 333);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    ASSERT_LE(batch->size(), 333u);
    got.insert(got.end(), batch->begin(), batch->end());
    ASSERT_LT(++calls, 100);
  }
  EXPECT_EQ(got.size(), want.size() - 1);
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()).size(), got.size());
  EXPECT_EQ(std::count(got.begin(), got.end(), "key-5"), 0);
  // At an epoch before the punch the punched dkey is listed; before the writes nothing is.
  ListAnchor before;
  EXPECT_EQ(vos_->ListDkeys(oid, 150, &before, kKeys * 2)->size(), want.size());
  ListAnchor none;
  EXPECT_TRUE(vos_->ListDkeys(oid, 99, &none, 10)->empty());
  EXPECT_TRUE(none.eof);
}

TEST_F(VosEnumTest, ObjectsAndAkeys) {
  auto v = Pattern(1, 8);
  for (uint64_t o = 1; o <= 25; ++o) ASSERT_TRUE(PutSingle(vos_.get(), TestOid(o), "d", "a", 10, v).ok());
  for (const std::string& a : std::vector<std::string>{"z", "b", std::string("a\0b", 3), "a"})
    ASSERT_TRUE(PutSingle(vos_.get(), TestOid(1), "d", a, 10, v).ok());
  ASSERT_TRUE(vos_->PunchObject(TestOid(3), 20).ok());
  ListAnchor anchor;
  std::vector<ObjectId> objs;
  while (!anchor.eof) {
    auto b = vos_->ListObjects(kEpochMax, &anchor, 4);
    ASSERT_TRUE(b.ok());
    objs.insert(objs.end(), b->begin(), b->end());
  }
  ASSERT_EQ(objs.size(), 24u);
  EXPECT_TRUE(std::is_sorted(objs.begin(), objs.end()));
  EXPECT_EQ(std::count(objs.begin(), objs.end(), TestOid(3)), 0);
  ListAnchor akeys;
  auto a = vos_->ListAkeys(TestOid(1), "d", kEpochMax, &akeys, 100);
  ASSERT_TRUE(a.ok());
  std::vector<std::string> want = {"a", std::string("a\0b", 3), "b", "z"};
  EXPECT_EQ(*a, want);
  EXPECT_TRUE(akeys.eof);
}

TEST_F(VosEnumTest, ExtentsAreReportedResolved) {
  ObjectId oid = TestOid(2);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 10, 0, 4, Pattern(1, 400)).ok());     // [0, 100)
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 20, 40, 4, Pattern(2, 80)).ok());     // [40, 60)
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 30, 200, 4, Pattern(3, 4000)).ok());  // [200, 1200)
  ListAnchor anchor;
  std::vector<ExtentInfo> got;
  while (!anchor.eof) {
    auto b = vos_->ListExtents(oid, "d", "a", kEpochMax, &anchor, 2);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    got.insert(got.end(), b->begin(), b->end());
  }
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].index, 0u);
  EXPECT_EQ(got[0].count, 40u);
  EXPECT_EQ(got[0].epoch, 10u);
  EXPECT_EQ(got[1].index, 40u);
  EXPECT_EQ(got[1].epoch, 20u);
  EXPECT_EQ(got[2].index, 60u);
  EXPECT_EQ(got[2].count, 40u);
  EXPECT_EQ(got[3].index, 200u);
  EXPECT_EQ(got[3].count, 1000u);
  EXPECT_EQ(got[3].record_size, 4u);
  ListAnchor old;
  EXPECT_EQ(vos_->ListExtents(oid, "d", "a", 15, &old, 10)->size(), 1u);
}

TEST_F(VosEnumTest, QueryMaxDkeyAndArrayEnd) {
  ObjectId oid = TestOid(3);
  auto v = Pattern(1, 16);
  EXPECT_FALSE(vos_->QueryMaxDkey(oid, kEpochMax)->has_value());
  for (std::string d : {"0001", "0003", "0002"}) ASSERT_TRUE(PutSingle(vos_.get(), oid, d, "a", 10, v).ok());
  EXPECT_EQ(**vos_->QueryMaxDkey(oid, kEpochMax), "0003");
  ASSERT_TRUE(vos_->PunchDkey(oid, "0003", 20).ok());
  EXPECT_EQ(**vos_->QueryMaxDkey(oid, kEpochMax), "0002");
  EXPECT_EQ(**vos_->QueryMaxDkey(oid, 15), "0003");

  EXPECT_FALSE(vos_->QueryArrayEnd(oid, "f", "data", kEpochMax)->has_value());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "f", "data", 10, 1000, 1, Pattern(2, 5000)).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "f", "data", 11, 0, 1, Pattern(3, 10)).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "f", "data", 12, 9000, 1, Pattern(4, 1)).ok());
  EXPECT_EQ(**vos_->QueryArrayEnd(oid, "f", "data", kEpochMax), 9001u);
  EXPECT_EQ(**vos_->QueryArrayEnd(oid, "f", "data", 11), 6000u);
  EXPECT_TRUE(vos_->QueryArrayEnd(oid, "0001", "a", kEpochMax).status().IsInvalidArgument());
}

}  // namespace
}  // namespace ros2::vos
