// VosStore: opening, recovery, progress, punch, snapshots and space.
#include "vos/vos_store.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>

#include <rocksdb/cache.h>
#include <rocksdb/file_system.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/merge_operator.h>
#include <rocksdb/table.h>

#include <fmt/format.h>

#include "common/log.h"

namespace ros2::vos {
namespace {

// 1: the data file was written full of zeros at creation (its size in 'M'
// "capacity"). 2: the data file grows on demand; 'M' "inline_bytes" counts the
// inline value bytes (a merge counter); 'M' "written" is the prefix of the data
// file a format-1 store had zero-filled. A format-1 store is upgraded at open.
constexpr uint64_t kFormatVersion = 2;
constexpr uint64_t kLegacyFormatVersion = 1;

std::string EncodeU64(uint64_t v) {
  std::string s;
  keys::AppendU64(&s, v);
  return s;
}

// RocksDB's file system with WAL files preallocated with their size set. An
// append that grows a file makes fdatasync journal the new size as well (a
// 200-byte append + fdatasync costs clearly more than the same write inside
// the file), and RocksDB preallocates WAL space (allow_fallocate,
// on by default) with FALLOC_FL_KEEP_SIZE unless its per-file options say
// otherwise, which DBOptions cannot.
// RocksDB trims a WAL to its length on close; a crash leaves a zero-filled
// tail, which its log reader takes for preallocated space (the end of the log).
class SizedWalFileSystem : public rocksdb::FileSystemWrapper {
 public:
  using rocksdb::FileSystemWrapper::FileSystemWrapper;
  static const char* kClassName() { return "Ros2SizedWalFileSystem"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& opts,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    return Private(f, target()->NewWritableFile(f, ForFile(f, opts), r, dbg));
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old, const rocksdb::FileOptions& opts,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* dbg) override {
    return Private(f, target()->ReuseWritableFile(f, old, ForFile(f, opts), r, dbg));
  }
  rocksdb::IOStatus NewLogger(const std::string& f, const rocksdb::IOOptions& io, std::shared_ptr<rocksdb::Logger>* r,
                              rocksdb::IODebugContext* dbg) override {
    return Private(f, target()->NewLogger(f, io, r, dbg));
  }
  rocksdb::IOStatus LockFile(const std::string& f, const rocksdb::IOOptions& io, rocksdb::FileLock** l,
                             rocksdb::IODebugContext* dbg) override {
    return Private(f, target()->LockFile(f, io, l, dbg));
  }

