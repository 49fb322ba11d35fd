// Bits flipped in the data file and in RocksDB are reported as Corruption on
// fetch, never returned as data.
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <algorithm>
#include <filesystem>

#include "common/checksum.h"
#include "vos/keys.h"
#include "vos/vos_store.h"
#include "testing/vos_fixture.h"
#include "vos/vos_test_util.h"

namespace ros2::vos {
namespace {

using namespace testing;  // the VOS test helpers (vos_test_util.h)

// Flips one bit `at` bytes after the first occurrence of `needle` in `path`.
bool FlipBitWhere(const std::string& path, const std::vector<std::byte>& needle, size_t at) {
  return testing::EditWhere(path, needle, at, 1, [](std::span<std::byte> b) { b[0] ^= std::byte{0x04}; });
}

class VosCorruptionTest : public ros2::testing::VosFixture<> {
 protected:
  VosOptions Options() override {
    VosOptions o = VosFixture::Options();
    o.inline_threshold = 64 << 10;  // lets the SST test keep large values in RocksDB
    return o;
  }
  void Open() { Reopen(); }
  std::string store() const { return dir_.path() + "/store"; }
};

TEST_F(VosCorruptionTest, FlippedDataFileBitIsCorruptionOnlyInItsChunk) {
  ObjectId oid = TestOid(1);
  auto data = Pattern(64 << 10, 1);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 10, 0, 1, data).ok());
  vos_.reset();
  ASSERT_TRUE(FlipBitWhere(store() + "/data", std::vector<std::byte>(data.begin(), data.begin() + 64), 5000));
  Open();
  auto whole = GetArray(vos_.get(), oid, "d", "a", kEpochMax, 0, data.size(), 1);
  ASSERT_FALSE(whole.ok());
  EXPECT_TRUE(whole.status().IsCorruption()) << whole.status().ToString();
  EXPECT_NE(whole.status().message().find("epoch 10"), std::string::npos) << whole.status().ToString();
  // The byte sits in chunk 1 ([4096, 8192)); a read of other chunks is still good.
  auto other = GetArray(vos_.get(), oid, "d", "a", kEpochMax, 8192, 16384, 1);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_TRUE(std::equal(other->begin(), other->end(), data.begin() + 8192));
  EXPECT_TRUE(GetArray(vos_.get(), oid, "d", "a", kEpochMax, 4999, 2, 1).status().IsCorruption());
}

// A caller that verifies end to end (the engine for libros2) gets the stored
// checksums passed through unchecked when they describe the result exactly, so
// its own check catches the flipped bit; whenever VOS has to compute the
// result's checksums (an unaligned range) it still verifies first.
TEST_F(VosCorruptionTest, CallerVerifiedFetchPassesStoredChecksumsThroughUnchecked) {
  ObjectId oid = TestOid(4);
  auto data = Pattern(64 << 10, 4);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 10, 0, 1, data).ok());
  vos_.reset();
  ASSERT_TRUE(FlipBitWhere(store() + "/data", std::vector<std::byte>(data.begin(), data.begin() + 64), 5000));
  Open();
  auto fetch = [&](uint64_t index, uint64_t count, bool caller_verifies, std::vector<std::byte>& buf) {
    buf.assign(count, std::byte{0});
    FetchOp op;
    op.oid = oid;
    op.dkey = "d";
    op.akey = "a";
    op.type = ValueType::kArray;
    op.index = index;
    op.count = count;
    op.buffer = buf;
    op.caller_verifies = caller_verifies;
    return vos_->Fetch(op);
  };
  std::vector<std::byte> buf;
  auto passed = fetch(0, data.size(), true, buf);
  ASSERT_TRUE(passed.ok()) << passed.status().ToString();
  Status check = VerifyChunkChecksums(passed->csum.type, buf, passed->csum.chunk_size, passed->csum.values, "fetched");
  EXPECT_TRUE(check.IsCorruption()) << "the caller's check must catch the flipped bit: " << check.ToString();
  // Without the flag, and for a range whose checksums VOS computes, VOS itself refuses.
  EXPECT_TRUE(fetch(0, data.size(), false, buf).status().IsCorruption());
  EXPECT_TRUE(fetch(4999, 2, true, buf).status().IsCorruption());
  EXPECT_TRUE(std::all_of(buf.begin(), buf.end(), [](std::byte b) { return b == std::byte{0}; }));
  // Chunks the flip did not touch pass through and check out.
  auto good = fetch(8192, 16384, true, buf);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_TRUE(VerifyChunkChecksums(good->csum.type, buf, good->csum.chunk_size, good->csum.values, "fetched").ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), data.begin() + 8192));
}

TEST_F(VosCorruptionTest, FlippedBitInAStoredRocksDbValueIsCorruption) {
  ObjectId oid = TestOid(2);
  auto data = Pattern(1000, 2);
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a", 10, data).ok());
  vos_.reset();
  {
    // Rewrite the record with one data bit flipped: RocksDB's own checksums are
    // then valid and only the VOS's checksum can notice.
    rocksdb::DB* raw = nullptr;
    rocksdb::Options o;
    o.compression = rocksdb::kNoCompression;
    o.merge_operator = MetadataMergeOperator();
    ASSERT_TRUE(rocksdb::DB::Open(o, store() + "/meta", &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string key = keys::SingleKey(keys::AkeyScope(oid, "d", "a"), 10);
    std::string value;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), key, &value).ok());
    value[value.size() - 300] ^= 0x20;
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), key, value).ok());
  }
  Open();
  auto got = GetSingle(vos_.get(), oid, "d", "a", kEpochMax);
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(got.status().IsCorruption()) << got.status().ToString();
}

TEST_F(VosCorruptionTest, FlippedBitInAnSstFileIsCorruption) {
  ObjectId oid = TestOid(3);
  auto data = Pattern(6000, 3);
  // A filler value that sorts first fills the SST's first block with it and
  // the store's format marker, so the damaged value sits in a block of its own.
  ASSERT_TRUE(PutSingle(vos_.get(), TestOid(0), "d", "a", 10, Pattern(6000, 4)).ok());
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a", 10, data).ok());
  vos_.reset();
  {
    rocksdb::DB* raw = nullptr;
    rocksdb::Options o;
    o.compression = rocksdb::kNoCompression;  // keep the value's bytes findable in the SST
    o.merge_operator = MetadataMergeOperator();
    ASSERT_TRUE(rocksdb::DB::Open(o, store() + "/meta", &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
  }
  bool flipped = false;
  for (const auto& e : std::filesystem::directory_iterator(store() + "/meta")) {
    if (e.path().extension() == ".sst" && FlipBitWhere(e.path(), data, 1000)) flipped = true;
  }
  ASSERT_TRUE(flipped);
  Open();
  auto got = GetSingle(vos_.get(), oid, "d", "a", kEpochMax);
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(got.status().IsCorruption()) << got.status().ToString();
  EXPECT_EQ(*GetSingle(vos_.get(), TestOid(0), "d", "a", kEpochMax), Pattern(6000, 4));
}

}  // namespace
}  // namespace ros2::vos
