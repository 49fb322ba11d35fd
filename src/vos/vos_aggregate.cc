// VosStore: aggregation, which removes versions no view can see and frees their space.
//
// The protected views are every snapshot at or below `upto` and the view at
// `upto` itself (the latest view when upto is kEpochMax); versions above `upto`
// are never touched. A single-value version survives when it is the visible
// version of some view; an extent survives when it owns at least one record in
// some view (extents partly hidden are kept whole, not trimmed). A punch
// tombstone at or below `upto` goes once no version it covers is older than it.
// Akeys with updates in flight are skipped until a later pass.
#include <algorithm>

#include <fmt/format.h>

#include "vos/vos_store.h"

namespace ros2::vos {
namespace {

struct Version {
  std::string key;
  Epoch epoch = 0;
  uint64_t begin = 0;  // arrays: first record
  uint64_t end = 0;
  bool external = false;
  uint64_t length = 0;  // inline versions: their bytes
  uint64_t offset = 0;
  uint64_t alloc_len = 0;
};

constexpr size_t kBatchLimit = 1024;

}  // namespace

void VosStore::DeleteVersion(rocksdb::WriteBatch* batch, std::string_view key, bool external, uint64_t offset,
                             uint64_t alloc_len, uint64_t length, Reclaimed* r) {
  batch->Delete(key);
  if (external) {
    batch->Delete(keys::AllocKey(offset));
    r->frees.emplace_back(offset, alloc_len);
  } else {
    r->inline_bytes += length;
  }
}

Status VosStore::WriteReclaiming(rocksdb::WriteBatch* batch, Reclaimed* r, std::string_view what) {
  if (r->inline_bytes > 0) {
    std::string delta;
    keys::AppendU64(&delta, uint64_t{0} - r->inline_bytes);
    batch->Merge(keys::MetaKey("inline_bytes"), delta);
  }
  ROS2_RETURN_IF_ERROR(FromRocks(db_->Write(WriteOpts(), batch), what));
  for (auto [offset, len] : r->frees) FreeAfterReaders(offset, len);
  inline_bytes_ -= std::min(inline_bytes_, r->inline_bytes);
  ReleaseSpace(r->inline_bytes);
  *r = Reclaimed{};
  return Status::Ok();
}

Result<AggregateStats> VosStore::Aggregate(Epoch upto) {
  AggregateStats stats;
  std::vector<Epoch> views;
  for (Epoch s : snapshots_) {
    if (s <= upto) views.push_back(s);
  }
  views.push_back(upto);

  rocksdb::WriteBatch batch;
  Reclaimed reclaimed;
  auto flush = [&]() -> Status {
    if (batch.Count() == 0) return Status::Ok();
    const uint64_t inline_freed = reclaimed.inline_bytes;
    ROS2_RETURN_IF_ERROR(WriteReclaiming(&batch, &reclaimed, "vos: aggregate"));
    batch.Clear();
    stats.inline_bytes_freed += inline_freed;
    return Status::Ok();
  };

  auto it = NewIterator();
  it->Seek(std::string(1, keys::kTree));
  while (it->Valid() && it->key()[0] == keys::kTree) {
    auto parsed = keys::ParseTreeKey(it->key().ToStringView());
    if (!parsed.ok()) return parsed.status();
    std::string akey_tree = it->key().ToString().substr(0, 1 + parsed->akey_scope_len);
    std::string_view scope = std::string_view(akey_tree).substr(1);
    if (pending_headers_.count(scope) != 0) {
      it->Seek(keys::PrefixSuccessor(akey_tree));
      continue;
    }
    std::vector<Version> versions;  // key order: singles newest first, extents by start then newest first
    bool has_header = false;
    bool is_array = false;
    for (; it->Valid() && it->key().starts_with(akey_tree); it->Next()) {
      auto k = keys::ParseTreeKey(it->key().ToStringView());
      if (!k.ok()) return k.status();
      if (k->kind == keys::kHeaderKind) {
        has_header = true;
        continue;
      }
      auto rec = DecodeValueRecord(it->value().ToStringView(), "aggregate", kNoChecksums);
      if (!rec.ok()) return rec.status();
      is_array = k->kind == keys::kExtentKind;
      Version& v = versions.emplace_back();
      v.key = it->key().ToString();
      v.epoch = k->epoch;
      v.begin = k->index;
      v.end = k->index + (is_array ? rec->length / rec->record_size : 1);
      v.external = rec->external;
      v.length = rec->length;
      v.offset = rec->offset;
      v.alloc_len = rec->alloc_len;
    }
    if (!it->status().ok()) break;

    std::vector<bool> keep(versions.size(), false);
    for (size_t i = 0; i < versions.size(); ++i) keep[i] = versions[i].epoch > upto;
    for (Epoch view : views) {
      Epoch punched = PunchedAt(scope, parsed->dkey_scope_len, view);
      if (!is_array) {
        for (size_t i = 0; i < versions.size(); ++i) {
          if (versions[i].epoch > view) continue;
          if (versions[i].epoch > punched) keep[i] = true;
          break;
        }
        continue;
      }
      std::vector<ExtentCandidate> candidates;
      for (size_t i = 0; i < versions.size(); ++i) {
        if (versions[i].epoch <= view && versions[i].epoch > punched) {
          candidates.push_back({versions[i].begin, versions[i].end, versions[i].epoch, i});
        }
      }
      for (const VisiblePiece& p : ResolveVisible(std::move(candidates), 0, ~uint64_t{0})) keep[p.id] = true;
    }
    size_t kept = 0;
    if (std::find(keep.begin(), keep.end(), false) != keep.end()) akey_cache_.DropExtents(scope);
    for (size_t i = 0; i < versions.size(); ++i) {
      if (keep[i]) {
        ++kept;
        continue;
      }
      const auto& v = versions[i];
      DeleteVersion(&batch, v.key, v.external, v.offset, v.alloc_len, v.length, &reclaimed);
      ++stats.versions_removed;
      if (v.external) stats.bytes_freed += v.alloc_len;
    }
    if (kept == 0 && has_header) {
      batch.Delete(keys::HeaderKey(scope));
      akey_cache_.DropHeader(scope);
    }
    if (batch.Count() >= kBatchLimit) ROS2_RETURN_IF_ERROR(flush());
  }
  if (!it->status().ok()) return FromRocks(it->status(), "vos: aggregate scan");
  ROS2_RETURN_IF_ERROR(flush());

  // Punch tombstones that no longer hide anything.
  auto probe = NewIterator();
  std::vector<std::pair<std::string, Epoch>> dropped;
  for (const auto& [scope, punch_epoch] : punches_.All()) {
    if (punch_epoch > upto) continue;
    std::string tree = keys::TreeKey(scope);
    bool hides = false;
    // An uncommitted update below the punch would surface if the tombstone went.
    for (auto p = pending_headers_.lower_bound(scope); p != pending_headers_.end() && p->first.starts_with(scope);
         ++p) {
      hides = true;
    }
    for (probe->Seek(tree); probe->Valid() && probe->key().starts_with(tree) && !hides; probe->Next()) {
      auto k = keys::ParseTreeKey(probe->key().ToStringView());
      if (!k.ok()) return k.status();
      if (k->kind != keys::kHeaderKind && k->epoch <= punch_epoch) hides = true;
    }
    if (!probe->status().ok()) return FromRocks(probe->status(), "vos: aggregate punches");
    if (!hides) {
      batch.Delete(keys::PunchKey(scope, punch_epoch));
      dropped.emplace_back(scope, punch_epoch);
    }
  }
  ROS2_RETURN_IF_ERROR(flush());
  for (const auto& [scope, e] : dropped) punches_.Remove(scope, e);
  stats.versions_removed += dropped.size();
  return stats;
}

}  // namespace ros2::vos
