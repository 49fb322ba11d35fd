// Failed operations of a leader: their abort (replica_forward.h, LeaderOp;
// docs/replication.md "Failed updates").
//
// An update or punch that failed on one copy (a refusal such as NoSpace, a
// copy that did not answer within the forward timeout or lost its
// connection) may sit on the leader and on the copies that stored it. Its
// failure is answered at once. Were it left there, once the leader's
// watermark passed it those copies would serve a value the others lack,
// reads going round the copies would alternate old and new values, and the
// value would be lost if they are. So the leader takes it back: it discards
// its own version (Vos::SubmitDiscard) and sends every copy that stored it,
// or may have, an abort (a forward with kForwardAbort); a copy discards its
// version and stops holding the dkey's reads. Until each answered OK, or the
// map excludes it (DOWN or DOWNOUT), the operation stays open: its position
// below the watermark (the copies keep holding its dkey's reads), its own
// reads of the dkey held, its conditional gate held, and a later attempt of
// the same transaction waiting (LeaderOp::waiting), so no abort takes back
// a resend. The abort is sent again to those that did not answer OK, with
// growing pauses. A failure on copies the map excludes only is settled as
// it is: the survivors hold the operation and the rebuild carries it to
// the fallback.
//
// Target thread only.
#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "common/log.h"
#include "engine/dkey_gate.h"
#include "engine/replica_forward.h"
#include "engine/target.h"

