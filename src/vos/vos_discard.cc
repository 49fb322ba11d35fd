// VosStore: discards, which take back one update or punch of a dkey
// (vos.h, DiscardOp; docs/vos.md "Discard").
//
// A replicated update that failed on one copy is taken back by the copies
// that stored it, so that none serves a value another lacks. Everything an
// operation at epoch E wrote under a dkey carries E in its key (a version, an
// extent, a punch record) or its value (a decided record), so a discard finds
// it by scanning the dkey's (or the akey's) keys. It runs once no operation
// at its epoch on the dkey is in flight: the store it undoes has landed, and
// its batch goes after it. Operations at other epochs touch other keys (an
// akey header an update in flight holds is left in place).
#include <map>

#include <fmt/format.h>

#include "vos/vos_store.h"

namespace ros2::vos {

void VosStore::SubmitDiscard(const DiscardOp& op, DiscardCallback done) {
  ++in_flight_;
  if (op.dkey.empty() || op.epoch == 0 || op.epoch == kEpochMax) {
    Status st = Status::InvalidArgument(fmt::format(
        "vos: discard oid={} at epoch {}: needs a dkey and an epoch in (0, max)", op.oid.ToString(), op.epoch));
    Defer([this, done = std::move(done), st] {
      --in_flight_;
      if (done) done(st);
    });
    return;
  }
  discards_.push_back({op, std::move(done)});
}

bool VosStore::DiscardWaits(const DiscardOp& op) const {
  for (const UpdateState& u : updates_) {
    if (u.op.epoch == op.epoch && u.op.oid == op.oid && u.op.dkey == op.dkey &&
        (op.akey.empty() || u.op.akey == op.akey)) {
      return true;
    }
  }
  for (const PunchState& p : punch_states_) {
    if (p.op.epoch == op.epoch && p.op.oid == op.oid && (p.op.scope == PunchScope::kObject || p.op.dkey == op.dkey)) {
      return true;
    }
  }
  return false;
}

int VosStore::StartDiscards() {
  int ran = 0;
  for (auto it = discards_.begin(); it != discards_.end();) {
    if (DiscardWaits(it->op)) {
      ++it;
      continue;
    }
    Status st = DiscardNow(it->op);
    DiscardCallback done = std::move(it->done);
    it = discards_.erase(it);
    --in_flight_;
    ++ran;
    if (done) done(std::move(st));
  }
  return ran;
}

Status VosStore::DiscardNow(const DiscardOp& op) {
  const std::string what =
      fmt::format("vos: {}: discard oid={} at epoch {}", options_.path, op.oid.ToString(), op.epoch);
  // Everything below the scope: the dkey's, or one akey's.
  const std::string scope =
      op.akey.empty() ? keys::DkeyScope(op.oid, op.dkey) : keys::AkeyScope(op.oid, op.dkey, op.akey);
  rocksdb::WriteBatch batch;
  Reclaimed reclaimed;
  // Per akey of the dkey: whether the discard removed a version there, and
  // whether one is left (an akey it leaves empty loses its header).
  struct AkeyState {
    bool removed = false;
    bool left = false;
    bool header = false;
  };
  std::map<std::string, AkeyState> akeys;  // by akey scope

  auto it = NewIterator();
  const std::string tree = keys::TreeKey(scope);
  for (it->Seek(tree); it->Valid() && it->key().starts_with(tree); it->Next()) {
    auto k = keys::ParseTreeKey(it->key().ToStringView());
    if (!k.ok()) return k.status().WithContext(what);
    AkeyState& a = akeys[it->key().ToString().substr(1, k->akey_scope_len)];
    if (k->kind == keys::kHeaderKind) {
      a.header = true;
      continue;
    }
    if (k->epoch != op.epoch) {
      a.left = true;
      continue;
    }
    auto rec = DecodeValueRecord(it->value().ToStringView(), what, kNoChecksums);
    if (!rec.ok()) return rec.status();
    DeleteVersion(&batch, it->key().ToStringView(), rec->external, rec->offset, rec->alloc_len, rec->length,
                  &reclaimed);
    a.removed = true;
  }
  if (!it->status().ok()) return FromRocks(it->status(), what);
  for (const auto& [akey, a] : akeys) {
    // An update of the akey in flight (another epoch) holds its header.
    if (a.removed && !a.left && a.header && pending_headers_.count(akey) == 0) batch.Delete(keys::HeaderKey(akey));
  }

  // Punch records of the dkey and its akeys: 'P' scope epoch.
  std::vector<std::string> punch_scopes;
  const std::string punches = std::string(1, keys::kPunch) + scope;
  for (it->Seek(punches); it->Valid() && it->key().starts_with(punches); it->Next()) {
    const std::string_view key = it->key().ToStringView();
    if (key.size() < 1 + scope.size() + 8 || keys::ReadU64(key.substr(key.size() - 8)) != op.epoch) continue;
    batch.Delete(it->key());
    punch_scopes.emplace_back(key.substr(1, key.size() - 9));
  }
  if (!it->status().ok()) return FromRocks(it->status(), what);

  // Decided records of the dkey's akeys and of the dkey's punch that hold this
  // transaction: a resend decides it again.
  size_t decided_removed = 0;
  const std::string decided = std::string(1, keys::kDecided) + scope;
  for (it->Seek(decided); it->Valid() && it->key().starts_with(decided); it->Next()) {
    if (it->value().size() != 8 || keys::ReadU64(it->value().ToStringView()) != op.epoch) continue;
    batch.Delete(it->key());
    ++decided_removed;
  }
  if (!it->status().ok()) return FromRocks(it->status(), what);
  it.reset();

  if (batch.Count() == 0) return Status::Ok();
  // Whether or not the batch lands, the cached akeys reload from RocksDB.
  for (const auto& [akey, a] : akeys) {
    if (a.removed) akey_cache_.Erase(akey);
  }
  ROS2_RETURN_IF_ERROR(WriteReclaiming(&batch, &reclaimed, what));
  for (const std::string& punched : punch_scopes) punches_.Remove(punched, op.epoch);
  decided_count_ -= std::min(decided_count_, decided_removed);
  return Status::Ok();
}

}  // namespace ros2::vos
