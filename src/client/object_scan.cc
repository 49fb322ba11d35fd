// Object calls that span every shard of an object in one step: the array-tail
// query (a file's size: all shards asked at once, blocking or through an
// EventQueue) and the paged dkey listing (readdir), plus the container-level
// helpers DFS needs (an event queue, the pool's space).
#include <algorithm>

#include <fmt/format.h>

#include "client/client_internal.h"

namespace ros2::client {

// One fan-out of array-tail queries to every shard of an object. Replies are
// folded in as they arrive; `done` runs once, after the last one.
struct TailQuery : std::enable_shared_from_this<TailQuery> {
  std::shared_ptr<ContainerCore> cont;
  ThreadIo* io = nullptr;
  std::string what;
  ObjectId oid;
  std::string akey;
  // Resending (a read: always safe) after a failure RetryAfterFailure allows.
  std::chrono::steady_clock::time_point retry_deadline{};
  bool retrying = false;
  int renewals = 0;
  std::vector<std::vector<uint8_t>> payloads;  // alive until every reply arrived
  std::vector<Route> routes;
  size_t remaining = 0;
  Status status;
  std::optional<ArrayTail> best;
  bool abandoned = false;  // submission failed: completion is not reported
  std::function<void()> done;

  void Release() {
    if (--remaining > 0) return;
    if (!abandoned && ShouldResend()) {
      io->QueueRetry([self = shared_from_this()] { self->Resend(); });
      return;
    }
    done();
  }

  bool ShouldResend() {
    if (status.ok() || !RetryAfterFailure(status, Effect::kRead, true)) return false;
    if (status.code() == Status::Code::kUnauthenticated) {
      if (++renewals > 2) return false;
      cont->MarkCapabilityStale();
    } else {
      cont->pool().MarkMapStale();
    }
    const auto now = std::chrono::steady_clock::now();
    if (!retrying) {
      retrying = true;
      retry_deadline = now + cont->pool().client().reconnect_timeout();
    }
    return now < retry_deadline;
  }

  // Called by ThreadIo::RunRetries, outside completions: every shard again.
  void Resend() {
    auto self = shared_from_this();
    status = Status::Ok();
    best.reset();
    Status sent = Start(self, oid, akey);
    if (!sent.ok() && status.ok()) status = sent;
    Release();
  }

  void Fold(const Route& route, const transport::ReplyView& reply) {
    CompletionScope scope;  // done() runs the caller's callback
    if (!reply.status.ok()) {
      if (reply.status.code() == Status::Code::kDisconnected) {
        io->DropEndpoint(route.address());
        cont->pool().MarkMapStale();
      }
      if (status.ok()) status = reply.status.WithContext(fmt::format("{} on target {}", what, route.target));
    } else if (auto decoded = obj::DecodeQueryReply(reply.payload); !decoded.ok()) {
      if (status.ok()) status = decoded.status().WithContext(what);
    } else if (decoded->found && (!best || decoded->max_dkey > best->dkey)) {
      best = ArrayTail{decoded->max_dkey, decoded->array_end};
    }
    Release();
  }

