// Update and fetch: single values, arrays with overlapping and partial
// overwrites, epochs, checksums, argument errors, persistence, async depth.
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>

#include "testing/vos_fixture.h"
#include "vos/aligned_buffer.h"
#include "vos/vos_store.h"
#include "vos/vos_test_util.h"

namespace ros2::vos {
namespace {

using namespace testing;  // the VOS test helpers (vos_test_util.h)

class VosUpdateFetchTest : public ros2::testing::VosFixture<::testing::TestWithParam<StorageClass>> {};

TEST_P(VosUpdateFetchTest, SingleValuesInlineAndExternal) {
  ObjectId oid = TestOid(1);
  for (size_t len : {size_t{0}, size_t{1}, size_t{100}, size_t{4095}, size_t{4096}, size_t{10000}, size_t{1} << 20}) {
    auto data = Pattern(len, len);
    ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a" + std::to_string(len), 10, data).ok());
    auto got = GetSingle(vos_.get(), oid, "d", "a" + std::to_string(len), kEpochMax);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, data) << len;
  }
  EXPECT_GT(vos_->Space().data_used, 0u);
}

TEST_P(VosUpdateFetchTest, SingleValueIsReplacedWholeAndOlderEpochsStayReadable) {
  ObjectId oid = TestOid(2);
  auto v1 = Pattern(20000, 1);
  auto v2 = Pattern(30, 2);
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a", 10, v1).ok());
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a", 20, v2).ok());
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "a", kEpochMax), v2);
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "a", 19), v1);
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "a", 20), v2);
  EXPECT_TRUE(GetSingle(vos_.get(), oid, "d", "a", 9)->empty());
  EXPECT_TRUE(GetSingle(vos_.get(), oid, "d", "missing", kEpochMax)->empty());
}

TEST_P(VosUpdateFetchTest, SingleValueLargerThanTheBufferReportsItsSize) {
  ObjectId oid = TestOid(3);
  auto data = Pattern(9000, 3);
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "a", 1, data).ok());
  std::vector<std::byte> buf(100);
  FetchOp op{oid, "d", "a", kEpochMax, ValueType::kSingle, 0, 0, 1, buf};
  auto r = vos_->Fetch(op);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->size, 9000u);
  EXPECT_TRUE(r->csum.values.empty());
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), data.begin()));
}

TEST_P(VosUpdateFetchTest, ArrayHolesReadAsZeros) {
  ObjectId oid = TestOid(4);
  auto data = Pattern(8 * 16, 4);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 5, 100, 16, data).ok());
  auto got = GetArray(vos_.get(), oid, "d", "a", kEpochMax, 90, 30, 16);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  std::vector<std::byte> want(30 * 16);
  std::copy(data.begin(), data.end(), want.begin() + 10 * 16);
  EXPECT_EQ(*got, want);
  auto never = GetArray(vos_.get(), oid, "d", "nothing", kEpochMax, 0, 4, 16);
  ASSERT_TRUE(never.ok());
  EXPECT_EQ(*never, std::vector<std::byte>(64));
}

TEST_P(VosUpdateFetchTest, OverlappingAndPartialOverwritesMatchAByteModel) {
  // Random overlapping extents (inline and external sizes) at increasing
  // epochs; every fetch at a random epoch must match a per-byte model.
  ObjectId oid = TestOid(5);
  constexpr uint64_t kSpan = 3 << 20;  // bytes (record size 1)
  struct Write {
    Epoch epoch;
    uint64_t index;
    std::vector<std::byte> data;
  };
  std::vector<Write> writes;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 60; ++i) {
    uint64_t len = rng() % 4 == 0 ? 1 + rng() % 3000 : 1 + rng() % (300 << 10);
    if (rng() % 5 == 0) len = 4096 * (1 + rng() % 64);
    uint64_t index = rng() % (kSpan - len);
    if (rng() % 3 == 0) index &= ~uint64_t{4095};
    writes.push_back({Epoch(100 + i * 10), index, Pattern(len, 1000 + i)});
    ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", writes.back().epoch, index, 1, writes.back().data).ok());
  }
  auto model = [&](Epoch at, uint64_t lo, uint64_t n) {
    std::vector<std::byte> out(n);
    for (const Write& w : writes) {  // ascending epochs: later ones win
      if (w.epoch > at) continue;
      for (uint64_t r = std::max(lo, w.index); r < std::min(lo + n, w.index + w.data.size()); ++r) {
        out[r - lo] = w.data[r - w.index];
      }
    }
    return out;
  };
  for (int i = 0; i < 40; ++i) {
    Epoch at = i == 0 ? kEpochMax : 100 + rng() % 700;
    uint64_t n = 1 + rng() % (600 << 10);
    uint64_t lo = rng() % (kSpan - n);
    auto got = GetArray(vos_.get(), oid, "d", "a", at, lo, n, 1);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(*got, model(at, lo, n)) << "fetch " << i << " at epoch " << at;
  }
  if (GetParam() == StorageClass::kNvme) {
    Reopen();
    auto got = GetArray(vos_.get(), oid, "d", "a", kEpochMax, 0, kSpan, 1);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, model(kEpochMax, 0, kSpan));
  }
}

