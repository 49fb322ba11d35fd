// VosStore: the fetch path (plan from metadata, read extents, verify, compose).
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "vos/vos_store.h"

namespace ros2::vos {
namespace {

std::string Describe(const FetchOp& op) {
  return fmt::format("fetch oid={} dkey='{}' akey='{}' epoch={}", op.oid.ToString(), op.dkey, op.akey, op.epoch);
}

}  // namespace

rocksdb::Iterator* VosStore::FetchIterator() {
  rocksdb::SequenceNumber seq = db_->GetLatestSequenceNumber();
  if (fetch_iter_ && seq != fetch_iter_seq_ && !fetch_iter_->Refresh().ok()) fetch_iter_.reset();
  if (!fetch_iter_) fetch_iter_ = NewIterator();
  fetch_iter_seq_ = seq;
  return fetch_iter_.get();
}

Status VosStore::LoadSource(const rocksdb::Slice& value, std::string_view what, ChecksumWindow window,
                            SourceVersion* src) {
  auto rec = DecodeValueRecord(value.ToStringView(), what, window);
  if (!rec.ok()) return rec.status();
  src->rec = std::move(*rec);
  if (!src->rec.external) src->inline_data.assign(src->rec.inline_data);
  src->rec.inline_data = {};
  return Status::Ok();
}

void VosStore::SubmitFetch(const FetchOp& op, FetchCallback done) {
  ++in_flight_;
  if (spare_fetches_.empty()) {
    fetches_.emplace_back();
  } else {
    fetches_.splice(fetches_.end(), spare_fetches_, spare_fetches_.begin());  // left as RecycleFetch cleared it
  }
  FetchState& f = fetches_.back();
  f.self = std::prev(fetches_.end());
  f.op = op;
  f.done = std::move(done);
  f.generation = next_generation_++;
  f.status = PrepareFetch(&f);
  if (f.status.ok()) StartReads(&f);
  if (f.reads_pending == 0) {
    FetchState* p = &f;
    Defer([this, p] { FinishFetch(p); });
  }
}

Status VosStore::PrepareFetch(FetchState* f) {
  const FetchOp& op = f->op;
  if (op.dkey.empty() || op.akey.empty()) {
    return Status::InvalidArgument(fmt::format("vos: {}: empty dkey or akey", Describe(op)));
  }
  if (op.epoch == 0) return Status::InvalidArgument(fmt::format("vos: {}: epoch must be > 0", Describe(op)));
  if (op.type == ValueType::kArray) {
    if (op.record_size == 0 || op.count == 0 || op.count > std::numeric_limits<uint64_t>::max() / op.record_size ||
        op.count * op.record_size != op.buffer.size()) {
      return Status::InvalidArgument(fmt::format("vos: {}: buffer of {} bytes does not hold {} records of {} bytes",
                                                 Describe(op), op.buffer.size(), op.count, op.record_size));
    }
    if (op.index > std::numeric_limits<uint64_t>::max() - op.count) {
      return Status::InvalidArgument(
          fmt::format("vos: {}: extent [{}, +{}) overflows the index space", Describe(op), op.index, op.count));
    }
  } else if (op.type != ValueType::kSingle) {
    return Status::InvalidArgument(fmt::format("vos: {}: unknown value type", Describe(op)));
  }
  keys::AssignAkeyScope(op.oid, op.dkey, op.akey, &f->scope);
  const std::string& scope = f->scope;
  size_t dkey_scope_len = keys::DkeyScopeSize(op.dkey);
  AkeyCache::Akey* cached = akey_cache_.Find(scope);  // the one lookup for the header and the extents
  auto header = LoadHeader(scope, &cached);
  if (!header.ok()) return header.status().WithContext(Describe(op));
  if (!header->has_value()) {
    if (op.type == ValueType::kArray) {
      std::memset(op.buffer.data(), 0, op.buffer.size());
      f->size = f->deliver = op.buffer.size();
    }
    return Status::Ok();
  }
  const AkeyHeader& h = **header;
  if (h.type != op.type) {
    return Status::InvalidArgument(fmt::format("vos: {}: the akey holds {} values", Describe(op),
                                               h.type == ValueType::kArray ? "array" : "single"));
  }
  if (op.type == ValueType::kSingle) return PlanSingle(f, scope, dkey_scope_len);
  if (h.record_size != op.record_size) {
    return Status::InvalidArgument(fmt::format("vos: {}: record size {} does not match the akey's {}", Describe(op),
                                               op.record_size, h.record_size));
  }
  return PlanArray(f, scope, dkey_scope_len, h, cached);
}

Status VosStore::PlanSingle(FetchState* f, std::string_view akey_scope, size_t dkey_scope_len) {
  const FetchOp& op = f->op;
  std::string prefix = keys::TreeKey(akey_scope) + keys::kSingleKind;
  rocksdb::Iterator* it = FetchIterator();
  it->Seek(keys::SingleKey(akey_scope, op.epoch));
  if (!it->status().ok()) return FromRocks(it->status(), fmt::format("vos: {}", Describe(op)));
  if (!it->Valid() || !it->key().starts_with(prefix)) return Status::Ok();
  Epoch e = ~keys::ReadU64(it->key().ToStringView().substr(prefix.size()));
  if (e <= PunchedAt(akey_scope, dkey_scope_len, op.epoch)) return Status::Ok();
  SourceVersion& src = f->sources.emplace_back();
  src.epoch = e;
  ChecksumWindow window{0, op.buffer.size()};
  if (Status st = LoadSource(it->value(), "stored version", window, &src); !st.ok()) {
    return st.WithContext(Describe(op));
  }
  f->size = src.rec.length;
  f->deliver = std::min<uint64_t>(src.rec.length, op.buffer.size());
  if (f->deliver > 0) AddPiece(f, 0, 0, f->deliver, 0);
  return Status::Ok();
}

Result<std::vector<std::pair<ExtentCandidate, ValueRecord>>> VosStore::EligibleExtents(std::string_view akey_scope,
                                                                                       size_t dkey_scope_len,
                                                                                       Epoch epoch) {
  std::vector<std::pair<ExtentCandidate, ValueRecord>> out;
  std::string prefix = keys::TreeKey(akey_scope) + keys::kExtentKind;
  Epoch punched = PunchedAt(akey_scope, dkey_scope_len, epoch);
  auto it = NewIterator();
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    std::string_view k = it->key().ToStringView().substr(prefix.size() + 1);  // after the size class
    uint64_t index = keys::ReadU64(k);
    Epoch e = ~keys::ReadU64(k.substr(8));
    if (e > epoch || e <= punched) continue;
    auto rec = DecodeValueRecord(it->value().ToStringView(), "extent", kNoChecksums);
    if (!rec.ok()) return rec.status();
    rec->inline_data = {};  // the iterator's memory goes away
    out.push_back({ExtentCandidate{index, index + rec->length / rec->record_size, e, out.size()}, *rec});
  }
  if (!it->status().ok()) return FromRocks(it->status(), "vos: scan extents");
  return out;
}

