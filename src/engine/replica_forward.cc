// The leader of a replica group and the copies it forwards to
// (replica_forward.h, docs/replication.md "Update protocol").
//
// Leader: admits the client's request as any update or punch (capability on a
// connection that proved its session, map version, fencing, limits), pulls the
// data once, decides a conditional operation under the dkey's gate, then
// forwards the decided, unconditional request to every other copy the client
// named, each copy pulling the data from the leader's buffer, and stores its
// own copy beside them. Once every copy has it durable it answers OK; a
// copy's failure is answered (a copy that cannot be reached or died is
// reported as Disconnected, so the client refreshes its map and resends the
// whole operation with the same epoch). Each operation has a position; the
// leader's watermark (every position below it answered by every copy) rides
// on its forwards, or goes alone shortly after, and a copy holds the reads of
// a dkey it stored a forward of above the watermark, as the leader holds
// those of a dkey it has an operation in flight on (docs/replication.md,
// "Read rule"). Endpoints to copies the pool map marks DOWN are closed
// (SetMapPeers), so a forward to a host cut off without a reset fails when
// the map changes, not at the forward timeout.
//
// Copy: accepts a forward (or a watermark) only on a connection
// authenticated for kForwardSession and with a MAC that verifies, then
// stores it as any update or punch of the client whose capability it carries.
#include "engine/replica_forward.h"

#include <fmt/format.h>

#include "common/log.h"
#include "engine/conditions.h"
#include "engine/dkey_gate.h"
#include "engine/target.h"

