// VosStore: the update path (validate, write extents, group commit).
#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "common/log.h"
#include "vos/vos_store.h"

namespace ros2::vos {
namespace {

// One io_uring transfer carries at most 2^31 - 1 bytes; values stay below 1 GiB.
constexpr uint64_t kMaxValueBytes = uint64_t{1} << 30;

std::string Describe(const UpdateOp& op) {
  return fmt::format("update oid={} dkey='{}' akey='{}' epoch={}", op.oid.ToString(), op.dkey, op.akey, op.epoch);
}

}  // namespace

void VosStore::SubmitUpdate(const UpdateOp& op, UpdateCallback done) {
  ++in_flight_;
  UpdateState& u = updates_.emplace_back();
  u.self = std::prev(updates_.end());
  u.op = op;
  u.done = std::move(done);
  Status st = PrepareUpdate(&u);
  if (!st.ok()) {
    UpdateState* p = &u;
    Defer([this, p, st] { CompleteUpdate(p, st); });
    return;
  }
  if (!u.rec.external) {
    ready_.push_back(&u);
    if (committer_) StartCommitIfIdle(/*from_progress=*/false);
    return;
  }
  std::span<const std::byte> data = u.op.data;
  if (u.bounce.size() > 0) data = u.bounce.span();
  UpdateState* p = &u;
  extents_->SubmitWrite(u.rec.offset, data, [this, p](Status s) { OnUpdateWritten(p, std::move(s)); });
  // The checksum pass over the data (tens of microseconds a MiB, mostly memory
  // bandwidth) runs while the device writes it. Nothing refers to the new
  // extent until the commit, which waits for the write's completion, and that
  // completion can only be reaped after this returns; a mismatch of the
  // caller's checksums fails the update there and frees the space.
  u.checksum_status = ChecksumData(&u);
}

Status VosStore::ChecksumData(UpdateState* u) {
  const UpdateOp& op = u->op;
  if (op.csum.type != ChecksumType::kNone) {
    // The update is named only on a failure: formatting its description for
    // every update was a visible share of a small update's CPU.
    Status st = VerifyChunkChecksums(op.csum.type, op.data, op.csum.chunk_size, op.csum.values, "data");
    if (!st.ok()) return st.WithContext(fmt::format("vos: {}", Describe(op)));
    u->rec.csum = op.csum;
  } else if (options_.checksum != ChecksumType::kNone) {
    u->rec.csum.type = options_.checksum;
    u->rec.csum.chunk_size = options_.csum_chunk_size;
    u->rec.csum.values = ComputeChunkChecksums(options_.checksum, op.data, options_.csum_chunk_size);
  }
  return Status::Ok();
}

Status VosStore::PrepareUpdate(UpdateState* u) {
  const UpdateOp& op = u->op;
  if (op.dkey.empty() || op.akey.empty()) {
    return Status::InvalidArgument(fmt::format("vos: {}: empty dkey or akey", Describe(op)));
  }
  if (op.epoch == 0 || op.epoch == kEpochMax) {
    return Status::InvalidArgument(fmt::format("vos: {}: epoch must be in (0, max)", Describe(op)));
  }
  uint64_t records = 1;
  if (op.type == ValueType::kArray) {
    if (op.record_size == 0 || op.data.empty() || op.data.size() % op.record_size != 0) {
      return Status::InvalidArgument(fmt::format("vos: {}: {} bytes are not a positive number of {}-byte records",
                                                 Describe(op), op.data.size(), op.record_size));
    }
    records = op.data.size() / op.record_size;
    if (op.index > std::numeric_limits<uint64_t>::max() - records) {
      return Status::InvalidArgument(
          fmt::format("vos: {}: extent [{}, +{}) overflows the index space", Describe(op), op.index, records));
    }
  } else if (op.type != ValueType::kSingle) {
    return Status::InvalidArgument(fmt::format("vos: {}: unknown value type", Describe(op)));
  }
  if (op.data.size() > kMaxValueBytes) {
    return Status::InvalidArgument(fmt::format("vos: {}: {} bytes exceed the largest value or extent ({} bytes)",
                                               Describe(op), op.data.size(), kMaxValueBytes));
  }
  if (op.data.size() > allocator_->capacity() && op.data.size() >= options_.inline_threshold) {
    return Status::NoSpace(fmt::format("vos: {}: {} bytes exceed the extent store of {} bytes", Describe(op),
                                       op.data.size(), allocator_->capacity()));
  }

  // Checksums: the caller's are verified, or they are computed, by ChecksumData:
  // here for inline values, while the data is being written for external ones.
  u->rec.length = op.data.size();
  u->rec.record_size = op.type == ValueType::kArray ? op.record_size : 1;
  if (op.csum.type != ChecksumType::kNone) {
    if (op.csum.chunk_size == 0) {
      return Status::InvalidArgument(fmt::format("vos: {}: checksum chunk size is 0", Describe(op)));
    }
    uint64_t chunks = (op.data.size() + op.csum.chunk_size - 1) / op.csum.chunk_size;
    if (op.csum.values.size() != chunks) {
      return Status::InvalidArgument(fmt::format("vos: {}: {} checksums for {} chunks of {} bytes", Describe(op),
                                                 op.csum.values.size(), chunks, op.csum.chunk_size));
    }
  }
  if (op.data.size() < options_.inline_threshold || op.data.empty()) ROS2_RETURN_IF_ERROR(ChecksumData(u));

  // The akey header fixes the type and record size.
  u->akey_scope = keys::AkeyScope(op.oid, op.dkey, op.akey);
  auto header = LoadHeader(u->akey_scope);
  if (!header.ok()) return header.status().WithContext(Describe(op));
  AkeyHeader h;
  if (header->has_value()) {
    h = **header;
    if (h.type != op.type) {
      return Status::InvalidArgument(fmt::format("vos: {}: the akey holds {} values", Describe(op),
                                                 h.type == ValueType::kArray ? "array" : "single"));
    }
    if (op.type == ValueType::kArray && h.record_size != op.record_size) {
      return Status::InvalidArgument(fmt::format("vos: {}: record size {} does not match the akey's {}", Describe(op),
                                                 op.record_size, h.record_size));
    }
  } else {
    h.type = op.type;
    h.record_size = u->rec.record_size;
  }
  uint8_t size_class = keys::ExtentSizeClass(records);
  if (op.type == ValueType::kArray) {
    h.max_extent_records = std::max(h.max_extent_records, records);
    h.class_mask |= uint64_t{1} << size_class;
  }

  u->record_key = op.type == ValueType::kArray ? keys::ExtentKey(u->akey_scope, size_class, op.index, op.epoch)
                                               : keys::SingleKey(u->akey_scope, op.epoch);
  if (uncommitted_keys_.count(u->record_key) != 0) {
    return Status::Busy(fmt::format("vos: {}: an update of the same key at the same epoch is in flight", Describe(op)));
  }
  // Rewriting a committed version (a replayed update) replaces it: its space is freed after the commit.
  // Every record committed, or in a group being committed, has an epoch at or
  // below highest_epoch_ (raised as each group is built, and loaded at open
  // from the mark every such group writes): above it no version can exist at
  // this key, and the lookup is skipped. An update stamped by the engine's
  // clock, which is seeded from that mark, always is above it.
  if (op.epoch <= highest_epoch_) {
    std::string old;
    rocksdb::Status rs = db_->Get(rocksdb::ReadOptions(), u->record_key, &old);
    if (rs.ok()) {
      auto prev = DecodeValueRecord(old, Describe(op), kNoChecksums);
      if (prev.ok() && prev->external) u->replaced = *prev;
      if (prev.ok() && !prev->external) u->replaced_inline = prev->length;
    } else if (!rs.IsNotFound()) {
      return FromRocks(rs, fmt::format("vos: {}", Describe(op)));
    }
  }

  // Placement: inline below the threshold, otherwise out of place in the
  // extent store. Either way the space is charged first: an update that does
  // not fit the budget fails here, before anything is written.
  if (op.data.size() >= options_.inline_threshold && !op.data.empty()) {
    ROS2_RETURN_IF_ERROR(PlaceExtent(u));
    size_t align = extents_->alignment();
    if (op.data.size() % align != 0 || !IsAligned(op.data.data(), align)) {
      u->bounce = AlignedBuffer(u->rec.alloc_len);
      std::memcpy(u->bounce.data(), op.data.data(), op.data.size());
      std::memset(u->bounce.data() + op.data.size(), 0, u->rec.alloc_len - op.data.size());
    }
  } else {
    ROS2_RETURN_IF_ERROR(ChargeSpace(op.data.size(), op));
    u->inline_charge = op.data.size();
    inline_bytes_ += u->inline_charge;
  }

  auto [it, inserted] = pending_headers_.try_emplace(u->akey_scope);
  if (inserted) {
    it->second.header = h;
  } else {
    it->second.header.max_extent_records = std::max(it->second.header.max_extent_records, h.max_extent_records);
    it->second.header.class_mask |= h.class_mask;
  }
  ++it->second.refs;
  u->holds_header = true;
  uncommitted_keys_.insert(u->record_key);
  return Status::Ok();
}

Status VosStore::ChargeSpace(uint64_t bytes, const UpdateOp& op) {
  if (bytes == 0) return Status::Ok();
  if (options_.budget && !options_.budget->TryCharge(bytes)) {
    const SpaceBudget& b = *options_.budget;
    return Status::NoSpace(fmt::format("vos: {}: out of space: {} bytes needed, {} of {} in use", Describe(op), bytes,
                                       b.used(), b.limit()));
  }
  charged_ += bytes;
  return Status::Ok();
}

Status VosStore::PlaceExtent(UpdateState* u) {
  const UpdateOp& op = u->op;
  const uint64_t len = AlignUp(op.data.size(), kBlockSize);
  ROS2_RETURN_IF_ERROR(ChargeSpace(len, op));
  auto off = allocator_->Allocate(len);
  if (!off.ok()) {
    ReleaseSpace(len);
    return off.status().WithContext(Describe(op));
  }
  // The data file grows to cover the extent before it is written (fallocate:
  // a full file system is NoSpace here, not a failed write later).
  Status grown = extents_->Reserve(*off + len);
  if (!grown.ok()) {
    FreeExtent(*off, len);
    return grown.WithContext(fmt::format("vos: {}", Describe(op)));
  }
  u->rec.external = true;
  u->rec.offset = *off;
  u->rec.alloc_len = len;
  u->fresh = track_written_ && !written_.Contains(*off, *off + len);
  return Status::Ok();
}

void VosStore::OnUpdateWritten(UpdateState* u, Status st) {
  if (st.ok() && !u->checksum_status.ok()) st = u->checksum_status;
  if (!st.ok()) {
    // Never referenced by a record: the space goes straight back.
    FreeExtent(u->rec.offset, u->rec.alloc_len);
    CompleteUpdate(u, st.WithContext(Describe(u->op)));
    return;
  }
  ready_.push_back(u);
}

int VosStore::StartCommitIfIdle(bool from_progress) {
  if (ready_.empty() && ready_punches_.empty()) return 0;
  if (committer_ && committer_->busy()) return 0;
  // Nothing but the ready operations in flight: nothing could progress while
  // their group syncs, so Progress commits it on this thread rather than wake
  // the commit thread and be woken back (two cross-core wake-ups, each tens of
  // microseconds on a VM). Under load the group goes to the thread and I/O goes on meanwhile.
  const bool commit_here = committer_ && options_.inline_commit && owner_allows_inline_ &&
                           ready_.size() + ready_punches_.size() == in_flight_;
  if (commit_here && !from_progress) return 0;
  auto group = std::make_unique<CommitGroup>();
  std::string check_list;     // extents whose durability rides on the group's WAL sync
  uint64_t inline_delta = 0;  // change of 'M' "inline_bytes" (modulo 2^64)
  // The akey header is written when RocksDB may not hold it yet: not when the
  // cache of committed headers holds exactly this one (it mirrors RocksDB:
  // filled from it or after a committed batch, erased where a header is
  // deleted or a batch's outcome is unknown), and once per akey per group.
  std::vector<std::string_view> headers_written;
  // The 'A' records go after the tree keys, in offset order: the allocator
  // places a stream of extents one after the other, and RocksDB inserts a key
  // that lands right after the previous insert without searching its memtable
  // (alternating with the randomly placed record keys, every one was a search).
  std::vector<std::pair<uint64_t, uint64_t>> allocs;  // offset, alloc_len
  std::vector<uint64_t> freed;                        // offsets of replaced versions' extents
  // Old decided records go first: a record this group rewrites comes after
  // its deletion in the batch and stays.
  if (Status st = SweepDecided(&group->batch); !st.ok()) {
    ROS2_LOG_WARN("vos: {}: decided transaction records not swept: {}", options_.path, st.ToString());
  }
  for (UpdateState* u : ready_) {
    inline_delta += (u->rec.external ? 0 : u->rec.length) - u->replaced_inline;
    auto h = pending_headers_.find(u->akey_scope);
    u->committed_header = h->second.header;
    const AkeyCache::Akey* stored = akey_cache_.Find(u->akey_scope);
    if ((!stored || !stored->header() || !(*stored->header() == u->committed_header)) &&
        std::find(headers_written.begin(), headers_written.end(), u->akey_scope) == headers_written.end()) {
      group->batch.Put(keys::HeaderKey(u->akey_scope), EncodeAkeyHeader(u->committed_header));
      headers_written.push_back(u->akey_scope);
    }
    std::span<const std::byte> inline_data = u->rec.external ? std::span<const std::byte>() : u->op.data;
    group->batch.Put(u->record_key, EncodeValueRecord(u->rec, inline_data));
    if (u->op.decided) {
      std::string txid;
      keys::AppendU64(&txid, u->op.epoch);
      group->batch.Put(keys::DecidedKey(u->op.oid, u->op.dkey, u->op.akey), txid);
      ++decided_count_;
    }
    if (u->replaced) freed.push_back(u->replaced->offset);
    if (u->rec.external) {
      allocs.emplace_back(u->rec.offset, u->rec.alloc_len);
      // Durable before the acknowledgement: by its write (dsync, ram), by the
      // WAL sync's flush with a check record, or by a data fdatasync first
      // (docs/vos.md, "Durability"). A replayed version replaces its old
      // record, which a rollback could not bring back: it syncs its data.
      // An extent in never-written space of a growing data file also syncs
      // its data: its first write converted fallocated blocks, a metadata
      // change only the file's fdatasync makes durable.
      if (!extents_->writes_are_durable()) {
        if (wal_covers_extents_ && u->rec.csum.type != ChecksumType::kNone && !u->replaced && !u->fresh) {
          AppendKeyToList(&check_list, u->record_key);
        } else {
          group->sync_data = true;
        }
      }
    }
    group->updates.push_back(u);
  }
  ready_.clear();
  std::sort(allocs.begin(), allocs.end());
  for (const auto& [offset, alloc_len] : allocs) {
    std::string len;
    keys::AppendU64(&len, alloc_len);
    group->batch.Put(keys::AllocKey(offset), len);
  }
  for (uint64_t offset : freed) group->batch.Delete(keys::AllocKey(offset));
  if (track_written_) {
    // The group's extents are durable once its batch is (each by the rule
    // above): the written prefix they extend is recorded in the same batch.
    std::vector<std::pair<uint64_t, uint64_t>> extents;
    for (void* opaque : group->updates) {
      const auto* u = static_cast<const UpdateState*>(opaque);
      if (u->rec.external) extents.emplace_back(u->rec.offset, u->rec.offset + u->rec.alloc_len);
    }
    std::sort(extents.begin(), extents.end());
    const uint64_t prefix = written_.PrefixEndWith(extents);
    if (prefix > written_prefix_) {
      group->batch.Put(keys::MetaKey("written"), [&] {
        std::string v;
        keys::AppendU64(&v, prefix);
        return v;
      }());
      group->written_prefix = prefix;
    }
  }
  if (inline_delta != 0) {
    std::string delta;
    keys::AppendU64(&delta, inline_delta);
    group->batch.Merge(keys::MetaKey("inline_bytes"), delta);
  }
  for (PunchState* p : ready_punches_) {
    group->batch.Put(keys::PunchKey(p->scope, p->op.epoch), rocksdb::Slice());
    if (p->op.decided && p->op.scope != PunchScope::kObject) {
      std::string txid;
      keys::AppendU64(&txid, p->op.epoch);
      const std::string_view akey = p->op.scope == PunchScope::kDkey ? std::string_view() : p->op.akey;
      group->batch.Put(keys::DecidedKey(p->op.oid, p->op.dkey, akey), txid);
      ++decided_count_;
    }
    group->punches.push_back(p);
  }
  ready_punches_.clear();
  // The epoch high-water mark rides in the same batch as the versions above it.
  Epoch group_high = 0;
  for (void* u : group->updates) group_high = std::max(group_high, static_cast<UpdateState*>(u)->op.epoch);
  for (void* p : group->punches) group_high = std::max(group_high, static_cast<PunchState*>(p)->op.epoch);
  if (group_high > highest_epoch_) {
    highest_epoch_ = group_high;
    std::string mark;
    keys::AppendU64(&mark, group_high);
    group->batch.Put(keys::MetaKey("epoch_high"), mark);
  }
  if (committer_) {
    // This sync's flush also covers the extents of the groups before it: their
    // check records go. A group that syncs its data first needs none.
    group->retired_checks = check_records_.size();
    for (uint64_t g : check_records_) group->batch.Delete(keys::CheckKey(g));
    if (!check_list.empty() && !group->sync_data) {
      group->check_group = next_check_group_++;
      group->batch.Put(keys::CheckKey(group->check_group), check_list);
    }
    if (commit_here) {
      CommitGroupNow(db_.get(), extents_.get(), /*sync=*/true, group.get());
      return FinishCommit(std::move(group));
    }
    committer_->Start(std::move(group));
    return 0;
  }
  CommitGroupNow(db_.get(), extents_.get(), /*sync=*/false, group.get());
  return FinishCommit(std::move(group));
}

int VosStore::FinishCommit(std::unique_ptr<CommitGroup> group) {
  int ran = 0;
  if (group->status.ok()) {
    written_prefix_ = std::max(written_prefix_, group->written_prefix);
    check_records_.erase(check_records_.begin(),
                         check_records_.begin() + static_cast<std::ptrdiff_t>(group->retired_checks));
  }
  // A failed batch may still have reached the WAL: its check record is deleted with the next one.
  if (group->check_group != 0 && group->metadata_attempted) check_records_.push_back(group->check_group);
  if (!group->status.ok() && group->metadata_attempted) {
    ROS2_LOG_ERROR("vos: {}: commit of {} updates and {} punches failed: {}; their space is reclaimed at the next open",
                   options_.path, group->updates.size(), group->punches.size(), group->status.ToString());
  }
  for (void* opaque : group->updates) {
    auto* u = static_cast<UpdateState*>(opaque);
    if (group->status.ok()) {
      AkeyCache::Akey& cached = akey_cache_.FindOrAdd(u->akey_scope);
      akey_cache_.SetHeader(cached, u->committed_header);
      if (u->op.type == ValueType::kArray) {
        // Keep a cached akey equal to RocksDB (the same key replaces a replayed version).
        ExtentSlot slot{keys::ExtentSizeClass(u->op.data.size() / u->op.record_size), u->op.index, u->op.epoch};
        CachedExtent extent;
        extent.rec = u->rec;
        extent.rec.inline_data = {};
        if (!u->rec.external)
          extent.inline_data.assign(reinterpret_cast<const char*>(u->op.data.data()), u->op.data.size());
        akey_cache_.AddExtent(cached, slot, std::move(extent));
      }
      if (u->replaced) FreeAfterReaders(u->replaced->offset, u->replaced->alloc_len);
      if (u->replaced_inline > 0) {
        inline_bytes_ -= std::min(inline_bytes_, u->replaced_inline);
        ReleaseSpace(u->replaced_inline);
      }
      if (u->rec.external && track_written_) written_.Add(u->rec.offset, u->rec.offset + u->rec.alloc_len);
      u->inline_charge = 0;  // now the store's
    } else if (group->metadata_attempted) {
      // The batch may or may not be in RocksDB: both caches reload from there.
      akey_cache_.Erase(u->akey_scope);
      u->inline_charge = 0;  // like its extent, counted until the next open recounts
    } else if (u->rec.external) {
      FreeExtent(u->rec.offset, u->rec.alloc_len);
    }
    CompleteUpdate(u, group->status);
    ++ran;
  }
  for (void* opaque : group->punches) {
    auto* p = static_cast<PunchState*>(opaque);
    if (!group->status.ok()) {
      CompletePunch(p, group->status.WithContext(
                           fmt::format("vos: punch oid={} at epoch {}", p->op.oid.ToString(), p->op.epoch)));
    } else {
      punches_.Add(p->scope, p->op.epoch);
      CompletePunch(p, Status::Ok());
    }
    ++ran;
  }
  return ran;
}

void VosStore::ReleaseHeader(UpdateState* u) {
  if (!u->holds_header) return;
  u->holds_header = false;
  uncommitted_keys_.erase(u->record_key);
  auto it = pending_headers_.find(u->akey_scope);
  if (it != pending_headers_.end() && --it->second.refs == 0) pending_headers_.erase(it);
}

void VosStore::CompleteUpdate(UpdateState* u, Status st) {
  ReleaseHeader(u);
  if (u->inline_charge > 0) {  // failed before its commit: its inline bytes go back
    inline_bytes_ -= std::min(inline_bytes_, u->inline_charge);
    ReleaseSpace(u->inline_charge);
    u->inline_charge = 0;
  }
  UpdateCallback done = std::move(u->done);
  updates_.erase(u->self);
  --in_flight_;
  if (done) done(std::move(st));
}

}  // namespace ros2::vos