namespace ros2::engine {

namespace {

constexpr std::chrono::milliseconds kFirstPause{50};
constexpr std::chrono::milliseconds kLongestPause{1000};

const char* Kind(const LeaderOp& op) {
  return op.op == obj::Opcode::kUpdate ? "update" : "punch";
}

size_t Lacking(const LeaderOp& op) {
  return op.lacking.size() + (op.own_lacking ? 1 : 0);
}

}  // namespace

bool SameTransaction(const LeaderOp& a, const LeaderOp& b) {
  if (a.op != b.op || a.epoch != b.epoch) return false;
  if (a.op == obj::Opcode::kUpdate) {
    return a.update.oid == b.update.oid && a.update.dkey == b.update.dkey && a.update.akey == b.update.akey &&
           a.update.header.pool == b.update.header.pool && a.update.header.container == b.update.header.container;
  }
  return a.punch.scope == b.punch.scope && a.punch.oid == b.punch.oid && a.punch.dkey == b.punch.dkey &&
         a.punch.akey == b.punch.akey && a.punch.header.pool == b.punch.header.pool &&
         a.punch.header.container == b.punch.header.container;
}

bool Target::StillLacking(LeaderOp& op) {
  const ReplicaState& rs = replica();
  const std::set<std::string> live = MapAddresses(rs);
  std::erase_if(op.lacking, [&](const obj::ReplicaPeer& p) { return MapExcludes(rs, live, p.address); });
  return Lacking(op) > 0;
}

void Target::SettleFailed(const std::shared_ptr<LeaderOp>& op) {
  // Nothing stored anywhere (every copy refused it), or only the copies the
  // map excludes lack it: settled with the failure, as it is.
  if (op->seq == 0 || !op->maybe_stored || !StillLacking(*op)) return Settle(op, op->failure);
  ReplicaState& rs = replica();
  if (rs.aborts.size() >= ReplicaState::kMaxAborts) {
    const std::shared_ptr<LeaderOp> oldest = rs.aborts.front();
    ROS2_LOG_WARN(
        "engine target {}: more than {} failed operations being taken back: the {} at epoch {} is no longer "
        "held, and the copies that did not discard it yet serve it",
        index_, ReplicaState::kMaxAborts, Kind(*oldest), oldest->epoch);
    EndAbort(oldest);
  }
  op->aborting = true;
  op->pause = kFirstPause;
  rs.aborts.push_back(op);
  ROS2_LOG_DEBUG("engine target {}: {} at epoch {} failed on {} cop{} ({}): taken back on every copy", index_,
                 Kind(*op), op->epoch, Lacking(*op), Lacking(*op) == 1 ? "y" : "ies", op->failure.ToString());
  // The client has the failure at once; the gate of a conditional operation
  // stays held until the abort settled (EndAbort).
  Finish(op->ticket, op->failure);
  // The first abort: to the leader's own store and to every copy but those
  // that refused the forward (they stored nothing) and those the map excludes.
  std::vector<obj::ReplicaPeer> copies;
  for (const auto& peer : op->peers) {
    if (std::find(op->refused.begin(), op->refused.end(), peer) == op->refused.end()) copies.push_back(peer);
  }
  op->lacking = std::move(copies);
  op->own_lacking = true;
  StillLacking(*op);
  // Sending may connect to a copy (a blocking round trip that progresses the
  // worker), and this runs inside a completion, i.e. inside the worker's
  // progress (UCX asserts against progressing it again there): the first
  // abort leaves from the loop, as Decide's forwards do. RetryAborts leaves
  // it alone until then.
  op->abort_queued = true;
  deferred_.push_back([this, op] {
    op->abort_queued = false;
    if (!op->closed) SendAborts(op);
  });
}

void Target::SendAborts(const std::shared_ptr<LeaderOp>& op) {
  std::vector<obj::ReplicaPeer> copies = std::move(op->lacking);
  op->lacking.clear();
  const bool own = std::exchange(op->own_lacking, false);
  op->failure = Status::Ok();
  // Under the map the engine has now: a copy that learned a newer one than
  // the client's refuses an older version (StaleMap).
  obj::RequestHeader& h = op->op == obj::Opcode::kUpdate ? op->update.header : op->punch.header;
  h.map_version = std::max(h.map_version, env_->maps.current());
  op->remaining = copies.size() + (own ? 1 : 0);
  if (op->remaining == 0) return AbortAnswered(op);
  for (const auto& peer : copies) SendForward(op, peer);
  if (own) DiscardOwnCopy(op);  // last: the aborts that fail at once leave it counted
}

void Target::DiscardOwnCopy(const std::shared_ptr<LeaderOp>& op) {
  const bool update = op->op == obj::Opcode::kUpdate;
  const obj::RequestHeader& h = update ? op->update.header : op->punch.header;
  auto shard = OpenShard(h.pool, h.container);
  if (!shard.ok()) return CopyDone(op, nullptr, shard.status());
  vos::DiscardOp d;
  d.oid = update ? op->update.oid : op->punch.oid;
  d.dkey = update ? op->update.dkey : op->punch.dkey;
  d.akey = update ? op->update.akey : (op->punch.scope == obj::PunchScope::kAkey ? op->punch.akey : std::string());
  d.epoch = op->epoch;
  (*shard)->vos->SubmitDiscard(d, [this, op](Status st) {
    usage_dirty_ = true;
    CopyDone(op, nullptr, st.ok() ? st : st.WithContext(fmt::format("engine target {}: the leader's discard", index_)));
  });
}

void Target::RetryAborts(std::chrono::steady_clock::time_point now) {
  ReplicaState& rs = replica();
  std::vector<std::shared_ptr<LeaderOp>> due;
  for (const auto& op : rs.aborts) {
    if (op->remaining == 0 && !op->abort_queued && now >= op->retry_at) due.push_back(op);
  }
  for (const auto& op : due) {
    if (op->closed) continue;  // ended by an earlier one's answer
    if (!StillLacking(*op)) {
      EndAbort(op);
      continue;
    }
    ROS2_LOG_DEBUG("engine target {}: {} at epoch {}: its abort goes again to {} cop{}", index_, Kind(*op), op->epoch,
                   Lacking(*op), Lacking(*op) == 1 ? "y" : "ies");
    SendAborts(op);
  }
}

void Target::AbortAnswered(const std::shared_ptr<LeaderOp>& op) {
  if (!StillLacking(*op)) {
    ROS2_LOG_DEBUG("engine target {}: {} at epoch {} that had failed is taken back on every copy the map has", index_,
                   Kind(*op), op->epoch);
    return EndAbort(op);
  }
  op->pause = std::min(2 * op->pause, kLongestPause);
  op->retry_at = std::chrono::steady_clock::now() + op->pause;
  ROS2_LOG_DEBUG("engine target {}: the abort of {} at epoch {} still fails on {} cop{}: {}", index_, Kind(*op),
                 op->epoch, Lacking(*op), Lacking(*op) == 1 ? "y" : "ies", op->failure.ToString());
}

void Target::ExcludeFromAborts() {
  ReplicaState& rs = replica();
  std::vector<std::shared_ptr<LeaderOp>> ended;
  for (const auto& op : rs.aborts) {
    // One in flight is decided when its aborts answer (an abort to a copy
    // just marked DOWN fails as its endpoint closes).
    if (op->remaining == 0 && !StillLacking(*op)) ended.push_back(op);
  }
  for (const auto& op : ended) EndAbort(op);
}

void Target::EndAbort(const std::shared_ptr<LeaderOp>& op) {
  ReplicaState& rs = replica();
  std::erase(rs.aborts, op);
  if (!op->gate_key.empty()) {
    conditional_gate_.Release(op->gate_key);
    op->gate_key.clear();
  }
  ClosePosition(op);
}

void Target::Lead(const std::shared_ptr<LeaderOp>& op) {
  ReplicaState& rs = replica();
  op->leading = true;
  rs.leading.emplace(op->epoch, op.get());
}

void Target::Unlead(const std::shared_ptr<LeaderOp>& op) {
  if (!op->leading) return;
  op->leading = false;
  ReplicaState& rs = replica();
  for (auto [it, end] = rs.leading.equal_range(op->epoch); it != end; ++it) {
    if (it->second != op.get()) continue;
    rs.leading.erase(it);
    break;
  }
  // The later attempts of its transaction are decided now, one after the
  // other (the first one open makes the next wait again).
  for (auto& w : op->waiting) deferred_.push_back([this, w] { Decide(w); });
  op->waiting.clear();
}

bool Target::WaitForOpenAttempt(const std::shared_ptr<LeaderOp>& op) {
  ReplicaState& rs = replica();
  for (auto [it, end] = rs.leading.equal_range(op->epoch); it != end; ++it) {
    LeaderOp& open = *it->second;
    if (!SameTransaction(open, *op)) continue;
    ROS2_LOG_DEBUG("engine target {}: {} at epoch {}: an earlier attempt is still open here: it waits for it", index_,
                   Kind(*op), op->epoch);
    open.waiting.push_back(op);
    return true;
  }
  return false;
}

Epoch Target::AggregationBound(const Shard& shard) {
  if (replica_ == nullptr) return kEpochMax;
  const ReplicaState& rs = *replica_;
  Epoch bound = kEpochMax;
  // The leader's open operations (in flight, or being taken back), lowest
  // epoch first, and the copy's in-doubt ones: each may still be discarded,
  // and the version it hides must be there to come back.
  for (const auto& [epoch, op] : rs.leading) {
    const obj::RequestHeader& h = op->op == obj::Opcode::kUpdate ? op->update.header : op->punch.header;
    if (h.pool != shard.pool || h.container != shard.container) continue;
    bound = epoch - 1;
    break;
  }
  for (const auto& e : rs.in_doubt) {
    const obj::RequestHeader& h = e->op == obj::Opcode::kUpdate ? e->update.header : e->punch.header;
    if (e->done || h.pool != shard.pool || h.container != shard.container) continue;
    bound = std::min(bound, h.epoch - 1);
  }
  return bound;
}

}  // namespace ros2::engine
