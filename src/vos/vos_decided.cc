// VosStore: decided transaction records (docs/vos.md, "Decided transactions").
//
// A conditional operation of a replicated object (create-if-absent, punch-if-
// present, ...) is decided once, by its group's leader; every copy then stores
// it unconditionally. A resend of the same transaction (its epoch) must not be
// decided again against a copy that already holds it, so the copy records the
// transaction with the value: 'D' akey-scope -> epoch, in the commit batch of
// the update or punch itself. The record is durable exactly when the operation
// is, and reopening the store brings both back.
#include <algorithm>

#include <fmt/format.h>

#include "vos/vos_store.h"

namespace ros2::vos {

Result<Epoch> VosStore::DecidedEpoch(const ObjectId& oid, std::string_view dkey, std::string_view akey) {
  std::string value;
  rocksdb::Status rs = db_->Get(rocksdb::ReadOptions(), keys::DecidedKey(oid, dkey, akey), &value);
  if (rs.IsNotFound()) return Epoch{0};
  ROS2_RETURN_IF_ERROR(FromRocks(rs, "vos: read a decided transaction record"));
  if (value.size() != 8) {
    return Status::Corruption(fmt::format("vos: {}: malformed decided transaction record of oid={} dkey='{}'",
                                          options_.path, oid.ToString(), dkey));
  }
  return keys::ReadU64(value);
}

Status VosStore::CountDecided() {
  const std::string prefix(1, keys::kDecided);
  auto it = NewIterator();
  decided_count_ = 0;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) ++decided_count_;
  return FromRocks(it->status(), "vos: count decided transaction records");
}

Status VosStore::SweepDecided(rocksdb::WriteBatch* batch) {
  if (decided_count_ < 2 * size_t{options_.decided_keep}) return Status::Ok();
  const std::string prefix(1, keys::kDecided);
  const uint64_t now_ms = EpochMillis(highest_epoch_);
  std::vector<std::pair<Epoch, std::string>> kept;  // epoch, key
  auto it = NewIterator();
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const Epoch epoch = it->value().size() == 8 ? keys::ReadU64(it->value().ToStringView()) : 0;
    if (EpochMillis(epoch) + options_.decided_retention_ms < now_ms) {
      batch->Delete(it->key());
    } else {
      kept.emplace_back(epoch, it->key().ToString());
    }
  }
  ROS2_RETURN_IF_ERROR(FromRocks(it->status(), "vos: scan decided transaction records"));
  if (kept.size() > options_.decided_keep) {
    const auto excess = static_cast<std::ptrdiff_t>(kept.size() - options_.decided_keep);
    std::nth_element(kept.begin(), kept.begin() + excess, kept.end());
    for (auto e = kept.begin(); e != kept.begin() + excess; ++e) batch->Delete(e->second);
    kept.erase(kept.begin(), kept.begin() + excess);
  }
  decided_count_ = kept.size();
  return Status::Ok();
}

}  // namespace ros2::vos
