// Vos: the versioned object store of one engine target (DAOS's VOS).
//
// Data model: object (ObjectId) -> dkey -> akey -> value. A value is either a
// single value (replaced whole by each update) or an array of fixed-size
// records addressed by extents [index, index + count). Every update is stamped
// with an epoch; a fetch at epoch E sees, for each byte, the newest version
// written at an epoch <= E that no punch at an epoch <= E removed. Array holes
// read as zeros. Snapshots pin epochs; Aggregate() reclaims versions that
// neither the latest view nor any snapshot can see.
//
// Storage: metadata and values below `inline_threshold` live in RocksDB; larger
// extents are written out of place to the extent store (a data file grown on
// demand or a block device, O_DIRECT through io_uring, or memory for the ram class) and
// then committed with one RocksDB write batch that also records their checksums.
// An acknowledged update (callback run with OK) is durable unless the store was
// opened with `sync_commit = false`. The formats are specified in docs/vos.md.
//
// Checksums: every value and extent is stored with chunked checksums (one per
// `csum_chunk_size` bytes of the update's data). Update verifies the caller's
// checksums before storing (mismatch: Corruption, nothing stored); fetch verifies
// what it read against the stored checksums (mismatch: Corruption, never the
// data) and returns fresh chunked checksums of the bytes it returns.
//
// Threading: a Vos is owned by one thread (the engine target thread). Every
// method must be called from that thread. Callbacks run inside Progress() (or a
// blocking wrapper) on that thread. Internal threads, if any, are private.
// Buffers passed in ops must stay valid until the op's callback has run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "common/hlc.h"
#include "common/object_id.h"
#include "common/object_model.h"
#include "common/status.h"
#include "vos/space_budget.h"