 private:
  // RocksDB creates its files 0644 (docs/vos.md, "The Env seam"): they hold
  // small values, so they are made the owner's alone, like the data file. The
  // metadata directory is 0700 already, so nobody else sees the file meanwhile.
  static rocksdb::IOStatus Private(const std::string& f, rocksdb::IOStatus st) {
    if (st.ok()) ::chmod(f.c_str(), 0600);
    return st;
  }
  static rocksdb::FileOptions ForFile(const std::string& name, rocksdb::FileOptions opts) {
    if (name.ends_with(".log")) opts.fallocate_with_keep_size = false;
    return opts;
  }
};

// Adds 8-byte big-endian operands modulo 2^64 (deltas of 'M' "inline_bytes";
// a negative delta is its two's complement), so that commit groups and
// aggregation passes can adjust the counter in their own batches in any order.
class U64AddOperator final : public rocksdb::AssociativeMergeOperator {
 public:
  bool Merge(const rocksdb::Slice& /*key*/, const rocksdb::Slice* existing, const rocksdb::Slice& value,
             std::string* new_value, rocksdb::Logger* /*logger*/) const override {
    if (value.size() != 8 || (existing != nullptr && existing->size() != 8)) return false;
    uint64_t sum = keys::ReadU64(value.ToStringView());
    if (existing != nullptr) sum += keys::ReadU64(existing->ToStringView());
    *new_value = EncodeU64(sum);
    return true;
  }
  const char* Name() const override { return "Ros2U64Add"; }
};

}  // namespace

std::shared_ptr<rocksdb::MergeOperator> MetadataMergeOperator() {
  return std::make_shared<U64AddOperator>();
}

namespace {

rocksdb::Options MetadataOptions(rocksdb::Env* env) {
  rocksdb::Options o;
  o.merge_operator = MetadataMergeOperator();
  // Obsolete WAL files are reused: with SizedWalFileSystem, a WAL sync does
  // not wait for an inode update (the commit path is one WAL fdatasync per group).
  o.recycle_log_file_num = 4;
  o.create_if_missing = true;
  o.env = env;
  o.compression = rocksdb::kNoCompression;  // values are mostly data; CPU is scarcer than space
  o.max_background_jobs = 2;
  o.write_buffer_size = 64 << 20;
  o.paranoid_checks = true;
  rocksdb::BlockBasedTableOptions t;
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  t.block_cache = rocksdb::NewLRUCache(64 << 20);
  t.cache_index_and_filter_blocks = false;
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  return o;
}

}  // namespace

VosStore::VosStore(const VosOptions& options)
    : options_(options), env_(options.env != nullptr ? options.env : Env::Default()) {}

Result<std::unique_ptr<Vos>> VosStore::Open(const VosOptions& options) {
  if (options.storage_class == StorageClass::kNvme && options.path.empty()) {
    return Status::InvalidArgument("vos: open: the nvme class needs a path");
  }
  if (options.data_size < kBlockSize) {
    return Status::InvalidArgument(
        fmt::format("vos: open {}: data_size {} is below one 4 KiB block", options.path, options.data_size));
  }
  if (options.checksum != ChecksumType::kNone && options.csum_chunk_size == 0) {
    return Status::InvalidArgument(fmt::format("vos: open {}: csum_chunk_size must be > 0", options.path));
  }
  if (options.io_depth == 0 || options.io_depth > 4096) {
    return Status::InvalidArgument(
        fmt::format("vos: open {}: io_depth {} not in [1, 4096]", options.path, options.io_depth));
  }
  std::unique_ptr<VosStore> store(new VosStore(options));
  Status st = store->Init();
  if (!st.ok()) return st;
  return std::unique_ptr<Vos>(std::move(store));
}

Status VosStore::Init() {
  event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0) return Status::FromErrno(errno, "vos: eventfd");
  std::string meta_path;
  if (options_.storage_class == StorageClass::kRam) {
    mem_env_.reset(rocksdb::NewMemEnv(rocksdb::Env::Default()));
    meta_path = "/ros2-vos-ram";
  } else {
    ROS2_RETURN_IF_ERROR(env_->CreateDirs(options_.path));
    meta_path = options_.path + "/meta";
    // RocksDB would create it 0755 (and its files 0644, see SizedWalFileSystem).
    ROS2_RETURN_IF_ERROR(env_->CreateDirs(meta_path));
    meta_env_ =
        rocksdb::NewCompositeEnv(std::make_shared<SizedWalFileSystem>(rocksdb::Env::Default()->GetFileSystem()));
  }
  rocksdb::DB* raw = nullptr;
  rocksdb::Status rs = rocksdb::DB::Open(MetadataOptions(mem_env_ ? mem_env_.get() : meta_env_.get()), meta_path, &raw);
  if (!rs.ok()) return FromRocks(rs, fmt::format("vos: open metadata {}", meta_path));
  db_.reset(raw);

