// VosStore: enumeration with anchors, and the queries file size needs.
#include <fmt/format.h>

#include "vos/vos_store.h"

namespace ros2::vos {

Result<bool> VosStore::HasVisibleUnder(rocksdb::Iterator* it, std::string_view tree_prefix, Epoch epoch) {
  it->Seek(rocksdb::Slice(tree_prefix.data(), tree_prefix.size()));
  while (it->Valid() && it->key().starts_with(rocksdb::Slice(tree_prefix.data(), tree_prefix.size()))) {
    auto parsed = keys::ParseTreeKey(it->key().ToStringView());
    if (!parsed.ok()) return parsed.status();
    std::string akey_tree = it->key().ToString().substr(0, 1 + parsed->akey_scope_len);
    std::string_view akey_scope = std::string_view(akey_tree).substr(1);
    Epoch punched = PunchedAt(akey_scope, parsed->dkey_scope_len, epoch);
    if (parsed->kind == keys::kHeaderKind) {
      it->Next();
      continue;
    }
    if (parsed->kind == keys::kSingleKind) {
      // Newest first: the first version at or below `epoch` decides.
      it->Seek(keys::SingleKey(akey_scope, epoch));
      std::string single_prefix = akey_tree + keys::kSingleKind;
      if (it->Valid() && it->key().starts_with(single_prefix)) {
        Epoch e = ~keys::ReadU64(it->key().ToStringView().substr(single_prefix.size()));
        if (e > punched) return true;
      }
    } else {
      std::string extent_prefix = akey_tree + keys::kExtentKind;
      for (; it->Valid() && it->key().starts_with(extent_prefix); it->Next()) {
        Epoch e = ~keys::ReadU64(it->key().ToStringView().substr(extent_prefix.size() + 1 + 8));
        if (e <= epoch && e > punched) return true;
      }
    }
    if (!it->status().ok()) break;
    it->Seek(keys::PrefixSuccessor(akey_tree));
  }
  if (!it->status().ok()) return FromRocks(it->status(), "vos: enumerate");
  return false;
}

Result<std::vector<keys::ParsedTreeKey>> VosStore::ListLevel(std::string_view parent_prefix, Level level, Epoch epoch,
                                                             ListAnchor* anchor, size_t max) {
  std::vector<keys::ParsedTreeKey> out;
  if (anchor->eof) return out;
  auto it = NewIterator();
  auto probe = NewIterator();
  std::string seek = anchor->position.empty() ? std::string(parent_prefix) : keys::PrefixSuccessor(anchor->position);
  rocksdb::Slice parent(parent_prefix.data(), parent_prefix.size());
  it->Seek(seek);
  while (out.size() < max && it->Valid() && it->key().starts_with(parent)) {
    auto parsed = keys::ParseTreeKey(it->key().ToStringView());
    if (!parsed.ok()) return parsed.status();
    size_t len = level == Level::kObject ? 16 : level == Level::kDkey ? parsed->dkey_scope_len : parsed->akey_scope_len;
    std::string child = it->key().ToString().substr(0, 1 + len);
    auto visible = HasVisibleUnder(probe.get(), child, epoch);
    if (!visible.ok()) return visible.status();
    if (*visible) {
      out.push_back(std::move(*parsed));
      anchor->position = child;
    }
    it->Seek(keys::PrefixSuccessor(child));
  }
  if (!it->status().ok()) return FromRocks(it->status(), "vos: enumerate");
  if (!it->Valid() || !it->key().starts_with(parent)) anchor->eof = true;
  return out;
}

Result<std::vector<ObjectId>> VosStore::ListObjects(Epoch epoch, ListAnchor* anchor, size_t max) {
  auto items = ListLevel(std::string(1, keys::kTree), Level::kObject, epoch, anchor, max);
  if (!items.ok()) return items.status();
  std::vector<ObjectId> out;
  for (auto& p : *items) out.push_back(p.oid);
  return out;
}

Result<std::vector<std::string>> VosStore::ListDkeys(const ObjectId& oid, Epoch epoch, ListAnchor* anchor, size_t max) {
  auto items = ListLevel(keys::TreeKey(keys::ObjectScope(oid)), Level::kDkey, epoch, anchor, max);
  if (!items.ok()) return items.status();
  std::vector<std::string> out;
  for (auto& p : *items) out.push_back(std::move(p.dkey));
  return out;
}

Result<std::vector<std::string>> VosStore::ListAkeys(const ObjectId& oid, const std::string& dkey, Epoch epoch,
                                                     ListAnchor* anchor, size_t max) {
  auto items = ListLevel(keys::TreeKey(keys::DkeyScope(oid, dkey)), Level::kAkey, epoch, anchor, max);
  if (!items.ok()) return items.status();
  std::vector<std::string> out;
  for (auto& p : *items) out.push_back(std::move(p.akey));
  return out;
}

Result<std::vector<ExtentInfo>> VosStore::ListExtents(const ObjectId& oid, const std::string& dkey,
                                                      const std::string& akey, Epoch epoch, ListAnchor* anchor,
                                                      size_t max) {
  std::vector<ExtentInfo> out;
  if (anchor->eof) return out;
  std::string scope = keys::AkeyScope(oid, dkey, akey);
  auto eligible = EligibleExtents(scope, keys::DkeyScope(oid, dkey).size(), epoch);
  if (!eligible.ok()) return eligible.status();
  std::vector<ExtentCandidate> candidates;
  for (auto& [c, rec] : *eligible) candidates.push_back(c);
  // The anchor holds the first record index not yet reported.
  uint64_t from = anchor->position.size() == 8 ? keys::ReadU64(anchor->position) : 0;
  std::vector<VisiblePiece> pieces = ResolveVisible(std::move(candidates), from, ~uint64_t{0});
  for (const VisiblePiece& p : pieces) {
    if (out.size() == max) {
      anchor->position.clear();
      keys::AppendU64(&anchor->position, p.begin);
      return out;
    }
    const auto& [c, rec] = (*eligible)[p.id];
    out.push_back(ExtentInfo{p.begin, p.end - p.begin, rec.record_size, c.epoch});
  }
  anchor->eof = true;
  return out;
}

Result<std::optional<std::string>> VosStore::QueryMaxDkey(const ObjectId& oid, Epoch epoch) {
  std::string object_prefix = keys::TreeKey(keys::ObjectScope(oid));
  auto it = NewIterator();
  auto probe = NewIterator();
  it->SeekForPrev(keys::PrefixSuccessor(object_prefix));
  while (it->Valid() && it->key().starts_with(object_prefix)) {
    auto parsed = keys::ParseTreeKey(it->key().ToStringView());
    if (!parsed.ok()) return parsed.status();
    std::string dkey_prefix = it->key().ToString().substr(0, 1 + parsed->dkey_scope_len);
    auto visible = HasVisibleUnder(probe.get(), dkey_prefix, epoch);
    if (!visible.ok()) return visible.status();
    if (*visible) return std::optional<std::string>(parsed->dkey);
    it->SeekForPrev(dkey_prefix);  // dkey_prefix itself is never a key: lands on the previous dkey
  }
  if (!it->status().ok()) return FromRocks(it->status(), "vos: query max dkey");
  return std::optional<std::string>();
}

Result<std::optional<uint64_t>> VosStore::QueryArrayEnd(const ObjectId& oid, const std::string& dkey,
                                                        const std::string& akey, Epoch epoch) {
  std::string scope = keys::AkeyScope(oid, dkey, akey);
  AkeyCache::Akey* cached = akey_cache_.Find(scope);
  auto header = LoadHeader(scope, &cached);
  if (!header.ok()) return header.status();
  if (!header->has_value()) return std::optional<uint64_t>();
  if ((*header)->type != ValueType::kArray) {
    return Status::InvalidArgument(
        fmt::format("vos: query array end oid={} dkey='{}' akey='{}': not an array", oid.ToString(), dkey, akey));
  }
  Epoch punched = PunchedAt(scope, keys::DkeyScopeSize(dkey), epoch);
  if (const AkeyCache::Extents* extents = cached ? cached->extents() : nullptr) {
    return CachedArrayEnd(*extents, **header, epoch, punched);
  }
  auto it = NewIterator();
  return StoredArrayEnd(it.get(), scope, **header, epoch, punched);
}

Result<std::optional<uint64_t>> VosStore::StoredArrayEnd(rocksdb::Iterator* it, std::string_view akey_scope,
                                                         const AkeyHeader& h, Epoch epoch, Epoch punched) {
  std::optional<uint64_t> best;
  for (int c = keys::kMaxSizeClass; c >= 0; --c) {
    if ((h.class_mask & (uint64_t{1} << c)) == 0) continue;
    uint8_t size_class = static_cast<uint8_t>(c);
    uint64_t longest = keys::ExtentClassBound(size_class);
    std::string prefix = keys::ExtentClassPrefix(akey_scope, size_class);
    // Backwards from the highest start: once start + longest <= best, nothing earlier in the class ends later.
    for (it->SeekForPrev(keys::PrefixSuccessor(prefix)); it->Valid() && it->key().starts_with(prefix); it->Prev()) {
      std::string_view k = it->key().ToStringView().substr(prefix.size());
      uint64_t index = keys::ReadU64(k);
      if (best && index <= *best && *best - index >= longest) break;
      Epoch e = ~keys::ReadU64(k.substr(8));
      if (e > epoch || e <= punched) continue;
      auto rec = DecodeValueRecord(it->value().ToStringView(), "extent", kNoChecksums);
      if (!rec.ok()) return rec.status();
      uint64_t end = index + rec->length / rec->record_size;
      if (!best || end > *best) best = end;
    }
    if (!it->status().ok()) return FromRocks(it->status(), "vos: query array end");
  }
  return best;
}

std::optional<uint64_t> VosStore::CachedArrayEnd(const AkeyCache::Extents& extents, const AkeyHeader& h, Epoch epoch,
                                                 Epoch punched) {
  std::optional<uint64_t> best;
  for (int c = keys::kMaxSizeClass; c >= 0; --c) {
    if ((h.class_mask & (uint64_t{1} << c)) == 0) continue;
    uint8_t size_class = static_cast<uint8_t>(c);
    uint64_t longest = keys::ExtentClassBound(size_class);
    // The same walk as StoredArrayEnd over the cache's copy of the extent keys:
    // from the first slot of the next class backwards.
    auto it = extents.lower_bound(ExtentSlot{static_cast<uint8_t>(c + 1), 0, kEpochMax});
    while (it != extents.begin()) {
      --it;
      const ExtentSlot& slot = it->first;
      if (slot.size_class != size_class) break;
      if (best && slot.index <= *best && *best - slot.index >= longest) break;
      if (slot.epoch > epoch || slot.epoch <= punched) continue;
      const ValueRecord& rec = it->second.rec;
      uint64_t end = slot.index + rec.length / rec.record_size;
      if (!best || end > *best) best = end;
    }
  }
  return best;
}

}  // namespace ros2::vos
