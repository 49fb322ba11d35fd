// Object calls that span every shard of an object in one step: the array-tail
// query (a file's size: all shards asked at once through a FanOut, blocking or
// through an EventQueue) and the paged dkey listing (readdir), plus the
// container-level helpers DFS needs (an event queue, the pool's space).
#include <algorithm>

#include <fmt/format.h>

#include "client/client_internal.h"
#include "client/event_queue_impl.h"
#include "client/handle_backends.h"
#include "client/resend.h"
#include "client/shard_call.h"

namespace ros2::client {

// The array-tail query of an object: one fan-out of kArrayTail queries to
// every shard, the replies folded in as they arrive; `done` runs once, after
// the last one, unless the failure policy sends them all again first (a
// timer of the thread's queue).
struct TailQuery : std::enable_shared_from_this<TailQuery> {
  std::shared_ptr<ContainerCore> cont;
  ThreadIo* io = nullptr;
  std::string what;
  ObjectId oid;
  std::string akey;
  FailurePolicy policy{std::chrono::milliseconds(0)};
  Status status;
  CallPhase phase = CallPhase::kConnecting;  // of the last fan-out
  std::optional<ArrayTail> best;
  bool abandoned = false;  // the first submission failed: completion is not reported
  std::function<void()> done;

  // After the last reply of a fan-out.
  void Finished() {
    if (!abandoned && !status.ok()) {
      auto d = policy.Decide(status, phase, Idempotency::kIdempotent, what);
      LogRecovery(status, phase, d);
      if (d.recovery != Recovery::kGiveUp) {
        PrepareRecovery(d.recovery, *cont);
        io->Schedule(d.pause, [self = shared_from_this()] { (void)self->Send(/*first=*/false); });
        return;
      }
      status = d.final;
    }
    done();
  }

  void Fold(const Result<std::span<const uint8_t>>& reply) {
    if (!reply.ok()) {
      if (status.ok()) status = reply.status();
    } else if (auto decoded = obj::DecodeQueryReply(*reply); !decoded.ok()) {
      if (status.ok()) status = decoded.status().WithContext(what);
    } else if (decoded->found && (!best || decoded->max_dkey > best->dkey)) {
      best = ArrayTail{decoded->max_dkey, decoded->array_end};
    }
  }