  if (options_.storage_class == StorageClass::kRam) {
    auto ram = ExtentStore::OpenRam(options_.data_size);
    if (!ram.ok()) return ram.status();
    extents_ = std::move(*ram);
  } else {
    bool device = !options_.block_device.empty();
    auto nvme =
        ExtentStore::OpenNvme(env_, device ? options_.block_device : options_.path + "/data", device,
                              options_.data_size, options_.io_depth, event_fd_,
                              /*dsync_writes=*/options_.sync_commit && options_.extent_sync == ExtentSync::kDsync);
    if (!nvme.ok()) return nvme.status();
    extents_ = std::move(*nvme);
  }
  allocator_ = std::make_unique<ExtentAllocator>(extents_->capacity());
  ROS2_RETURN_IF_ERROR(LoadState());
  if (options_.storage_class == StorageClass::kNvme && options_.sync_commit) {
    committer_ = std::make_unique<CommitThread>(db_.get(), extents_.get(), event_fd_);
    if (options_.extent_sync == ExtentSync::kWal) {
      // The WAL's fdatasync flushes the cache of the device under the WAL
      // only: the data file must sit on that device. A block device never
      // does (the metadata lives on a file system); a file is compared by
      // st_dev with the metadata directory.
      struct stat data_st {
      }, meta_st{};
      wal_covers_extents_ = options_.block_device.empty() && ::stat((options_.path + "/data").c_str(), &data_st) == 0 &&
                            ::stat(meta_path.c_str(), &meta_st) == 0 && data_st.st_dev == meta_st.st_dev;
      // The flush covers only what reached the device: buffered writes (a file
      // system that refused O_DIRECT) may still sit in the page cache.
      if (wal_covers_extents_ && extents_->alignment() <= 1) {
        wal_covers_extents_ = false;
        ROS2_LOG_WARN(
            "vos: {}: extent_sync wal needs O_DIRECT, which the data file's file system refused: each "
            "commit group fdatasyncs the data file (extent_sync group)",
            options_.path);
      } else if (!wal_covers_extents_) {
        ROS2_LOG_INFO("vos: {}: extent data on another device than the WAL: each commit group fdatasyncs it",
                      options_.path);
      }
    }
  }
  return Status::Ok();
}

Status VosStore::LoadState() {
  // Format marker: refuse stores written by an unknown format, upgrade format 1.
  std::string value;
  uint64_t written_prefix = 0;  // a format-1 data file's zero-filled size
  rocksdb::Status rs = db_->Get(rocksdb::ReadOptions(), keys::MetaKey("format"), &value);
  if (rs.IsNotFound()) {
    rocksdb::WriteBatch batch;
    batch.Put(keys::MetaKey("format"), EncodeU64(kFormatVersion));
    batch.Put(keys::MetaKey("capacity"), EncodeU64(extents_->capacity()));
    batch.Put(keys::MetaKey("inline_bytes"), EncodeU64(0));
    ROS2_RETURN_IF_ERROR(FromRocks(db_->Write(WriteOpts(), &batch), "vos: write format marker"));
  } else if (!rs.ok()) {
    return FromRocks(rs, "vos: read format marker");
  } else if (value.size() == 8 && keys::ReadU64(value) == kLegacyFormatVersion) {
    // Written by a version that zero-filled the data file at creation: that
    // prefix counts as written, and the inline values are counted once.
    std::string capacity;
    rs = db_->Get(rocksdb::ReadOptions(), keys::MetaKey("capacity"), &capacity);
    if (rs.ok() && capacity.size() == 8) written_prefix = keys::ReadU64(capacity);
    written_prefix = std::min(written_prefix, extents_->file_size());
    ROS2_ASSIGN_OR_RETURN(uint64_t inline_bytes, CountInlineBytes());
    rocksdb::WriteBatch batch;
    batch.Put(keys::MetaKey("format"), EncodeU64(kFormatVersion));
    batch.Put(keys::MetaKey("written"), EncodeU64(written_prefix));
    batch.Put(keys::MetaKey("inline_bytes"), EncodeU64(inline_bytes));
    ROS2_RETURN_IF_ERROR(FromRocks(db_->Write(WriteOpts(), &batch), "vos: upgrade the store format"));
    ROS2_LOG_INFO("vos: {}: upgraded the store to format {} ({} bytes of inline values)", options_.path, kFormatVersion,
                  inline_bytes);
  } else if (value.size() != 8 || keys::ReadU64(value) != kFormatVersion) {
    return Status::Corruption(fmt::format("vos: {}: unknown store format", options_.path));
  } else {
    std::string written;
    rs = db_->Get(rocksdb::ReadOptions(), keys::MetaKey("written"), &written);
    if (rs.ok() && written.size() == 8) written_prefix = keys::ReadU64(written);
  }
  rs = db_->Get(rocksdb::ReadOptions(), keys::MetaKey("inline_bytes"), &value);
  if (!rs.ok() || value.size() != 8) {
    return rs.ok() ? Status::Corruption(fmt::format("vos: {}: malformed inline byte counter", options_.path))
                   : FromRocks(rs, "vos: read the inline byte counter");
  }
  inline_bytes_ = keys::ReadU64(value);
  track_written_ = extents_->fresh_space_needs_sync();
  if (track_written_) written_.Add(0, written_prefix);
  written_prefix_ = written_prefix;

  if (options_.storage_class == StorageClass::kNvme) ROS2_RETURN_IF_ERROR(CheckLastGroups());
  auto it = NewIterator();
  // Allocations: rebuild the allocator's free map.
  for (it->Seek(std::string(1, keys::kAlloc)); it->Valid() && it->key()[0] == keys::kAlloc; it->Next()) {
    if (it->key().size() != 9 || it->value().size() != 8) return Status::Corruption("vos: malformed allocation record");
    uint64_t offset = keys::ReadU64(it->key().ToStringView().substr(1));
    uint64_t len = keys::ReadU64(it->value().ToStringView());
    ROS2_RETURN_IF_ERROR(allocator_->MarkAllocated(offset, len).WithContext(options_.path));
    // Committed, so written and made durable as its group's rules required.
    if (track_written_) written_.Add(offset, offset + AlignUp(len, kBlockSize));
  }
  if (!it->status().ok()) return FromRocks(it->status(), "vos: load allocations");
  // What the store holds counts against its budget, whatever the limit.
  charged_ = allocator_->used() + inline_bytes_;
  if (options_.budget) options_.budget->Charge(charged_);
  // Punch tombstones.
  for (it->Seek(std::string(1, keys::kPunch)); it->Valid() && it->key()[0] == keys::kPunch; it->Next()) {
    std::string_view k = it->key().ToStringView();
    if (k.size() < 1 + 16 + 8) return Status::Corruption("vos: malformed punch record");
    punches_.Add(k.substr(1, k.size() - 9), keys::ReadU64(k.substr(k.size() - 8)));
  }
  if (!it->status().ok()) return FromRocks(it->status(), "vos: load punches");
  for (it->Seek(std::string(1, keys::kSnapshot)); it->Valid() && it->key()[0] == keys::kSnapshot; it->Next()) {
    if (it->key().size() != 9) return Status::Corruption("vos: malformed snapshot record");
    snapshots_.insert(keys::ReadU64(it->key().ToStringView().substr(1)));
  }
  ROS2_RETURN_IF_ERROR(FromRocks(it->status(), "vos: load snapshots"));
  ROS2_RETURN_IF_ERROR(CountDecided());
  return LoadHighestEpoch();
}