TEST_P(VosUpdateFetchTest, FetchesInterleavedWithUpdatesAndAggregationMatchAByteModel) {
  // Fetches plan from the in-memory extent cache once an akey was read; this
  // checks that the cache follows every later commit, same-epoch replay and
  // aggregation exactly like RocksDB does.
  ObjectId oid = TestOid(15);
  constexpr uint64_t kSpan = 1 << 20;
  std::vector<std::byte> model(kSpan);
  std::mt19937_64 rng(15);
  Epoch epoch = 10;
  uint64_t index = 0, len = 0;
  for (int round = 0; round < 120; ++round) {
    // Now and then replay the previous update (same epoch, same extent) with
    // other data: the new version replaces the old one under the same key.
    bool replay = round > 0 && rng() % 8 == 0;
    if (!replay) {
      ++epoch;
      len = rng() % 3 == 0 ? 1 + rng() % 3000 : 4096 * (1 + rng() % 32);
      index = rng() % (kSpan - len);
      if (rng() % 2 == 0) index &= ~uint64_t{4095};
    }
    auto data = Pattern(len, 5000 + round);
    ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", epoch, index, 1, data).ok()) << "round " << round;
    std::copy(data.begin(), data.end(), model.begin() + static_cast<ptrdiff_t>(index));
    if (round % 25 == 24) {
      auto agg = vos_->Aggregate();
      ASSERT_TRUE(agg.ok()) << agg.status().ToString();
    }
    for (int f = 0; f < 3; ++f) {
      uint64_t n = 1 + rng() % (128 << 10);
      uint64_t lo = rng() % (kSpan - n);
      if (f == 0) lo = index, n = std::min<uint64_t>(len, kSpan - lo);  // the bytes just written
      auto got = GetArray(vos_.get(), oid, "d", "a", kEpochMax, lo, n, 1);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_TRUE(std::equal(got->begin(), got->end(), model.begin() + static_cast<ptrdiff_t>(lo)))
          << "round " << round << " fetch [" << lo << ", +" << n << ")";
    }
  }
}

// A fetch plans its extents when submitted and reads them later: space that
// aggregation frees meanwhile must not be handed to another write until the
// fetch has completed, or the fetch would return that write's bytes.
TEST_P(VosUpdateFetchTest, SpaceAFetchInFlightMayReadIsNotReusedUntilItCompletes) {
  const ObjectId oid = TestOid(16);
  constexpr uint64_t kLen = 256 << 10;
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "x", 10, 0, 1, Pattern(kLen, 1)).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "x", 20, 0, 1, Pattern(kLen, 2)).ok());
  const uint64_t used_both = vos_->Space().data_used;

  AlignedBuffer buf(kLen);
  std::optional<Result<FetchResult>> fetched;
  vos_->SubmitFetch(FetchOp{oid, "d", "x", 15, ValueType::kArray, 0, kLen, 1, buf.span()},
                    [&](Result<FetchResult> r) { fetched = std::move(r); });
  ASSERT_FALSE(fetched.has_value()) << "the fetch completed inside SubmitFetch: nothing was in flight";

  // Aggregation removes the epoch-10 version the fetch is reading ...
  auto agg = vos_->Aggregate();
  ASSERT_TRUE(agg.ok()) << agg.status().ToString();
  EXPECT_EQ(agg->versions_removed, 1u);
  // ... but keeps its space while the fetch may read it,
  EXPECT_EQ(vos_->Space().data_used, used_both);
  // so a new write of the same size is placed elsewhere.
  const auto other_data = Pattern(kLen, 3);
  const UpdateOp other = SingleUpdate(oid, "d", "y", 30, other_data);
  std::optional<Status> stored;
  vos_->SubmitUpdate(other, [&](Status st) { stored = st; });
  while (!fetched.has_value() || !stored.has_value()) vos_->Progress(/*wait=*/true);
  ASSERT_TRUE(stored->ok()) << stored->ToString();
  ASSERT_TRUE(fetched->ok()) << fetched->status().ToString();
  EXPECT_EQ(std::memcmp(buf.data(), Pattern(kLen, 1).data(), kLen), 0) << "the fetch read bytes written after it";
  // The fetch is done: the old version's space is free now, the new value's taken.
  vos_->Progress(false);
  EXPECT_EQ(vos_->Space().data_used, used_both);
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "y", kEpochMax), other_data);
  EXPECT_EQ(*GetArray(vos_.get(), oid, "d", "x", kEpochMax, 0, kLen, 1), Pattern(kLen, 2));
}

