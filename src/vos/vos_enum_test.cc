// Enumeration with anchors, and the max-dkey / array-end queries.
#include <gtest/gtest.h>

#include <set>

#include "vos/vos_test_util.h"

namespace ros2::vos {
namespace {

using namespace testing;  // the VOS test helpers (vos_test_util.h)

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
  auto v = Pattern(8, 1);
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
  auto v = Pattern(8, 1);
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
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 10, 0, 4, Pattern(400, 1)).ok());     // [0, 100)
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 20, 40, 4, Pattern(80, 2)).ok());     // [40, 60)
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 30, 200, 4, Pattern(4000, 3)).ok());  // [200, 1200)
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
  auto v = Pattern(16, 1);
  EXPECT_FALSE(vos_->QueryMaxDkey(oid, kEpochMax)->has_value());
  for (std::string d : {"0001", "0003", "0002"}) ASSERT_TRUE(PutSingle(vos_.get(), oid, d, "a", 10, v).ok());
  EXPECT_EQ(**vos_->QueryMaxDkey(oid, kEpochMax), "0003");
  ASSERT_TRUE(vos_->PunchDkey(oid, "0003", 20).ok());
  EXPECT_EQ(**vos_->QueryMaxDkey(oid, kEpochMax), "0002");
  EXPECT_EQ(**vos_->QueryMaxDkey(oid, 15), "0003");

  EXPECT_FALSE(vos_->QueryArrayEnd(oid, "f", "data", kEpochMax)->has_value());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "f", "data", 10, 1000, 1, Pattern(5000, 2)).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "f", "data", 11, 0, 1, Pattern(10, 3)).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "f", "data", 12, 9000, 1, Pattern(1, 4)).ok());
  EXPECT_EQ(**vos_->QueryArrayEnd(oid, "f", "data", kEpochMax), 9001u);
  EXPECT_EQ(**vos_->QueryArrayEnd(oid, "f", "data", 11), 6000u);
  EXPECT_TRUE(vos_->QueryArrayEnd(oid, "0001", "a", kEpochMax).status().IsInvalidArgument());
}

// The array end a fetch returns with want_array_end (0: none), and its data.
Result<uint64_t> FetchArrayEnd(Vos* vos, const ObjectId& oid, const std::string& dkey, const std::string& akey,
                               Epoch epoch, uint64_t index, uint64_t count, std::vector<std::byte>* data) {
  data->assign(count, std::byte{0x5a});
  FetchOp op;
  op.oid = oid;
  op.dkey = dkey;
  op.akey = akey;
  op.epoch = epoch;
  op.type = ValueType::kArray;
  op.index = index;
  op.count = count;
  op.buffer = *data;
  op.want_array_end = true;
  auto r = vos->Fetch(op);
  if (!r.ok()) return r.status();
  return r->array_end;
}

// A fetch's array end is QueryArrayEnd's at the same epoch: from RocksDB
// before the akey is in the extent cache, from the cache after the first fetch
// loaded it, and after updates and punches that reach the cached copy.
TEST_F(VosEnumTest, FetchArrayEndMatchesQueryArrayEndCachedOrNot) {
  ObjectId oid = TestOid(4);
  std::vector<std::byte> got;
  auto fetch_end = [&](Epoch epoch) -> uint64_t {
    auto end = FetchArrayEnd(vos_.get(), oid, "f", "data", epoch, 0, 10, &got);
    EXPECT_TRUE(end.ok()) << end.status().ToString();
    return end.ok() ? *end : ~uint64_t{0};
  };
  auto query_end = [&](Epoch epoch) -> uint64_t {
    auto end = vos_->QueryArrayEnd(oid, "f", "data", epoch);
    EXPECT_TRUE(end.ok()) << end.status().ToString();
    return end.ok() ? end->value_or(0) : ~uint64_t{0};
  };
  EXPECT_EQ(fetch_end(kEpochMax), 0u);  // no such akey
  EXPECT_EQ(got, std::vector<std::byte>(10));

  const auto head = Pattern(10, 3);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "f", "data", 10, 1000, 1, Pattern(5000, 2)).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "f", "data", 11, 0, 1, head).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "f", "data", 12, 9000, 1, Pattern(1, 4)).ok());
  // Not cached yet: QueryArrayEnd walks RocksDB.
  EXPECT_EQ(query_end(kEpochMax), 9001u);
  EXPECT_EQ(query_end(11), 6000u);
  EXPECT_EQ(query_end(9), 0u);
  // The first fetch caches the akey; its end and QueryArrayEnd's (now from the cache) agree.
  for (Epoch e : {Epoch{kEpochMax}, Epoch{12}, Epoch{11}, Epoch{10}, Epoch{9}}) {
    const uint64_t want = e >= 12 ? 9001 : e >= 10 ? 6000 : 0;
    EXPECT_EQ(fetch_end(e), want) << "epoch " << e;
    EXPECT_EQ(query_end(e), want) << "epoch " << e;
  }
  EXPECT_EQ(fetch_end(kEpochMax), 9001u);
  EXPECT_EQ(got, head);  // the data still comes with it

  // A punch hides everything below it; later extents of the cached akey count.
  ASSERT_TRUE(vos_->PunchAkey(oid, "f", "data", 20).ok());
  EXPECT_EQ(fetch_end(kEpochMax), 0u);
  EXPECT_EQ(got, std::vector<std::byte>(10));
  EXPECT_EQ(fetch_end(15), 9001u);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "f", "data", 30, 100, 1, Pattern(100, 5)).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "f", "data", 31, 40960, 1, Pattern(4096, 6)).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "f", "data", 32, 0, 1, Pattern(uint64_t{1} << 16, 7)).ok());
  for (Epoch e : {Epoch{kEpochMax}, Epoch{31}, Epoch{30}, Epoch{25}, Epoch{15}}) {
    const uint64_t want = e >= 32 ? 65536 : e >= 31 ? 45056 : e >= 30 ? 200 : e >= 20 ? 0 : 9001;
    EXPECT_EQ(fetch_end(e), want) << "epoch " << e;
    EXPECT_EQ(query_end(e), want) << "epoch " << e;
  }
  // A short extent in a small class ending past a long one of a larger class.
  ASSERT_TRUE(PutArray(vos_.get(), oid, "f", "data", 40, 65535, 1, Pattern(2, 8)).ok());
  EXPECT_EQ(fetch_end(kEpochMax), 65537u);
  EXPECT_EQ(query_end(kEpochMax), 65537u);
}

}  // namespace
}  // namespace ros2::vos
