// Object I/O: update and fetch (asynchronous, with blocking wrappers), and the
// blocking punch, list and query calls. Each request is encoded with the object
// protocol (object/obj_rpc.h) and sent to the target that owns the dkey through
// the calling thread's worker.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>

#include <fmt/format.h>

#include "client/client_internal.h"
#include "client/io_checksum.h"
#include "common/log.h"

namespace ros2::client {

namespace {

constexpr std::chrono::seconds kBlockingSlack{5};

std::span<const uint8_t> AsBytes(const std::vector<uint8_t>& v) {
  return {v.data(), v.size()};
}

// The operation's name for an error message: a string, or a callable that
// makes one, called only when there is an error (formatting it costs more
// than a small I/O's checks).
template <typename What>
std::string NameOf(const What& what) {
  if constexpr (std::is_invocable_v<What>) {
    return what();
  } else {
    return std::string(what);
  }
}

template <typename What>
Status ValidateKeys(std::string_view dkey, std::string_view akey, bool need_akey, const What& what) {
  if (dkey.empty()) return Status::InvalidArgument(fmt::format("{}: empty dkey", NameOf(what)));
  if (dkey.size() > obj::kMaxKeySize) {
    return Status::InvalidArgument(
        fmt::format("{}: dkey of {} bytes (limit {})", NameOf(what), dkey.size(), obj::kMaxKeySize));
  }
  if (need_akey && akey.empty()) return Status::InvalidArgument(fmt::format("{}: empty akey", NameOf(what)));
  if (akey.size() > obj::kMaxKeySize) {
    return Status::InvalidArgument(
        fmt::format("{}: akey of {} bytes (limit {})", NameOf(what), akey.size(), obj::kMaxKeySize));
  }
  return Status::Ok();
}

// Drives `submit` (which registers `callback`) to completion on `io`'s worker,
// resending what fails in a way that is safe to resend (ThreadIo::RunRetries).
template <typename Submit>
Result<IoResult> RunBlocking(ThreadIo& io, std::chrono::milliseconds timeout, Submit submit) {
  IoResult out;
  bool done = false;
  IoCallback callback = [&out, &done](const IoResult& r) {
    out = r;
    done = true;
  };
  ROS2_RETURN_IF_ERROR(submit(std::move(callback)));
  // The transport fails every request at its deadline, so the callback always
  // runs; keep progressing until it has (it references this frame).
  while (!done) {
    (void)io.worker().RunUntil([&done, &io] { return done || io.has_retries(); }, timeout + kBlockingSlack);
    io.RunRetries();
  }
  if (!out.status.ok()) return out.status;
  return out;
}

}  // namespace

// One asynchronous update or fetch from its submission to its completion.
// Its arguments are kept, so that it can be sent again (to a new route, with
// a renewed capability) when that is safe: RetryAfterFailure.
struct IoOp : std::enable_shared_from_this<IoOp> {
  bool is_fetch = false;
  std::shared_ptr<ContainerCore> cont;
  ThreadIo* io = nullptr;  // the submitting thread's; outlives the op (owns the worker)
  std::string address;
  uint32_t target = 0;
  ObjectId oid;
  std::string dkey, akey;
  std::vector<uint8_t> payload;
  EventQueue* eq = nullptr;
  bool counted = false;  // in eq->in_flight_
  uint64_t user_data = 0;
  IoCallback callback;
  ValueType kind = ValueType::kSingle;
  uint64_t index = 0;
  uint32_t record_size = 1;
  // update
  std::span<const std::byte> data;
  uint64_t length = 0;
  uint8_t flags = 0;
  // fetch
  uint64_t count = 0;
  std::span<std::byte> buffer;
  uint64_t expected = 0;  // kArray: count * record_size
  // resending
  int resends = 0;
  int capability_renewals = 0;
  std::chrono::steady_clock::time_point retry_deadline{};  // set at the first failure
  Status first_failure;

  std::string What() const {
    return fmt::format("{} {} on target {}", is_fetch ? "fetch" : "update", DescribeIo(oid, dkey, akey), target);
  }
  Effect effect() const { return is_fetch ? Effect::kRead : Effect::kWrite; }

