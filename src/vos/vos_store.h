// VosStore: the implementation of Vos (vos.h) on RocksDB and an ExtentStore.
//
// One instance per target, owned by the target thread; every public method
// must be called from that thread. It owns the RocksDB instance (metadata and
// inline values), the extent store (io_uring on the data file, or memory), the
// extent allocator, the in-memory punch index and snapshot set, and, for the
// nvme class with durable commits, a private CommitThread. The code is split
// by operation: vos_store.cc (open, progress, punch, snapshots, space),
// vos_update.cc, vos_fetch.cc, vos_enum.cc (enumeration and queries) and
// vos_aggregate.cc. The formats are specified in docs/vos.md.
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/merge_operator.h>

#include <deque>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "vos/akey_cache.h"
#include "vos/aligned_buffer.h"
#include "vos/commit_thread.h"
#include "vos/extent_allocator.h"
#include "vos/extent_store.h"
#include "vos/keys.h"
#include "vos/range_set.h"
#include "vos/records.h"
#include "vos/visibility.h"
#include "vos/vos.h"

namespace ros2::vos {

// The merge operator of the metadata RocksDB (8-byte counters such as 'M'
// "inline_bytes" add up); anything that opens a store's RocksDB needs it.
std::shared_ptr<rocksdb::MergeOperator> MetadataMergeOperator();

// Whether a pass that may hold (HoldSubmissions) keeps `queued` small I/Os
// back for the next pass, with `in_kernel` I/Os already at the device: only
// while the device is deep (kHoldWhenDeep) and the batch is small
// (kHoldAtMost). A pass never holds twice in a row (VosStore::SubmitQueued).
inline constexpr size_t kHoldAtMost = 16;   // queued I/O a pass never keeps back
inline constexpr size_t kHoldWhenDeep = 8;  // I/Os in the kernel below which nothing is held
inline bool HoldsSmallIo(size_t queued, size_t in_kernel) {
  return queued > 0 && queued < kHoldAtMost && in_kernel >= kHoldWhenDeep;
}

class VosStore final : public Vos {
 public:
  static Result<std::unique_ptr<Vos>> Open(const VosOptions& options);
  ~VosStore() override;

  void SubmitUpdate(const UpdateOp& op, UpdateCallback done) override;
  void SubmitFetch(const FetchOp& op, FetchCallback done) override;
  int Progress(bool wait) override;
  int PrepareSleep() override;
  int event_fd() const override { return event_fd_; }
  size_t in_flight() const override { return in_flight_; }
  void AllowInlineCommit(bool allowed) override { owner_allows_inline_ = allowed; }
  void HoldSubmissions(bool hold) override { owner_holds_ = hold; }

  void SubmitPunch(const PunchOp& op, PunchCallback done) override;
  void SubmitDiscard(const DiscardOp& op, DiscardCallback done) override;

  Result<std::vector<ObjectId>> ListObjects(Epoch epoch, ListAnchor* anchor, size_t max) override;
  Result<std::vector<std::string>> ListDkeys(const ObjectId& oid, Epoch epoch, ListAnchor* anchor, size_t max) override;
  Result<std::vector<std::string>> ListAkeys(const ObjectId& oid, const std::string& dkey, Epoch epoch,
                                             ListAnchor* anchor, size_t max) override;
  Result<std::vector<ExtentInfo>> ListExtents(const ObjectId& oid, const std::string& dkey, const std::string& akey,
                                              Epoch epoch, ListAnchor* anchor, size_t max) override;
  Result<std::optional<std::string>> QueryMaxDkey(const ObjectId& oid, Epoch epoch) override;
  Result<std::optional<uint64_t>> QueryArrayEnd(const ObjectId& oid, const std::string& dkey, const std::string& akey,
                                                Epoch epoch) override;

  Status CreateSnapshot(Epoch epoch) override;
  Status DestroySnapshot(Epoch epoch) override;
  std::vector<Epoch> ListSnapshots() const override { return {snapshots_.begin(), snapshots_.end()}; }
  Result<AggregateStats> Aggregate(Epoch upto) override;

  Result<Epoch> DecidedEpoch(const ObjectId& oid, std::string_view dkey, std::string_view akey) override;

  Epoch HighestEpoch() const override { return highest_epoch_; }
  SpaceInfo Space() const override;
  HealthInfo Health() const override;
  Status Sync() override;

