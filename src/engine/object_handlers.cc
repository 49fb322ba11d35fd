// The object RPC handlers of a target: decode (obj_rpc), admit (shutdown,
// target, capability, shard), check the request limits (size, client epoch,
// in-flight budget: request_budget.h) before allocating anything, run the VOS
// operation, move the bulk, reply.
#include <fmt/format.h>

#include "common/log.h"
#include "engine/conditions.h"
#include "engine/target.h"

namespace ros2::engine {
namespace {

using obj::Opcode;
using transport::IncomingRequest;

// Fetches of at least this many bytes from a ram shard are reaped as soon as
// they are submitted (HandleFetch).
constexpr uint64_t kEagerReapBytes = 256 * 1024;

vos::PunchOp ToVos(const obj::PunchRequest& m, Epoch epoch) {
  return vos::PunchOp{m.scope, m.oid, m.dkey, m.akey, epoch};
}

Epoch ReadEpoch(Epoch e) {
  return e == 0 ? kEpochMax : e;
}

}  // namespace

// Whether `akey` of `dkey` has a visible value now (punched keys do not).
Result<bool> AkeyVisible(vos::Vos& vos, const ObjectId& oid, const std::string& dkey, const std::string& akey) {
  vos::ListAnchor anchor;
  while (!anchor.eof) {
    ROS2_ASSIGN_OR_RETURN(auto keys, vos.ListAkeys(oid, dkey, kEpochMax, &anchor, 64));
    for (const auto& k : keys)
      if (k == akey) return true;
    if (keys.empty()) break;
  }
  return false;
}

// Whether `dkey` has any visible akey now.
Result<bool> DkeyVisible(vos::Vos& vos, const ObjectId& oid, const std::string& dkey) {
  vos::ListAnchor anchor;
  ROS2_ASSIGN_OR_RETURN(auto keys, vos.ListAkeys(oid, dkey, kEpochMax, &anchor, 1));
  return !keys.empty();
}

// The outcome of a condition check: OK to proceed, or the refusal.
Status CheckCondition(uint8_t flags, Result<bool> visible, std::string_view what) {
  if (!visible.ok()) return visible.status();
  if ((flags & obj::kFlagIfAbsent) != 0 && *visible) {
    return Status::AlreadyExists(fmt::format("{}: the key exists (conditional insert)", what));
  }
  if ((flags & obj::kFlagIfPresent) != 0 && !*visible) {
    return Status::NotFound(fmt::format("{}: the key does not exist (conditional update or punch)", what));
  }
  return Status::Ok();
}

void Target::RegisterHandlers() {
  auto reg = [this](Opcode op, void (Target::*fn)(IncomingRequest)) {
    // List and query reply before their handler returns: timed here (the
    // others are timed from Track to Finish).
    const bool enumerate = op == Opcode::kList || op == Opcode::kQuery;
    Status st = worker_->RegisterHandler(static_cast<uint16_t>(op), [this, fn, enumerate](IncomingRequest r) {
      dispatching_ = fn;  // Park needs it
      const auto start = enumerate ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      (this->*fn)(std::move(r));
      dispatching_ = nullptr;
      if (enumerate) {
        TargetMetrics::Op& m = metrics_.Of(OpKind::kEnumerate);
        m.completed.Add();
        m.latency.Observe(static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count()));
      }
    });
    if (!st.ok())
      ROS2_LOG_ERROR("engine target {}: register {}: {}", index_, obj::OpcodeName(static_cast<uint16_t>(op)),
                     st.ToString());
  };
  // Sessions on the data plane: a connection proves a session's key before
  // its capabilities are accepted (Admit). The key is derived from the
  // capability key; a revoked session gets none.
  worker_->SetSessionKeyLookup([this](const transport::SessionId& session) -> Result<transport::SessionKey> {
    control::CapabilityVerifier* verifier = env_->verifier.load(std::memory_order_acquire);
    if (verifier == nullptr) return Status::Busy(fmt::format("engine target {}: still starting", index_));
    return verifier->SessionKeyFor(Uuid::FromBytes(session));
  });
  reg(Opcode::kPing, &Target::HandlePing);
  reg(Opcode::kUpdate, &Target::HandleUpdate);
  reg(Opcode::kFetch, &Target::HandleFetch);
  reg(Opcode::kPunch, &Target::HandlePunch);
  reg(Opcode::kList, &Target::HandleList);
  reg(Opcode::kQuery, &Target::HandleQuery);
  reg(Opcode::kLeader, &Target::HandleLeader);    // replica_forward.cc
  reg(Opcode::kForward, &Target::HandleForward);  // replica_forward.cc
  reg(Opcode::kRebuildRead, &Target::HandleRebuildRead);  // target_rebuild_plane.cc
}