Status VosStore::LoadHighestEpoch() {
  std::string value;
  rocksdb::Status rs = db_->Get(rocksdb::ReadOptions(), keys::MetaKey("epoch_high"), &value);
  if (rs.ok()) {
    if (value.size() != 8)
      return Status::Corruption(fmt::format("vos: {}: malformed epoch high-water mark", options_.path));
    highest_epoch_ = keys::ReadU64(value);
    return Status::Ok();
  }
  if (!rs.IsNotFound()) return FromRocks(rs, "vos: read epoch high-water mark");
  // No mark yet (a new store, or one written before the mark existed): the
  // epochs of its records, punches and snapshots; the next commit group
  // records the mark.
  Epoch high = snapshots_.empty() ? 0 : *snapshots_.rbegin();
  auto it = NewIterator();
  for (it->Seek(std::string(1, keys::kTree)); it->Valid() && it->key()[0] == keys::kTree; it->Next()) {
    auto parsed = keys::ParseTreeKey(it->key().ToStringView());
    if (parsed.ok()) high = std::max(high, parsed->epoch);
  }
  for (it->Seek(std::string(1, keys::kPunch)); it->Valid() && it->key()[0] == keys::kPunch; it->Next()) {
    std::string_view k = it->key().ToStringView();
    if (k.size() >= 9) high = std::max(high, keys::ReadU64(k.substr(k.size() - 8)));
  }
  ROS2_RETURN_IF_ERROR(FromRocks(it->status(), "vos: scan epochs"));
  highest_epoch_ = high;
  return Status::Ok();
}

