// extent_sync: wal. A commit group's extents become durable with its WAL
// sync's device flush, and a check record names them until a later batch (or a
// clean close) deletes it. These tests play the stop that flush guards
// against: a child process acknowledges updates and exits without closing,
// the test then takes the last group's data away from the data file (as a
// device that lost its volatile cache would), and the next open must roll that
// update back instead of serving a record whose data never arrived.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <algorithm>

#include "testing/subprocess.h"
#include "vos/fault_injection_env.h"
#include "vos/keys.h"
#include "vos/vos_store.h"
#include "vos/vos_test_util.h"

namespace ros2::vos {
namespace {

using namespace testing;  // the VOS test helpers (vos_test_util.h)

constexpr size_t kMiB = size_t{1} << 20;

// Overwrites the first occurrence of `needle` in `path` with `replacement` (same size).
bool Replace(const std::string& path, const std::vector<std::byte>& needle, const std::vector<std::byte>& replacement) {
  return replacement.size() == needle.size() &&
         testing::EditWhere(path, needle, 0, needle.size(), [&](std::span<std::byte> b) {
           std::copy(replacement.begin(), replacement.end(), b.begin());
         });
}

// The number of check records in the (closed) store's metadata.
int CheckRecords(const std::string& store) {
  rocksdb::DB* raw = nullptr;
  rocksdb::Options options;
  options.merge_operator = MetadataMergeOperator();
  rocksdb::Status s = rocksdb::DB::OpenForReadOnly(options, store + "/meta", &raw);
  if (!s.ok()) return -1;
  std::unique_ptr<rocksdb::DB> db(raw);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  int n = 0;
  for (it->Seek(std::string(1, keys::kCheck)); it->Valid() && it->key()[0] == keys::kCheck; it->Next()) ++n;
  return it->status().ok() ? n : -1;
}

std::unique_ptr<Vos> OpenOrDie(const VosOptions& o) {
  auto v = Vos::Open(o);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? std::move(*v) : nullptr;
}

TEST(VosCheckRecordTest, TheLastGroupsExtentThatMissedTheDiskIsRolledBackAtOpen) {
  testing::TempDir dir;
  const VosOptions o = testing::SmallOptions(dir.path());
  ASSERT_EQ(o.extent_sync, ExtentSync::kWal);  // the default
  const ObjectId oid = TestOid(1);
  {
    auto vos = OpenOrDie(o);
    ASSERT_NE(vos, nullptr);
    WarmDataFile(vos.get(), 8 * kMiB);
    ASSERT_TRUE(PutArray(vos.get(), oid, "d", "a", 10, 0, 1, Pattern(kMiB, 1)).ok());
    ASSERT_TRUE(PutArray(vos.get(), oid, "d", "b", 10, 0, 1, Pattern(kMiB, 3)).ok());
  }
  EXPECT_EQ(CheckRecords(o.path), 0) << "a clean close leaves no check record";

  // The child acknowledges a new version of b, then of a (a later group, whose
  // batch deletes b's check record), and stops without closing.
  const int code = ros2::testing::RunInChild([&] {
    auto v = Vos::Open(o);
    if (!v.ok()) std::_Exit(10);
    if (!PutArray(v->get(), oid, "d", "b", 20, 0, 1, Pattern(kMiB, 4)).ok()) std::_Exit(11);
    if (!PutArray(v->get(), oid, "d", "a", 20, 0, 1, Pattern(kMiB, 2)).ok()) std::_Exit(12);
    std::_Exit(0);  // no destructors: the store is not closed
    return 0;
  });
  ASSERT_EQ(code, 0) << "child exit code";
  EXPECT_EQ(CheckRecords(o.path), 1) << "only the last group's check record is left";

  // The device kept a's record but not its data (the extent holds zeros, as
  // never-written space reads), and a bit of b's new version rots.
  const std::string data_file = o.path + "/data";
  ASSERT_TRUE(Replace(data_file, Pattern(kMiB, 2), std::vector<std::byte>(kMiB)));
  auto rotten = Pattern(kMiB, 4);
  rotten[5000] ^= std::byte{0x10};
  ASSERT_TRUE(Replace(data_file, Pattern(kMiB, 4), rotten));

  {
    auto vos = OpenOrDie(o);
    ASSERT_NE(vos, nullptr);
    // a: its unfinished version rolled back, the acknowledged one before it intact.
    auto a = GetArray(vos.get(), oid, "d", "a", kEpochMax, 0, kMiB, 1);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_TRUE(*a == Pattern(kMiB, 1));
    // b's group was settled by a's WAL sync: its damage is corruption, not a rollback.
    auto b = GetArray(vos.get(), oid, "d", "b", kEpochMax, 0, kMiB, 1);
    EXPECT_TRUE(b.status().IsCorruption()) << b.status().ToString();
    auto b_old = GetArray(vos.get(), oid, "d", "b", 10, 0, kMiB, 1);
    ASSERT_TRUE(b_old.ok()) << b_old.status().ToString();
    EXPECT_TRUE(*b_old == Pattern(kMiB, 3));
    // The rolled-back extent's space is free again: a@10, b@10, b@20 remain.
    EXPECT_EQ(vos->Space().data_used, 3 * kMiB);
    // Its key is usable again.
    ASSERT_TRUE(PutArray(vos.get(), oid, "d", "a", 20, 0, 1, Pattern(kMiB, 5)).ok());
    auto again = GetArray(vos.get(), oid, "d", "a", kEpochMax, 0, kMiB, 1);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_TRUE(*again == Pattern(kMiB, 5));
  }
  EXPECT_EQ(CheckRecords(o.path), 0);
}

TEST(VosCheckRecordTest, ADamagedCheckRecordIsDroppedAndTheStoreOpens) {
  // A check record only saves the next open from serving a record whose data
  // never arrived; fetches verify checksums regardless. One that cannot be
  // decoded is logged and removed, and the store opens.
  testing::TempDir dir;
  const VosOptions o = testing::SmallOptions(dir.path());
  {
    auto vos = OpenOrDie(o);
    ASSERT_NE(vos, nullptr);
    ASSERT_TRUE(PutArray(vos.get(), TestOid(3), "d", "a", 10, 0, 1, Pattern(kMiB, 1)).ok());
  }
  {
    rocksdb::DB* raw = nullptr;
    rocksdb::Options options;
    options.merge_operator = MetadataMergeOperator();
    ASSERT_TRUE(rocksdb::DB::Open(options, o.path + "/meta", &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), keys::CheckKey(7), std::string("\x05\0\0\0ab", 6)).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), std::string(1, keys::kCheck) + "x", "").ok());  // a short key
  }
  ASSERT_EQ(CheckRecords(o.path), 2);
  {
    auto vos = OpenOrDie(o);
    ASSERT_NE(vos, nullptr);
    auto a = GetArray(vos.get(), TestOid(3), "d", "a", kEpochMax, 0, kMiB, 1);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_TRUE(*a == Pattern(kMiB, 1));
  }
  EXPECT_EQ(CheckRecords(o.path), 0);
}