Result<Target::Shard*> Target::Admit(const IncomingRequest& req, const obj::RequestHeader& header,
                                     control::Rights rights, bool forwarded) {
  const auto op = obj::OpcodeName(req.opcode());
  if (stopping_) return Status::Cancelled(fmt::format("engine target {}: shutting down, {} refused", index_, op));
  if (header.target != index_) {
    metrics_.Refuse(Refusal::kStaleMap);
    return Status::InvalidArgument(fmt::format(
        "engine target {}: {} addressed to target {} arrived here (stale pool map?)", index_, op, header.target));
  }
  if (header.pool.IsNil() || header.container.IsNil()) {
    return Status::InvalidArgument(fmt::format("engine target {}: {} names no pool or no container", index_, op));
  }
  control::CapabilityVerifier* verifier = env_->verifier.load(std::memory_order_acquire);
  if (verifier == nullptr) return Status::Busy(fmt::format("engine target {}: still starting", index_));
  if (req.capability().empty()) {
    metrics_.Refuse(Refusal::kCapability);
    return Status::Unauthenticated(fmt::format("engine target {}: {} carries no capability", index_, op));
  }
  auto cap = verifier->Authorize(req.capability(), header.pool, header.container, rights);
  if (!cap.ok()) {
    metrics_.Refuse(Refusal::kCapability);
    return cap.status().WithContext(fmt::format("engine target {}: {}", index_, op));
  }
  // A forward (replica_forward.cc) comes from the leader's engine, on a
  // connection HandleForward checked; it carries the client's capability.
  if (!forwarded && !req.SessionAuthenticated(cap->session.bytes())) {
    // A capability works only on a connection that proved its session's key:
    // one captured on the wire and replayed elsewhere does nothing.
    metrics_.Refuse(Refusal::kCapability);
    return Status::PermissionDenied(fmt::format(
        "engine target {}: {} carries a capability of session {}, but connection {:#x} authenticated for {}", index_,
        op, cap->session.ToString(), req.connection_id(), req.AuthenticatedSessions()));
  }
  req.MarkAuthenticated();  // a valid capability: the connection is no longer subject to the hello limits
  // The map version: checked once the caller is known (a stranger learns
  // nothing of the map) and before anything runs, so a refused request can be
  // resent whatever it was.
  const uint64_t known = env_->maps.current();
  if (header.map_version < known) {
    metrics_.Refuse(Refusal::kStaleMap);
    return Status::StaleMap(
        fmt::format("engine target {}: {} made with pool map version {}, this engine has version {}: refresh the "
                    "pool map and resend",
                    index_, op, header.map_version, known));
  }
  if (header.map_version > known) env_->maps.NoteNewer(header.map_version);
  if (cap->IsPoolCapability()) {
    metrics_.Refuse(Refusal::kCapability);
    return Status::PermissionDenied(
        fmt::format("engine target {}: {} needs a container capability, got a pool capability", index_, op));
  }
  if ((rights & control::kRightWrite) != 0 && std::chrono::steady_clock::now().time_since_epoch().count() >
                                                  env_->writes_fenced_after_ns.load(std::memory_order_relaxed)) {
    return Status::Busy(fmt::format(
        "engine target {}: {} refused: this engine is fenced (its etcd lease was not renewed for half its TTL; it may "
        "be cut off from the cluster)",
        index_, op));
  }
  auto shard = ShardFor(header.pool, header.container, /*open=*/true);
  if (shard.ok() && *shard != nullptr && (rights & control::kRightWrite) != 0) {
    (*shard)->aggregate_pending = true;  // MaybeAggregate reclaims what this replaces
    (*shard)->last_write = std::chrono::steady_clock::now();
  }
  return shard;
}

