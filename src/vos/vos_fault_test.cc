// I/O errors, short writes and ENOSPC through the FaultInjectionEnv: each is a
// clear Status, nothing is half-written and the space accounting stays right.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "vos/fault_injection_env.h"
#include "testing/vos_fixture.h"
#include "vos/vos_test_util.h"

namespace ros2::vos {
namespace {

using namespace testing;  // the VOS test helpers (vos_test_util.h)

class VosFaultTest : public ros2::testing::VosFixture<> {
 protected:
  void SetUp() override { Reopen(); }
  // The store uses env_, which goes before the fixture's members: close it first.
  ~VosFaultTest() override { vos_.reset(); }
  VosOptions Options() override {
    VosOptions o = testing::SmallOptions(store_dir_.empty() ? dir_.path() : store_dir_);
    o.data_size = data_size_;
    o.env = &env_;
    return o;
  }
  void Reopen(uint64_t data_size = 64 << 20) { ReopenIn(dir_.path(), data_size); }
  void ReopenIn(const std::string& dir, uint64_t data_size) {
    store_dir_ = dir;
    data_size_ = data_size;
    VosFixture::Reopen();
    env_.Reset();
  }
  FaultInjectionEnv env_;
  std::string store_dir_;
  uint64_t data_size_ = 64 << 20;
};

TEST_F(VosFaultTest, FailedWriteIsAnIOErrorAndLeaksNothing) {
  ObjectId oid = TestOid(1);
  auto old = Pattern(64 << 10, 1);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 10, 0, 1, old).ok());
  uint64_t used = vos_->Space().data_used;
  env_.FailNthWrite(env_.writes() + 1, EIO);
  Status st = PutArray(vos_.get(), oid, "d", "a", 20, 0, 1, Pattern(64 << 10, 2));
  EXPECT_TRUE(st.IsIOError()) << st.ToString();
  EXPECT_NE(st.message().find("akey='a'"), std::string::npos) << st.ToString();
  EXPECT_EQ(vos_->Space().data_used, used);
  EXPECT_EQ(*GetArray(vos_.get(), oid, "d", "a", kEpochMax, 0, old.size(), 1), old);
  // The same epoch can be retried and succeeds.
  auto retry = Pattern(64 << 10, 3);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 20, 0, 1, retry).ok());
  EXPECT_EQ(*GetArray(vos_.get(), oid, "d", "a", kEpochMax, 0, old.size(), 1), retry);
  Reopen();
  EXPECT_EQ(vos_->Space().data_used, used + (64 << 10));
}

TEST_F(VosFaultTest, ShortWritesAreContinued) {
  env_.SetShortWrites(true);
  auto data = Pattern((1 << 20) + 12345, 4);
  ASSERT_TRUE(PutSingle(vos_.get(), TestOid(2), "d", "a", 10, data).ok());
  EXPECT_GT(env_.writes(), 2u);  // the write took several rounds
  env_.Reset();
  EXPECT_EQ(*GetSingle(vos_.get(), TestOid(2), "d", "a", kEpochMax), data);
}

TEST_F(VosFaultTest, DeviceEnospcIsNoSpaceAndNothingIsHalfWritten) {
  ObjectId oid = TestOid(3);
  uint64_t used = vos_->Space().data_used;
  env_.SetWriteBudget(0);
  Status st = PutSingle(vos_.get(), oid, "d", "a", 10, Pattern(1 << 20, 5));
  EXPECT_TRUE(st.IsNoSpace()) << st.ToString();
  EXPECT_EQ(vos_->Space().data_used, used);
  EXPECT_TRUE(GetSingle(vos_.get(), oid, "d", "a", kEpochMax)->empty());
  // Inline values do not touch the data file and still work.
  EXPECT_TRUE(PutSingle(vos_.get(), oid, "d", "small", 11, Pattern(100, 6)).ok());
}

TEST_F(VosFaultTest, FullExtentStoreIsNoSpaceWithExactAccounting) {
  testing::TempDir small;  // a fresh store: an existing data file keeps its size
  ReopenIn(small.path(), 1 << 20);
  ObjectId oid = TestOid(4);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 10, 0, 1, Pattern(768 << 10, 1)).ok());
  Status st = PutArray(vos_.get(), oid, "d", "a", 11, 0, 1, Pattern(512 << 10, 2));
  EXPECT_TRUE(st.IsNoSpace()) << st.ToString();
  EXPECT_EQ(vos_->Space().data_used, 768u << 10);
  EXPECT_EQ(vos_->Space().data_total, 1u << 20);
  EXPECT_TRUE(PutArray(vos_.get(), oid, "d", "a", 12, 0, 1, Pattern(256 << 10, 3)).ok());
  EXPECT_EQ(vos_->Space().data_used, 1u << 20);
  // Aggregation makes room again.
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 13, 0, 1, Pattern(100, 4)).ok());  // inline
  EXPECT_TRUE(PutArray(vos_.get(), oid, "d", "b", 14, 0, 1, Pattern(8192, 5)).IsNoSpace());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 15, 0, 1, Pattern(1 << 20, 6)).IsNoSpace());
  ASSERT_TRUE(vos_->Aggregate(kEpochMax).ok());
  EXPECT_EQ(vos_->Space().data_used, 1u << 20);  // [100, 768K) of epoch 10 and the epoch-12 part stay visible
  ASSERT_TRUE(vos_->PunchAkey(oid, "d", "a", 16).ok());
  ASSERT_TRUE(vos_->Aggregate(kEpochMax).ok());
  EXPECT_EQ(vos_->Space().data_used, 0u);
  vos_.reset();  // before `small` goes
}