Status VosStore::PlanArray(FetchState* f, std::string_view akey_scope, size_t dkey_scope_len, const AkeyHeader& h,
                           AkeyCache::Akey* cached_akey) {
  const FetchOp& op = f->op;
  uint64_t lo = op.index;
  uint64_t hi = op.index + op.count;
  uint64_t rs = op.record_size;
  f->size = f->deliver = op.buffer.size();
  Epoch punched = PunchedAt(akey_scope, dkey_scope_len, op.epoch);
  std::vector<ExtentCandidate>& candidates = f->candidates;
  candidates.clear();
  std::optional<uint64_t> end;
  if (const AkeyCache::Extents* cached = CachedExtents(akey_scope, cached_akey)) {
    ROS2_RETURN_IF_ERROR(CollectCachedSources(f, *cached, h, punched, &candidates));
    if (op.want_array_end) end = CachedArrayEnd(*cached, h, op.epoch, punched);
  } else {
    ROS2_RETURN_IF_ERROR(CollectStoredSources(f, akey_scope, h, punched, &candidates));
    if (op.want_array_end) {
      auto stored = StoredArrayEnd(FetchIterator(), akey_scope, h, op.epoch, punched);
      if (!stored.ok()) return stored.status().WithContext(Describe(op));
      end = *stored;
    }
  }
  f->array_end = end.value_or(0);
  ResolveVisibleInto(candidates, lo, hi, &f->visible);
  uint64_t pos = lo;
  for (const VisiblePiece& p : f->visible) {
    if (p.begin > pos) std::memset(op.buffer.data() + (pos - lo) * rs, 0, (p.begin - pos) * rs);
    const SourceVersion& src = f->sources[p.id];
    AddPiece(f, p.id, (p.begin - src.index) * rs, (p.end - src.index) * rs, (p.begin - lo) * rs);
    pos = p.end;
  }
  if (pos < hi) std::memset(op.buffer.data() + (pos - lo) * rs, 0, (hi - pos) * rs);
  return Status::Ok();
}