namespace ros2::vos {

class Env;  // file layer seam (vos/env.h); nullptr means the real OS

enum class StorageClass : uint8_t {
  kNvme = 0,  // RocksDB on disk + extent data file/device with O_DIRECT via io_uring
  kRam = 1,   // metadata and data in memory (DAOS's ram class): not durable across restarts
};
std::string_view StorageClassName(StorageClass c);
Result<StorageClass> ParseStorageClass(std::string_view name);  // "nvme" | "ram"

// How a durable update's extent data reaches stable storage before its commit
// record (nvme class with sync_commit; see docs/vos.md, "Durability").
enum class ExtentSync : uint8_t {
  kGroup = 0,  // plain O_DIRECT writes; one fdatasync of the data file per commit group
  kDsync = 1,  // every extent write carries RWF_DSYNC (one device flush per write)
  // Plain O_DIRECT writes made durable by the device flush of the group's WAL
  // sync (one flush per group); the next open checks the last group's extents
  // against their checksums. Falls back to kGroup for a group with an extent
  // without checksums or a same-epoch replay, and for a data file on another
  // device than the WAL (docs/vos.md, "Durability").
  kWal = 2,
};
std::string_view ExtentSyncName(ExtentSync s);
Result<ExtentSync> ParseExtentSync(std::string_view name);  // "wal" | "group" | "dsync"

struct VosOptions {
  std::string path;  // directory for RocksDB and the data file (created if missing)
  StorageClass storage_class = StorageClass::kNvme;
  // Extent address space in bytes. The nvme data file is not preallocated: it
  // grows on demand (fallocate) to what the extents use; `budget` is what
  // bounds a store's space in the engine.
  uint64_t data_size = uint64_t{1} << 30;
  std::string block_device;                   // if set (nvme class): extents go to this device, not a file
  uint64_t inline_threshold = 4096;           // values/extents smaller than this live in RocksDB
  bool sync_commit = true;                    // false = relaxed durability (acknowledged before the WAL sync)
  ExtentSync extent_sync = ExtentSync::kWal;  // with sync_commit: how extent data is made durable
  // With sync_commit: a commit group holding every operation in flight is
  // committed on the calling thread, saving the two thread wake-ups of a hand-off
  // to the commit thread (docs/vos.md, "Group commit"); false: always the thread.
  bool inline_commit = true;
  ChecksumType checksum = ChecksumType::kCrc32c;  // used when an update carries no checksums
  uint32_t csum_chunk_size = 4096;                // bytes per chunk checksum
  uint32_t io_depth = 128;                        // io_uring submission queue entries
  // Decided transaction records ('D', docs/vos.md "Decided transactions"):
  // once a commit finds 2 x decided_keep of them, it drops those older than
  // decided_retention_ms (by their epoch's wall-clock part, against the
  // store's newest epoch), then the oldest beyond decided_keep.
  uint32_t decided_keep = 4096;
  uint64_t decided_retention_ms = 600'000;
  Env* env = nullptr;  // file-layer seam for fault injection (tests); not owned
  // Shared byte budget (the engine: the pool's space on this engine). The
  // store charges its extent blocks and inline value bytes to it; an update
  // that does not fit fails with NoSpace and changes nothing. nullptr: none.
  std::shared_ptr<SpaceBudget> budget;
};

// The data-model vocabulary shared with the object protocol and the client
// (common/object_model.h): ValueType, Checksums, PunchScope and ListAnchor
// (an enumeration position: the last key returned, encoded).
using ros2::Checksums;
using ros2::ListAnchor;
using ros2::PunchScope;
using ros2::ValueType;

struct UpdateOp {
  ObjectId oid;
  std::string dkey;  // non-empty
  std::string akey;  // non-empty
  Epoch epoch = 0;   // > 0
  ValueType type = ValueType::kSingle;
  uint64_t index = 0;               // kArray: first record
  uint32_t record_size = 1;         // kArray: bytes per record; data.size() must be a multiple
  std::span<const std::byte> data;  // kSingle: the whole value (may be empty); kArray: the records
  Checksums csum;                   // over `data`; type kNone: VOS computes them with VosOptions::checksum
  // Records `epoch` as the decided transaction of (oid, dkey, akey) in the
  // same RocksDB batch as the value (DecidedEpoch; docs/vos.md, "Decided
  // transactions"): the record and the update are durable together or not at all.
  bool decided = false;
};

struct FetchOp {
  ObjectId oid;
  std::string dkey;
  std::string akey;
  Epoch epoch = kEpochMax;  // newest version at or below this epoch
  ValueType type = ValueType::kSingle;
  uint64_t index = 0;           // kArray
  uint64_t count = 0;           // kArray: records to read
  uint32_t record_size = 1;     // kArray: must match the stored record size
  std::span<std::byte> buffer;  // kArray: count * record_size bytes; kSingle: capacity
  // The caller checks the returned checksums against the returned bytes (the
  // engine serving a client that verifies end to end). VOS then skips its own
  // verification when it returns the stored checksums unchanged — one version,
  // one piece, chunked like the store — because a mismatch is caught by the
  // caller against the checksums written with the data. Whenever VOS computes
  // the result's checksums (several pieces, other chunking, holes) it verifies
  // first, as always: a computed checksum must never bless bad bytes.
  bool caller_verifies = false;
  // kArray: also return the akey's array end (FetchResult::array_end), read
  // from the same view as the data: what QueryArrayEnd answers, without its
  // own header load and RocksDB seeks.
  bool want_array_end = false;
};

struct FetchResult {
  // kSingle: the value's full size (when larger than the buffer, only the first
  // buffer.size() bytes were copied and no checksums are returned).
  // kArray: count * record_size (holes are zero-filled).
  uint64_t size = 0;
  Checksums csum;  // over the returned bytes, chunked from the start of the buffer
  // With FetchOp::want_array_end: one past the highest visible record of the
  // whole akey at the fetch's epoch (0 when it holds none).
  uint64_t array_end = 0;
};

// A visible array extent as enumeration reports it.
struct ExtentInfo {
  uint64_t index = 0;
  uint64_t count = 0;
  uint32_t record_size = 0;
  Epoch epoch = 0;
};

struct SpaceInfo {
  uint64_t data_total = 0;      // extent store address space (data_size)
  uint64_t data_used = 0;       // bytes allocated to live extents
  uint64_t data_file = 0;       // bytes the data file holds allocated (it grows on demand)
  uint64_t inline_bytes = 0;    // bytes of inline values (committed or in flight)
  uint64_t metadata_bytes = 0;  // approximate RocksDB size (SST + memtables)
  // What the store charges to its budget: data_used + inline_bytes.
  uint64_t charged() const { return data_used + inline_bytes; }
};

// Health of a store's metadata database and I/O ring, for the engine's
// metrics (docs/observability.md). The stall and submission figures are
// cumulative since the store was opened.
struct HealthInfo {
  uint64_t write_stops = 0;               // RocksDB writes stopped (io_stalls.total_stop)
  uint64_t write_slowdowns = 0;           // RocksDB writes slowed down (io_stalls.total_slowdown)
  uint64_t running_compactions = 0;       // RocksDB compactions running now
  uint64_t pending_compaction_bytes = 0;  // RocksDB's estimate of bytes compaction must rewrite
  uint64_t uring_submits = 0;             // io_uring_enter calls that submitted
  uint64_t uring_sqes = 0;                // SQEs they submitted (sqes / submits: the batch size)
};

struct AggregateStats {
  uint64_t versions_removed = 0;
  uint64_t bytes_freed = 0;         // extent store bytes returned to the allocator
  uint64_t inline_bytes_freed = 0;  // bytes of inline values removed
};

// A punch: at `epoch`, removes the object, one dkey or one akey (reads at
// >= epoch see nothing of it, older reads and snapshots still do).
struct PunchOp {
  PunchScope scope = PunchScope::kObject;
  ObjectId oid;
  std::string dkey;  // kDkey, kAkey
  std::string akey;  // kAkey
  Epoch epoch = 0;
  // kDkey, kAkey: records `epoch` as the decided transaction of (oid, dkey,
  // akey) (akey empty for a dkey punch) in the punch's batch, as UpdateOp::decided.
  bool decided = false;
};

// A discard: takes back one update or punch (docs/vos.md, "Discard").
// Removes exactly what operations at `epoch` wrote under (oid, dkey, akey) —
// under the whole dkey when `akey` is empty: single-value versions and array
// extents (their space freed), dkey and akey punch records, the decided
// records that hold `epoch`, and the akey headers it leaves without a
// version. The older versions they hid are visible again. Nothing at `epoch`
// there: OK.
struct DiscardOp {
  ObjectId oid;
  std::string dkey;  // non-empty
  std::string akey;  // empty: every akey of the dkey, and the dkey's own punch
  Epoch epoch = 0;   // > 0
};

using UpdateCallback = std::function<void(Status)>;
using FetchCallback = std::function<void(Result<FetchResult>)>;
using PunchCallback = std::function<void(Status)>;
using DiscardCallback = std::function<void(Status)>;

class Vos {
 public:
  // Opens the store at options.path, creating it (with an empty data file)
  // when missing, and recovering the allocator state when present. What the
  // store holds is charged to options.budget whatever its limit.
  static Result<std::unique_ptr<Vos>> Open(const VosOptions& options);
  // Deletes everything a store at `path` holds.
  static Status Destroy(const std::string& path, Env* env = nullptr);

