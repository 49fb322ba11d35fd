// Failed operations of a leader (replica_forward.h, LeaderOp;
// docs/replication.md "Failed updates").
//
// An update or punch that failed on one copy (a refusal such as NoSpace, a
// copy that died or did not answer within the forward timeout) may sit on
// the leader and on the copies that stored it. Its failure is answered at
// once, and the client's resend (same epoch) stores it everywhere; but a
// writer that never resends would leave it there, and once the leader's
// watermark passed it those copies would serve a value the others lack, lost
// if they are lost. So the leader keeps it open: its position stays below
// the watermark (the copies that stored it keep holding its dkey's reads)
// and its own reads of the dkey stay held, while it forwards the operation
// again itself, from the data it pulled once, to the copies that lack it,
// with growing pauses, until each answered OK, or the map excludes it (DOWN
// or DOWNOUT: the survivors hold the operation and the rebuild carries it to
// the fallback), or its window ends (2 x the forward timeout after the
// failure: the copies that stored it stop holding at 3 x the forward timeout
// after their store).
//
// Target thread only.
#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "common/log.h"
#include "engine/replica_forward.h"
#include "engine/target.h"

namespace ros2::engine {

namespace {

constexpr std::chrono::milliseconds kFirstPause{50};
constexpr std::chrono::milliseconds kLongestPause{1000};

// Whether two attempts are of one transaction: same kind, key and epoch.
bool SameTransaction(const LeaderOp& a, const LeaderOp& b) {
  if (a.op != b.op || a.epoch != b.epoch) return false;
  if (a.op == obj::Opcode::kUpdate) {
    return a.update.oid == b.update.oid && a.update.dkey == b.update.dkey && a.update.akey == b.update.akey;
  }
  return a.punch.scope == b.punch.scope && a.punch.oid == b.punch.oid && a.punch.dkey == b.punch.dkey &&
         a.punch.akey == b.punch.akey;
}

const char* Kind(const LeaderOp& op) {
  return op.op == obj::Opcode::kUpdate ? "update" : "punch";
}

size_t Lacking(const LeaderOp& op) {
  return op.lacking.size() + (op.own_lacking ? 1 : 0);
}

}  // namespace

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
  SupersedeRepairs(*op);
  if (rs.repairs.size() >= ReplicaState::kMaxRepairs) {
    const std::shared_ptr<LeaderOp> oldest = rs.repairs.front();
    ROS2_LOG_WARN(
        "engine target {}: more than {} failed operations kept open: the {} at epoch {} is no longer, and the "
        "copies that stored it serve it",
        index_, ReplicaState::kMaxRepairs, Kind(*oldest), oldest->epoch);
    EndRepair(oldest);
  }
  const auto now = std::chrono::steady_clock::now();
  op->repairing = true;
  op->pause = kFirstPause;
  op->retry_at = now + op->pause;
  op->give_up_at = now + 2 * env_->forward_timeout;
  rs.repairs.push_back(op);
  ROS2_LOG_DEBUG(
      "engine target {}: {} at epoch {} failed on {} cop{} ({}): kept open, its reads held, until it is "
      "forwarded to them again or the map excludes them",
      index_, Kind(*op), op->epoch, Lacking(*op), Lacking(*op) == 1 ? "y" : "ies", op->failure.ToString());
  Answer(op, op->failure);
}

void Target::SupersedeRepairs(const LeaderOp& op) {
  ReplicaState& rs = replica();
  if (rs.repairs.empty()) return;
  std::vector<std::shared_ptr<LeaderOp>> superseded;
  for (const auto& r : rs.repairs) {
    if (r.get() != &op && SameTransaction(*r, op)) superseded.push_back(r);
  }
  for (const auto& r : superseded) EndRepair(r);
}

void Target::RetryRepairs(std::chrono::steady_clock::time_point now) {
  ReplicaState& rs = replica();
  std::vector<std::shared_ptr<LeaderOp>> due;
  for (const auto& op : rs.repairs) {
    if (op->remaining == 0 && now >= op->retry_at) due.push_back(op);
  }
  for (const auto& op : due) {
    if (op->closed) continue;  // ended by an earlier one's answer
    if (!StillLacking(*op)) {
      EndRepair(op);
      continue;
    }
    if (now >= op->give_up_at) {
      ROS2_LOG_WARN(
          "engine target {}: {} at epoch {} is still not on {} of its copies ({}): no longer kept open, the "
          "copies that stored it serve it",
          index_, Kind(*op), op->epoch, Lacking(*op), op->failure.ToString());
      EndRepair(op);
      continue;
    }
    ForwardAgain(op);
  }
}

void Target::ForwardAgain(const std::shared_ptr<LeaderOp>& op) {
  std::vector<obj::ReplicaPeer> copies = std::move(op->lacking);
  op->lacking.clear();
  const bool own = std::exchange(op->own_lacking, false);
  op->failure = Status::Ok();
  // Under the map the engine has now: a copy that learned a newer one than
  // the client's refuses an older version (StaleMap).
  obj::RequestHeader& h = op->op == obj::Opcode::kUpdate ? op->update.header : op->punch.header;
  h.map_version = std::max(h.map_version, env_->maps.current());
  ROS2_LOG_DEBUG("engine target {}: {} at epoch {}: forwarding it again to {} cop{}", index_, Kind(*op), op->epoch,
                 copies.size() + (own ? 1 : 0), copies.size() + (own ? 1 : 0) == 1 ? "y" : "ies");
  op->remaining = copies.size() + (own ? 1 : 0);
  for (const auto& peer : copies) SendForward(op, peer);
  if (own) StoreOwnCopy(op);  // last: the forwards that fail at once leave it counted
}

void Target::RepairAnswered(const std::shared_ptr<LeaderOp>& op) {
  if (!StillLacking(*op)) {
    ROS2_LOG_DEBUG("engine target {}: {} at epoch {} that had failed is now on every copy the map has", index_,
                   Kind(*op), op->epoch);
    return EndRepair(op);
  }
  op->pause = std::min(2 * op->pause, kLongestPause);
  op->retry_at = std::chrono::steady_clock::now() + op->pause;
  ROS2_LOG_DEBUG("engine target {}: {} at epoch {} still fails on {} cop{}: {}", index_, Kind(*op), op->epoch,
                 Lacking(*op), Lacking(*op) == 1 ? "y" : "ies", op->failure.ToString());
}

void Target::ExcludeFromRepairs() {
  ReplicaState& rs = replica();
  std::vector<std::shared_ptr<LeaderOp>> ended;
  for (const auto& op : rs.repairs) {
    // One in flight is decided when its forwards answer (a forward to a copy
    // just marked DOWN fails as its endpoint closes).
    if (op->remaining == 0 && !StillLacking(*op)) ended.push_back(op);
  }
  for (const auto& op : ended) EndRepair(op);
}

void Target::EndRepair(const std::shared_ptr<LeaderOp>& op) {
  ReplicaState& rs = replica();
  std::erase(rs.repairs, op);
  ClosePosition(op);
}

}  // namespace ros2::engine