  // Sends one query per shard. On a submission error the queries already sent
  // still complete (and call done); the error is returned.
  static Status Start(const std::shared_ptr<TailQuery>& q, const ObjectId& oid, std::string_view akey) {
    q->oid = oid;
    q->akey = std::string(akey);
    q->remaining = 1;  // the caller's Release() after the last send
    ROS2_ASSIGN_OR_RETURN(q->routes, q->cont->ShardRoutes(&oid));
    ROS2_ASSIGN_OR_RETURN(auto capability, q->cont->Capability());
    q->payloads.resize(q->routes.size());
    q->remaining += q->routes.size();
    Status first_error;
    for (size_t i = 0; i < q->routes.size(); ++i) {
      const Route& route = q->routes[i];
      obj::QueryRequest req;
      req.header = q->cont->Header(route);
      req.kind = obj::QueryKind::kArrayTail;
      req.oid = oid;
      req.akey = akey;
      q->payloads[i] = obj::Encode(req);
      transport::CallOptions options;
      options.timeout = q->cont->pool().client().options().io_timeout;
      options.capability = AsCapability(*capability);
      Status st;
      auto ep = ConnectTarget(*q->io, *q->cont, route);
      if (!ep.ok()) {
        st = ep.status();
      } else {
        st = (*ep)->Call(static_cast<uint16_t>(obj::Opcode::kQuery), {q->payloads[i].data(), q->payloads[i].size()},
                         options, [q, i](const transport::ReplyView& reply) { q->Fold(q->routes[i], reply); });
      }
      if (!st.ok()) {
        st = st.WithContext(fmt::format("{}: send to target {}", q->what, route.target));
        if (first_error.ok()) first_error = st;
        if (q->status.ok()) q->status = st;
        --q->remaining;
      }
    }
    return first_error;
  }
};

Result<std::optional<ArrayTail>> Object::QueryArrayTail(std::string_view akey) const {
  return WithRetry(*cont_, Effect::kRead, [&, this]() -> Result<std::optional<ArrayTail>> {
    ROS2_ASSIGN_OR_RETURN(auto io, cont_->pool().client().ThisThreadIo());
    auto q = std::make_shared<TailQuery>();
    q->cont = cont_;
    q->io = io.get();
    q->what = "query array tail of " + DescribeIo(oid_, {}, akey);
    if (akey.empty()) return Status::InvalidArgument(q->what + ": empty akey");
    bool finished = false;
    q->done = [&finished] { finished = true; };
    Status sent = TailQuery::Start(q, oid_, akey);
    q->abandoned = !sent.ok();  // a failed submission is tried again whole, by WithRetry
    q->Release();
    // Every sent query completes (the transport fails them at their deadline),
    // and `done` references this frame: wait for it whatever happened.
    while (!finished) {
      (void)io->worker().RunUntil([&finished, &io] { return finished || io->has_retries(); }, std::chrono::seconds(5));
      io->RunRetries();
    }
    if (!sent.ok()) return sent;
    if (!q->status.ok()) return q->status;
    return q->best;
  });
}

Status Object::SubmitQueryArrayTail(EventQueue& eq, std::string_view akey, ArrayTailCallback callback) const {
  if (!callback) return Status::InvalidArgument("submit array tail query: empty callback");
  auto q = std::make_shared<TailQuery>();
  q->cont = cont_;
  q->io = eq.io_.get();
  q->what = "query array tail of " + DescribeIo(oid_, {}, akey);
  if (akey.empty()) return Status::InvalidArgument(q->what + ": empty akey");
  // `done` holds the query only weakly (the query owns `done`); the replies'
  // callbacks hold it strongly until the last one ran.
  q->done = [weak = std::weak_ptr<TailQuery>(q), queue = &eq, callback = std::move(callback)]() mutable {
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
  ++eq.in_flight_;
  Status sent = TailQuery::Start(q, oid_, akey);
  if (!sent.ok()) {
    q->abandoned = true;  // queries already on the wire finish silently
    --eq.in_flight_;
  }
  q->Release();
  return sent;
}

Status Object::ConnectShards() const {
  ROS2_ASSIGN_OR_RETURN(auto io, cont_->pool().client().ThisThreadIo());
  ROS2_ASSIGN_OR_RETURN(auto routes, cont_->ShardRoutes(&oid_));
  for (const Route& route : routes) {
    auto ep = ConnectTarget(*io, *cont_, route);
    if (!ep.ok()) {
      return ep.status().WithContext(
          fmt::format("connect to target {} for {}", route.target, DescribeIo(oid_, {}, {})));
    }
  }
  return Status::Ok();
}

Result<std::vector<std::string>> Object::ListDkeysPage(KeyAnchor& anchor, size_t max) const {
  // A read: an attempt that failed is made again from the same anchor.
  const KeyAnchor start = anchor;
  return WithRetry(*cont_, Effect::kRead, [&, this] {
    anchor = start;
    return ListDkeysPageOnce(anchor, max);
  });
}

Result<std::vector<std::string>> Object::ListDkeysPageOnce(KeyAnchor& anchor, size_t max) const {
  const std::string what = "list dkeys of " + DescribeIo(oid_, {}, {});
  if (max == 0) return Status::InvalidArgument(what + ": page size 0");
  std::vector<std::string> keys;
  if (anchor.eof) return keys;
  ROS2_ASSIGN_OR_RETURN(auto io, cont_->pool().client().ThisThreadIo());
  ROS2_ASSIGN_OR_RETURN(auto routes, cont_->ShardRoutes(&oid_));
  while (keys.size() < max && anchor.shard < routes.size()) {
    const Route& route = routes[anchor.shard];
    obj::ListRequest req;
    req.header = cont_->Header(route);
    req.kind = obj::ListKind::kDkeys;
    req.oid = oid_;
    req.anchor.position = anchor.position;
    req.max_entries = static_cast<uint32_t>(std::min<size_t>(max - keys.size(), obj::kMaxListEntries));
    auto ep = ConnectTarget(*io, *cont_, route);
    if (!ep.ok()) {
      return ep.status().WithContext(fmt::format("{}: connect to target {}", what, route.target));
    }
    ROS2_ASSIGN_OR_RETURN(auto capability, cont_->Capability());
    transport::CallOptions options;
    options.timeout = cont_->pool().client().options().io_timeout;
    options.capability = AsCapability(*capability);
    auto payload = obj::Encode(req);
    auto reply = (*ep)->CallSync(static_cast<uint16_t>(obj::Opcode::kList), {payload.data(), payload.size()}, options);
    if (!reply.ok()) {
      if (reply.status().code() == Status::Code::kDisconnected) {
        io->DropEndpoint(route.address());
        cont_->pool().MarkMapStale();
      }
      return reply.status().WithContext(fmt::format("{} on target {}", what, route.target));
    }
    auto decoded = obj::DecodeListReply(reply->payload);
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

Result<std::unique_ptr<EventQueue>> Container::CreateEventQueue() const {
  if (offload_) {
    std::unique_ptr<EventQueue> eq(new EventQueue(nullptr));
    eq->offload_ = std::make_shared<OffloadQueue>();
    eq->offload_->session = offload_->session;
    return eq;
  }
  ROS2_ASSIGN_OR_RETURN(auto io, core_->pool().client().ThisThreadIo());
  return std::unique_ptr<EventQueue>(new EventQueue(std::move(io)));
}

Result<PoolSpace> Container::QueryPoolSpace() const {
  if (offload_) return Status::NotSupported("query pool space: in offload mode the DFS's Statfs asks the agent");
  auto info = core_->pool().client().management().QueryPool(core_->pool().uuid().ToString());
  if (!info.ok()) return info.status().WithContext("query the space of pool " + core_->pool().uuid().ToString());
  PoolSpace space;
  space.total_bytes = info->size_bytes();
  space.used_bytes = std::min(info->used_bytes(), info->size_bytes());
  return space;
}

}  // namespace ros2::client