  virtual ~Vos() = default;

  // --- asynchronous I/O (the engine's path) ---
  // Validates and starts an update; `done` runs from Progress() once it is durable
  // (or failed). Validation errors also arrive through `done`, never silently.
  // Extent I/O is queued on io_uring and handed to the kernel by the next
  // Progress() call (one system call for everything queued), so call Progress()
  // after submitting. Zero copy: data and buffers whose address and length are
  // multiples of 4 KiB (and, for fetch, ranges that line up with the stored
  // extents' 4 KiB blocks and checksum chunks) go to O_DIRECT as they are;
  // anything else is staged through an aligned bounce buffer.
  virtual void SubmitUpdate(const UpdateOp& op, UpdateCallback done) = 0;
  virtual void SubmitFetch(const FetchOp& op, FetchCallback done) = 0;
  // A punch is a metadata write only: it joins the next commit group with the
  // updates (one WAL sync for all of them) and becomes visible when its
  // callback runs.
  virtual void SubmitPunch(const PunchOp& op, PunchCallback done) = 0;
  // A discard (DiscardOp) runs once no update or punch at its epoch on its
  // dkey is in flight (submitted before or after it), so it lands after the
  // store it undoes; it is one RocksDB batch, durable (synced) as a commit
  // group is, written on the calling thread from Progress(). `done` runs from
  // Progress() once it is.
  virtual void SubmitDiscard(const DiscardOp& op, DiscardCallback done) = 0;
  // Reaps completions and runs callbacks. Returns the number of callbacks run.
  // With `wait`, blocks until at least one op completes (if any is in flight).
  virtual int Progress(bool wait = false) = 0;
  // A file descriptor that becomes readable when Progress() has work; for epoll
  // integration with the UCX worker's event fd. -1 if none (then poll Progress).
  // Progress(false) leaves it as it is (clearing it is a system call, which
  // would come between a completion's callback and whatever the caller does
  // next, such as sending the replies its callbacks gave): an epoll loop calls
  // PrepareSleep() before it sleeps.
  virtual int event_fd() const = 0;
  // Clears event_fd() and looks for work once more, so that a completion
  // posted before the clear is not missed; returns the callbacks run. Sleep on
  // event_fd() only when it returns 0.
  virtual int PrepareSleep() = 0;
  // Number of submitted ops whose callbacks have not run yet.
  virtual size_t in_flight() const = 0;
  // The owner's say on inline commits (VosOptions::inline_commit; allowed
  // until told otherwise): an owner whose thread also serves other stores or
  // other work disallows them while that has work of its own, since the
  // thread is blocked for the commit's WAL sync.
  virtual void AllowInlineCommit(bool allowed) = 0;
  // The owner's say on when small extent I/O reaches the kernel: with `hold`
  // (the owner is still taking in requests that will queue more), a
  // Progress(false) pass keeps what it queued for the next pass, once and up
  // to a batch, so that both go in one system call. PrepareSleep and
  // Progress(true) always submit.
  virtual void HoldSubmissions(bool hold) = 0;