TEST_P(VosUpdateFetchTest, RecordSizesAboveOneAndAlignedZeroCopyBuffers) {
  ObjectId oid = TestOid(6);
  auto data = Pattern(256 << 10, 6);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 7, 16, 4096, data).ok());
  AlignedBuffer buf(64 << 10);
  FetchOp op{oid, "d", "a", kEpochMax, ValueType::kArray, 20, 16, 4096, buf.span()};
  auto r = vos_->Fetch(op);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(std::memcmp(buf.data(), data.data() + 4 * 4096, 64 << 10), 0);
  // Returned checksums cover the returned bytes in csum_chunk_size chunks.
  EXPECT_EQ(r->csum.type, ChecksumType::kCrc32c);
  EXPECT_EQ(r->csum.values,
            ComputeChunkChecksums(ChecksumType::kCrc32c, std::span<const std::byte>(buf.data(), buf.size()), 4096));
}

TEST_P(VosUpdateFetchTest, ReturnedChecksumsAlwaysCoverTheReturnedBytes) {
  // Whole values (stored checksums reused), unaligned parts and compositions of
  // several versions (recomputed) must all match a fresh computation.
  ObjectId oid = TestOid(13);
  auto value = Pattern(10000, 1);
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "s", 5, value).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "x", 5, 0, 1, Pattern(50000, 2)).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "x", 6, 9000, 1, Pattern(5000, 3)).ok());
  auto check = [&](FetchOp op) {
    auto r = vos_->Fetch(op);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    size_t n = op.type == ValueType::kSingle ? r->size : op.buffer.size();
    EXPECT_EQ(r->csum.values, ComputeChunkChecksums(ChecksumType::kCrc32c, op.buffer.first(n), 4096))
        << "index " << op.index << " count " << op.count;
  };
  std::vector<std::byte> buf(50000);
  check(FetchOp{oid, "d", "s", kEpochMax, ValueType::kSingle, 0, 0, 1, buf});
  for (auto [index, count] : {std::pair<uint64_t, uint64_t>{0, 50000},
                              {4096, 8192},
                              {4096, 4000},
                              {100, 9000},
                              {8192, 4096},
                              {45056, 4944}}) {
    check(FetchOp{oid, "d", "x", kEpochMax, ValueType::kArray, index, count, 1, std::span(buf).first(count)});
  }
}

TEST_P(VosUpdateFetchTest, CallerChecksumsAreVerifiedAtUpdate) {
  ObjectId oid = TestOid(7);
  auto data = Pattern(10000, 7);
  UpdateOp op = SingleUpdate(oid, "d", "a", 3, data);
  op.csum = {ChecksumType::kCrc64, 1024, ComputeChunkChecksums(ChecksumType::kCrc64, data, 1024)};
  ASSERT_TRUE(vos_->Update(op).ok());
  EXPECT_EQ(*GetSingle(vos_.get(), oid, "d", "a", kEpochMax), data);
  op.epoch = 4;
  op.csum.values[3] ^= 1;
  uint64_t used = vos_->Space().data_used;
  Status st = vos_->Update(op);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  // The data is written while its checksums are verified: the space goes back.
  EXPECT_EQ(vos_->Space().data_used, used);
  op.csum.values.pop_back();
  EXPECT_TRUE(vos_->Update(op).IsInvalidArgument());
  EXPECT_EQ(GetSingle(vos_.get(), oid, "d", "a", 4)->size(), 10000u);  // still the epoch-3 value
}