Status Target::CheckClientEpoch(Epoch epoch, std::string_view op) {
  const auto drift = static_cast<uint64_t>(env_->limits.max_epoch_drift.count());
  if (env_->clock->WithinDrift(epoch, drift)) return Status::Ok();
  metrics_.Refuse(Refusal::kLimit);
  const uint64_t wall = HybridClock::WallMillis();
  return Status::InvalidArgument(
      fmt::format("engine target {}: {} at epoch {} is {} ms ahead of the engine's wall clock (limits.max_epoch_drift "
                  "{} ms); send epoch 0 to have the engine stamp it",
                  index_, op, epoch, EpochMillis(epoch) - std::min(wall, EpochMillis(epoch)), drift));
}

void Target::SubmitUpdateWithRetry(const Uuid& pool, const Uuid& container, vos::UpdateOp* op,
                                   std::function<void(Status)> done, bool retried,
                                   std::chrono::steady_clock::time_point busy_until) {
  auto shard = OpenShard(pool, container);
  if (!shard.ok()) return done(shard.status());
  (*shard)->vos->SubmitUpdate(*op, [this, pool, container, op, done = std::move(done), retried,
                                    busy_until](Status st) mutable {
    if (st.code() == Status::Code::kBusy) {
      const auto now = std::chrono::steady_clock::now();
      if (busy_until == std::chrono::steady_clock::time_point{}) busy_until = now + env_->forward_timeout;
      if (now < busy_until) {
        return deferred_.push_back([this, pool, container, op, done = std::move(done), retried, busy_until]() mutable {
          SubmitUpdateWithRetry(pool, container, op, std::move(done), retried, busy_until);
        });
      }
    }
    if (st.code() != Status::Code::kNoSpace || retried) return done(st);
    // Out of space: overwritten or punched versions may hold it, in any of
    // the pool's shards on this target. Aggregate them (after this VOS
    // callback returns) and try once more if that freed anything.
    deferred_.push_back([this, pool, container, op, done = std::move(done), st]() mutable {
      auto again = OpenShard(pool, container);
      if (!again.ok()) return done(st);
      if (AggregatePoolShards(pool, "out of space") == 0) return done(st);
      SubmitUpdateWithRetry(pool, container, op, std::move(done), /*retried=*/true);
    });
  });
}

void Target::HandlePing(IncomingRequest req) {
  auto m = obj::DecodePingRequest(req.payload());
  if (!m.ok()) return req.Reply(m.status());
  obj::PingReply reply{index_, env_->target_count, env_->engine_id};
  req.Reply(Status::Ok(), obj::Encode(reply));
}