const AkeyCache::Extents* VosStore::CachedExtents(std::string_view akey_scope, AkeyCache::Akey* cached) {
  if (cached) {
    if (const AkeyCache::Extents* hit = cached->extents()) return hit;
    if (cached->uncacheable()) return nullptr;
  }
  AkeyCache::Extents loaded;
  std::string prefix = keys::TreeKey(akey_scope) + keys::kExtentKind;
  rocksdb::Iterator* it = FetchIterator();
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    std::string_view k = it->key().ToStringView().substr(prefix.size());
    auto rec = DecodeValueRecord(it->value().ToStringView(), "stored version", kAllChecksums);
    if (k.size() != 17 || !rec.ok() || loaded.size() >= AkeyCache::kMaxExtentsPerAkey) {
      akey_cache_.MarkUncacheable(cached ? *cached : akey_cache_.FindOrAdd(akey_scope));
      return nullptr;
    }
    ExtentSlot slot{static_cast<uint8_t>(k[0]), keys::ReadU64(k.substr(1)), ~keys::ReadU64(k.substr(9))};
    CachedExtent e;
    e.rec = std::move(*rec);
    if (!e.rec.external) e.inline_data.assign(e.rec.inline_data);
    e.rec.inline_data = {};
    loaded.emplace(slot, std::move(e));
  }
  if (!it->status().ok()) return nullptr;  // the RocksDB path reports the error
  return akey_cache_.SetExtents(cached ? *cached : akey_cache_.FindOrAdd(akey_scope), std::move(loaded));
}

Status VosStore::CollectCachedSources(FetchState* f, const AkeyCache::Extents& extents, const AkeyHeader& h,
                                      Epoch punched, std::vector<ExtentCandidate>* candidates) {
  const FetchOp& op = f->op;
  uint64_t lo = op.index;
  uint64_t hi = op.index + op.count;
  uint64_t rs = op.record_size;
  for (int c = 0; c <= keys::kMaxSizeClass; ++c) {
    if ((h.class_mask & (uint64_t{1} << c)) == 0) continue;
    // An extent of class c overlapping [lo, hi) starts in (lo - 2^c, hi).
    uint8_t size_class = static_cast<uint8_t>(c);
    uint64_t bound = keys::ExtentClassBound(size_class);
    uint64_t first = lo >= bound ? lo - bound + 1 : 0;
    for (auto it = extents.lower_bound(ExtentSlot{size_class, first, kEpochMax});
         it != extents.end() && it->first.size_class == size_class && it->first.index < hi; ++it) {
      const ExtentSlot& slot = it->first;
      const ValueRecord& rec = it->second.rec;
      if (slot.epoch > op.epoch || slot.epoch <= punched) continue;
      uint64_t end = slot.index + rec.length / rs;
      if (end <= lo) continue;
      SourceVersion& src = f->sources.emplace_back();
      src.epoch = slot.epoch;
      src.index = slot.index;
      // Copy the record with the checksums of the chunks inside [lo, hi) only.
      src.rec.length = rec.length;
      src.rec.record_size = rec.record_size;
      src.rec.external = rec.external;
      src.rec.offset = rec.offset;
      src.rec.alloc_len = rec.alloc_len;
      src.rec.csum.type = rec.csum.type;
      src.rec.csum.chunk_size = rec.csum.chunk_size;
      const auto [first_chunk, last_chunk] =
          ChunksCovering(FetchWindow(lo, hi, slot.index, rs), rec.length, rec.csum.chunk_size, rec.csum.values.size());
      src.rec.csum_first = first_chunk;
      src.rec.csum.values.assign(rec.csum.values.begin() + static_cast<ptrdiff_t>(first_chunk),
                                 rec.csum.values.begin() + static_cast<ptrdiff_t>(last_chunk));
      if (!rec.external) src.inline_data = it->second.inline_data;
      candidates->push_back({slot.index, end, slot.epoch, f->sources.size() - 1});
    }
  }
  return Status::Ok();
}