TEST_P(VosUpdateFetchTest, InvalidArgumentsAreRejected) {
  ObjectId oid = TestOid(8);
  auto data = Pattern(64, 8);
  EXPECT_TRUE(PutSingle(vos_.get(), oid, "", "a", 1, data).IsInvalidArgument());
  EXPECT_TRUE(PutSingle(vos_.get(), oid, "d", "", 1, data).IsInvalidArgument());
  EXPECT_TRUE(PutSingle(vos_.get(), oid, "d", "a", 0, data).IsInvalidArgument());
  EXPECT_TRUE(PutArray(vos_.get(), oid, "d", "arr", 1, 0, 5, data).IsInvalidArgument());  // 64 % 5
  EXPECT_TRUE(PutArray(vos_.get(), oid, "d", "arr", 1, ~uint64_t{0} - 2, 1, data).IsInvalidArgument());
  EXPECT_TRUE(PutArray(vos_.get(), oid, "d", "arr", 1, 0, 0, data).IsInvalidArgument());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "arr", 1, 0, 8, data).ok());
  EXPECT_TRUE(PutArray(vos_.get(), oid, "d", "arr", 2, 0, 16, data).IsInvalidArgument());  // record size
  EXPECT_TRUE(PutSingle(vos_.get(), oid, "d", "arr", 2, data).IsInvalidArgument());        // type
  EXPECT_TRUE(GetArray(vos_.get(), oid, "d", "arr", kEpochMax, 0, 8, 4).status().IsInvalidArgument());
  EXPECT_TRUE(GetSingle(vos_.get(), oid, "d", "arr", kEpochMax).status().IsInvalidArgument());
  std::vector<std::byte> small(10);
  FetchOp bad{oid, "d", "arr", kEpochMax, ValueType::kArray, 0, 8, 8, small};
  EXPECT_TRUE(vos_->Fetch(bad).status().IsInvalidArgument());
  FetchOp wrap{oid, "d", "arr", kEpochMax, ValueType::kArray, ~uint64_t{0}, 1, 8, std::span<std::byte>(small).first(8)};
  EXPECT_TRUE(vos_->Fetch(wrap).status().IsInvalidArgument());
  EXPECT_EQ(vos_->in_flight(), 0u);
}

TEST_P(VosUpdateFetchTest, ManyAsyncOpsInFlight) {
  ObjectId oid = TestOid(9);
  constexpr int kOps = 200;
  std::vector<std::vector<std::byte>> data;
  for (int i = 0; i < kOps; ++i) data.push_back(Pattern(i % 3 == 0 ? 100 : 4096 * (1 + i % 4), i));
  int ok = 0;
  for (int i = 0; i < kOps; ++i) {
    UpdateOp op;
    op.oid = oid;
    op.dkey = "d" + std::to_string(i % 7);
    op.akey = "a" + std::to_string(i);
    op.epoch = 50 + i;
    op.data = data[i];
    vos_->SubmitUpdate(op, [&ok](Status s) { ok += s.ok(); });
  }
  EXPECT_EQ(vos_->in_flight(), static_cast<size_t>(kOps));
  while (vos_->in_flight() > 0) vos_->Progress(true);
  EXPECT_EQ(ok, kOps);
  std::vector<std::vector<std::byte>> bufs(kOps, std::vector<std::byte>(20000));
  int matched = 0;
  for (int i = 0; i < kOps; ++i) {
    FetchOp op{oid,    "d" + std::to_string(i % 7), "a" + std::to_string(i), kEpochMax, ValueType::kSingle, 0, 0, 1,
               bufs[i]};
    vos_->SubmitFetch(op, [&, i](Result<FetchResult> r) {
      matched += r.ok() && r->size == data[i].size() && std::equal(data[i].begin(), data[i].end(), bufs[i].begin());
    });
  }
  while (vos_->in_flight() > 0) vos_->Progress(true);
  EXPECT_EQ(matched, kOps);
}

TEST_P(VosUpdateFetchTest, ReplayedUpdateAtTheSameEpochReplacesAndKeepsSpaceRight) {
  ObjectId oid = TestOid(10);
  auto a = Pattern(64 << 10, 1);
  auto b = Pattern(64 << 10, 2);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 9, 0, 1, a).ok());
  uint64_t used = vos_->Space().data_used;
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 9, 0, 1, b).ok());
  EXPECT_EQ(vos_->Space().data_used, used);
  EXPECT_EQ(*GetArray(vos_.get(), oid, "d", "a", kEpochMax, 0, a.size(), 1), b);
}