 private:
  // An update between SubmitUpdate and its callback.
  struct UpdateState {
    UpdateOp op;
    UpdateCallback done;
    std::string akey_scope;
    std::string record_key;
    ValueRecord rec;
    bool holds_header = false;            // counted in pending_headers_
    std::optional<ValueRecord> replaced;  // a committed record at the same key, freed after commit
    uint64_t replaced_inline = 0;         // the inline bytes of a replaced inline record, released after commit
    uint64_t inline_charge = 0;           // inline bytes charged and not yet committed (released on failure)
    bool fresh = false;                   // the extent lies in data-file space never written before
    AlignedBuffer bounce;                 // the data, when the caller's buffer cannot go to O_DIRECT
    Status checksum_status;               // external: the checksum pass run while the data is written
    AkeyHeader committed_header;          // the header its commit group wrote
    std::list<UpdateState>::iterator self;
  };

  // A punch between SubmitPunch and its callback.
  struct PunchState {
    PunchOp op;
    PunchCallback done;
    std::string scope;  // keys::ObjectScope / DkeyScope / AkeyScope
    std::list<PunchState>::iterator self;
  };

  // One stored version a fetch reads from.
  struct SourceVersion {
    std::string inline_data;  // inline records: their data (rec.inline_data is not used)
    ValueRecord rec;
    Epoch epoch = 0;
    uint64_t index = 0;  // arrays: first record
  };
  // A contiguous part of one version delivered into the caller's buffer.
  struct ReadPiece {
    size_t source = 0;           // index into FetchState::sources
    uint64_t deliver_begin = 0;  // bytes of the version's data to deliver
    uint64_t deliver_end = 0;
    uint64_t dst = 0;           // offset in the caller's buffer
    uint64_t verify_begin = 0;  // the checksum chunks covering the delivered bytes
    uint64_t verify_end = 0;
    uint64_t read_begin = 0;  // external: first byte read (block-aligned)
    bool direct = false;      // read straight into the caller's buffer
    AlignedBuffer bounce;
  };
  struct FetchState {
    FetchOp op;
    FetchCallback done;
    uint64_t generation = 0;
    uint64_t size = 0;       // FetchResult::size
    uint64_t deliver = 0;    // bytes written into the buffer
    uint64_t array_end = 0;  // FetchResult::array_end
    std::vector<SourceVersion> sources;
    std::vector<ReadPiece> pieces;
    // The plan's scratch, kept with the node for the next fetch's plan.
    std::string scope;  // keys::AkeyScope
    std::vector<ExtentCandidate> candidates;
    std::vector<VisiblePiece> visible;
    size_t reads_pending = 0;
    Status status;
    std::list<FetchState>::iterator self;
  };

  struct PendingHeader {
    AkeyHeader header;
    int refs = 0;
  };
  struct DeferredFree {
    uint64_t generation;
    uint64_t offset;
    uint64_t len;
  };

  static constexpr size_t kAkeyCacheBytes = size_t{256} << 20;

  explicit VosStore(const VosOptions& options);
  Status Init();
  Status LoadState();
  // Loads highest_epoch_ from MetaKey("epoch_high"); a store written before
  // the key existed is scanned once for its record, punch and snapshot epochs.
  Status LoadHighestEpoch();
  // At open: checks the extents of the commit groups whose data rode on their
  // WAL sync (check records a crash left) and rolls back those that did not
  // reach the disk. At close: deletes the check records still present.
  Status CheckLastGroups();
  void RetireCheckRecords();
  Status Drain();  // waits for every in-flight op (used before close)

  // vos_update.cc
  Status PrepareUpdate(UpdateState* u);
  Status ChecksumData(UpdateState* u);  // verifies the caller's checksums or computes the store's
  void OnUpdateWritten(UpdateState* u, Status st);
  // Builds a commit group of the ready updates and punches unless one is
  // committing; returns the callbacks run. `from_progress`: called by
  // Progress, which may run the commit (and its callbacks) inline; submit
  // paths leave such a group to the next Progress.
  int StartCommitIfIdle(bool from_progress);
  int FinishCommit(std::unique_ptr<CommitGroup> group);
  void CompleteUpdate(UpdateState* u, Status st);
  void ReleaseHeader(UpdateState* u);

  // vos_decided.cc
  Status CountDecided();  // at open: decided_count_
  // With 2 x decided_keep records or more: adds to `batch` the deletion of
  // those older than the retention, then of the oldest beyond decided_keep.
  // REQUIRES: no commit group in flight (the scan sees every record), and the
  // group's own records go into `batch` after these deletions.
  Status SweepDecided(rocksdb::WriteBatch* batch);

  // vos_discard.cc
  struct DiscardState {
    DiscardOp op;
    DiscardCallback done;
  };
  // Runs the discards with no update or punch at their epoch on their dkey in
  // flight; returns the callbacks run.
  int StartDiscards();
  bool DiscardWaits(const DiscardOp& op) const;
  Status DiscardNow(const DiscardOp& op);