  // Starts the reconnect window at the first failure; true while it is open.
  bool WithinRetryWindow(const Status& failure) {
    const auto now = std::chrono::steady_clock::now();
    if (first_failure.ok()) {
      first_failure = failure;
      retry_deadline = now + cont->pool().client().reconnect_timeout();
    }
    return now < retry_deadline;
  }

  // Routes, encodes and sends the request once; on error nothing is queued.
  Status SendOnce() {
    ROS2_ASSIGN_OR_RETURN(Route route, cont->RouteFor(oid, dkey));
    address = route.address();
    target = route.target;
    auto ep = ConnectTarget(*io, *cont, route);
    if (!ep.ok()) {
      return ep.status().WithContext(fmt::format("{}: connect to target {}", What(), target));
    }
    ROS2_ASSIGN_OR_RETURN(auto capability, cont->Capability());
    transport::CallOptions options;
    options.timeout = cont->pool().client().options().io_timeout;
    options.capability = AsCapability(*capability);
    obj::Opcode opcode;
    if (is_fetch) {
      obj::FetchRequest req;
      req.header = cont->Header(route);
      req.header.flags = flags;
      req.oid = oid;
      req.dkey = dkey;
      req.akey = akey;
      req.type = kind;
      req.index = index;
      req.count = count;
      req.record_size = record_size;
      payload = obj::Encode(req);
      options.bulk_in = buffer;
      if (expected > io->context().options().inline_limit) {
        auto region = io->context().CachedRegistration(buffer.data(), expected);
        if (!region.ok()) return region.status().WithContext(What() + ": register the buffer");
        options.bulk_in_region = *region;
      }
      opcode = obj::Opcode::kFetch;
    } else {
      obj::UpdateRequest req;
      req.header = cont->Header(route);
      req.header.flags = flags;
      req.oid = oid;
      req.dkey = dkey;
      req.akey = akey;
      req.type = kind;
      req.index = index;
      req.record_size = record_size;
      req.length = data.size();
      req.csum = ChecksumsForUpdate(cont->checksum_type(), cont->pool().client().options().checksum_chunk_size, data);
      payload = obj::Encode(req);
      options.bulk_out = data;
      if (data.size() > io->context().options().inline_limit) {
        auto region = io->context().CachedRegistration(const_cast<std::byte*>(data.data()), data.size());
        if (!region.ok()) return region.status().WithContext(What() + ": register the data buffer");
        options.bulk_out_region = *region;
      }
      opcode = obj::Opcode::kUpdate;
    }
    if (eq != nullptr && !counted) {
      ++eq->in_flight_;
      counted = true;
    }
    auto self = shared_from_this();
    Status st = ep->get()->Call(static_cast<uint16_t>(opcode), AsBytes(payload), options,
                                [self](const transport::ReplyView& reply) { self->OnReply(reply); });
    if (!st.ok()) {
      if (st.code() == Status::Code::kDisconnected) {
        io->DropEndpoint(address);
        cont->pool().MarkMapStale();
      }
      return st.WithContext(What());
    }
    return Status::Ok();
  }

  // Sends the request, trying again while it fails unsent with a failure
  // that may pass (the engine away: the map and session are recovered first,
  // within ClientOptions::reconnect_timeout). Not from inside a completion:
  // recovering and connecting progress the worker.
  Status Start() {
    for (int attempt = 0;; ++attempt) {
      Status st = SendOnce();
      if (st.ok()) return st;
      const bool transient = st.code() == Status::Code::kDisconnected || st.code() == Status::Code::kCancelled;
      if (!transient || t_completion_depth > 0 || !WithinRetryWindow(st)) return st;
      cont->pool().MarkMapStale();
      if (attempt > 0) std::this_thread::sleep_for(RetryPause(attempt));
    }
  }

  // Called by ThreadIo::RunRetries, outside completions.
  void Resend() {
    ++resends;
    Status st = Start();
    if (st.ok()) return;
    IoResult r;
    r.status = st.WithContext(fmt::format("resend after '{}'", first_failure.message()));
    Complete(r);
  }