void Target::HandleUpdate(IncomingRequest req) {
  auto m = obj::DecodeUpdateRequest(req.payload());
  if (!m.ok()) return req.Reply(m.status());
  auto shard = Admit(req, m->header, control::kRightWrite);
  if (!shard.ok()) return ReplyRefused(req, shard.status(), m->header);
  if (*shard == nullptr) return Park(std::move(req), m->header);
  if (req.bulk_out_size() != m->length) {
    return req.Reply(Status::InvalidArgument(fmt::format(
        "engine target {}: update of {} bytes carries {} bytes of data", index_, m->length, req.bulk_out_size())));
  }
  // Limits first: nothing is allocated or pulled for a request refused here.
  if (m->length > env_->limits.max_io_size) {
    metrics_.Refuse(Refusal::kLimit);
    return req.Reply(Status::InvalidArgument(
        fmt::format("engine target {}: update of {} bytes exceeds limits.max_io_size ({} bytes)", index_, m->length,
                    env_->limits.max_io_size)));
  }
  if (m->header.epoch != 0) {
    if (Status st = CheckClientEpoch(m->header.epoch, "update"); !st.ok()) return req.Reply(st);
  }
  auto ticket = Track(req, m->length);
  if (!ticket.ok()) return req.Reply(ticket.status());
  auto buffer = buffers_.Get(m->length);
  if (!buffer.ok()) return Finish(*ticket, buffer.status());

  // The op, its data buffer and the request live until the VOS callback.
  struct UpdateState {
    vos::UpdateOp op;
    PooledBuffer buffer;
    uint64_t ticket = 0;
  };
  auto state = std::make_shared<UpdateState>();
  state->buffer = std::move(*buffer);
  state->ticket = *ticket;
  vos::UpdateOp& op = state->op;
  op.oid = m->oid;
  op.dkey = std::move(m->dkey);
  op.akey = std::move(m->akey);
  if (m->header.epoch == 0) {
    op.epoch = env_->clock->Now();
  } else {
    env_->clock->Update(m->header.epoch);
    op.epoch = m->header.epoch;
  }
  op.type = m->type;
  op.index = m->index;
  op.record_size = m->record_size;
  op.data = state->buffer.span();
  op.csum = std::move(m->csum);
  const uint8_t condition = m->header.flags & obj::kUpdateFlags;

  auto submit = [this, state, condition, header = m->header](const Status& pulled) {
    if (!pulled.ok()) {
      return Finish(state->ticket, pulled.WithContext(fmt::format("engine target {}: pulling update data", index_)));
    }
    if (condition == 0) {
      SubmitUpdateWithRetry(header.pool, header.container, &state->op, [this, state](Status st) {
        usage_dirty_ = true;
        const Epoch epoch = state->op.epoch;
        state->buffer = PooledBuffer();  // back to the pool before the reply
        Finish(state->ticket, st, obj::Encode(obj::UpdateReply{epoch}));
      });
      return;
    }
    // Conditional: check and write while holding the dkey, so no other
    // conditional operation on it runs (or checks) in between. The shard is
    // looked up again: it may have been retired while this one waited.
    auto key =
        std::make_shared<std::string>(DkeyGate::Key(header.pool, header.container, state->op.oid, state->op.dkey));
    conditional_gate_.Acquire(*key, [this, state, key, condition, header] {
      auto shard = OpenShard(header.pool, header.container);
      Status st =
          shard.ok()
              ? CheckCondition(condition, AkeyVisible(*(*shard)->vos, state->op.oid, state->op.dkey, state->op.akey),
                               fmt::format("engine target {}: update", index_))
              : shard.status();
      if (!st.ok()) {
        Finish(state->ticket, st);
        return conditional_gate_.Release(*key);
      }
      if (header.epoch == 0) state->op.epoch = env_->clock->Now();  // stamped after the wait: later than the holder's
      SubmitUpdateWithRetry(header.pool, header.container, &state->op, [this, state, key](Status st) {
        usage_dirty_ = true;
        const Epoch epoch = state->op.epoch;
        state->buffer = PooledBuffer();
        Finish(state->ticket, st, obj::Encode(obj::UpdateReply{epoch}));
        conditional_gate_.Release(*key);
      });
    });
  };
  if (m->length == 0) return submit(Status::Ok());
  req.Pull(state->buffer.span(), submit);
}

