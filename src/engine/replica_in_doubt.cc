// In-doubt operations of a copy (replica_forward.h, InDoubtOp;
// docs/replication.md "In-doubt updates").
//
// A copy stores a forward before its leader knows whether every other copy
// has it. If the leader dies then, the update may sit on some copies only,
// and the next leader (one of them) would serve a value the others lack: lost
// for good if that copy is lost too, or if the writer, who got no answer,
// died as well. So a copy keeps what it stored for as long as its leader may
// not have settled it, and when the map marks that leader DOWN it forwards
// each such operation to the group's other live copies itself, from its own
// store, at the same epoch (a replay there is harmless), holding reads of the
// dkey until they answered.
//
// The committed watermark (docs/replication.md, "Read rule"): the leader
// numbers the operations it leads and tells its copies, on each forward and
// alone shortly after it settles one that no forward told them about, the
// position below which every operation was answered by every copy. A copy
// keeps only what it stored above its leader's watermark, and holds reads
// of those dkeys until the watermark passes them (or their resolution
// completes); the leader holds reads of a dkey it has an operation in flight
// on. Listings and queries are held the same way, per object (of its dkeys,
// its largest dkey) or per dkey (of its akeys, extents, an array's end).
// Target thread only.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "common/log.h"
#include "engine/dkey_gate.h"
#include "engine/replica_forward.h"
#include "engine/target.h"