Status VosStore::CheckLastGroups() {
  // Check records a stop left behind (normally one: the last group's; a clean
  // close leaves none). Their extents were written before their WAL sync, whose
  // device flush made them durable if it completed; if it did not, the records
  // may have reached the disk without the data. The stored checksums tell: an
  // extent that does not match is rolled back (record and allocation deleted;
  // its update was never acknowledged), so no record points at data that never
  // arrived. What cannot be checked (a damaged check record or value record,
  // an extent that cannot be read) is logged and left as it is: fetches still
  // verify every extent against its checksums and report the error.
  std::vector<std::pair<std::string, std::string>> checks;
  auto it = NewIterator();
  for (it->Seek(std::string(1, keys::kCheck)); it->Valid() && it->key()[0] == keys::kCheck; it->Next()) {
    checks.emplace_back(it->key().ToString(), it->value().ToString());
  }
  if (!it->status().ok()) return FromRocks(it->status(), "vos: load check records");
  it.reset();
  if (checks.empty()) return Status::Ok();

  rocksdb::WriteBatch batch;
  size_t checked = 0, rolled_back = 0;
  AlignedBuffer buf;
  for (const auto& [check_key, list] : checks) {
    batch.Delete(check_key);
    if (check_key.size() != 9) {
      ROS2_LOG_ERROR("vos: {}: malformed check record key of {} bytes; its extents are not checked", options_.path,
                     check_key.size());
      continue;
    }
    const std::string what = fmt::format("{}: check record {}", options_.path, keys::ReadU64(check_key.substr(1)));
    auto record_keys = DecodeKeyList(list, what);
    if (!record_keys.ok()) {
      ROS2_LOG_ERROR("{}; its extents are not checked", record_keys.status().ToString());
      continue;
    }
    for (const std::string& record_key : *record_keys) {
      std::string value;
      rocksdb::Status rs = db_->Get(rocksdb::ReadOptions(), record_key, &value);
      if (rs.IsNotFound()) continue;  // aggregated or replaced since
      if (!rs.ok()) return FromRocks(rs, "vos: " + what);
      auto rec = DecodeValueRecord(value, what, kAllChecksums);
      if (!rec.ok()) {
        ROS2_LOG_ERROR("{}; its extent is not checked", rec.status().ToString());
        continue;
      }
      if (!rec->external || rec->csum.type == ChecksumType::kNone) continue;
      if (rec->alloc_len > extents_->capacity() || rec->offset > extents_->capacity() - rec->alloc_len) {
        ROS2_LOG_ERROR("vos: {}: extent [{}, +{}) outside the extent store; not checked", what, rec->offset,
                       rec->alloc_len);
        continue;
      }
      if (buf.size() < rec->alloc_len) buf = AlignedBuffer(rec->alloc_len);
      std::optional<Status> read;
      extents_->SubmitRead(rec->offset, buf.span().first(rec->alloc_len), [&read](Status st) { read = std::move(st); });
      while (!read) {
        extents_->WaitForCompletion();
        extents_->Reap();
      }
      if (!read->ok()) {  // the same error reaches the fetches of this extent
        ROS2_LOG_ERROR("{}; its extent is not checked", read->WithContext(what).ToString());
        continue;
      }
      ++checked;
      if (VerifyChunkChecksums(rec->csum.type, buf.span().first(rec->length), rec->csum.chunk_size, rec->csum.values,
                               what)
              .ok()) {
        continue;
      }
      ROS2_LOG_WARN(
          "vos: {}: the extent at offset {} ({} bytes) does not match its checksums: the update did not "
          "reach the disk before the stop; rolled back",
          what, rec->offset, rec->length);
      batch.Delete(record_key);
      batch.Delete(keys::AllocKey(rec->offset));
      ++rolled_back;
    }
  }
  ROS2_RETURN_IF_ERROR(
      FromRocks(db_->Write(WriteOpts(), &batch), fmt::format("vos: {}: settle check records", options_.path)));
  ROS2_LOG_INFO("vos: {}: {} extents of the last commit groups checked after an unclean stop, {} rolled back",
                options_.path, checked, rolled_back);
  return Status::Ok();
}