void Target::HandleFetch(IncomingRequest req) {
  // io_stages: this read's arrival (its pass's start) and its handler's start.
  io_stages::StageSet* const stages = io_stages::t_current;
  uint64_t arrived = 0;
  if (stages != nullptr) {
    stages->read_handled = io_stages::NowNs();
    arrived = stages->pass_start;
    stages->Add(io_stages::kQueue, arrived, stages->read_handled);
  }
  auto m = obj::DecodeFetchRequest(req.payload());
  if (!m.ok()) return req.Reply(m.status());
  auto shard = Admit(req, m->header, control::kRightRead);
  if (!shard.ok()) return ReplyRefused(req, shard.status(), m->header);
  if (*shard == nullptr) return Park(std::move(req), m->header);
  // A replicated dkey with an update not yet on every copy: held until it is
  // (replica_in_doubt.cc, docs/replication.md "Read rule").
  if (HoldWhileResolving(req, m->header, m->oid, m->dkey)) return;
  const uint64_t capacity = req.bulk_in_capacity();
  uint64_t want = capacity;
  if (m->type == obj::ValueType::kArray) {
    want = m->count * m->record_size;
    if (want > capacity) {
      return req.Reply(Status::InvalidArgument(
          fmt::format("engine target {}: fetch of {} records of {} bytes does not fit the {}-byte buffer", index_,
                      m->count, m->record_size, capacity)));
    }
    if (want > env_->limits.max_io_size) {
      metrics_.Refuse(Refusal::kLimit);
      return req.Reply(Status::InvalidArgument(
          fmt::format("engine target {}: fetch of {} bytes exceeds limits.max_io_size ({} bytes)", index_, want,
                      env_->limits.max_io_size)));
    }
  } else if (want > env_->limits.max_io_size) {
    want = env_->limits.max_io_size;  // a larger single value cannot have been stored
  }
  struct FetchState {
    vos::FetchOp op;
    PooledBuffer buffer;
    std::span<std::byte> direct;  // the client's own buffer (a shared segment), when VOS reads straight into it
    obj::FetchReply reply;
    uint64_t ticket = 0;
    uint64_t arrived = 0;  // io_stages (0: not timed)
    uint64_t handled = 0;  // io_stages: the handler's start while its lookup is not counted
    uint64_t reaped = 0;   // io_stages: its data was ready
  };
  auto state = std::make_shared<FetchState>();
  if (stages != nullptr) {
    state->arrived = arrived;
    state->handled = stages->read_handled;
  }
  // A client buffer in a shared segment of a same-host client is mapped here:
  // VOS reads into it and the reply follows, with no copy of the engine's own
  // (the request, held by the callback, keeps the mapping).
  if (std::span<std::byte> direct = req.DirectBulkIn(); direct.size() >= want && want > 0) {
    state->direct = direct.first(want);
  }
  auto ticket = Track(req, state->direct.empty() ? want : 0);
  if (!ticket.ok()) return req.Reply(ticket.status());
  state->ticket = *ticket;
  if (state->direct.empty()) {
    auto buffer = buffers_.Get(want);
    if (!buffer.ok()) return Finish(state->ticket, buffer.status());
    state->buffer = std::move(*buffer);
  }
  vos::FetchOp& op = state->op;
  op.oid = m->oid;
  op.dkey = std::move(m->dkey);
  op.akey = std::move(m->akey);
  op.epoch = ReadEpoch(m->header.epoch);
  op.type = m->type;
  op.index = m->index;
  op.count = m->count;
  op.record_size = m->record_size;
  op.buffer = state->direct.empty() ? state->buffer.span() : state->direct;
  // libros2 verifies every fetched byte against the checksums in the reply:
  // VOS need not verify what it passes through unchanged (vos.h, FetchOp),
  // unless the client asks, after its own check of this target's data failed.
  op.caller_verifies = (m->header.flags & obj::kFlagVerifyStored) == 0;
  // The end of the whole akey, so a reader can tell a hole from the end of a
  // file: VOS works it out while it plans the fetch, from the same extents.
  op.want_array_end = (m->header.flags & obj::kFlagWantArrayEnd) != 0;

  vos::Vos* vos = (*shard)->vos.get();
  vos->SubmitFetch(op, [this, state, req](Result<vos::FetchResult> r) mutable {
    if (!r.ok()) return Finish(state->ticket, r.status());
    if (state->arrived != 0) FetchDataReady(state->handled, &state->reaped);
    SetMovedBytes(state->ticket, std::min<uint64_t>(r->size, state->op.buffer.size()));
    state->reply.size = r->size;
    state->reply.csum = std::move(r->csum);
    state->reply.array_end = r->array_end;
    if (!state->direct.empty()) {
      req.PushedDirect(std::min<uint64_t>(r->size, state->direct.size()));
      if (state->arrived != 0) FetchReplied(state->arrived, state->reaped);
      return Finish(state->ticket, Status::Ok(), obj::Encode(state->reply));
    }
    const uint64_t pushed = std::min<uint64_t>(r->size, state->buffer.size());
    auto reply = [this, state](const Status& st) {
      if (!st.ok()) {
        return Finish(state->ticket, st.WithContext(fmt::format("engine target {}: pushing fetch data", index_)));
      }
      state->buffer = PooledBuffer();
      if (state->arrived != 0) FetchReplied(state->arrived, state->reaped);
      Finish(state->ticket, Status::Ok(), obj::Encode(state->reply));
    };
    if (pushed == 0) return reply(Status::Ok());
    req.Push(std::span<const std::byte>(state->buffer.data(), pushed), reply);
  });
  // A ram shard has already copied the data; its completion would wait for
  // the loop's next reap, after the rest of the client's batch. Reaped now, a
  // large fetch's reply leaves before the next fetch's copy (the transport
  // sends it at once, TransportOptions::batch_flush_bytes), so the client
  // verifies those bytes while this thread copies the next ones.
  if (stages != nullptr) {
    // The extent store counted the lookup when it queued the read; a value
    // with no extent (inline, a hole) counts it when its data is ready.
    if (stages->read_handled == 0) state->handled = 0;
    stages->read_handled = 0;
  }
  if (want >= kEagerReapBytes && env_->vos_template.storage_class == vos::StorageClass::kRam) vos->Progress(false);
}