// The lookup of an existing version at the update's key is skipped for epochs
// above every epoch committed: replays at and below the newest epoch, also
// after a reopen (the mark is loaded from the store), must still replace.
TEST_P(VosUpdateFetchTest, ReplaysBelowAndAtTheNewestEpochReplaceAfterReopen) {
  ObjectId oid = TestOid(12);
  auto a = Pattern(16 << 10, 1);
  auto b = Pattern(16 << 10, 2);
  auto small = Pattern(100, 3);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 5, 0, 1, a).ok());
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "s", 6, small).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "b", 9, 0, 1, a).ok());
  if (GetParam() == StorageClass::kNvme) Reopen();
  const SpaceInfo before = vos_->Space();
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 5, 0, 1, b).ok());  // below the newest epoch
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "b", 9, 0, 1, b).ok());  // at it
  ASSERT_TRUE(PutSingle(vos_.get(), oid, "d", "s", 6, small).ok());   // an inline value
  EXPECT_EQ(vos_->Space().data_used, before.data_used);
  EXPECT_EQ(vos_->Space().inline_bytes, before.inline_bytes);
  EXPECT_EQ(*GetArray(vos_.get(), oid, "d", "a", 5, 0, b.size(), 1), b);
  EXPECT_EQ(*GetArray(vos_.get(), oid, "d", "b", kEpochMax, 0, b.size(), 1), b);
  // A new epoch adds a version (and space) as before.
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "b", 10, 0, 1, a).ok());
  EXPECT_EQ(vos_->Space().data_used, before.data_used + a.size());
}

// The akey header is written only when RocksDB may not hold it: an unchanged
// header is not rewritten, a widened one is, and one that aggregation deleted
// is written again. The reopen drops the caches, so a header that never
// reached RocksDB would show as missing extents here.
// Tests that reopen a store and expect its contents back: the classes that
// keep them (the ram class starts empty at every open).
class VosUpdateFetchReopenTest : public VosUpdateFetchTest {};

TEST_P(VosUpdateFetchReopenTest, AkeyHeaderReachesTheStoreWheneverItChangesOrWasDeleted) {
  ObjectId oid = TestOid(13);
  auto small = Pattern(4 << 10, 1);
  auto large = Pattern(64 << 10, 2);
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 1, 0, 1, small).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 2, 8 << 10, 1, small).ok());  // same header
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 3, 1 << 20, 1, large).ok());  // a new size class
  Reopen();
  EXPECT_EQ(*GetArray(vos_.get(), oid, "d", "a", kEpochMax, 0, small.size(), 1), small);
  EXPECT_EQ(*GetArray(vos_.get(), oid, "d", "a", kEpochMax, 8 << 10, small.size(), 1), small);
  EXPECT_EQ(*GetArray(vos_.get(), oid, "d", "a", kEpochMax, 1 << 20, large.size(), 1), large);
  auto end = vos_->QueryArrayEnd(oid, "d", "a", kEpochMax);
  ASSERT_TRUE(end.ok() && end->has_value());
  EXPECT_EQ(**end, (1u << 20) + large.size());

  // Punched and aggregated away: the header goes with the last version.
  ASSERT_TRUE(vos_->PunchAkey(oid, "d", "a", 10).ok());
  ASSERT_TRUE(vos_->Aggregate(kEpochMax).ok());
  ASSERT_TRUE(PutArray(vos_.get(), oid, "d", "a", 11, 0, 1, small).ok());
  Reopen();
  EXPECT_EQ(*GetArray(vos_.get(), oid, "d", "a", kEpochMax, 0, small.size(), 1), small);
}