Status VosStore::CollectStoredSources(FetchState* f, std::string_view akey_scope, const AkeyHeader& h, Epoch punched,
                                      std::vector<ExtentCandidate>* candidates) {
  const FetchOp& op = f->op;
  uint64_t lo = op.index;
  uint64_t hi = op.index + op.count;
  uint64_t rs = op.record_size;
  for (int c = 0; c <= keys::kMaxSizeClass; ++c) {
    if ((h.class_mask & (uint64_t{1} << c)) == 0) continue;
    // An extent of class c overlapping [lo, hi) starts in (lo - 2^c, hi).
    uint8_t size_class = static_cast<uint8_t>(c);
    uint64_t bound = keys::ExtentClassBound(size_class);
    uint64_t first = lo >= bound ? lo - bound + 1 : 0;
    std::string prefix = keys::ExtentClassPrefix(akey_scope, size_class);
    rocksdb::Iterator* it = FetchIterator();
    for (it->Seek(keys::ExtentKey(akey_scope, size_class, first, kEpochMax));
         it->Valid() && it->key().starts_with(prefix); it->Next()) {
      std::string_view k = it->key().ToStringView().substr(prefix.size());
      uint64_t index = keys::ReadU64(k);
      if (index >= hi) break;
      Epoch e = ~keys::ReadU64(k.substr(8));
      if (e > op.epoch || e <= punched) continue;
      SourceVersion& src = f->sources.emplace_back();
      src.epoch = e;
      src.index = index;
      // Only the chunks of this version inside [lo, hi) can be read.
      if (Status st = LoadSource(it->value(), "stored version", FetchWindow(lo, hi, index, rs), &src); !st.ok()) {
        return st.WithContext(Describe(op));
      }
      uint64_t end = index + src.rec.length / rs;
      if (end <= lo) {
        f->sources.pop_back();
        continue;
      }
      candidates->push_back({index, end, e, f->sources.size() - 1});
    }
    if (!it->status().ok()) return FromRocks(it->status(), fmt::format("vos: {}", Describe(op)));
  }
  return Status::Ok();
}

void VosStore::AddPiece(FetchState* f, size_t source, uint64_t deliver_begin, uint64_t deliver_end, uint64_t dst) {
  const ValueRecord& rec = f->sources[source].rec;
  ReadPiece& p = f->pieces.emplace_back();
  p.source = source;
  p.deliver_begin = deliver_begin;
  p.deliver_end = deliver_end;
  p.dst = dst;
  uint64_t cs = rec.csum.type == ChecksumType::kNone ? 0 : rec.csum.chunk_size;
  // Whole covering chunks are read so that their checksums can be verified.
  p.verify_begin = cs ? AlignDown(deliver_begin, cs) : deliver_begin;
  p.verify_end = cs ? std::min<uint64_t>(AlignUp(deliver_end, cs), rec.length) : deliver_end;
  if (!rec.external) return;
  size_t a = extents_->alignment();
  p.read_begin = AlignDown(p.verify_begin, a);
  uint64_t read_end = AlignUp(p.verify_end, a);
  p.direct = p.read_begin == deliver_begin && read_end == deliver_end && IsAligned(f->op.buffer.data() + dst, a);
  if (!p.direct) p.bounce = AlignedBuffer(read_end - p.read_begin, std::max<size_t>(a, 64));
}

void VosStore::StartReads(FetchState* f) {
  for (ReadPiece& p : f->pieces) {
    const ValueRecord& rec = f->sources[p.source].rec;
    if (!rec.external) continue;
    std::span<std::byte> into =
        p.direct ? f->op.buffer.subspan(p.dst, p.deliver_end - p.deliver_begin) : p.bounce.span();
    ++f->reads_pending;
    extents_->SubmitRead(rec.offset + p.read_begin, into, [this, f](Status s) {
      if (!s.ok() && f->status.ok()) f->status = s.WithContext(Describe(f->op));
      if (--f->reads_pending == 0) FinishFetch(f);
    });
  }
}

bool VosStore::ReuseStoredChecksums(const FetchState& f, std::vector<uint64_t>* out) const {
  // When the whole result is one piece of one version, chunked exactly like the
  // store's chunking, the stored checksums are the checksums of the result: no
  // recomputation and no window. (FinishFetch verifies the bytes against them
  // unless the caller will.) Depends only on the fetch plan, not on the bytes.
  if (f.pieces.size() != 1 || f.deliver == 0) return false;
  const ReadPiece& p = f.pieces[0];
  const ValueRecord& rec = f.sources[p.source].rec;
  uint64_t cs = options_.csum_chunk_size;
  if (p.dst != 0 || rec.csum.type != options_.checksum || rec.csum.chunk_size != cs || p.deliver_begin % cs != 0 ||
      p.deliver_end - p.deliver_begin != f.deliver) {
    return false;
  }
  if (p.deliver_end != rec.length && f.deliver % cs != 0) return false;
  uint64_t first = p.deliver_begin / cs;
  uint64_t n = (f.deliver + cs - 1) / cs;
  if (first < rec.csum_first || first - rec.csum_first + n > rec.csum.values.size()) return false;
  auto begin = rec.csum.values.begin() + static_cast<ptrdiff_t>(first - rec.csum_first);
  out->assign(begin, begin + static_cast<ptrdiff_t>(n));
  return true;
}