namespace ros2::engine {

std::set<std::string> MapAddresses(const ReplicaState& rs) {
  std::set<std::string> live;
  for (const auto& [index, address] : rs.members) live.insert(address);
  return live;
}

bool MapExcludes(const ReplicaState& rs, const std::set<std::string>& live, const std::string& address) {
  return rs.down.count(address) != 0 || (!live.empty() && live.count(address) == 0);
}

void Target::NoteInDoubt(obj::Opcode op, const obj::UpdateRequest* update, const obj::PunchRequest* punch,
                         uint8_t flags, std::vector<obj::ReplicaPeer> group, std::span<const uint8_t> capability,
                         uint64_t seq, std::string gate) {
  ReplicaState& rs = replica();
  // Nothing to resolve it with, a resolution another copy sends (its leader
  // is gone already, and it numbered nothing), or settled already (its
  // leader's watermark passed it: a replay).
  auto settled = [&] {
    if (!gate.empty()) Unsettle(gate);
  };
  if (group.empty() || seq == 0 || MapExcludes(rs, MapAddresses(rs), group.front().address)) return settled();
  if (auto w = rs.watermarks.find(group.front().address); w != rs.watermarks.end() && seq < w->second) {
    return settled();
  }
  const auto now = std::chrono::steady_clock::now();
  PruneInDoubt(now);
  if (rs.in_doubt.size() >= ReplicaState::kMaxInDoubt) {
    ROS2_LOG_WARN(
        "engine target {}: more than {} forwards above their leaders' watermarks: the oldest is no longer "
        "resolved if its leader dies",
        index_, ReplicaState::kMaxInDoubt);
    Forget(*rs.in_doubt.front());
    rs.in_doubt.pop_front();
  }
  auto e = std::make_shared<InDoubtOp>();
  e->stored = now;
  e->op = op;
  if (update != nullptr) e->update = *update;
  if (punch != nullptr) e->punch = *punch;
  e->decided = (flags & obj::kForwardDecided) != 0;
  e->gate = std::move(gate);  // counted since the forward arrived (HoldFromArrival)
  e->seq = seq;
  e->counted = true;
  if (rs.last_group == nullptr || *rs.last_group != group) {
    rs.last_group = std::make_shared<const std::vector<obj::ReplicaPeer>>(std::move(group));
  }
  e->group = rs.last_group;
  if (rs.last_capability == nullptr ||
      !std::equal(capability.begin(), capability.end(), rs.last_capability->begin(), rs.last_capability->end())) {
    rs.last_capability = std::make_shared<const std::vector<uint8_t>>(capability.begin(), capability.end());
  }
  e->capability = rs.last_capability;
  rs.in_doubt.push_back(std::move(e));
}

void Target::PruneInDoubt(std::chrono::steady_clock::time_point now) {
  ReplicaState& rs = replica();
  const auto window = 3 * env_->forward_timeout;
  while (!rs.in_doubt.empty() && (rs.in_doubt.front()->done ||
                                  (now - rs.in_doubt.front()->stored > window && !rs.in_doubt.front()->resolving))) {
    if (const InDoubtOp& e = *rs.in_doubt.front(); !e.done) {
      ROS2_LOG_WARN(
          "engine target {}: a forward at epoch {} was not settled by its leader within {} ms: its "
          "reads are no longer held",
          index_, e.op == obj::Opcode::kUpdate ? e.update.header.epoch : e.punch.header.epoch, window.count());
    }
    Forget(*rs.in_doubt.front());
    rs.in_doubt.pop_front();
  }
}

uint64_t Target::Watermark() {
  const ReplicaState& rs = replica();
  return rs.open.empty() ? rs.next_seq : *rs.open.begin();
}

void Target::NoteWatermark(const std::string& leader, uint64_t watermark) {
  ReplicaState& rs = replica();
  if (watermark == 0) return;  // a resolution's forward, or a leader that numbered nothing yet
  uint64_t& known = rs.watermarks[leader];
  if (watermark <= known) return;
  known = watermark;
  // The in-doubt set keeps only what is above its leader's watermark.
  std::vector<std::string> settled;
  std::erase_if(rs.in_doubt, [&](const std::shared_ptr<InDoubtOp>& e) {
    if (e->resolving || e->seq >= watermark || e->group->front().address != leader) return false;
    if (e->counted) settled.push_back(e->gate);
    e->counted = false;
    return true;
  });
  for (const auto& gate : settled) Unsettle(gate);
}

void Target::DropInDoubt(const std::string& leader, uint64_t seq) {
  ReplicaState& rs = replica();
  std::vector<std::shared_ptr<InDoubtOp>> dropped;
  std::erase_if(rs.in_doubt, [&](const std::shared_ptr<InDoubtOp>& e) {
    if (e->resolving || e->seq != seq || e->group->front().address != leader) return false;
    dropped.push_back(e);
    return true;
  });
  for (const auto& e : dropped) Forget(*e);
}

void Target::Forget(InDoubtOp& e) {
  if (!e.counted) return;
  e.counted = false;
  Unsettle(e.gate);
}

void Target::Unsettle(const std::string& gate) {
  ReplicaState& rs = replica();
  auto it = rs.unsettled.find(gate);
  if (it == rs.unsettled.end() || --it->second > 0) return;
  rs.unsettled.erase(it);
  ReleaseHeld(gate);
}

void Target::ReplicaTick(std::chrono::steady_clock::time_point now) {
  ReplicaState& rs = *replica_;
  if (rs.watermark_due && now >= rs.watermark_at) SendWatermarks();
  if (!rs.in_doubt.empty() && now >= rs.next_prune) {
    rs.next_prune = now + std::chrono::milliseconds(100);
    PruneInDoubt(now);
  }
  if (!rs.aborts.empty() && now >= rs.next_abort) {
    rs.next_abort = now + std::chrono::milliseconds(10);
    RetryAborts(now);
  }
}

void Target::ResolveInDoubt() {
  ReplicaState& rs = replica();
  const auto now = std::chrono::steady_clock::now();
  const auto window = 3 * env_->forward_timeout;
  const std::set<std::string> live = MapAddresses(rs);
  for (const auto& e : rs.in_doubt) {
    if (e->done || e->resolving || now - e->stored > window) continue;
    if (!MapExcludes(rs, live, e->group->front().address)) continue;  // its leader is still there
    ResolveOne(e, live);
  }
}

void Target::ResolveOne(const std::shared_ptr<InDoubtOp>& e, const std::set<std::string>& live) {
  ReplicaState& rs = replica();
  const bool update = e->op == obj::Opcode::kUpdate;
  const obj::RequestHeader& h = update ? e->update.header : e->punch.header;
  const ObjectId& oid = update ? e->update.oid : e->punch.oid;
  const std::string& dkey = update ? e->update.dkey : e->punch.dkey;
  auto shard = OpenShard(h.pool, h.container);
  if (!shard.ok()) {
    ROS2_LOG_WARN("engine target {}: in-doubt {} of oid={} not resolved: {}", index_, update ? "update" : "punch",
                  oid.ToString(), shard.status().ToString());
    return;
  }
  auto op = std::make_shared<LeaderOp>();
  op->op = e->op;
  op->epoch = update ? e->update.header.epoch : e->punch.header.epoch;
  op->decided = e->decided;
  op->capability = *e->capability;
  op->group = *e->group;
  const std::string self(address_.begin(), address_.end());
  for (const auto& peer : *e->group) {
    if (peer.address != self && !MapExcludes(rs, live, peer.address)) op->peers.push_back(peer);
  }
  if (op->peers.empty()) {  // no other live copy: nothing in doubt left
    e->done = true;
    Forget(*e);
    return;
  }
  const std::string gate = DkeyGate::Key(h.pool, h.container, oid, dkey);
  e->resolving = true;
  ++rs.resolving[gate];
  op->resolved = [this, e, gate](const Status& st) { ResolvedOne(e, gate, st); };
  const uint64_t map_version = std::max(h.map_version, env_->maps.current());
  ROS2_LOG_INFO(
      "engine target {}: the leader of {} oid={} dkey of {} bytes at epoch {} is DOWN: forwarding it to {} "
      "live cop{}",
      index_, update ? "an update of" : "a punch of", oid.ToString(), dkey.size(), op->epoch, op->peers.size(),
      op->peers.size() == 1 ? "y" : "ies");
  if (!update) {
    op->punch = e->punch;
    op->punch.header.map_version = map_version;
    return deferred_.push_back([this, op] { Replicate(op); });
  }
  op->update = e->update;
  op->update.header.map_version = map_version;
  auto buffer = buffers_.Get(e->update.length);
  if (!buffer.ok()) return ResolvedOne(e, gate, buffer.status());
  op->buffer = std::move(*buffer);
  // The value as this copy stored it: the version at the operation's epoch.
  vos::FetchOp f;
  f.oid = oid;
  f.dkey = dkey;
  f.akey = e->update.akey;
  f.epoch = op->epoch;
  f.type = e->update.type;
  f.index = e->update.index;
  f.record_size = e->update.record_size;
  f.count = e->update.record_size == 0 ? 0 : e->update.length / e->update.record_size;
  f.buffer = op->buffer.span();
  (*shard)->vos->SubmitFetch(f, [this, op, e, gate](Result<vos::FetchResult> r) {
    if (!r.ok()) return ResolvedOne(e, gate, r.status());
    if (r->size != op->update.length) {
      return ResolvedOne(
          e, gate,
          Status::Internal(fmt::format("its value is {} bytes here, the update had {}", r->size, op->update.length)));
    }
    deferred_.push_back([this, op] { Replicate(op); });
  });
}

void Target::ResolvedOne(const std::shared_ptr<InDoubtOp>& e, const std::string& gate, const Status& st) {
  ReplicaState& rs = replica();
  e->resolving = false;
  if (st.ok()) {
    e->done = true;
    Forget(*e);
  } else {
    // Kept: the next map change tries again, while it is in its window.
    ROS2_LOG_WARN("engine target {}: an in-doubt operation at epoch {} was not resolved: {}", index_,
                  e->op == obj::Opcode::kUpdate ? e->update.header.epoch : e->punch.header.epoch, st.ToString());
  }
  auto it = rs.resolving.find(gate);
  if (it == rs.resolving.end() || --it->second > 0) return;
  rs.resolving.erase(it);
  ReleaseHeld(gate);
}

namespace {

// Whether `keys` (DkeyGate keys, ordered) has a dkey of `object`: the keys of
// one object's dkeys are contiguous, after the object's own key.
bool HasDkeyOf(const std::map<std::string, int, std::less<>>& keys, std::string_view object) {
  auto it = keys.lower_bound(object);
  return it != keys.end() && std::string_view(it->first).substr(0, object.size()) == object;
}

}  // namespace

bool Target::ObjectOpen(std::string_view object) {
  const ReplicaState& rs = replica();
  return HasDkeyOf(rs.unsettled, object) || HasDkeyOf(rs.resolving, object);
}

void Target::ReleaseHeld(const std::string& gate) {
  ReplicaState& rs = replica();
  if (rs.held.empty() || rs.resolving.count(gate) != 0 || rs.unsettled.count(gate) != 0) return;
  // The reads held for the dkey, and the listings held for its object once
  // none of its dkeys has an operation left, run now, in arrival order.
  const std::string_view object = DkeyGate::ObjectOf(gate);
  const bool object_free = !ObjectOpen(object);
  std::vector<std::pair<transport::IncomingRequest, Handler>> ready;
  for (auto h = rs.held.begin(); h != rs.held.end();) {
    if (std::get<0>(*h) != gate && !(object_free && std::get<0>(*h) == object)) {
      ++h;
      continue;
    }
    ready.emplace_back(std::move(std::get<1>(*h)), std::get<2>(*h));
    h = rs.held.erase(h);
  }
  for (auto& [req, handler] : ready) {
    deferred_.push_back([this, req = std::make_shared<transport::IncomingRequest>(std::move(req)), handler]() mutable {
      dispatching_ = handler;
      (this->*handler)(std::move(*req));
      dispatching_ = nullptr;
    });
  }
}

bool Target::HoldWhileResolving(transport::IncomingRequest& req, const obj::RequestHeader& h, const ObjectId& oid,
                                const std::string& dkey) {
  if (replica_ == nullptr || dispatching_ == nullptr) return false;
  if (replica_->resolving.empty() && replica_->unsettled.empty()) return false;
  if (ReplicaCount(oid.object_class()) < 2) return false;  // only replicated updates are held
  std::string gate = DkeyGate::Key(h.pool, h.container, oid, dkey);
  if (replica_->resolving.count(gate) == 0 && replica_->unsettled.count(gate) == 0) return false;
  return Hold(std::move(gate), req);
}

bool Target::HoldWhileObjectOpen(transport::IncomingRequest& req, const obj::RequestHeader& h, const ObjectId& oid) {
  if (replica_ == nullptr || dispatching_ == nullptr) return false;
  if (replica_->resolving.empty() && replica_->unsettled.empty()) return false;
  if (ReplicaCount(oid.object_class()) < 2) return false;  // only replicated updates are held
  std::string object = DkeyGate::ObjectKey(h.pool, h.container, oid);
  if (!ObjectOpen(object)) return false;
  return Hold(std::move(object), req);
}

bool Target::Hold(std::string gate, transport::IncomingRequest& req) {
  if (replica_->held.size() >= env_->limits.target_requests_in_flight) return false;  // served as it is
  replica_->held.emplace_back(std::move(gate), std::move(req), dispatching_);
  return true;
}

}  // namespace ros2::engine