TEST_P(VosUpdateFetchTest, DataSurvivesReopenOnNvme) {
  if (GetParam() == StorageClass::kRam) {
    // The ram class keeps nothing across an open: a reopened store is empty.
    auto data = Pattern(100, 1);
    ASSERT_TRUE(PutSingle(vos_.get(), TestOid(11), "d", "a", 1, data).ok());
    Reopen();
    EXPECT_TRUE(GetSingle(vos_.get(), TestOid(11), "d", "a", kEpochMax)->empty());
    return;
  }
  auto small = Pattern(100, 1);
  auto big = Pattern(1 << 20, 2);
  ASSERT_TRUE(PutSingle(vos_.get(), TestOid(11), "d", "small", 1, small).ok());
  ASSERT_TRUE(PutArray(vos_.get(), TestOid(11), "d", "big", 2, 0, 1, big).ok());
  uint64_t used = vos_->Space().data_used;
  Reopen();
  EXPECT_EQ(vos_->Space().data_used, used);
  EXPECT_EQ(*GetSingle(vos_.get(), TestOid(11), "d", "small", kEpochMax), small);
  EXPECT_EQ(*GetArray(vos_.get(), TestOid(11), "d", "big", kEpochMax, 0, big.size(), 1), big);
}

TEST_P(VosUpdateFetchTest, RelaxedCommitModeStillReadsBack) {
  vos_.reset();
  VosOptions o = Options();
  o.sync_commit = false;
  auto v = Vos::Open(o);
  ASSERT_TRUE(v.ok());
  vos_ = std::move(*v);
  auto data = Pattern(50000, 5);
  ASSERT_TRUE(PutSingle(vos_.get(), TestOid(12), "d", "a", 1, data).ok());
  ASSERT_TRUE(vos_->Sync().ok());
  EXPECT_EQ(*GetSingle(vos_.get(), TestOid(12), "d", "a", kEpochMax), data);
}