void VosStore::RecycleFetch(FetchState* f) {
  if (spare_fetches_.size() >= kMaxSpareFetches) {
    fetches_.erase(f->self);
    return;
  }
  // What SubmitFetch does not overwrite is reset here; the vectors keep their
  // capacity (a piece's bounce buffer is freed with the piece).
  f->done = nullptr;
  f->size = f->deliver = f->array_end = 0;
  f->sources.clear();
  f->pieces.clear();
  f->reads_pending = 0;
  f->status = Status::Ok();
  f->op.buffer = {};
  spare_fetches_.splice(spare_fetches_.end(), fetches_, f->self);
}

void VosStore::FinishFetch(FetchState* f) {
  const FetchOp& op = f->op;
  const bool whole = !(op.type == ValueType::kSingle && f->size > op.buffer.size());
  const bool with_csum = whole && options_.checksum != ChecksumType::kNone;
  // When the stored checksums are exactly the result's, they are returned as
  // they are; to a caller that verifies them they then travel unchecked, since
  // our own pass over the bytes would check the same thing twice (FetchOp).
  std::vector<uint64_t> stored;
  const bool reuse_stored = f->status.ok() && with_csum && ReuseStoredChecksums(*f, &stored);
  const bool pass_through = reuse_stored && op.caller_verifies;
  for (ReadPiece& p : f->pieces) {
    if (!f->status.ok()) break;
    const SourceVersion& src = f->sources[p.source];
    const ValueRecord& rec = src.rec;
    const std::byte* verified;  // the bytes [verify_begin, verify_end) of the version
    if (!rec.external) {
      verified = reinterpret_cast<const std::byte*>(src.inline_data.data()) + p.verify_begin;
    } else if (p.direct) {
      verified = op.buffer.data() + p.dst;
    } else {
      verified = p.bounce.data() + (p.verify_begin - p.read_begin);
    }
    if (rec.csum.type != ChecksumType::kNone && !pass_through) {
      uint64_t cs = rec.csum.chunk_size;
      uint64_t first = p.verify_begin / cs;
      uint64_t n = (p.verify_end - p.verify_begin + cs - 1) / cs;
      if (first < rec.csum_first || first - rec.csum_first + n > rec.csum.values.size()) {
        f->status = Status::Internal(
            fmt::format("vos: {}: checksums of chunks [{}, +{}) were not decoded", Describe(op), first, n));
        break;
      }
      Status st = VerifyChunkChecksums(rec.csum.type, {verified, p.verify_end - p.verify_begin}, cs,
                                       std::span<const uint64_t>(rec.csum.values).subspan(first - rec.csum_first, n),
                                       "stored data");
      if (!st.ok()) {
        f->status = Status::Corruption(fmt::format(
            "vos: {}: version at epoch {} (record {}, {} bytes, {}): {}", Describe(op), src.epoch, src.index,
            rec.length, rec.external ? fmt::format("extent store offset {}", rec.offset) : std::string("inline"),
            st.message()));
        break;
      }
    }
    if (!p.direct) {
      std::memcpy(op.buffer.data() + p.dst, verified + (p.deliver_begin - p.verify_begin),
                  p.deliver_end - p.deliver_begin);
    }
  }
  Result<FetchResult> result = f->status;
  if (f->status.ok()) {
    FetchResult r;
    r.size = f->size;
    r.array_end = f->array_end;
    if (with_csum) {
      r.csum.type = options_.checksum;
      r.csum.chunk_size = options_.csum_chunk_size;
      r.csum.values = reuse_stored ? std::move(stored)
                                   : ComputeChunkChecksums(options_.checksum, op.buffer.first(f->deliver),
                                                           options_.csum_chunk_size);
    }
    result = std::move(r);
  } else if (f->status.IsCorruption()) {
    // Never leave unverified bytes in the caller's buffer.
    std::memset(op.buffer.data(), 0, op.buffer.size());
  }
  FetchCallback done = std::move(f->done);
  RecycleFetch(f);
  --in_flight_;
  ReleaseDeferredFrees();
  if (done) done(std::move(result));
}

}  // namespace ros2::vos