void VosStore::RetireCheckRecords() {
  // Every group has committed (Drain): each one's WAL sync flushed the
  // extents of the groups before it, and the last check record's own sync its
  // extents. Deleting the records spares the next open the check.
  if (check_records_.empty()) return;
  rocksdb::WriteBatch batch;
  for (uint64_t g : check_records_) batch.Delete(keys::CheckKey(g));
  Status st = FromRocks(db_->Write(WriteOpts(), &batch), "vos: delete check records");
  if (!st.ok()) {
    ROS2_LOG_WARN("vos: {}: {}; the next open checks their extents", options_.path, st.ToString());
    return;
  }
  check_records_.clear();
}

VosStore::~VosStore() {
  Drain();
  if (db_) RetireCheckRecords();
  // Closed (or destroyed): its space no longer counts against the budget.
  if (options_.budget) options_.budget->Release(charged_);
  fetch_iter_.reset();
  committer_.reset();
  extents_.reset();
  db_.reset();
  if (event_fd_ >= 0) ::close(event_fd_);
}

Status VosStore::Drain() {
  while (in_flight_ > 0) {
    if (Progress(true) == 0 && in_flight_ > 0 && extents_ && extents_->in_flight() == 0 &&
        !(committer_ && committer_->busy()) && ready_.empty() && ready_punches_.empty() && deferred_.empty()) {
      return Status::Internal("vos: ops in flight with nothing to wait for");
    }
  }
  return Status::Ok();
}

rocksdb::WriteOptions VosStore::WriteOpts() const {
  rocksdb::WriteOptions wo;
  wo.sync = options_.sync_commit && options_.storage_class == StorageClass::kNvme;
  return wo;
}

std::unique_ptr<rocksdb::Iterator> VosStore::NewIterator() const {
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  return std::unique_ptr<rocksdb::Iterator>(db_->NewIterator(ro));
}

int VosStore::RunDeferred() {
  int ran = 0;
  while (!deferred_.empty()) {
    std::vector<std::function<void()>> batch;
    batch.swap(deferred_);
    for (auto& fn : batch) {
      fn();
      ++ran;
    }
  }
  return ran;
}

int VosStore::Progress(bool wait) {
  while (true) {
    int ran = RunDeferred();
    ran += extents_->Reap();
    if (committer_) {
      if (auto group = committer_->TakeFinished()) ran += FinishCommit(std::move(group));
    }
    // Discards before the next group: one whose operation was in the group
    // just finished runs now, whatever keeps the commit thread busy next.
    if (!discards_.empty()) ran += StartDiscards();
    ran += StartCommitIfIdle(/*from_progress=*/true);
    ran += RunDeferred();
    bool committing = committer_ && committer_->busy();
    if (ran > 0 || in_flight_ == 0 || !wait || committing) SubmitQueued(/*may_hold=*/!wait);
    // Without `wait` the eventfd is left for PrepareSleep (see vos.h).
    if (in_flight_ == 0 || ran > 0 || !wait) return ran;
    if (committing) {
      // About to return empty-handed or to sleep on the eventfd: clear it, then
      // look once more so that no completion posted before the read is missed.
      DrainEventFd();
      ran = extents_->Reap();
      if (committer_) {
        if (auto group = committer_->TakeFinished()) ran += FinishCommit(std::move(group));
      }
      if (ran > 0) return ran;
      pollfd pfd{event_fd_, POLLIN, 0};
      ::poll(&pfd, 1, -1);
    } else {
      extents_->WaitForCompletion();  // submits what is queued and waits, in one system call
    }
  }
}

int VosStore::PrepareSleep() {
  DrainEventFd();
  const int ran = Progress(false);
  SubmitQueued(/*may_hold=*/false);  // nothing held back across a sleep
  return ran;
}

void VosStore::SubmitQueued(bool may_hold) {
  const size_t queued = extents_->queued();
  if (queued == 0) {
    held_ = false;
    return;
  }
  // Held only while the device is busy: with fewer than kHoldWhenDeep I/Os
  // in the kernel a read held for the next pass is a read the device is not
  // serving, and the client waits for it (at one job the device then saw
  // fewer reads than the client had in flight). With the device deep, the
  // held reads join the next pass's in one io_uring_enter, and the VM exit
  // it costs, while the device stays busy with the ones it has.
  const size_t in_kernel = extents_->in_flight() > queued ? extents_->in_flight() - queued : 0;
  if (may_hold && owner_holds_ && !held_ && HoldsSmallIo(queued, in_kernel)) {
    held_ = true;
    return;
  }
  held_ = false;
  extents_->Flush();
}