// WAL files are preallocated with their size set (so a WAL sync does not
// journal a size change), and a store copied while open, as a crash leaves
// it, with the WAL's zero-filled preallocated tail, opens with every
// acknowledged update.
TEST(VosWalTest, WalIsPreallocatedAndItsZeroTailReadsAsTheEnd) {
  testing::TempDir dir;
  auto vos = Vos::Open(testing::SmallOptions(dir.path()));
  ASSERT_TRUE(vos.ok()) << vos.status().ToString();
  auto small = Pattern(100, 3);
  auto big = Pattern(1 << 20, 4);
  ASSERT_TRUE(PutSingle(vos->get(), TestOid(13), "d", "small", 1, small).ok());
  ASSERT_TRUE(PutArray(vos->get(), TestOid(13), "d", "big", 2, 0, 1, big).ok());
  namespace fs = std::filesystem;
  uintmax_t largest_log = 0;
  for (const auto& e : fs::directory_iterator(fs::path(testing::SmallOptions(dir.path()).path) / "meta")) {
    if (e.path().extension() == ".log") largest_log = std::max(largest_log, e.file_size());
  }
  // Two small commits are a few hundred bytes of WAL; the file is sized ahead.
  EXPECT_GE(largest_log, uintmax_t{1} << 20);

  testing::TempDir copy;
  fs::copy(dir.path(), copy.path(), fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  auto reopened = Vos::Open(testing::SmallOptions(copy.path()));
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(*GetSingle(reopened->get(), TestOid(13), "d", "small", kEpochMax), small);
  EXPECT_EQ(*GetArray(reopened->get(), TestOid(13), "d", "big", kEpochMax, 0, big.size(), 1), big);
}

// One fetch of more extents than the io_uring completion ring holds (a file
// written in 4 KiB appends, read back a chunk at a time): the completions the
// kernel parks on its overflow list must be reaped too, or the fetch never ends.
TEST(VosUringTest, AFetchOfMoreExtentsThanTheCompletionRingCompletes) {
  testing::TempDir dir;
  VosOptions o = testing::SmallOptions(dir.path());
  o.io_depth = 2;  // a completion ring of 4 entries
  auto vos = Vos::Open(o);
  ASSERT_TRUE(vos.ok()) << vos.status().ToString();
  constexpr uint64_t kExtents = 96, kExtent = 4096;
  std::vector<std::byte> all;
  for (uint64_t i = 0; i < kExtents; ++i) {
    auto piece = Pattern(kExtent, 100 + i);
    ASSERT_TRUE(PutArray(vos->get(), TestOid(14), "d", "a", Epoch(10 + i), i * kExtent, 1, piece).ok());
    all.insert(all.end(), piece.begin(), piece.end());
  }
  // As the engine drives it: submit, then reap on the event fd only
  // (Progress(false) never waits in the kernel, which would flush the
  // overflow list by itself). The buffer is not block-aligned, as a client's
  // shared segment need not be, so every extent is a read of its own.
  std::vector<std::byte> storage(all.size() + 1);
  std::span<std::byte> buffer(storage.data() + 1, all.size());
  FetchOp op{TestOid(14), "d", "a", kEpochMax, ValueType::kArray, 0, all.size(), 1, buffer};
  std::optional<Result<FetchResult>> result;
  (*vos)->SubmitFetch(op, [&](Result<FetchResult> r) { result = std::move(r); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!result && std::chrono::steady_clock::now() < deadline) {
    if ((*vos)->Progress(false) == 0) {
      pollfd pfd{(*vos)->event_fd(), POLLIN, 0};
      (void)::poll(&pfd, 1, 100);
    }
  }
  ASSERT_TRUE(result.has_value()) << "the fetch did not complete";
  ASSERT_TRUE(result->ok()) << result->status().ToString();
  EXPECT_TRUE(std::equal(buffer.begin(), buffer.end(), all.begin()));
}

// When a pass holds small I/O back: only with the device deep (kHoldWhenDeep
// I/Os in the kernel) and a batch below kHoldAtMost.
TEST(VosUringTest, SmallIoIsHeldOnlyWhileTheDeviceIsDeep) {
  EXPECT_FALSE(HoldsSmallIo(0, 100));
  for (size_t in_kernel = 0; in_kernel < kHoldWhenDeep; ++in_kernel) {
    EXPECT_FALSE(HoldsSmallIo(1, in_kernel)) << in_kernel;
    EXPECT_FALSE(HoldsSmallIo(kHoldAtMost - 1, in_kernel)) << in_kernel;
  }
  EXPECT_TRUE(HoldsSmallIo(1, kHoldWhenDeep));
  EXPECT_TRUE(HoldsSmallIo(kHoldAtMost - 1, 64));
  EXPECT_FALSE(HoldsSmallIo(kHoldAtMost, 64));
}

// HoldSubmissions, as an engine target uses it while requests keep coming,
// with the device idle: a small read is handed to the kernel by the pass that
// queued it (nothing waits for a later pass at queue depth 1), and
// PrepareSleep never sleeps on queued I/O.
TEST(VosUringTest, ReadsOfAnIdleDeviceGoAtOnceAndNeverWaitASleep) {
  testing::TempDir dir;
  auto vos = Vos::Open(testing::SmallOptions(dir.path()));
  ASSERT_TRUE(vos.ok()) << vos.status().ToString();
  const auto data = Pattern(4096, 21);
  ASSERT_TRUE(PutArray(vos->get(), TestOid(15), "d", "a", 3, 0, 1, data).ok());
  auto fetch = [&](std::vector<std::byte>& into, std::optional<Result<FetchResult>>& result) {
    FetchOp op{TestOid(15), "d", "a", kEpochMax, ValueType::kArray, 0, into.size(), 1, into};
    (*vos)->SubmitFetch(op, [&result](Result<FetchResult> r) { result = std::move(r); });
  };
  auto signalled = [&](int ms) {
    pollfd pfd{(*vos)->event_fd(), POLLIN, 0};
    return ::poll(&pfd, 1, ms) == 1;
  };
  auto finish = [&](std::optional<Result<FetchResult>>& result) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!result && std::chrono::steady_clock::now() < deadline) {
      if ((*vos)->Progress(false) == 0) signalled(100);
    }
  };
  (*vos)->HoldSubmissions(true);
  (void)(*vos)->PrepareSleep();  // start with a clear event fd

  // The device has nothing: the pass that queued the read submits it, though
  // the owner holds.
  std::vector<std::byte> first(4096);
  std::optional<Result<FetchResult>> first_result;
  fetch(first, first_result);
  (void)(*vos)->Progress(false);
  EXPECT_TRUE(signalled(5000)) << "a read of an idle device was held for another pass";
  finish(first_result);
  ASSERT_TRUE(first_result.has_value());
  ASSERT_TRUE(first_result->ok()) << first_result->status().ToString();
  EXPECT_EQ(first, data);

  // Before a sleep nothing stays held.
  (void)(*vos)->PrepareSleep();
  std::vector<std::byte> second(4096);
  std::optional<Result<FetchResult>> second_result;
  fetch(second, second_result);
  (void)(*vos)->PrepareSleep();  // its own pass holds; the sleep must not
  EXPECT_TRUE(signalled(5000)) << "PrepareSleep left a held read unsubmitted";
  finish(second_result);
  ASSERT_TRUE(second_result.has_value());
  ASSERT_TRUE(second_result->ok()) << second_result->status().ToString();
  EXPECT_EQ(second, data);
}