void Target::FetchDataReady(uint64_t handled, uint64_t* reaped) {
  io_stages::StageSet* stages = io_stages::t_current;
  if (stages == nullptr) return;
  *reaped = stages->last_reaped != 0 ? stages->last_reaped : io_stages::NowNs();
  if (handled != 0) stages->Add(io_stages::kLookup, handled, *reaped);
}

void Target::FetchReplied(uint64_t arrived, uint64_t reaped) {
  io_stages::StageSet* stages = io_stages::t_current;
  if (stages == nullptr) return;
  const uint64_t now = io_stages::NowNs();
  stages->Add(io_stages::kReply, reaped, now);
  stages->Add(io_stages::kTotal, arrived, now);
}

void Target::HandlePunch(IncomingRequest req) {
  auto m = obj::DecodePunchRequest(req.payload());
  if (!m.ok()) return req.Reply(m.status());
  auto shard = Admit(req, m->header, control::kRightWrite);
  if (!shard.ok()) return ReplyRefused(req, shard.status(), m->header);
  if (*shard == nullptr) return Park(std::move(req), m->header);
  Epoch epoch = m->header.epoch;
  if (epoch != 0) {
    if (Status st = CheckClientEpoch(epoch, "punch"); !st.ok()) return req.Reply(st);
  }
  auto tracked = Track(req);
  if (!tracked.ok()) return req.Reply(tracked.status());
  const uint64_t ticket = *tracked;
  if (epoch == 0) {
    epoch = env_->clock->Now();
  } else {
    env_->clock->Update(epoch);
  }
  if (m->header.flags == 0) {
    // Asynchronous: the punch joins the shard's next commit group (one WAL
    // sync with the updates) and the target goes on serving meanwhile.
    (*shard)->vos->SubmitPunch(ToVos(*m, epoch), [this, ticket, epoch](Status st) {
      usage_dirty_ = true;
      Finish(ticket, st, obj::Encode(obj::PunchReply{epoch}));  // Finish drops the payload of an error
    });
    return;
  }
  // Conditional (dkey or akey only, see the decoder): punch only if visible,
  // after every earlier conditional operation on the dkey has committed (the
  // in-flight budget bounds how many wait).
  auto key = std::make_shared<std::string>(DkeyGate::Key(m->header.pool, m->header.container, m->oid, m->dkey));
  conditional_gate_.Acquire(*key, [this, ticket, key, m = std::move(*m)] {
    auto shard = OpenShard(m.header.pool, m.header.container);
    Status st = shard.status();
    if (st.ok()) {
      vos::Vos& vos = *(*shard)->vos;
      const std::string what = fmt::format("engine target {}: punch", index_);
      st = m.scope == obj::PunchScope::kDkey
               ? CheckCondition(m.header.flags, DkeyVisible(vos, m.oid, m.dkey), what)
               : CheckCondition(m.header.flags, AkeyVisible(vos, m.oid, m.dkey, m.akey), what);
    }
    if (!st.ok()) {
      Finish(ticket, st, {});
      conditional_gate_.Release(*key);
      return;
    }
    // The gate stays held until the punch committed: the next conditional
    // operation on the dkey must see it.
    const Epoch epoch = m.header.epoch == 0 ? env_->clock->Now() : m.header.epoch;
    (*shard)->vos->SubmitPunch(ToVos(m, epoch), [this, ticket, key, epoch](Status st) {
      usage_dirty_ = true;
      Finish(ticket, st, obj::Encode(obj::PunchReply{epoch}));
      conditional_gate_.Release(*key);
    });
  });
}