TEST(VosCheckRecordTest, ExtentsWithoutChecksumsAreSyncedBeforeTheirRecord) {
  // Nothing could check them at open, so their group fdatasyncs the data file
  // first, as extent_sync: group does; with checksums the WAL sync suffices.
  testing::TempDir dir;
  FaultInjectionEnv env;
  VosOptions o = testing::SmallOptions(dir.path());
  o.env = &env;
  {
    auto vos = OpenOrDie(o);
    ASSERT_NE(vos, nullptr);
    WarmDataFile(vos.get(), 8 * kMiB);
    const uint64_t before = env.syncs();
    ASSERT_TRUE(PutArray(vos.get(), TestOid(2), "d", "a", 10, 0, 1, Pattern(kMiB, 1)).ok());
    EXPECT_EQ(env.syncs(), before) << "checksummed extents ride on the WAL sync";
  }
  o.checksum = ChecksumType::kNone;
  auto vos = OpenOrDie(o);
  ASSERT_NE(vos, nullptr);
  const uint64_t before = env.syncs();
  ASSERT_TRUE(PutArray(vos.get(), TestOid(2), "d", "a", 20, 0, 1, Pattern(kMiB, 2)).ok());
  EXPECT_EQ(env.syncs(), before + 1) << "an extent without checksums is fdatasynced before its record";
  auto a = GetArray(vos.get(), TestOid(2), "d", "a", kEpochMax, 0, kMiB, 1);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(*a == Pattern(kMiB, 2));
}

}  // namespace
}  // namespace ros2::vos