INSTANTIATE_TEST_SUITE_P(Classes, VosUpdateFetchTest, ::testing::Values(StorageClass::kNvme, StorageClass::kRam),
                         [](const auto& info) { return std::string(StorageClassName(info.param)); });
INSTANTIATE_TEST_SUITE_P(Classes, VosUpdateFetchReopenTest, ::testing::Values(StorageClass::kNvme),
                         [](const auto& info) { return std::string(StorageClassName(info.param)); });

TEST(VosEventFdTest, EventFdWakesAnEpollStyleLoop) {
  // The engine polls with Progress(false), and before it sleeps in poll/epoll on
  // event_fd() it calls PrepareSleep(), sleeping only when that ran nothing.
  testing::TempDir dir;
  auto v = Vos::Open(testing::SmallOptions(dir.path()));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  Vos* vos = v->get();
  ASSERT_GE(vos->event_fd(), 0);
  auto data = Pattern(256 << 10, 1);
  int done = 0;
  for (int i = 0; i < 8; ++i) {
    UpdateOp op;
    op.oid = TestOid(1);
    op.dkey = "d";
    op.akey = "a" + std::to_string(i);
    op.epoch = 10;
    op.data = data;
    vos->SubmitUpdate(op, [&done](Status s) { done += s.ok(); });
  }
  vos->Progress(false);  // hands the queued writes to the kernel
  int wakeups = 0;
  while (done < 8) {
    if (vos->PrepareSleep() > 0) continue;  // something completed meanwhile: no sleep
    pollfd pfd{vos->event_fd(), POLLIN, 0};
    ASSERT_EQ(::poll(&pfd, 1, 20000), 1) << "no wake-up with " << vos->in_flight() << " ops in flight";
    vos->Progress(false);
    ASSERT_LT(++wakeups, 1000);
  }
  EXPECT_EQ(vos->in_flight(), 0u);
  // Progress(false) leaves the fd signalled; PrepareSleep clears it, so an
  // epoll loop would sleep.
  EXPECT_EQ(vos->PrepareSleep(), 0);
  pollfd pfd{vos->event_fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 0), 0);
  EXPECT_EQ(*GetSingle(vos, TestOid(1), "d", "a7", kEpochMax), data);
}

TEST(VosOpenTest, BlockDeviceOptionUsesThatTargetAsIs) {
  // A pre-sized regular file stands in for a device: the store must use it as
  // it is (no creation, no zero fill) and bound its capacity by data_size.
  testing::TempDir dir;
  std::string device = dir.path() + "/fake-device";
  {
    std::vector<char> zeros(1 << 20);
    FILE* f = std::fopen(device.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    for (int i = 0; i < 16; ++i) ASSERT_EQ(std::fwrite(zeros.data(), 1, zeros.size(), f), zeros.size());
    std::fclose(f);
  }
  VosOptions o = testing::SmallOptions(dir.path());
  o.block_device = device;
  o.data_size = 8 << 20;
  auto data = Pattern(1 << 20, 9);
  {
    auto v = Vos::Open(o);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ((*v)->Space().data_total, 8u << 20);
    ASSERT_TRUE(PutSingle(v->get(), TestOid(1), "d", "a", 3, data).ok());
  }
  EXPECT_FALSE(std::filesystem::exists(o.path + "/data"));
  auto v = Vos::Open(o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*GetSingle(v->get(), TestOid(1), "d", "a", kEpochMax), data);
  EXPECT_EQ((*v)->Space().data_used, 1u << 20);
}

TEST(VosOpenTest, BadOptionsAreRejected) {
  VosOptions o;
  EXPECT_TRUE(Vos::Open(o).status().IsInvalidArgument());  // nvme without a path
  testing::TempDir dir;
  o = testing::SmallOptions(dir.path());
  o.data_size = 100;
  EXPECT_TRUE(Vos::Open(o).status().IsInvalidArgument());
  o = testing::SmallOptions(dir.path());
  o.io_depth = 0;
  EXPECT_TRUE(Vos::Open(o).status().IsInvalidArgument());
}

}  // namespace
}  // namespace ros2::vos