namespace ros2::engine {

using transport::IncomingRequest;

namespace {

// A copy that could not be reached, or whose connection failed: the client
// resends once its map changes (its failure policy's answer to Disconnected).
Status CopyFailure(const Status& st, uint32_t leader, uint32_t copy) {
  const std::string what = fmt::format("engine target {}: copy on target {}", leader, copy);
  switch (st.code()) {
    case Status::Code::kDisconnected:
    case Status::Code::kTimedOut:
    case Status::Code::kCancelled:
    case Status::Code::kNotSupported:
    case Status::Code::kProtocol: return Status::Disconnected(fmt::format("{}: {}", what, st.message()));
    default: return st.WithContext(what);
  }
}

std::span<const uint8_t> AsBytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// An abort a copy refuses for a reason that no later attempt changes.
bool AbortRefusedForGood(const Status& st) {
  switch (st.code()) {
    case Status::Code::kPermissionDenied:
    case Status::Code::kUnauthenticated:
    case Status::Code::kInvalidArgument:
    case Status::Code::kNotFound: return true;
    default: return false;
  }
}

}  // namespace

// The forward key, once the capability verifier exists.
Status EnsureForwardKey(ReplicaState& rs, control::CapabilityVerifier* verifier, uint32_t target) {
  if (rs.mac.has_value()) return Status::Ok();
  if (verifier == nullptr) return Status::Busy(fmt::format("engine target {}: still starting", target));
  ROS2_ASSIGN_OR_RETURN(auto key, verifier->SessionKeyFor(Uuid::FromBytes(kForwardSession)));
  ROS2_ASSIGN_OR_RETURN(auto mac, control::HmacSha256::Create(key));
  rs.mac.emplace(std::move(mac));
  rs.credential.id = kForwardSession;
  rs.credential.key = key;
  return Status::Ok();
}

Result<std::shared_ptr<transport::Endpoint>> PeerEndpoint(ReplicaState& rs, transport::Worker& worker,
                                                          const std::string& address) {
  if (rs.down.count(address) != 0) {
    return Status::Disconnected("the pool map marks the copy's target DOWN (no forward to it)");
  }
  auto it = rs.peers.find(address);
  if (it != rs.peers.end()) {
    if (it->second->status().ok()) return it->second;
    rs.peers.erase(it);
  }
  if (rs.peers.size() >= ReplicaState::kMaxPeers) {
    std::erase_if(rs.peers, [](const auto& p) { return p.second->outstanding() == 0; });
  }
  // Blocks this target's loop for the hello's round trip (its worker keeps
  // serving meanwhile): once per peer, the endpoint is kept.
  ROS2_ASSIGN_OR_RETURN(auto ep, worker.Connect(AsBytes(address)));
  ROS2_RETURN_IF_ERROR(ep->AuthenticateSession(rs.credential));
  rs.peers[address] = ep;
  return ep;
}

ReplicaState& Target::replica() {
  if (replica_ == nullptr) replica_ = std::make_shared<ReplicaState>();
  return *replica_;
}

void Target::HandleLeader(IncomingRequest req) {
  auto m = obj::DecodeLeaderRequest(req.payload());
  if (!m.ok()) return req.Reply(m.status());
  // The copies come from the client's map: each must be a target of the
  // engine's own (index and worker address), so a client cannot make the
  // engine connect, authenticate as an engine and send wherever it says.
  const ReplicaState& rs = replica();
  for (const auto& peer : m->peers) {
    if (rs.members.empty() || rs.members.count({peer.target, peer.address}) != 0) continue;
    return req.Reply(Status::PermissionDenied(
        fmt::format("engine target {}: leader request names copy {} at a worker address ({} bytes) that no target "
                    "of the pool map has",
                    index_, peer.target, peer.address.size())));
  }
  if (m->op == obj::Opcode::kUpdate) return LeadUpdate(req, *m);
  LeadPunch(req, *m);
}

void Target::LeadUpdate(IncomingRequest& req, obj::LeaderRequest& m) {
  auto u = obj::DecodeUpdateRequest(m.body);
  if (!u.ok()) return req.Reply(u.status().WithContext("leader request"));
  auto shard = Admit(req, u->header, control::kRightWrite);
  if (!shard.ok()) return ReplyRefused(req, shard.status(), u->header);
  if (*shard == nullptr) return Park(std::move(req), u->header);
  if (u->header.epoch == 0) {
    return req.Reply(Status::InvalidArgument(fmt::format(
        "engine target {}: a replicated update needs the client's epoch (its transaction id), got 0", index_)));
  }
  if (Status st = CheckClientEpoch(u->header.epoch, "replicated update"); !st.ok()) return req.Reply(st);
  if (req.bulk_out_size() != u->length) {
    return req.Reply(Status::InvalidArgument(fmt::format(
        "engine target {}: update of {} bytes carries {} bytes of data", index_, u->length, req.bulk_out_size())));
  }
  if (u->length > env_->limits.max_io_size) {
    metrics_.Refuse(Refusal::kLimit);
    return req.Reply(Status::InvalidArgument(
        fmt::format("engine target {}: update of {} bytes exceeds limits.max_io_size ({} bytes)", index_, u->length,
                    env_->limits.max_io_size)));
  }
  auto ticket = Track(req, u->length);
  if (!ticket.ok()) return req.Reply(ticket.status());
  auto buffer = buffers_.Get(u->length);
  if (!buffer.ok()) return Finish(*ticket, buffer.status());
  auto op = std::make_shared<LeaderOp>();
  op->ticket = *ticket;
  op->op = obj::Opcode::kUpdate;
  op->peers = std::move(m.peers);
  op->capability.assign(req.capability().begin(), req.capability().end());
  op->buffer = std::move(*buffer);
  op->condition = u->header.flags & obj::kUpdateFlags;
  op->epoch = u->header.epoch;
  env_->clock->Update(op->epoch);
  op->store = vos::UpdateOp{};
  op->store.oid = u->oid;
  op->store.dkey = u->dkey;
  op->store.akey = u->akey;
  op->store.epoch = op->epoch;
  op->store.type = u->type;
  op->store.index = u->index;
  op->store.record_size = u->record_size;
  op->store.data = op->buffer.span();
  op->store.csum = u->csum;
  op->update = std::move(*u);
  auto decide = [this, op](const Status& pulled) {
    if (!pulled.ok()) {
      return Finish(op->ticket, pulled.WithContext(fmt::format("engine target {}: pulling update data", index_)));
    }
    Decide(op);
  };
  if (op->update.length == 0) return decide(Status::Ok());
  req.Pull(op->buffer.span(), decide);
}

void Target::LeadPunch(IncomingRequest& req, obj::LeaderRequest& m) {
  auto p = obj::DecodePunchRequest(m.body);
  if (!p.ok()) return req.Reply(p.status().WithContext("leader request"));
  if (p->scope == obj::PunchScope::kObject) {
    return req.Reply(Status::InvalidArgument(
        fmt::format("engine target {}: an object punch goes to every shard, not through a group's leader", index_)));
  }
  auto shard = Admit(req, p->header, control::kRightWrite);
  if (!shard.ok()) return ReplyRefused(req, shard.status(), p->header);
  if (*shard == nullptr) return Park(std::move(req), p->header);
  if (p->header.epoch == 0) {
    return req.Reply(Status::InvalidArgument(fmt::format(
        "engine target {}: a replicated punch needs the client's epoch (its transaction id), got 0", index_)));
  }
  if (Status st = CheckClientEpoch(p->header.epoch, "replicated punch"); !st.ok()) return req.Reply(st);
  auto ticket = Track(req);
  if (!ticket.ok()) return req.Reply(ticket.status());
  auto op = std::make_shared<LeaderOp>();
  op->ticket = *ticket;
  op->op = obj::Opcode::kPunch;
  op->peers = std::move(m.peers);
  op->capability.assign(req.capability().begin(), req.capability().end());
  op->condition = p->header.flags & obj::kPunchFlags;
  op->epoch = p->header.epoch;
  env_->clock->Update(op->epoch);
  op->punch = std::move(*p);
  Decide(op);
}

void Target::Decide(const std::shared_ptr<LeaderOp>& op) {
  // A resend while an earlier attempt of the transaction is open here (in
  // flight, or being taken back) goes after it: an abort must not take
  // back what a resend stored.
  if (WaitForOpenAttempt(op)) return;
  Lead(op);
  // Forwarding may connect (a blocking round trip that progresses the
  // worker): never inside a completion, always from the loop.
  auto replicate = [this, op] { deferred_.push_back([this, op] { Replicate(op); }); };
  if (op->condition == 0) return replicate();
  const obj::RequestHeader& h = op->op == obj::Opcode::kUpdate ? op->update.header : op->punch.header;
  const ObjectId& oid = op->op == obj::Opcode::kUpdate ? op->update.oid : op->punch.oid;
  const std::string& dkey = op->op == obj::Opcode::kUpdate ? op->update.dkey : op->punch.dkey;
  op->gate_key = DkeyGate::Key(h.pool, h.container, oid, dkey);
  // Held until every copy answered: the next conditional operation on the
  // dkey is decided after this one is stored everywhere (or failed).
  conditional_gate_.Acquire(op->gate_key, [this, op, replicate] {
    const bool update = op->op == obj::Opcode::kUpdate;
    const obj::RequestHeader& h = update ? op->update.header : op->punch.header;
    const std::string& dkey = update ? op->update.dkey : op->punch.dkey;
    const std::string& akey = update ? op->update.akey : op->punch.akey;
    const ObjectId& oid = update ? op->update.oid : op->punch.oid;
    // A resend of a transaction this copy already stored (its decided
    // record, written with it) is not decided again: it was this very
    // operation that made the key exist or vanish.
    Status st;
    auto shard = OpenShard(h.pool, h.container);
    const std::string what = fmt::format("engine target {}: {}", index_, update ? "update" : "punch");
    const bool dkey_punch = !update && op->punch.scope == obj::PunchScope::kDkey;
    if (!shard.ok()) {
      st = shard.status();
    } else if (auto decided = (*shard)->vos->DecidedEpoch(oid, dkey, dkey_punch ? std::string() : akey);
               !decided.ok()) {
      st = decided.status().WithContext(what);
    } else if (*decided == op->epoch) {
      ROS2_LOG_DEBUG("{}: transaction {} already decided here (a resend): stored again", what, op->epoch);
    } else if (dkey_punch) {
      st = CheckCondition(op->condition, DkeyVisible(*(*shard)->vos, oid, dkey), what);
    } else {
      st = CheckCondition(op->condition, AkeyVisible(*(*shard)->vos, oid, dkey, akey), what);
    }
    if (!st.ok()) {
      Finish(op->ticket, st);
      Unlead(op);
      return conditional_gate_.Release(op->gate_key);
    }
    replicate();
  });
}

void Target::Replicate(const std::shared_ptr<LeaderOp>& op) {
  if (op->group.empty()) {
    op->group.push_back({index_, std::string(address_.begin(), address_.end())});  // as the map has it
    op->group.insert(op->group.end(), op->peers.begin(), op->peers.end());
  }
  op->remaining = op->peers.size();
  if (op->resolved) {  // a resolution: stored here already
    if (op->remaining == 0) return op->resolved(Status::Ok());
    for (const auto& peer : op->peers) SendForward(op, peer);
    return;
  }
  // Numbered, and its dkey's reads held here, until every copy and the
  // leader's own store answered (Settle).
  ReplicaState& rs = replica();
  if (rs.next_seq == 0) {
    rs.next_seq = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
  }
  op->seq = rs.next_seq++;
  rs.open.insert(op->seq);
  const bool update = op->op == obj::Opcode::kUpdate;
  const obj::RequestHeader& h = update ? op->update.header : op->punch.header;
  op->read_gate = DkeyGate::Key(h.pool, h.container, update ? op->update.oid : op->punch.oid,
                                update ? op->update.dkey : op->punch.dkey);
  ++rs.unsettled[op->read_gate];
  ++op->remaining;  // the leader's own store, beside the forwards
  for (const auto& peer : op->peers) SendForward(op, peer);
  StoreOwnCopy(op);
}

void Target::StoreOwnCopy(const std::shared_ptr<LeaderOp>& op) {
  const obj::RequestHeader& h = op->op == obj::Opcode::kUpdate ? op->update.header : op->punch.header;
  auto mine = [this, op](Status st) {
    usage_dirty_ = true;
    CopyDone(op, nullptr, st.ok() ? st : st.WithContext(fmt::format("engine target {}: the leader's copy", index_)));
  };
  // A decided conditional operation records its transaction with itself
  // (the same commit batch): a resend after a restart finds it.
  const bool decided = op->condition != 0;
  if (op->op == obj::Opcode::kUpdate) {
    op->store.decided = decided;
    return SubmitUpdateWithRetry(h.pool, h.container, &op->store, mine);
  }
  auto shard = OpenShard(h.pool, h.container);
  if (!shard.ok()) return CopyDone(op, nullptr, shard.status());
  const obj::PunchRequest& p = op->punch;
  vos::PunchOp punch{p.scope, p.oid, p.dkey, p.akey, op->epoch};
  punch.decided = decided;
  (*shard)->vos->SubmitPunch(punch, mine);
}

void Target::SendForward(const std::shared_ptr<LeaderOp>& op, const obj::ReplicaPeer& peer) {
  ReplicaState& rs = replica();
  auto fail = [&](const Status& st) { CopyDone(op, &peer, CopyFailure(st, index_, peer.target)); };
  if (Status st = EnsureForwardKey(rs, env_->verifier.load(std::memory_order_acquire), index_); !st.ok()) {
    return fail(st);
  }
  auto ep = PeerEndpoint(rs, *worker_, peer.address);
  if (!ep.ok()) return fail(ep.status());
  obj::ForwardRequest fwd;
  fwd.op = op->op;
  fwd.flags = op->aborting ? obj::kForwardAbort : op->condition != 0 || op->decided ? obj::kForwardDecided : 0;
  fwd.group = op->group;
  if (!op->resolved) {  // a resolution's forward carries no position and no watermark
    fwd.seq = op->seq;
    fwd.watermark = Watermark();
    rs.told[peer.address] = {peer.target, fwd.watermark, std::chrono::steady_clock::now()};
  }
  if (op->op == obj::Opcode::kUpdate) {
    obj::UpdateRequest r = op->update;
    r.header.target = peer.target;
    r.header.flags = 0;  // decided here
    fwd.body = obj::Encode(r);
  } else {
    obj::PunchRequest r = op->punch;
    r.header.target = peer.target;
    r.header.flags = 0;
    fwd.body = obj::Encode(r);
  }
  auto mac = rs.mac->Compute(obj::ForwardMacInput(fwd, op->capability));
  if (!mac.ok()) return fail(mac.status());
  fwd.mac = *mac;
  transport::CallOptions options;
  options.capability = op->capability;
  options.timeout = env_->forward_timeout;
  if (op->op == obj::Opcode::kUpdate && !op->aborting) options.bulk_out = op->buffer.span();
  const auto payload = obj::Encode(fwd);
  Status st = (*ep)->Call(static_cast<uint16_t>(obj::Opcode::kForward), payload, options,
                          [this, op, peer](const transport::ReplyView& reply) {
                            CopyDone(op, &peer,
                                     reply.status.ok() ? Status::Ok() : CopyFailure(reply.status, index_, peer.target));
                          });
  if (!st.ok()) fail(st);
}

void Target::CopyDone(const std::shared_ptr<LeaderOp>& op, const obj::ReplicaPeer* copy, const Status& st) {
  // A forward that timed out or lost its connection may have been stored;
  // one refused was not.
  if (st.ok() || st.code() == Status::Code::kDisconnected) op->maybe_stored = true;
  if (!st.ok() && copy != nullptr && !op->aborting && st.code() != Status::Code::kDisconnected) {
    op->refused.push_back(*copy);
  }
  if (!st.ok() && op->aborting && copy != nullptr && AbortRefusedForGood(st)) {
    // Sending it again would change nothing (the client's capability
    // expired or was revoked, the container is gone): that copy keeps what
    // it stored, and its in-doubt window ends its hold.
    ROS2_LOG_WARN("engine target {}: the abort of the operation at epoch {} is refused by target {} for good: {}",
                  index_, op->epoch, copy->target, st.ToString());
  } else if (!st.ok()) {
    if (op->failure.ok()) op->failure = st;
    if (copy != nullptr) {
      op->lacking.push_back(*copy);
    } else {
      op->own_lacking = true;
    }
  }
  if (--op->remaining > 0) return;
  if (op->resolved) return op->resolved(op->failure);  // an in-doubt operation's resolution: stored here already
  if (op->closed) {                                    // an abort that ended while this forward was in flight
    op->buffer = PooledBuffer();
    return;
  }
  if (op->aborting) return AbortAnswered(op);
  if (op->failure.ok()) return Settle(op, Status::Ok());
  // A copy failed: answered with that failure (the client resends the
  // whole operation, same epoch, under its next map), and taken back from
  // the copies that stored it (replica_abort.cc).
  SettleFailed(op);
}

void Target::Settle(const std::shared_ptr<LeaderOp>& op, const Status& st) {
  ClosePosition(op);
  Answer(op, st);
}

void Target::ClosePosition(const std::shared_ptr<LeaderOp>& op) {
  op->closed = true;
  Unlead(op);
  if (op->remaining == 0) op->buffer = PooledBuffer();  // else a copy may still pull from it
  if (op->seq == 0) return;
  ReplicaState& rs = replica();
  rs.open.erase(op->seq);
  if (!rs.watermark_due) {
    rs.watermark_due = true;
    rs.watermark_at = std::chrono::steady_clock::now() + ReplicaState::kWatermarkDelay;
  }
  Unsettle(op->read_gate);
}

void Target::Answer(const std::shared_ptr<LeaderOp>& op, const Status& st) {
  if (!op->gate_key.empty()) {
    conditional_gate_.Release(op->gate_key);
    op->gate_key.clear();
  }
  if (!st.ok()) return Finish(op->ticket, st);
  if (op->op == obj::Opcode::kUpdate) return Finish(op->ticket, Status::Ok(), obj::Encode(obj::UpdateReply{op->epoch}));
  Finish(op->ticket, Status::Ok(), obj::Encode(obj::PunchReply{op->epoch}));
}

void Target::SetMapPeers(std::vector<std::string> addresses, std::vector<std::pair<uint32_t, std::string>> members) {
  ReplicaState& rs = replica();
  rs.members = std::set<std::pair<uint32_t, std::string>>(std::make_move_iterator(members.begin()),
                                                          std::make_move_iterator(members.end()));
  rs.down = std::set<std::string>(std::make_move_iterator(addresses.begin()), std::make_move_iterator(addresses.end()));
  for (auto it = rs.peers.begin(); it != rs.peers.end();) {
    if (rs.down.count(it->first) == 0) {
      ++it;
      continue;
    }
    std::shared_ptr<transport::Endpoint> ep = std::move(it->second);
    it = rs.peers.erase(it);
    if (ep->outstanding() > 0) {
      ROS2_LOG_INFO("engine target {}: {} forward(s) abandoned: the pool map marks their copy's target DOWN", index_,
                    ep->outstanding());
    }
    ep->Close();  // fails the forwards in flight (Cancelled: the copy is reported Disconnected)
  }
  std::erase_if(rs.told, [&rs](const auto& t) { return rs.down.count(t.first) != 0; });
  if (!rs.members.empty()) {  // the watermarks of leaders the map no longer has
    std::erase_if(rs.watermarks, [&rs](const auto& w) {
      return std::none_of(rs.members.begin(), rs.members.end(), [&w](const auto& m) { return m.second == w.first; });
    });
  }
  // A leader marked DOWN, or restarted (its old worker address gone from the
  // map), may have left updates on this copy that other copies lack
  // (replica_in_doubt.cc).
  if (!rs.in_doubt.empty()) ResolveInDoubt();
  // A failed operation being taken back ends once the map excludes every
  // copy that has not answered its abort.
  if (!rs.aborts.empty()) ExcludeFromAborts();
}

Status Target::RequireEngineSession(const IncomingRequest& req, std::string_view what, std::string_view who_may) {
  // Only an engine holds the forward session's key: a client's connection
  // never proved it, whatever it sends.
  if (!req.SessionAuthenticated(kForwardSession)) {
    metrics_.Refuse(Refusal::kCapability);
    return Status::PermissionDenied(
        fmt::format("engine target {}: {} refused: connection {:#x} did not authenticate as an engine (the replica "
                    "forward session); {}",
                    index_, what, req.connection_id(), who_may));
  }
  return EnsureForwardKey(replica(), env_->verifier.load(std::memory_order_acquire), index_);
}

void Target::HandleForward(IncomingRequest req) {
  auto m = obj::DecodeForwardRequest(req.payload());
  if (!m.ok()) return req.Reply(m.status());
  if (Status st = RequireEngineSession(req, "forward", "only the leader of a replica group forwards updates");
      !st.ok()) {
    return req.Reply(st);
  }
  ReplicaState& rs = replica();
  auto mac = rs.mac->Compute(obj::ForwardMacInput(*m, req.capability()));
  if (!mac.ok()) return req.Reply(mac.status());
  if (!control::ConstantTimeEqual(*mac, m->mac)) {
    metrics_.Refuse(Refusal::kCapability);
    return req.Reply(Status::Unauthenticated(fmt::format(
        "engine target {}: forward refused: its MAC does not verify under the engines' forward key", index_)));
  }
  // The leader's watermark: what it forwarded below it is on every copy.
  // Only an engine can send it (the session and the MAC above).
  if (!m->group.empty()) NoteWatermark(m->group.front().address, m->watermark);
  if ((m->flags & obj::kForwardWatermark) != 0) return req.Reply(Status::Ok());
  if ((m->flags & obj::kForwardAbort) != 0) return AbortForwarded(req, *m);
  if (m->op == obj::Opcode::kUpdate) {
    auto u = obj::DecodeUpdateRequest(m->body);
    if (!u.ok()) return req.Reply(u.status().WithContext("forward request"));
    return StoreForwardedUpdate(req, std::move(*u), m->flags, std::move(m->group), m->seq);
  }
  auto p = obj::DecodePunchRequest(m->body);
  if (!p.ok()) return req.Reply(p.status().WithContext("forward request"));
  StoreForwardedPunch(req, std::move(*p), m->flags, std::move(m->group), m->seq);
}

void Target::StoreForwardedUpdate(IncomingRequest& req, obj::UpdateRequest u, uint8_t flags,
                                  std::vector<obj::ReplicaPeer> group, uint64_t seq) {
  if (u.header.flags != 0 || u.header.epoch == 0) {
    return req.Reply(Status::InvalidArgument(fmt::format(
        "engine target {}: a forward must carry a decided (unconditional) update at the leader's epoch", index_)));
  }
  auto shard = Admit(req, u.header, control::kRightWrite, /*forwarded=*/true);
  if (!shard.ok()) return ReplyRefused(req, shard.status(), u.header);
  if (*shard == nullptr) return Park(std::move(req), u.header);
  if (Status st = CheckClientEpoch(u.header.epoch, "forwarded update"); !st.ok()) return req.Reply(st);
  if (req.bulk_out_size() != u.length || u.length > env_->limits.max_io_size) {
    return req.Reply(Status::InvalidArgument(fmt::format("engine target {}: forwarded update of {} bytes carries {}",
                                                         index_, u.length, req.bulk_out_size())));
  }
  auto ticket = Track(req, u.length);
  if (!ticket.ok()) return req.Reply(ticket.status());
  auto buffer = buffers_.Get(u.length);
  if (!buffer.ok()) return Finish(*ticket, buffer.status());
  auto op = std::make_shared<LeaderOp>();
  op->ticket = *ticket;
  op->buffer = std::move(*buffer);
  op->epoch = u.header.epoch;
  env_->clock->Update(op->epoch);
  op->store.decided = (flags & obj::kForwardDecided) != 0;
  op->condition = flags;
  op->group = std::move(group);
  op->capability.assign(req.capability().begin(), req.capability().end());
  op->store.oid = u.oid;
  op->store.dkey = u.dkey;
  op->store.akey = u.akey;
  op->store.epoch = op->epoch;
  op->store.type = u.type;
  op->store.index = u.index;
  op->store.record_size = u.record_size;
  op->store.data = op->buffer.span();
  op->store.csum = u.csum;
  op->update = std::move(u);
  op->seq = seq;
  HoldFromArrival(op->update.header, op->update.oid, op->update.dkey, seq, &op->read_gate);
  // An abort of this transaction arriving before the store answered runs
  // after it (ForwardStored).
  // The dkey's gate key is made once: HoldFromArrival's, when it held it.
  const std::string transaction = op->read_gate.empty()
                                      ? TransactionKey(op->update.header, op->update.oid, op->update.dkey)
                                      : TransactionKey(op->read_gate, op->update.header.epoch);
  ++replica().storing[transaction];
  auto store = [this, op, transaction](const Status& pulled) {
    if (!pulled.ok()) {
      if (!op->read_gate.empty()) Unsettle(op->read_gate);
      ForwardStored(transaction);
      return Finish(op->ticket, pulled.WithContext(fmt::format("engine target {}: pulling forwarded data", index_)));
    }
    const obj::RequestHeader& h = op->update.header;
    SubmitUpdateWithRetry(h.pool, h.container, &op->store, [this, op, transaction](Status st) {
      usage_dirty_ = true;
      op->buffer = PooledBuffer();
      if (st.ok()) {
        NoteInDoubt(obj::Opcode::kUpdate, &op->update, nullptr, op->condition, std::move(op->group), op->capability,
                    op->seq, std::move(op->read_gate));
      } else if (!op->read_gate.empty()) {
        Unsettle(op->read_gate);
      }
      ForwardStored(transaction);
      Finish(op->ticket, st, obj::Encode(obj::UpdateReply{op->epoch}));
    });
  };
  if (op->update.length == 0) return store(Status::Ok());
  req.Pull(op->buffer.span(), store);
}

void Target::StoreForwardedPunch(IncomingRequest& req, obj::PunchRequest p, uint8_t flags,
                                 std::vector<obj::ReplicaPeer> group, uint64_t seq) {
  if (p.header.flags != 0 || p.header.epoch == 0 || p.scope == obj::PunchScope::kObject) {
    return req.Reply(Status::InvalidArgument(fmt::format(
        "engine target {}: a forward must carry a decided dkey or akey punch at the leader's epoch", index_)));
  }
  auto shard = Admit(req, p.header, control::kRightWrite, /*forwarded=*/true);
  if (!shard.ok()) return ReplyRefused(req, shard.status(), p.header);
  if (*shard == nullptr) return Park(std::move(req), p.header);
  if (Status st = CheckClientEpoch(p.header.epoch, "forwarded punch"); !st.ok()) return req.Reply(st);
  auto ticket = Track(req);
  if (!ticket.ok()) return req.Reply(ticket.status());
  const Epoch epoch = p.header.epoch;
  env_->clock->Update(epoch);
  vos::PunchOp punch{p.scope, p.oid, p.dkey, p.akey, epoch};
  punch.decided = (flags & obj::kForwardDecided) != 0;
  std::vector<uint8_t> capability(req.capability().begin(), req.capability().end());
  std::string gate;
  HoldFromArrival(p.header, p.oid, p.dkey, seq, &gate);
  (*shard)->vos->SubmitPunch(punch, [this, t = *ticket, epoch, p = std::move(p), flags, group = std::move(group),
                                     capability = std::move(capability), seq, gate](Status st) mutable {
    usage_dirty_ = true;
    if (st.ok()) {
      NoteInDoubt(obj::Opcode::kPunch, nullptr, &p, flags, std::move(group), capability, seq, std::move(gate));
    } else if (!gate.empty()) {
      Unsettle(gate);
    }
    Finish(t, st, obj::Encode(obj::PunchReply{epoch}));
  });
}

std::string TransactionKey(std::string gate_key, Epoch epoch) {
  gate_key.append(reinterpret_cast<const char*>(&epoch), sizeof(epoch));
  return gate_key;
}

std::string TransactionKey(const obj::RequestHeader& h, const ObjectId& oid, const std::string& dkey) {
  return TransactionKey(DkeyGate::Key(h.pool, h.container, oid, dkey), h.epoch);
}

void Target::ForwardStored(const std::string& transaction) {
  ReplicaState& rs = replica();
  auto it = rs.storing.find(transaction);
  if (it == rs.storing.end() || --it->second > 0) return;
  rs.storing.erase(it);
  auto [first, last] = rs.after_store.equal_range(transaction);
  for (auto a = first; a != last; ++a) deferred_.push_back(std::move(a->second));
  rs.after_store.erase(first, last);
}

void Target::AbortForwarded(IncomingRequest& req, const obj::ForwardRequest& m) {
  // The operation it takes back, as the leader forwarded it (no data).
  obj::RequestHeader header;
  vos::DiscardOp d;
  if (m.op == obj::Opcode::kUpdate) {
    auto u = obj::DecodeUpdateRequest(m.body);
    if (!u.ok()) return req.Reply(u.status().WithContext("abort request"));
    header = u->header;
    d.oid = u->oid;
    d.dkey = std::move(u->dkey);
    d.akey = std::move(u->akey);
  } else {
    auto p = obj::DecodePunchRequest(m.body);
    if (!p.ok()) return req.Reply(p.status().WithContext("abort request"));
    if (p->scope == obj::PunchScope::kObject) {
      return req.Reply(Status::InvalidArgument(
          fmt::format("engine target {}: an abort takes back a dkey or akey punch, not an object punch", index_)));
    }
    header = p->header;
    d.oid = p->oid;
    d.dkey = std::move(p->dkey);
    if (p->scope == obj::PunchScope::kAkey) d.akey = std::move(p->akey);
  }
  if (header.flags != 0 || header.epoch == 0 || d.dkey.empty()) {
    return req.Reply(Status::InvalidArgument(
        fmt::format("engine target {}: an abort must name a decided operation's dkey and epoch", index_)));
  }
  // As its forward was: the client's capability for the container, the map
  // version, fencing.
  auto shard = Admit(req, header, control::kRightWrite, /*forwarded=*/true);
  if (!shard.ok()) return ReplyRefused(req, shard.status(), header);
  if (*shard == nullptr) return Park(std::move(req), header);
  auto ticket = Track(req);
  if (!ticket.ok()) return req.Reply(ticket.status());
  d.epoch = header.epoch;
  const std::string transaction = TransactionKey(header, d.oid, d.dkey);
  auto discard = [this, t = *ticket, pool = header.pool, container = header.container, d,
                  leader = m.group.front().address, seq = m.seq] {
    auto shard = OpenShard(pool, container);
    if (!shard.ok()) return Finish(t, shard.status());
    (*shard)->vos->SubmitDiscard(d, [this, t, leader, seq](Status st) {
      usage_dirty_ = true;
      if (st.ok()) DropInDoubt(leader, seq);
      Finish(t, st);
    });
  };
  ReplicaState& rs = replica();
  if (rs.storing.count(transaction) != 0) {
    rs.after_store.emplace(transaction, std::move(discard));
    return;
  }
  discard();
}

void Target::HoldFromArrival(const obj::RequestHeader& h, const ObjectId& oid, const std::string& dkey, uint64_t seq,
                             std::string* gate) {
  // Counted from the forward's arrival, not from its commit: a store's commit
  // thread makes the value visible to a fetch before this thread runs the
  // store's callback (NoteInDoubt), and a fetch in between would serve it.
  if (seq == 0) return;  // a resolution's forward: its leader is gone already
  *gate = DkeyGate::Key(h.pool, h.container, oid, dkey);
  ++replica().unsettled[*gate];
}

void Target::SendWatermarks() {
  ReplicaState& rs = replica();
  rs.watermark_due = false;
  const uint64_t watermark = Watermark();
  if (watermark == 0 || !rs.mac.has_value()) return;
  const auto now = std::chrono::steady_clock::now();
  const obj::ReplicaPeer self{index_, std::string(address_.begin(), address_.end())};
  for (auto& [address, told] : rs.told) {
    if (told.watermark >= watermark) continue;
    if (now - told.at < ReplicaState::kWatermarkDelay) {  // a forward just went there: checked again later
      const auto at = told.at + ReplicaState::kWatermarkDelay;
      if (!rs.watermark_due || at < rs.watermark_at) rs.watermark_at = at;
      rs.watermark_due = true;
      continue;
    }
    auto ep = PeerEndpoint(rs, *worker_, address);
    if (!ep.ok()) continue;  // gone: its forwards failed, and so does this
    obj::ForwardRequest fwd;
    fwd.flags = obj::kForwardWatermark;
    fwd.group = {self};
    fwd.watermark = watermark;
    auto mac = rs.mac->Compute(obj::ForwardMacInput(fwd, {}));
    if (!mac.ok()) return;
    fwd.mac = *mac;
    transport::CallOptions options;
    options.timeout = env_->forward_timeout;
    Status st = (*ep)->Call(static_cast<uint16_t>(obj::Opcode::kForward), obj::Encode(fwd), options,
                            [this, target = told.target](const transport::ReplyView& reply) {
                              if (!reply.status.ok()) {
                                ROS2_LOG_DEBUG("engine target {}: watermark to target {}: {}", index_, target,
                                               reply.status.ToString());
                              }
                            });
    if (st.ok()) told = {told.target, watermark, now};
  }
}

}  // namespace ros2::engine