  // vos_fetch.cc
  Status PrepareFetch(FetchState* f);
  Status PlanSingle(FetchState* f, std::string_view akey_scope, size_t dkey_scope_len);
  // `cached`: the akey's cache entry found with its header, or nullptr.
  Status PlanArray(FetchState* f, std::string_view akey_scope, size_t dkey_scope_len, const AkeyHeader& header,
                   AkeyCache::Akey* cached);
  // The akey's extents from its cache entry `cached` (nullptr: none), loaded
  // from RocksDB on a miss; nullptr when the akey cannot be cached (too large,
  // or a record that does not decode: the RocksDB path then reports it for
  // the fetches it affects).
  const AkeyCache::Extents* CachedExtents(std::string_view akey_scope, AkeyCache::Akey* cached);
  Status CollectCachedSources(FetchState* f, const AkeyCache::Extents& extents, const AkeyHeader& h, Epoch punched,
                              std::vector<ExtentCandidate>* candidates);
  Status CollectStoredSources(FetchState* f, std::string_view akey_scope, const AkeyHeader& h, Epoch punched,
                              std::vector<ExtentCandidate>* candidates);
  // One past the highest record visible at `epoch` (above `punched`) of an
  // array akey, or nullopt: from its cached extents, or from RocksDB through
  // `it`. Per size class, backwards from the highest start.
  static std::optional<uint64_t> CachedArrayEnd(const AkeyCache::Extents& extents, const AkeyHeader& h, Epoch epoch,
                                                Epoch punched);
  Result<std::optional<uint64_t>> StoredArrayEnd(rocksdb::Iterator* it, std::string_view akey_scope,
                                                 const AkeyHeader& h, Epoch epoch, Epoch punched);
  void AddPiece(FetchState* f, size_t source, uint64_t deliver_begin, uint64_t deliver_end, uint64_t dst);
  void StartReads(FetchState* f);
  void FinishFetch(FetchState* f);
  // Retires a finished fetch: its node goes to spare_fetches_ (or is freed).
  void RecycleFetch(FetchState* f);
  bool ReuseStoredChecksums(const FetchState& f, std::vector<uint64_t>* out) const;

  // vos_enum.cc
  enum class Level { kObject, kDkey, kAkey };
  Result<std::vector<keys::ParsedTreeKey>> ListLevel(std::string_view parent_prefix, Level level, Epoch epoch,
                                                     ListAnchor* anchor, size_t max);
  Result<bool> HasVisibleUnder(rocksdb::Iterator* it, std::string_view tree_prefix, Epoch epoch);
  Result<std::vector<std::pair<ExtentCandidate, ValueRecord>>> EligibleExtents(std::string_view akey_scope,
                                                                               size_t dkey_scope_len, Epoch epoch);

  // shared helpers
  // The akey's header: an update's in flight, else the committed one (from
  // the akey cache, else RocksDB, which then fills the cache); nullopt when
  // the akey has none. `cached`: the akey's cache entry as Find returned it
  // (nullptr: none), updated when the header is cached here.
  Result<std::optional<AkeyHeader>> LoadHeader(std::string_view akey_scope, AkeyCache::Akey** cached);
  Result<std::optional<AkeyHeader>> LoadHeader(std::string_view akey_scope) {
    AkeyCache::Akey* cached = akey_cache_.Find(akey_scope);
    return LoadHeader(akey_scope, &cached);
  }
  Epoch PunchedAt(std::string_view akey_scope, size_t dkey_scope_len, Epoch at) const {
    return punches_.LatestCovering(akey_scope, dkey_scope_len, at);
  }
  void CompletePunch(PunchState* p, Status st);
  void FreeAfterReaders(uint64_t offset, uint64_t len);
  // Versions a batch deletes (Aggregate, DiscardNow) and the space they give
  // back once it is written.
  struct Reclaimed {
    std::vector<std::pair<uint64_t, uint64_t>> frees;  // external: offset, alloc_len
    uint64_t inline_bytes = 0;
  };
  // Adds one version's deletion to `batch`: its key, and an external one's
  // allocation record.
  static void DeleteVersion(rocksdb::WriteBatch* batch, std::string_view key, bool external, uint64_t offset,
                            uint64_t alloc_len, uint64_t length, Reclaimed* r);
  // Writes `batch` with the inline-bytes counter's change, then gives the
  // versions' space back (extents once no reader holds them); `r` is then empty.
  Status WriteReclaiming(rocksdb::WriteBatch* batch, Reclaimed* r, std::string_view what);
  // Space accounting (docs/vos.md, "Space accounting"): charges the budget
  // (NoSpace, nothing charged, when it does not fit) and returns space to it.
  Status ChargeSpace(uint64_t bytes, const UpdateOp& op);
  void ReleaseSpace(uint64_t bytes);
  // Returns an extent's blocks to the allocator and their charge to the budget.
  void FreeExtent(uint64_t offset, uint64_t len);
  // Places an external update's extent: budget, allocator, data-file growth.
  Status PlaceExtent(UpdateState* u);
  // Bytes of inline values in the store (an upgrade from format 1 counts them once).
  Result<uint64_t> CountInlineBytes();
  void ReleaseDeferredFrees();
  int RunDeferred();
  void DrainEventFd();
  // Hands queued extent I/O to the kernel, unless `may_hold`, the owner holds
  // submissions (HoldSubmissions), HoldsSmallIo says so and the last pass
  // did not hold.
  void SubmitQueued(bool may_hold);
  void Defer(std::function<void()> fn) { deferred_.push_back(std::move(fn)); }
  std::unique_ptr<rocksdb::Iterator> NewIterator() const;
  // The iterator of the fetch path, refreshed when the database has changed.
  rocksdb::Iterator* FetchIterator();
  // Decodes a record read from RocksDB into `src` (copying inline data).
  Status LoadSource(const rocksdb::Slice& value, std::string_view what, ChecksumWindow window, SourceVersion* src);
  rocksdb::WriteOptions WriteOpts() const;