TEST_F(VosFaultTest, FailedGroupDataSyncFailsTheUpdate) {
  // Group mode: the commit thread fdatasyncs the data file before the WAL
  // write; when that fails, the update must fail and nothing be committed.
  vos_.reset();
  VosOptions o = testing::SmallOptions(dir_.path());
  o.env = &env_;
  o.extent_sync = ExtentSync::kGroup;
  auto v = Vos::Open(o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  vos_ = std::move(*v);
  env_.SetFailSync(true);
  Status st = PutSingle(vos_.get(), TestOid(6), "d", "a", 10, Pattern(64 << 10, 1));
  EXPECT_TRUE(st.IsIOError()) << st.ToString();
  env_.Reset();
  EXPECT_EQ(vos_->Space().data_used, 0u);  // the failed update's extent went back
  auto r = GetSingle(vos_.get(), TestOid(6), "d", "a", kEpochMax);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->empty());  // nothing was committed
  ASSERT_TRUE(PutSingle(vos_.get(), TestOid(6), "d", "a", 11, Pattern(64 << 10, 2)).ok());
}

TEST_F(VosFaultTest, ALoneUpdateCommitsOnTheCallingThread) {
  // Group mode makes the commit's data fdatasync visible through the Env. A
  // group holding everything in flight is committed by Progress itself
  // (inline_commit); with inline_commit off, or while the owner disallows it
  // (AllowInlineCommit(false), as an engine target with other busy shards
  // does), it goes to the commit thread.
  struct Case {
    bool inline_commit, owner_allows;
    uint64_t oid;
  };
  for (Case c : {Case{true, true, 7}, Case{false, true, 8}, Case{true, false, 9}}) {
    SCOPED_TRACE(fmt::format("inline_commit {} owner allows {}", c.inline_commit, c.owner_allows));
    const bool inline_commit = c.inline_commit && c.owner_allows;
    vos_.reset();
    VosOptions o = testing::SmallOptions(dir_.path());
    o.env = &env_;
    o.extent_sync = ExtentSync::kGroup;
    o.inline_commit = c.inline_commit;
    auto v = Vos::Open(o);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vos_ = std::move(*v);
    vos_->AllowInlineCommit(c.owner_allows);
    env_.Reset();
    const ObjectId oid = TestOid(c.oid);
    ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a", 10, Pattern(64 << 10, 3)).ok());
    EXPECT_EQ(env_.syncs(), 1u) << "one data fdatasync for the update's group";
    EXPECT_EQ(env_.last_sync_thread() == std::this_thread::get_id(), inline_commit);
    // Eight updates in flight at once still commit, in however many groups.
    int done = 0;
    std::vector<std::vector<std::byte>> values;
    for (int i = 0; i < 8; ++i) values.push_back(Pattern(64 << 10, 20 + i));
    for (int i = 0; i < 8; ++i) {
      UpdateOp op;
      op.oid = oid;
      op.dkey = "d" + std::to_string(i);
      op.akey = "a";
      op.type = ValueType::kSingle;
      op.epoch = 11;
      op.data = values[static_cast<size_t>(i)];
      vos_->SubmitUpdate(op, [&done](Status st) {
        EXPECT_TRUE(st.ok()) << st.ToString();
        ++done;
      });
    }
    while (done < 8) vos_->Progress(true);
    for (int i = 0; i < 8; ++i) {
      auto r = GetSingle(vos_.get(), oid, "d" + std::to_string(i), "a", kEpochMax);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(*r, values[static_cast<size_t>(i)]);
    }
  }
  vos_.reset();
}