  // Sends one query per shard (again, from a timer of the thread's queue,
  // when not `first`). When the first submission fails with a failure the
  // policy gives up on at once, the query is abandoned: the queries already
  // sent still complete, and `done` runs after them without reporting
  // anything; that error is returned. Any other failure is the policy's,
  // after the last reply (Finished).
  Status Send(bool first) {
    auto self = shared_from_this();
    status = Status::Ok();
    best.reset();
    phase = CallPhase::kConnecting;
    auto fan = std::make_shared<FanOut>(
        *io, *cont, what, [self](size_t, const Result<std::span<const uint8_t>>& reply) { self->Fold(reply); },
        nullptr);
    // The fan-out outlives its own `on_done` call.
    FanOut* raw = fan.get();
    fan->SetOnDone([self, raw] {
      self->phase = std::max(self->phase, raw->reached());
      self->Finished();
    });
    Status sent = [&]() -> Status {
      ROS2_ASSIGN_OR_RETURN(auto routes, cont->ShardRoutes(&oid));
      const auto payloads = QueryPayloads(*cont, routes, oid, obj::QueryKind::kArrayTail, akey);
      return fan->Send(std::move(routes), obj::Opcode::kQuery, payloads);
    }();
    if (!sent.ok()) {
      if (status.ok()) status = sent;
      const CallPhase reached = std::max(phase, fan->reached());
      if (first && Classify(sent.code(), reached, Idempotency::kIdempotent) == Recovery::kGiveUp) {
        abandoned = true;
      } else {
        sent = Status::Ok();  // the policy decides after the last reply
      }
    }
    fan->Release();
    return sent;
  }
};

// A new array-tail query of `akey` of `oid`, sent through `io`.
static Result<std::shared_ptr<TailQuery>> NewTailQuery(const std::shared_ptr<ContainerCore>& cont, ThreadIo* io,
                                                       const ObjectId& oid, std::string_view akey) {
  auto q = std::make_shared<TailQuery>();
  q->cont = cont;
  q->io = io;
  q->oid = oid;
  q->akey = std::string(akey);
  q->policy = FailurePolicy(cont->pool().client().reconnect_timeout());
  q->what = "query array tail of " + DescribeIo(oid, {}, akey);
  if (akey.empty()) return Status::InvalidArgument(q->what + ": empty akey");
  return q;
}

Result<std::optional<ArrayTail>> Object::QueryArrayTail(std::string_view akey) const {
  return WithRetry(*impl_->cont, Idempotency::kIdempotent, "query array tail of " + DescribeIo(impl_->oid, {}, akey),
                   [&, this](CallPhase& phase) -> Result<std::optional<ArrayTail>> {
    ROS2_ASSIGN_OR_RETURN(auto io, impl_->cont->pool().client().ThisThreadIo());
    ROS2_ASSIGN_OR_RETURN(auto q, NewTailQuery(impl_->cont, io.get(), impl_->oid, akey));
    bool finished = false;
    q->done = [&finished] { finished = true; };
    // A failed submission is tried again whole, by WithRetry.
    Status sent = q->Send(/*first=*/true);
    // Every sent query completes, and `done` references this frame: wait for
    // it whatever happened.
    WaitFor(*io, finished);
    phase = q->phase;
    if (!sent.ok()) return sent;
    if (!q->status.ok()) return q->status;
    return q->best;
  });
}

Status Object::SubmitQueryArrayTail(EventQueue& eq, std::string_view akey, ArrayTailCallback callback) const {
  if (!callback) return Status::InvalidArgument("submit array tail query: empty callback");
  EventQueue::Impl& queue_state = eq.impl();
  ROS2_ASSIGN_OR_RETURN(ThreadIo * io, DirectIoOf(eq, "submit array tail query"));
  ROS2_ASSIGN_OR_RETURN(auto q, NewTailQuery(impl_->cont, io, impl_->oid, akey));
  // `done` holds the query only weakly (the query owns `done`); the fan-out's
  // functions hold it strongly until the last reply ran.
  q->done = [weak = std::weak_ptr<TailQuery>(q), queue = &queue_state, callback = std::move(callback)]() mutable {
    auto self = weak.lock();
    if (!self || self->abandoned) return;  // a failed submission reported itself
    IoCallback finish = [self, cb = std::move(callback)](const IoResult& r) {
      if (!r.status.ok()) return cb(Result<std::optional<ArrayTail>>(r.status));
      cb(Result<std::optional<ArrayTail>>(self->best));
    };
    IoResult result;
    result.status = self->status;
    queue->Complete(0, finish, result);
  };
  ++queue_state.in_flight_;
  Status sent = q->Send(/*first=*/true);
  if (!sent.ok()) --queue_state.in_flight_;  // queries already on the wire finish silently
  return sent;
}

Status Object::ConnectShards() const {
  PoolCore& pool = impl_->cont->pool();
  // The DFS calls this before every read: once this thread holds endpoints to
  // every live target of the current map, nothing is placed, named or
  // connected (the placement and the name cost more than the read's own
  // request). A stale map takes the full path, which recovers it.
  if (!pool.map_stale()) {
    auto io = pool.client().ThisThreadIo();
    if (io.ok() && (*io)->ConnectedToAll(pool.CurrentMap().get())) return Status::Ok();
  }
  return WithRetry(*impl_->cont, Idempotency::kIdempotent, "connect to the shards of " + DescribeIo(impl_->oid, {}, {}),
                   [this](CallPhase&) -> Status {  // every failure here is kConnecting
                     ROS2_ASSIGN_OR_RETURN(auto io, impl_->cont->pool().client().ThisThreadIo());
                     ROS2_ASSIGN_OR_RETURN(auto routes, impl_->cont->ShardRoutes(&impl_->oid));
                     for (const Route& route : routes) {
                       auto ep = ConnectTarget(*io, *impl_->cont, route);
                       if (!ep.ok()) {
                         return ep.status().WithContext(
                             fmt::format("connect to target {} for {}", route.target, DescribeIo(impl_->oid, {}, {})));
                       }
                       io->NoteConnected(route.snapshot, route.target);
                     }
                     return Status::Ok();
                   });
}

// One attempt of Object::ListDkeysPage.
static Result<std::vector<std::string>> ListDkeysPageOnce(ContainerCore& cont, const ObjectId& oid, KeyAnchor& anchor,
                                                          size_t max, CallPhase& phase) {
  const std::string what = "list dkeys of " + DescribeIo(oid, {}, {});
  if (max == 0) return Status::InvalidArgument(what + ": page size 0");
  std::vector<std::string> keys;
  if (anchor.eof) return keys;
  ROS2_ASSIGN_OR_RETURN(auto io, cont.pool().client().ThisThreadIo());
  ROS2_ASSIGN_OR_RETURN(auto routes, cont.ShardRoutes(&oid));
  while (keys.size() < max && anchor.shard < routes.size()) {
    const Route& route = routes[anchor.shard];
    obj::ListRequest req;
    req.header = cont.Header(route);
    req.kind = obj::ListKind::kDkeys;
    req.oid = oid;
    req.anchor.position = anchor.position;
    req.max_entries = static_cast<uint32_t>(std::min<size_t>(max - keys.size(), obj::kMaxListEntries));
    ROS2_ASSIGN_OR_RETURN(auto payload, CallShard(*io, cont, what, route, obj::Opcode::kList, obj::Encode(req), &phase));
    auto decoded = obj::DecodeListReply(payload);
    if (!decoded.ok()) return decoded.status().WithContext(what);
    for (auto& k : decoded->keys) keys.push_back(std::move(k));
    if (decoded->anchor.eof) {
      ++anchor.shard;
      anchor.position.clear();
      // A page ends at a shard boundary once it holds something, so one call
      // costs one round trip in the common case.
      if (!keys.empty()) break;
    } else {
      if (decoded->keys.empty() && decoded->anchor.position == anchor.position) {
        return Status::Protocol(fmt::format("{} on target {}: the anchor did not advance", what, route.target));
      }
      anchor.position = std::move(decoded->anchor.position);
    }
  }
  if (anchor.shard >= routes.size()) anchor.eof = true;
  return keys;
}

Result<std::vector<std::string>> Object::ListDkeysPage(KeyAnchor& anchor, size_t max) const {
  // A read: an attempt that failed is made again from the same anchor.
  const KeyAnchor start = anchor;
  return WithRetry(*impl_->cont, Idempotency::kIdempotent, "list dkeys of " + DescribeIo(impl_->oid, {}, {}),
                   [&, this](CallPhase& phase) {
                     anchor = start;
                     return ListDkeysPageOnce(*impl_->cont, impl_->oid, anchor, max, phase);
                   });
}

Result<std::unique_ptr<EventQueue>> DirectContainer::CreateEventQueue() const {
  ROS2_ASSIGN_OR_RETURN(auto io, core_->pool().client().ThisThreadIo());
  return MakeEventQueue(std::make_unique<DirectQueue>(std::move(io)));
}

Result<PoolSpace> DirectContainer::QueryPoolSpace() const {
  auto info = core_->pool().client().management().QueryPool(core_->pool().uuid().ToString());
  if (!info.ok()) return info.status().WithContext("query the space of pool " + core_->pool().uuid().ToString());
  PoolSpace space;
  space.total_bytes = info->size_bytes();
  space.used_bytes = std::min(info->used_bytes(), info->size_bytes());
  return space;
}

}  // namespace ros2::client