  // Whether a failed reply is resent rather than reported.
  bool ShouldResend(const Status& status) {
    if (!RetryAfterFailure(status, effect(), /*sent=*/true)) return false;
    if (status.code() == Status::Code::kUnauthenticated) {
      // The engine refused the capability (expired, or of a session it does
      // not know): renew it, once or twice; a refusal that persists is real.
      if (++capability_renewals > 2) return false;
      cont->MarkCapabilityStale();
    }
    return WithinRetryWindow(status);
  }

  IoResult Finish(const transport::ReplyView& reply) {
    IoResult r;
    if (!reply.status.ok()) {
      r.status = reply.status.WithContext(What());
      if (!is_fetch &&
          (reply.status.code() == Status::Code::kDisconnected || reply.status.code() == Status::Code::kTimedOut ||
           reply.status.code() == Status::Code::kCancelled)) {
        r.status = r.status.WithContext(
            "outcome unknown (the update was in flight when the connection failed; it may or may not be stored, "
            "and it is not resent)");
      }
      return r;
    }
    if (!is_fetch) {
      auto decoded = obj::DecodeUpdateReply(reply.payload);
      if (!decoded.ok()) {
        r.status = decoded.status().WithContext(What());
        return r;
      }
      r.size = length;
      r.epoch = decoded->epoch;
      return r;
    }
    auto decoded = obj::DecodeFetchReply(reply.payload);
    if (!decoded.ok()) {
      r.status = decoded.status().WithContext(What());
      return r;
    }
    uint64_t pushed = 0;
    if (kind == ValueType::kSingle) {
      if (decoded->size > buffer.size()) {  // truncated: the caller must fetch again with a larger buffer
        r.size = decoded->size;
        return r;
      }
      pushed = decoded->size;
    } else {
      if (decoded->size != expected) {
        r.status = Status::Protocol(
            fmt::format("{}: the engine returned {} bytes for {} requested", What(), decoded->size, expected));
        return r;
      }
      pushed = expected;
    }
    if (reply.bulk_in_bytes < pushed) {
      r.status = Status::Protocol(
          fmt::format("{}: the engine reported {} bytes but transferred {}", What(), pushed, reply.bulk_in_bytes));
      return r;
    }
    r.status = VerifyFetched(cont->summary().checksum, decoded->csum, buffer.first(pushed), "fetched data");
    if (!r.status.ok()) {
      // Never leave unverified bytes in the caller's buffer (the engine passes
      // stored checksums through without checking them itself: we are the check).
      std::memset(buffer.data(), 0, pushed);
      r.status = r.status.WithContext(What());
    }
    r.size = decoded->size;
    r.array_end = decoded->array_end;
    return r;
  }

  void Complete(const IoResult& result) {
    CompletionScope scope;
    if (eq != nullptr) {
      counted = false;
      eq->Complete(user_data, callback, result);
    } else if (callback) {
      callback(result);
    }
  }