TEST_F(VosFaultTest, FailedDataSyncIsReportedBySync) {
  // Relaxed mode relies on Sync(), which must report a failed fdatasync.
  vos_.reset();
  VosOptions o = testing::SmallOptions(dir_.path());
  o.env = &env_;
  o.sync_commit = false;
  auto v = Vos::Open(o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  vos_ = std::move(*v);
  ASSERT_TRUE(PutSingle(vos_.get(), TestOid(5), "d", "a", 10, Pattern(64 << 10, 1)).ok());
  env_.SetFailSync(true);
  Status st = vos_->Sync();
  EXPECT_TRUE(st.IsIOError()) << st.ToString();
  env_.Reset();
  EXPECT_TRUE(vos_->Sync().ok());
}

TEST_F(VosFaultTest, DataFileIsCreatedEmptyAndGrowsOnDemandWithoutZeros) {
  testing::TempDir fresh;
  VosOptions o = testing::SmallOptions(fresh.path());
  o.env = &env_;
  o.data_size = uint64_t{1} << 44;  // 16 TiB of address space costs nothing
  auto v = Vos::Open(o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(env_.writes(), 0u) << "creating the store wrote to the data file";
  EXPECT_EQ(std::filesystem::file_size(o.path + "/data"), 0u);
  EXPECT_EQ((*v)->Space().data_total, uint64_t{1} << 44);
  auto data = Pattern(3 << 20, 7);
  ASSERT_TRUE(PutSingle(v->get(), TestOid(9), "d", "a", 10, data).ok());
  EXPECT_EQ(env_.writes(), 1u) << "only the extent is written";
  const uint64_t grown = std::filesystem::file_size(o.path + "/data");
  EXPECT_GE(grown, 3u << 20);
  EXPECT_LE(grown, 4u << 20) << "the file grows by what the extents need (and a step of 1 MiB at this size)";
  EXPECT_EQ((*v)->Space().data_file, grown);
  EXPECT_EQ(*GetSingle(v->get(), TestOid(9), "d", "a", kEpochMax), data);
}

TEST_F(VosFaultTest, FullFileSystemWhileGrowingIsNoSpaceAndNothingIsHalfWritten) {
  ObjectId oid = TestOid(10);
  auto before = Pattern(1 << 20, 8);
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a", 10, before).ok());
  const SpaceInfo space = vos_->Space();
  const uint64_t writes = env_.writes();
  env_.SetFailAllocate(true);  // fallocate: ENOSPC
  Status st = PutSingle(vos_.get(), oid, "d", "b", 11, Pattern(8 << 20, 9));
  EXPECT_TRUE(st.IsNoSpace()) << st.ToString();
  EXPECT_NE(st.message().find("growing the data file"), std::string::npos) << st.ToString();
  EXPECT_EQ(env_.writes(), writes) << "an update that could not get its space wrote something";
  EXPECT_EQ(vos_->Space().data_used, space.data_used);
  EXPECT_TRUE(GetSingle(vos_.get(), oid, "d", "b", kEpochMax)->empty());
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "a", kEpochMax), before);
  // Inline values do not need the data file.
  EXPECT_TRUE(PutSingle(vos_.get(), oid, "d", "small", 12, Pattern(100, 10)).ok());
  env_.SetFailAllocate(false);
  EXPECT_TRUE(PutSingle(vos_.get(), oid, "d", "b", 13, Pattern(8 << 20, 9)).ok());
}

TEST_F(VosFaultTest, FirstWriteOfFreshSpaceSyncsTheDataFileReusedSpaceDoesNot) {
  // extent_sync: wal (the default). A block of the growing data file written
  // for the first time changes file metadata (fallocated space converted), so
  // its group fdatasyncs the data file; space written before rides on the WAL
  // sync's flush as always (docs/vos.md, "Durability").
  ObjectId oid = TestOid(11);
  const uint64_t syncs = env_.syncs();
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a", 10, Pattern(1 << 20, 11)).ok());
  EXPECT_EQ(env_.syncs(), syncs + 1) << "fresh space: the group syncs the data file";
  ASSERT_TRUE(vos_->PunchAkey(oid, "d", "a", 11).ok());
  ASSERT_TRUE(vos_->Aggregate(kEpochMax).ok());
  EXPECT_EQ(vos_->Space().data_used, 0u);
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "b", 12, Pattern(1 << 20, 12)).ok());
  EXPECT_EQ(env_.syncs(), syncs + 1) << "reused space needs no data fdatasync";
  // After a restart, committed extents still count as written.
  Reopen();
  const uint64_t after = env_.syncs();
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "b", 12, Pattern(1 << 20, 13)).ok());  // a replay syncs anyway
  ASSERT_TRUE(vos_->Aggregate(kEpochMax).ok());
  EXPECT_EQ(vos_->Space().data_used, 1u << 20);
  const uint64_t base = env_.syncs();
  ASSERT_TRUE(vos_->PunchAkey(oid, "d", "b", 13).ok());
  ASSERT_TRUE(vos_->Aggregate(kEpochMax).ok());
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "c", 14, Pattern(1 << 20, 14)).ok());
  EXPECT_EQ(env_.syncs(), base) << "space of an extent recovered at open was written";
  EXPECT_GE(base, after);
}

}  // namespace
}  // namespace ros2::vos