void Target::FailEnumerate(IncomingRequest& req, const Status& why, const obj::RequestHeader* header) {
  metrics_.Of(OpKind::kEnumerate).failed.Add();
  if (header != nullptr) return ReplyRefused(req, why, *header);
  req.Reply(why);
}

void Target::ReplyRefused(IncomingRequest& req, const Status& why, const obj::RequestHeader& header) {
  if (why.code() != Status::Code::kStaleMap) return req.Reply(why);
  // The version only goes up: still newer than the request's.
  const obj::StaleMapReply stale{env_->maps.current(), header.map_version};
  req.Reply(why, obj::Encode(stale));
}

void Target::HandleList(IncomingRequest req) {
  auto m = obj::DecodeListRequest(req.payload());
  if (!m.ok()) return FailEnumerate(req, m.status());
  auto shard = Admit(req, m->header, control::kRightRead);
  if (!shard.ok()) return FailEnumerate(req, shard.status(), &m->header);
  if (*shard == nullptr) return Park(std::move(req), m->header);
  // A replicated object's dkeys (or a dkey's akeys, an akey's extents) with an
  // update or punch not yet on every copy: held until it is, as a fetch is
  // (docs/replication.md "Read rule"). A listing of objects is not.
  if (m->kind == obj::ListKind::kDkeys ? HoldWhileObjectOpen(req, m->header, m->oid)
      : m->kind != obj::ListKind::kObjects ? HoldWhileResolving(req, m->header, m->oid, m->dkey)
                                           : false) {
    return;
  }
  vos::Vos& vos = *(*shard)->vos;
  const Epoch epoch = ReadEpoch(m->header.epoch);

  obj::ListReply reply;
  reply.kind = m->kind;
  vos::ListAnchor anchor;
  anchor.position = m->anchor.position;
  anchor.eof = m->anchor.eof;
  // Budget the reply: ask VOS for no more entries than the worst case fits.
  const size_t worst = m->kind == obj::ListKind::kObjects   ? obj::kObjectEntrySize
                       : m->kind == obj::ListKind::kExtents ? obj::kExtentEntrySize
                                                            : obj::KeyEntrySize(obj::kMaxKeySize);
  size_t budget = obj::kMaxListReplyBytes - obj::kListReplyOverhead - obj::kMaxAnchorSize;
  size_t remaining = m->max_entries;
  while (!anchor.eof && remaining > 0 && budget >= worst) {
    const size_t ask = std::min(remaining, budget / worst);
    size_t got = 0;
    Status st;
    switch (m->kind) {
      case obj::ListKind::kObjects: {
        auto r = vos.ListObjects(epoch, &anchor, ask);
        if (!(st = r.status()).ok()) break;
        got = r->size();
        budget -= got * obj::kObjectEntrySize;
        reply.objects.insert(reply.objects.end(), r->begin(), r->end());
        break;
      }
      case obj::ListKind::kDkeys:
      case obj::ListKind::kAkeys: {
        auto r = m->kind == obj::ListKind::kDkeys ? vos.ListDkeys(m->oid, epoch, &anchor, ask)
                                                  : vos.ListAkeys(m->oid, m->dkey, epoch, &anchor, ask);
        if (!(st = r.status()).ok()) break;
        got = r->size();
        for (auto& k : *r) {
          budget -= obj::KeyEntrySize(k.size());
          reply.keys.push_back(std::move(k));
        }
        break;
      }
      case obj::ListKind::kExtents: {
        auto r = vos.ListExtents(m->oid, m->dkey, m->akey, epoch, &anchor, ask);
        if (!(st = r.status()).ok()) break;
        got = r->size();
        budget -= got * obj::kExtentEntrySize;
        for (const auto& e : *r) reply.extents.push_back({e.index, e.count, e.record_size, e.epoch});
        break;
      }
    }
    if (!st.ok()) return FailEnumerate(req, st);
    remaining -= std::min(remaining, got);
    if (got < ask) break;
  }
  if (anchor.position.size() > obj::kMaxAnchorSize) {
    return FailEnumerate(req, Status::Internal(fmt::format(
        "engine target {}: list anchor of {} bytes exceeds the protocol limit", index_, anchor.position.size())));
  }
  reply.anchor.position = anchor.position;
  reply.anchor.eof = anchor.eof;
  req.Reply(Status::Ok(), obj::Encode(reply));
}