void VosStore::DrainEventFd() {
  uint64_t count = 0;
  ssize_t rc = ::read(event_fd_, &count, sizeof(count));  // EAGAIN when already clear
  (void)rc;
}

namespace {

// The RocksDB scope key a punch tombstones, or why the punch is invalid.
Result<std::string> PunchScopeKey(const PunchOp& op) {
  const std::string oid = op.oid.ToString();
  if (op.epoch == 0) return Status::InvalidArgument(fmt::format("vos: punch oid={}: epoch must be > 0", oid));
  switch (op.scope) {
    case PunchScope::kObject: return keys::ObjectScope(op.oid);
    case PunchScope::kDkey:
      if (op.dkey.empty()) return Status::InvalidArgument(fmt::format("vos: punch oid={}: empty dkey", oid));
      return keys::DkeyScope(op.oid, op.dkey);
    case PunchScope::kAkey:
      if (op.dkey.empty() || op.akey.empty()) {
        return Status::InvalidArgument(
            fmt::format("vos: punch oid={} dkey='{}': empty {}", oid, op.dkey, op.dkey.empty() ? "dkey" : "akey"));
      }
      return keys::AkeyScope(op.oid, op.dkey, op.akey);
  }
  return Status::InvalidArgument(fmt::format("vos: punch oid={}: unknown scope {}", oid, static_cast<int>(op.scope)));
}

}  // namespace

void VosStore::SubmitPunch(const PunchOp& op, PunchCallback done) {
  ++in_flight_;
  PunchState& p = punch_states_.emplace_back();
  p.self = std::prev(punch_states_.end());
  p.op = op;
  p.done = std::move(done);
  auto scope = PunchScopeKey(op);
  if (!scope.ok()) {
    PunchState* ps = &p;
    Defer([this, ps, st = scope.status()] { CompletePunch(ps, st); });
    return;
  }
  p.scope = std::move(*scope);
  ready_punches_.push_back(&p);
  if (committer_) StartCommitIfIdle(/*from_progress=*/false);
}

void VosStore::CompletePunch(PunchState* p, Status st) {
  PunchCallback done = std::move(p->done);
  punch_states_.erase(p->self);
  --in_flight_;
  if (done) done(std::move(st));
}

Status VosStore::CreateSnapshot(Epoch epoch) {
  if (epoch == 0) return Status::InvalidArgument("vos: snapshot epoch must be > 0");
  rocksdb::WriteBatch batch;
  batch.Put(keys::SnapshotKey(epoch), rocksdb::Slice());
  ROS2_RETURN_IF_ERROR(FromRocks(db_->Write(WriteOpts(), &batch), fmt::format("vos: create snapshot {}", epoch)));
  snapshots_.insert(epoch);
  return Status::Ok();
}

Status VosStore::DestroySnapshot(Epoch epoch) {
  if (snapshots_.count(epoch) == 0) return Status::NotFound(fmt::format("vos: no snapshot at epoch {}", epoch));
  rocksdb::WriteBatch batch;
  batch.Delete(keys::SnapshotKey(epoch));
  ROS2_RETURN_IF_ERROR(FromRocks(db_->Write(WriteOpts(), &batch), fmt::format("vos: destroy snapshot {}", epoch)));
  snapshots_.erase(epoch);
  return Status::Ok();
}

SpaceInfo VosStore::Space() const {
  SpaceInfo s;
  s.data_total = allocator_->capacity();
  s.data_used = allocator_->used();
  s.data_file = extents_->file_size();
  s.inline_bytes = inline_bytes_;
  uint64_t sst = 0;
  uint64_t mem = 0;
  db_->GetIntProperty("rocksdb.total-sst-files-size", &sst);
  db_->GetIntProperty("rocksdb.cur-size-all-mem-tables", &mem);
  s.metadata_bytes = sst + mem;
  return s;
}