  void OnReply(const transport::ReplyView& reply) {
    if (!reply.status.ok()) {
      if (reply.status.code() == Status::Code::kDisconnected) {
        io->DropEndpoint(address);
        cont->pool().MarkMapStale();
      }
      if (ShouldResend(reply.status)) {
        ROS2_LOG_DEBUG("libros2: {}: {}; resending", What(), reply.status.ToString());
        io->QueueRetry([self = shared_from_this()] { self->Resend(); });
        return;
      }
    }
    Complete(Finish(reply));
  }
};

void ThreadIo::RunRetries() {
  if (retries_.empty() || t_completion_depth > 0) return;
  std::vector<std::function<void()>> batch;
  batch.swap(retries_);
  for (auto& resend : batch) resend();
}

Status Object::SubmitUpdateTo(ThreadIo& io, EventQueue* eq, const UpdateArgs& args, uint64_t user_data,
                              IoCallback callback) const {
  auto op = std::make_shared<IoOp>();
  op->oid = oid_;
  op->dkey = args.dkey;
  op->akey = args.akey;
  const auto what = [&op] { return op->What(); };
  ROS2_RETURN_IF_ERROR(ValidateKeys(args.dkey, args.akey, true, what));
  if (args.kind == ValueType::kArray) {
    if (args.record_size == 0) return Status::InvalidArgument(op->What() + ": record size 0");
    if (args.data.empty()) return Status::InvalidArgument(op->What() + ": an array update needs at least one record");
    if (args.data.size() % args.record_size != 0) {
      return Status::InvalidArgument(fmt::format("{}: {} bytes are not a whole number of {}-byte records", op->What(),
                                                 args.data.size(), args.record_size));
    }
  } else if (args.kind != ValueType::kSingle) {
    return Status::InvalidArgument(op->What() + ": unknown value kind");
  }
  if (args.data.size() > obj::kMaxIoSize) {
    return Status::InvalidArgument(
        fmt::format("{}: {} bytes (limit {})", op->What(), args.data.size(), obj::kMaxIoSize));
  }
  switch (args.condition) {
    case Condition::kNone: break;
    case Condition::kAbsent: op->flags = obj::kFlagIfAbsent; break;
    case Condition::kPresent: op->flags = obj::kFlagIfPresent; break;
    default: return Status::InvalidArgument(op->What() + ": unknown condition");
  }
  op->cont = cont_;
  op->io = &io;
  op->eq = eq;
  op->user_data = user_data;
  op->callback = std::move(callback);
  op->kind = args.kind;
  op->index = args.kind == ValueType::kArray ? args.index : 0;
  op->record_size = args.kind == ValueType::kArray ? args.record_size : 1;
  op->data = args.data;
  op->length = args.data.size();
  return op->Start();
}

Status Object::SubmitFetchTo(ThreadIo& io, EventQueue* eq, const FetchArgs& args, uint64_t user_data,
                             IoCallback callback) const {
  auto op = std::make_shared<IoOp>();
  op->is_fetch = true;
  op->oid = oid_;
  op->dkey = args.dkey;
  op->akey = args.akey;
  const auto what = [&op] { return op->What(); };
  ROS2_RETURN_IF_ERROR(ValidateKeys(args.dkey, args.akey, true, what));
  uint64_t want = args.buffer.size();
  if (args.kind == ValueType::kArray) {
    if (args.record_size == 0) return Status::InvalidArgument(op->What() + ": record size 0");
    if (args.count == 0) return Status::InvalidArgument(op->What() + ": count 0");
    if (args.count > std::numeric_limits<uint64_t>::max() / args.record_size ||
        args.index > std::numeric_limits<uint64_t>::max() - args.count) {
      return Status::InvalidArgument(op->What() + ": index/count overflow");
    }
    want = args.count * args.record_size;
    if (args.buffer.size() < want) {
      return Status::InvalidArgument(fmt::format("{}: buffer of {} bytes for {} records of {} bytes", op->What(),
                                                 args.buffer.size(), args.count, args.record_size));
    }
  } else if (args.kind != ValueType::kSingle) {
    return Status::InvalidArgument(op->What() + ": unknown value kind");
  }
  if (want > obj::kMaxIoSize) {
    return Status::InvalidArgument(fmt::format("{}: {} bytes (limit {})", op->What(), want, obj::kMaxIoSize));
  }
  if (args.want_array_end) {
    if (args.kind != ValueType::kArray) return Status::InvalidArgument(op->What() + ": array end of a single value");
    op->flags = obj::kFlagWantArrayEnd;
  }
  op->cont = cont_;
  op->io = &io;
  op->eq = eq;
  op->user_data = user_data;
  op->callback = std::move(callback);
  op->kind = args.kind;
  op->index = args.kind == ValueType::kArray ? args.index : 0;
  op->count = args.kind == ValueType::kArray ? args.count : 0;
  op->record_size = args.kind == ValueType::kArray ? args.record_size : 1;
  op->buffer = args.buffer.first(want);
  op->expected = want;
  return op->Start();
}

// --- asynchronous entry points ---

Status Object::SubmitUpdate(EventQueue& eq, const UpdateArgs& args, uint64_t user_data) const {
  return SubmitUpdateTo(*eq.io_, &eq, args, user_data, nullptr);
}
Status Object::SubmitUpdate(EventQueue& eq, const UpdateArgs& args, IoCallback callback) const {
  if (!callback) return Status::InvalidArgument("submit update: empty callback");
  return SubmitUpdateTo(*eq.io_, &eq, args, 0, std::move(callback));
}
Status Object::SubmitFetch(EventQueue& eq, const FetchArgs& args, uint64_t user_data) const {
  return SubmitFetchTo(*eq.io_, &eq, args, user_data, nullptr);
}
Status Object::SubmitFetch(EventQueue& eq, const FetchArgs& args, IoCallback callback) const {
  if (!callback) return Status::InvalidArgument("submit fetch: empty callback");
  return SubmitFetchTo(*eq.io_, &eq, args, 0, std::move(callback));
}

// --- blocking wrappers ---

Status Object::Update(const UpdateArgs& args) const {
  ROS2_ASSIGN_OR_RETURN(auto io, cont_->pool().client().ThisThreadIo());
  auto r = RunBlocking(*io, cont_->pool().client().options().io_timeout,
                       [&](IoCallback cb) { return SubmitUpdateTo(*io, nullptr, args, 0, std::move(cb)); });
  return r.status();
}

Result<IoResult> Object::Fetch(const FetchArgs& args) const {
  ROS2_ASSIGN_OR_RETURN(auto io, cont_->pool().client().ThisThreadIo());
  return RunBlocking(*io, cont_->pool().client().options().io_timeout,
                     [&](IoCallback cb) { return SubmitFetchTo(*io, nullptr, args, 0, std::move(cb)); });
}

Status Object::Put(std::string_view dkey, std::string_view akey, std::span<const std::byte> value) const {
  UpdateArgs args;
  args.dkey = dkey;
  args.akey = akey;
  args.data = value;
  return Update(args);
}

Result<std::vector<std::byte>> Object::Get(std::string_view dkey, std::string_view akey, size_t size_hint) const {
  std::vector<std::byte> value(std::max<size_t>(size_hint, 1));
  for (int attempt = 0; attempt < 3; ++attempt) {
    FetchArgs args;
    args.dkey = dkey;
    args.akey = akey;
    args.buffer = value;
    ROS2_ASSIGN_OR_RETURN(IoResult r, Fetch(args));
    if (r.size <= value.size()) {
      value.resize(r.size);
      return value;
    }
    value.resize(r.size);  // the value is larger than the buffer: fetch it whole
  }
  return Status::Busy(fmt::format("get {}: the value kept growing while being read", DescribeIo(oid_, dkey, akey)));
}

// --- punch, list, query: blocking control of one or all shards ---

namespace {

// A connected endpoint for the route, with errors naming the operation
// (`what` is only called then).
template <typename What>
Result<std::shared_ptr<transport::Endpoint>> Connect(ThreadIo& io, ContainerCore& cont, const Route& route,
                                                     const What& what) {
  auto ep = ConnectTarget(io, cont, route);
  if (!ep.ok()) {
    return ep.status().WithContext(fmt::format("{}: connect to target {}", NameOf(what), route.target));
  }
  return ep;
}

struct SyncCall {
  ContainerCore& cont;
  ThreadIo& io;
  std::string what;