  // --- blocking wrappers (tests, tools) ---
  Status Update(const UpdateOp& op);
  Result<FetchResult> Fetch(const FetchOp& op);

  // --- blocking punches (SubmitPunch and Progress until it completed) ---
  Status Punch(const PunchOp& op);
  Status PunchObject(const ObjectId& oid, Epoch epoch) { return Punch({PunchScope::kObject, oid, {}, {}, epoch}); }
  Status PunchDkey(const ObjectId& oid, const std::string& dkey, Epoch epoch) {
    return Punch({PunchScope::kDkey, oid, dkey, {}, epoch});
  }
  Status PunchAkey(const ObjectId& oid, const std::string& dkey, const std::string& akey, Epoch epoch) {
    return Punch({PunchScope::kAkey, oid, dkey, akey, epoch});
  }
  // SubmitDiscard and Progress until it completed.
  Status Discard(const DiscardOp& op);

  // --- enumeration: up to `max` entries visible at `epoch`, resuming from `anchor` ---
  virtual Result<std::vector<ObjectId>> ListObjects(Epoch epoch, ListAnchor* anchor, size_t max) = 0;
  virtual Result<std::vector<std::string>> ListDkeys(const ObjectId& oid, Epoch epoch, ListAnchor* anchor,
                                                     size_t max) = 0;
  virtual Result<std::vector<std::string>> ListAkeys(const ObjectId& oid, const std::string& dkey, Epoch epoch,
                                                     ListAnchor* anchor, size_t max) = 0;
  // Visible extents of an array akey, in index order (overlaps already resolved:
  // the parts of older extents hidden by newer ones are not reported).
  virtual Result<std::vector<ExtentInfo>> ListExtents(const ObjectId& oid, const std::string& dkey,
                                                      const std::string& akey, Epoch epoch, ListAnchor* anchor,
                                                      size_t max) = 0;

  // --- queries (file size needs them) ---
  // The largest visible dkey of the object (bytewise order), or nullopt.
  virtual Result<std::optional<std::string>> QueryMaxDkey(const ObjectId& oid, Epoch epoch) = 0;
  // One past the highest visible record index of an array akey, or nullopt.
  virtual Result<std::optional<uint64_t>> QueryArrayEnd(const ObjectId& oid, const std::string& dkey,
                                                        const std::string& akey, Epoch epoch) = 0;

  // --- decided transactions (docs/vos.md, "Decided transactions") ---
  // The epoch last recorded as the decided transaction of (oid, dkey, akey)
  // (akey empty: of a dkey punch) by a committed UpdateOp::decided or
  // PunchOp::decided, or 0 when none is recorded (never, or swept).
  virtual Result<Epoch> DecidedEpoch(const ObjectId& oid, std::string_view dkey, std::string_view akey) = 0;

  // --- snapshots and aggregation ---
  virtual Status CreateSnapshot(Epoch epoch) = 0;
  virtual Status DestroySnapshot(Epoch epoch) = 0;
  virtual std::vector<Epoch> ListSnapshots() const = 0;
  // Removes versions at or below `upto` that no snapshot and not the latest view
  // can see, and frees their extent space. A version above `upto` is never
  // removed, nor one it hides from the view at `upto`: an owner that may still
  // discard the operation at epoch E (SubmitDiscard) passes upto < E, so that
  // the older version E hides is there to come back.
  virtual Result<AggregateStats> Aggregate(Epoch upto = kEpochMax) = 0;

  // The highest epoch of any update or punch stored (committed or in a commit
  // group), 0 for an empty store. Kept durable in the store's metadata, so a
  // reopened store reports what it held before (docs/vos.md, "Epoch high-water
  // mark"): the engine seeds its clock with it.
  virtual Epoch HighestEpoch() const = 0;

  virtual SpaceInfo Space() const = 0;
  // The database's and the ring's health (HealthInfo). Thread: the owner's.
  virtual HealthInfo Health() const { return {}; }
  // Flushes everything (relaxed mode included) to stable storage.
  virtual Status Sync() = 0;
};

}  // namespace ros2::vos