  VosOptions options_;
  Env* env_;
  int event_fd_ = -1;
  std::unique_ptr<rocksdb::Env> mem_env_;   // ram class: RocksDB in memory
  std::unique_ptr<rocksdb::Env> meta_env_;  // nvme class: the OS, WAL files preallocated with their size
  std::unique_ptr<rocksdb::DB> db_;
  std::unique_ptr<ExtentStore> extents_;
  std::unique_ptr<ExtentAllocator> allocator_;
  std::unique_ptr<CommitThread> committer_;  // nvme class with sync_commit
  // ExtentSync::kWal in effect (a data file on the WAL's device): a group's
  // extents are made durable by its WAL sync's device flush.
  bool wal_covers_extents_ = false;
  // The highest epoch written to a commit batch (and recorded in it under
  // MetaKey("epoch_high")); HighestEpoch().
  Epoch highest_epoch_ = 0;
  bool owner_allows_inline_ = true;  // AllowInlineCommit
  bool owner_holds_ = false;         // HoldSubmissions
  bool held_ = false;                // a pass kept its queued I/O back
  uint64_t next_check_group_ = 1;
  // Decided transaction records in RocksDB (counted at open, then each one a
  // batch writes; a rewrite of the same key counts twice until the next sweep).
  size_t decided_count_ = 0;
  std::vector<uint64_t> check_records_;  // check records written and not yet deleted by a committed batch
  PunchIndex punches_;
  std::set<Epoch> snapshots_;

  size_t in_flight_ = 0;
  std::list<UpdateState> updates_;
  // Fetches in flight, in generation order (SubmitFetch appends, FinishFetch
  // takes out): the front is the oldest one a deferred free waits for.
  std::list<FetchState> fetches_;
  // Finished fetches' nodes, kept for the next ones (their vectors and key
  // strings keep their memory): a fetch allocates nothing of its own.
  std::list<FetchState> spare_fetches_;
  static constexpr size_t kMaxSpareFetches = 64;
  std::vector<UpdateState*> ready_;  // data written, waiting for a commit group
  std::list<PunchState> punch_states_;
  std::vector<PunchState*> ready_punches_;                             // waiting for a commit group
  std::list<DiscardState> discards_;                                   // submitted, not yet run
  std::vector<std::function<void()>> deferred_;                        // callbacks to run from Progress
  std::map<std::string, PendingHeader, std::less<>> pending_headers_;  // akeys with uncommitted updates
  AkeyCache akey_cache_{kAkeyCacheBytes};                              // committed headers and extents
  std::unique_ptr<rocksdb::Iterator> fetch_iter_;
  rocksdb::SequenceNumber fetch_iter_seq_ = 0;
  std::set<std::string, std::less<>> uncommitted_keys_;  // record keys of uncommitted updates

  // Space: inline value bytes (committed, plus in flight), and everything this
  // store has charged to options_.budget (released when the store closes).
  uint64_t inline_bytes_ = 0;
  uint64_t charged_ = 0;
  // A data file grown on demand (ExtentStore::fresh_space_needs_sync): the
  // ranges known to have been written and made durable. An extent outside
  // them makes its group fdatasync the data file (the first write of a block
  // converts fallocated space, a metadata change the WAL's flush does not cover).
  // The prefix of it that is persisted ('M' "written"), so a restart need not
  // sync again the space a sequential fill wrote.
  bool track_written_ = false;
  RangeSet written_;
  uint64_t written_prefix_ = 0;

  uint64_t next_generation_ = 1;
  std::deque<DeferredFree> deferred_frees_;
  uint64_t deferred_free_bytes_ = 0;
};

}  // namespace ros2::vos