  Result<std::vector<uint8_t>> Call(const Route& route, obj::Opcode opcode, const std::vector<uint8_t>& payload) {
    auto ep = Connect(io, cont, route, what);
    if (!ep.ok()) return ep.status();
    ROS2_ASSIGN_OR_RETURN(auto capability, cont.Capability());
    transport::CallOptions options;
    options.timeout = cont.pool().client().options().io_timeout;
    options.capability = AsCapability(*capability);
    t_request_sent = true;  // CallSync does not tell a failed send from a failed reply
    auto reply = (*ep)->CallSync(static_cast<uint16_t>(opcode), AsBytes(payload), options);
    if (!reply.ok()) {
      if (reply.status().code() == Status::Code::kDisconnected) {
        io.DropEndpoint(route.address());
        cont.pool().MarkMapStale();
      }
      return reply.status().WithContext(fmt::format("{} on target {}", what, route.target));
    }
    return std::move(reply->payload);
  }

  // Sends payloads[i] to routes[i], all at once, and waits for every reply:
  // one round trip for an operation on every shard.
  std::vector<Result<std::vector<uint8_t>>> CallAll(const std::vector<Route>& routes, obj::Opcode opcode,
                                                    const std::vector<std::vector<uint8_t>>& payloads) {
    std::vector<Result<std::vector<uint8_t>>> results(routes.size(), Status::Cancelled("not sent"));
    size_t pending = 0;
    auto capability = cont.Capability();
    if (!capability.ok()) {
      for (auto& r : results) r = capability.status();
      return results;
    }
    for (size_t i = 0; i < routes.size(); ++i) {
      auto ep = Connect(io, cont, routes[i], what);
      if (!ep.ok()) {
        results[i] = ep.status();
        continue;
      }
      transport::CallOptions options;
      options.timeout = cont.pool().client().options().io_timeout;
      options.capability = AsCapability(**capability);
      Status st = (*ep)->Call(static_cast<uint16_t>(opcode), AsBytes(payloads[i]), options,
                              [this, &results, &pending, &routes, i](const transport::ReplyView& reply) {
                                --pending;
                                if (!reply.status.ok()) {
                                  if (reply.status.code() == Status::Code::kDisconnected) {
                                    io.DropEndpoint(routes[i].address());
                                    cont.pool().MarkMapStale();
                                  }
                                  results[i] =
                                      reply.status.WithContext(fmt::format("{} on target {}", what, routes[i].target));
                                } else {
                                  results[i] = std::vector<uint8_t>(reply.payload.begin(), reply.payload.end());
                                }
                              });
      if (st.ok()) {
        ++pending;
        t_request_sent = true;
      } else {
        results[i] = st.WithContext(fmt::format("{} on target {}", what, routes[i].target));
      }
    }
    // Every call completes (the transport fails it at its deadline); the
    // callbacks reference this frame, so wait for all of them.
    while (pending > 0) (void)io.worker().RunUntil([&pending] { return pending == 0; }, std::chrono::seconds(5));
    return results;
  }
};

}  // namespace

static Status PunchOnce(ContainerCore& cont, const ObjectId& oid, obj::PunchScope scope, std::string_view dkey,
                        std::string_view akey, Condition condition) {
  ROS2_ASSIGN_OR_RETURN(auto io, cont.pool().client().ThisThreadIo());
  SyncCall call{cont, *io, "punch " + DescribeIo(oid, dkey, akey)};
  if (scope != obj::PunchScope::kObject) {
    ROS2_RETURN_IF_ERROR(ValidateKeys(dkey, akey, scope == obj::PunchScope::kAkey, call.what));
  }
  if (condition != Condition::kNone && condition != Condition::kPresent) {
    return Status::InvalidArgument(call.what + ": a punch can only be conditional on the key being present");
  }
  std::vector<Route> routes;
  if (scope == obj::PunchScope::kObject) {
    ROS2_ASSIGN_OR_RETURN(routes, cont.ShardRoutes(&oid));
  } else {
    ROS2_ASSIGN_OR_RETURN(Route r, cont.RouteFor(oid, dkey));
    routes.push_back(std::move(r));
  }
  std::vector<std::vector<uint8_t>> payloads;
  for (const Route& route : routes) {
    obj::PunchRequest req;
    req.header = cont.Header(route);
    req.scope = scope;
    if (condition == Condition::kPresent) req.header.flags = obj::kFlagIfPresent;
    req.oid = oid;
    req.dkey = dkey;
    req.akey = akey;
    payloads.push_back(obj::Encode(req));
  }
  // An object punch goes to every shard at once.
  for (auto& payload : call.CallAll(routes, obj::Opcode::kPunch, payloads)) {
    if (!payload.ok()) return payload.status();
    auto decoded = obj::DecodePunchReply(*payload);
    if (!decoded.ok()) return decoded.status().WithContext(call.what);
  }
  return Status::Ok();
}

// A punch is resent only when none of its requests was sent (or the engine
// refused the capability): one that reached an engine has an unknown outcome.
static Status Punch(ContainerCore& cont, const ObjectId& oid, obj::PunchScope scope, std::string_view dkey,
                    std::string_view akey, Condition condition = Condition::kNone) {
  return WithRetry(cont, Effect::kWrite, [&] { return PunchOnce(cont, oid, scope, dkey, akey, condition); });
}

Status Object::PunchObject() const {
  return Punch(*cont_, oid_, obj::PunchScope::kObject, {}, {});
}
Status Object::PunchDkey(std::string_view dkey) const {
  return Punch(*cont_, oid_, obj::PunchScope::kDkey, dkey, {});
}
Status Object::PunchAkey(std::string_view dkey, std::string_view akey) const {
  return Punch(*cont_, oid_, obj::PunchScope::kAkey, dkey, akey);
}
Status Object::PunchDkey(std::string_view dkey, Condition condition) const {
  return Punch(*cont_, oid_, obj::PunchScope::kDkey, dkey, {}, condition);
}
Status Object::PunchAkey(std::string_view dkey, std::string_view akey, Condition condition) const {
  return Punch(*cont_, oid_, obj::PunchScope::kAkey, dkey, akey, condition);
}

// Pages through one list of one target until its anchor reports eof.
static Status ListAll(SyncCall& call, const Route& route, obj::ListRequest req,
                      const std::function<void(obj::ListReply&)>& take) {
  req.header = call.cont.Header(route);
  req.max_entries = obj::kMaxListEntries;
  for (int page = 0; page < 1'000'000; ++page) {
    ROS2_ASSIGN_OR_RETURN(auto payload, call.Call(route, obj::Opcode::kList, obj::Encode(req)));
    auto decoded = obj::DecodeListReply(payload);
    if (!decoded.ok()) return decoded.status().WithContext(call.what);
    take(*decoded);
    if (decoded->anchor.eof) return Status::Ok();
    if (decoded->anchor == req.anchor) {
      return Status::Protocol(
          fmt::format("{} on target {}: the engine's anchor did not advance", call.what, route.target));
    }
    req.anchor = std::move(decoded->anchor);
  }
  return Status::Protocol(call.what + ": too many pages");
}

static Result<std::vector<std::string>> ListKeysOnce(ContainerCore& cont, const ObjectId& oid, obj::ListKind kind,
                                                     std::string_view dkey) {
  ROS2_ASSIGN_OR_RETURN(auto io, cont.pool().client().ThisThreadIo());
  SyncCall call{
      cont, *io,
      fmt::format("list {} of {}", kind == obj::ListKind::kDkeys ? "dkeys" : "akeys", DescribeIo(oid, dkey, {}))};
  std::vector<Route> routes;
  if (kind == obj::ListKind::kDkeys) {
    ROS2_ASSIGN_OR_RETURN(routes, cont.ShardRoutes(&oid));
  } else {
    ROS2_RETURN_IF_ERROR(ValidateKeys(dkey, {}, false, call.what));
    ROS2_ASSIGN_OR_RETURN(Route r, cont.RouteFor(oid, dkey));
    routes.push_back(std::move(r));
  }
  std::vector<std::string> keys;
  for (const Route& route : routes) {
    obj::ListRequest req;
    req.kind = kind;
    req.oid = oid;
    req.dkey = dkey;
    ROS2_RETURN_IF_ERROR(ListAll(call, route, req, [&keys](obj::ListReply& r) {
      for (auto& k : r.keys) keys.push_back(std::move(k));
    }));
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

static Result<std::vector<std::string>> ListKeys(ContainerCore& cont, const ObjectId& oid, obj::ListKind kind,
                                                 std::string_view dkey) {
  return WithRetry(cont, Effect::kRead, [&] { return ListKeysOnce(cont, oid, kind, dkey); });
}

Result<std::vector<std::string>> Object::ListDkeys() const {
  return ListKeys(*cont_, oid_, obj::ListKind::kDkeys, {});
}
Result<std::vector<std::string>> Object::ListAkeys(std::string_view dkey) const {
  return ListKeys(*cont_, oid_, obj::ListKind::kAkeys, dkey);
}

Result<std::vector<ObjectId>> Container::ListObjects() const {
  if (offload_) return Status::NotSupported("list objects: offload mode carries the DFS API only");
  return WithRetry(*core_, Effect::kRead, [this]() -> Result<std::vector<ObjectId>> {
    ROS2_ASSIGN_OR_RETURN(auto io, core_->pool().client().ThisThreadIo());
    SyncCall call{*core_, *io, "list objects of container " + core_->summary().label};
    ROS2_ASSIGN_OR_RETURN(auto routes, core_->ShardRoutes(nullptr));
    std::vector<ObjectId> objects;
    for (const Route& route : routes) {
      obj::ListRequest req;
      req.kind = obj::ListKind::kObjects;
      ROS2_RETURN_IF_ERROR(ListAll(call, route, req, [&objects](obj::ListReply& r) {
        objects.insert(objects.end(), r.objects.begin(), r.objects.end());
      }));
    }
    std::sort(objects.begin(), objects.end());
    objects.erase(std::unique(objects.begin(), objects.end()), objects.end());
    return objects;
  });
}

Result<std::optional<std::string>> Object::QueryMaxDkey() const {
  return WithRetry(*cont_, Effect::kRead, [this]() -> Result<std::optional<std::string>> {
    ROS2_ASSIGN_OR_RETURN(auto io, cont_->pool().client().ThisThreadIo());
    SyncCall call{*cont_, *io, "query max dkey of " + DescribeIo(oid_, {}, {})};
    ROS2_ASSIGN_OR_RETURN(auto routes, cont_->ShardRoutes(&oid_));
    std::optional<std::string> best;
    for (const Route& route : routes) {
      obj::QueryRequest req;
      req.header = cont_->Header(route);
      req.kind = obj::QueryKind::kMaxDkey;
      req.oid = oid_;
      ROS2_ASSIGN_OR_RETURN(auto payload, call.Call(route, obj::Opcode::kQuery, obj::Encode(req)));
      auto decoded = obj::DecodeQueryReply(payload);
      if (!decoded.ok()) return decoded.status().WithContext(call.what);
      if (decoded->found && (!best || decoded->max_dkey > *best)) best = decoded->max_dkey;
    }
    return best;
  });
}

Result<std::optional<uint64_t>> Object::QueryArrayEnd(std::string_view dkey, std::string_view akey) const {
  return WithRetry(*cont_, Effect::kRead, [&, this]() -> Result<std::optional<uint64_t>> {
    ROS2_ASSIGN_OR_RETURN(auto io, cont_->pool().client().ThisThreadIo());
    SyncCall call{*cont_, *io, "query array end of " + DescribeIo(oid_, dkey, akey)};
    ROS2_RETURN_IF_ERROR(ValidateKeys(dkey, akey, true, call.what));
    ROS2_ASSIGN_OR_RETURN(Route route, cont_->RouteFor(oid_, dkey));
    obj::QueryRequest req;
    req.header = cont_->Header(route);
    req.kind = obj::QueryKind::kArrayEnd;
    req.oid = oid_;
    req.dkey = dkey;
    req.akey = akey;
    ROS2_ASSIGN_OR_RETURN(auto payload, call.Call(route, obj::Opcode::kQuery, obj::Encode(req)));
    auto decoded = obj::DecodeQueryReply(payload);
    if (!decoded.ok()) return decoded.status().WithContext(call.what);
    if (!decoded->found) return std::optional<uint64_t>();
    return std::optional<uint64_t>(decoded->array_end);
  });
}

}  // namespace ros2::client