HealthInfo VosStore::Health() const {
  HealthInfo h;
  std::map<std::string, std::string> stats;
  if (db_->GetMapProperty(rocksdb::DB::Properties::kCFStats, &stats)) {
    auto read = [&stats](const char* key) -> uint64_t {
      auto it = stats.find(key);
      return it == stats.end() ? 0 : std::strtoull(it->second.c_str(), nullptr, 10);
    };
    h.write_stops = read("io_stalls.total_stop");
    h.write_slowdowns = read("io_stalls.total_slowdown");
  }
  db_->GetIntProperty(rocksdb::DB::Properties::kNumRunningCompactions, &h.running_compactions);
  db_->GetIntProperty(rocksdb::DB::Properties::kEstimatePendingCompactionBytes, &h.pending_compaction_bytes);
  h.uring_submits = extents_->uring_submits();
  h.uring_sqes = extents_->uring_sqes();
  return h;
}

Status VosStore::Sync() {
  ROS2_RETURN_IF_ERROR(extents_->Sync());
  if (options_.storage_class == StorageClass::kRam) return Status::Ok();
  return FromRocks(db_->FlushWAL(/*sync=*/true), "vos: sync WAL");
}

Result<std::optional<AkeyHeader>> VosStore::LoadHeader(std::string_view akey_scope, AkeyCache::Akey** cached) {
  if (auto it = pending_headers_.find(akey_scope); it != pending_headers_.end()) return {it->second.header};
  if (*cached && (*cached)->header()) return {*(*cached)->header()};
  std::string value;
  rocksdb::ReadOptions ro;
  rocksdb::Status rs = db_->Get(ro, keys::HeaderKey(akey_scope), &value);
  if (rs.IsNotFound()) return std::optional<AkeyHeader>();
  if (!rs.ok()) return FromRocks(rs, "vos: read akey header");
  auto h = DecodeAkeyHeader(value, "akey header");
  if (!h.ok()) return h.status();
  if (!*cached) *cached = &akey_cache_.FindOrAdd(akey_scope);
  akey_cache_.SetHeader(**cached, *h);
  return std::optional<AkeyHeader>(*h);
}

void VosStore::FreeAfterReaders(uint64_t offset, uint64_t len) {
  // Fetches submitted before now may still read these bytes: hold the space
  // until they have all completed.
  if (fetches_.empty()) {
    FreeExtent(offset, len);
    return;
  }
  deferred_frees_.push_back({next_generation_, offset, len});
  deferred_free_bytes_ += len;
}

void VosStore::ReleaseDeferredFrees() {
  uint64_t oldest = fetches_.empty() ? ~uint64_t{0} : fetches_.front().generation;
  while (!deferred_frees_.empty() && deferred_frees_.front().generation <= oldest) {
    const DeferredFree& f = deferred_frees_.front();
    FreeExtent(f.offset, f.len);
    deferred_free_bytes_ -= f.len;
    deferred_frees_.pop_front();
  }
}

void VosStore::ReleaseSpace(uint64_t bytes) {
  charged_ -= std::min(charged_, bytes);
  if (options_.budget) options_.budget->Release(bytes);
}

void VosStore::FreeExtent(uint64_t offset, uint64_t len) {
  allocator_->Free(offset, len);
  ReleaseSpace(AlignUp(len, kBlockSize));
}

Result<uint64_t> VosStore::CountInlineBytes() {
  uint64_t total = 0;
  auto it = NewIterator();
  for (it->Seek(std::string(1, keys::kTree)); it->Valid() && it->key()[0] == keys::kTree; it->Next()) {
    auto k = keys::ParseTreeKey(it->key().ToStringView());
    if (!k.ok()) return k.status();
    if (k->kind == keys::kHeaderKind) continue;
    auto rec = DecodeValueRecord(it->value().ToStringView(), "count inline bytes", kNoChecksums);
    if (!rec.ok()) return rec.status();
    if (!rec->external) total += rec->length;
  }
  if (!it->status().ok()) return FromRocks(it->status(), "vos: count inline bytes");
  return total;
}

}  // namespace ros2::vos