void Target::HandleQuery(IncomingRequest req) {
  auto m = obj::DecodeQueryRequest(req.payload());
  if (!m.ok()) return FailEnumerate(req, m.status());
  auto shard = Admit(req, m->header, control::kRightRead);
  if (!shard.ok()) return FailEnumerate(req, shard.status(), &m->header);
  if (*shard == nullptr) return Park(std::move(req), m->header);
  // Held as a listing of the object's dkeys (or of the dkey's akeys) is.
  if (m->kind == obj::QueryKind::kArrayEnd ? HoldWhileResolving(req, m->header, m->oid, m->dkey)
                                           : HoldWhileObjectOpen(req, m->header, m->oid)) {
    return;
  }
  vos::Vos& vos = *(*shard)->vos;
  const Epoch epoch = ReadEpoch(m->header.epoch);
  obj::QueryReply reply;
  reply.kind = m->kind;
  if (m->kind == obj::QueryKind::kMaxDkey || m->kind == obj::QueryKind::kArrayTail) {
    auto r = vos.QueryMaxDkey(m->oid, epoch);
    if (!r.ok()) return FailEnumerate(req, r.status());
    reply.found = r->has_value();
    if (reply.found) reply.max_dkey = **r;
    if (reply.found && m->kind == obj::QueryKind::kArrayTail) {
      auto end = vos.QueryArrayEnd(m->oid, reply.max_dkey, m->akey, epoch);
      if (!end.ok()) return FailEnumerate(req, end.status());
      reply.array_end = end->value_or(0);
    }
  } else {
    auto r = vos.QueryArrayEnd(m->oid, m->dkey, m->akey, epoch);
    if (!r.ok()) return FailEnumerate(req, r.status());
    reply.found = r->has_value();
    if (reply.found) reply.array_end = **r;
  }
  req.Reply(Status::Ok(), obj::Encode(reply));
}

}  // namespace ros2::engine
