// Object I/O: update and fetch (asynchronous, with blocking wrappers), and the
// blocking punch, list and query calls. Each request is encoded with the object
// protocol (object/obj_rpc.h) and sent to the target that owns the dkey through
// the calling thread's worker, by the shard-call helpers (client/shard_call.h).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>

#include <fmt/format.h>

#include "client/client_internal.h"
#include "client/event_queue_impl.h"
#include "client/handle_backends.h"
#include "client/io_checksum.h"
#include "client/replicated_update.h"
#include "client/resend.h"
#include "client/shard_call.h"
#include "common/log.h"

namespace ros2::client {

namespace {

std::span<const uint8_t> AsBytes(const std::vector<uint8_t>& v) {
  return {v.data(), v.size()};
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
// running the resends the failure policy scheduled (ThreadIo::RunDueTimers).
template <typename Submit>
Result<IoResult> RunBlocking(ThreadIo& io, Submit submit) {
  IoResult out;
  bool done = false;
  IoCallback callback = [&out, &done](const IoResult& r) {
    out = r;
    done = true;
  };
  ROS2_RETURN_IF_ERROR(submit(std::move(callback)));
  // The callback references this frame: wait until it ran.
  WaitFor(io, done);
  if (!out.status.ok()) return out.status;
  return out;
}

}  // namespace

// One asynchronous update or fetch from its submission to its completion.
// Its arguments are kept, so that it can be sent again (to a new route, with
// a renewed capability) when the failure policy says so; a resend is a timer
// of the submitting thread's queue (ThreadIo::Schedule), never a wait.
struct IoOp : std::enable_shared_from_this<IoOp> {
  bool is_fetch = false;
  std::shared_ptr<ContainerCore> cont;
  // The submitting thread's I/O state (it outlives the op: it owns the
  // worker), the container and the route of the current attempt.
  ShardTarget shard;
  ObjectId oid;
  std::string dkey, akey;
  EventQueue::Impl* eq = nullptr;
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
  // fetch of a replicated object: which readable copy this attempt reads,
  // counted from `first_copy` (ContainerCore::RouteFor); moves on when a
  // copy's data fails its checksum. Successive fetches start at successive
  // copies, so every copy serves reads (docs/replication.md, "Read rule").
  uint32_t replica = 0;
  uint32_t first_copy = 0;
  // Set when this copy's data failed our checksum: the next attempt asks its
  // engine to verify what it stores (obj::kFlagVerifyStored), which tells a
  // damaged copy (Corruption from the engine) from damage on the way.
  bool verify_stored = false;
  // resending
  int resends = 0;
  FailurePolicy policy{std::chrono::milliseconds(0)};
  // After kRefreshMap: the map the failed attempt was placed with, and its
  // failure; the next attempt is made only on a map that differs.
  std::shared_ptr<const MapSnapshot> refresh_from;
  Status refresh_failure;

  ThreadIo& io() const { return *shard.io; }
  std::string Name() const { return fmt::format("{} {}", is_fetch ? "fetch" : "update", DescribeIo(oid, dkey, akey)); }
  std::string What() const { return fmt::format("{} on target {}", Name(), shard.route.target); }
  Idempotency idempotency() const { return is_fetch ? Idempotency::kIdempotent : Idempotency::kNotIdempotent; }

  // The fields a fetch request and an update request share.
  template <typename Request>
  Request NewRequest() const {
    Request req;
    req.header = cont->Header(shard.route);
    req.header.flags = flags;
    if (verify_stored) req.header.flags |= obj::kFlagVerifyStored;
    req.oid = oid;
    req.dkey = dkey;
    req.akey = akey;
    req.type = kind;
    req.index = index;
    req.record_size = record_size;
    return req;
  }

  // The encoded request of this op; its bulk buffers go into `options`.
  // Above the inline limit a buffer inside one the application registered
  // (Client::RegisterBuffer) travels with that registration; any other is
  // registered by the transport for its call alone, when it moves by RMA.
  Result<std::vector<uint8_t>> Encode(transport::CallOptions& options) {
    const uint64_t inline_limit = io().context().options().inline_limit;
    ClientCore& client = cont->pool().client();
    if (is_fetch) {
      auto req = NewRequest<obj::FetchRequest>();
      req.count = count;
      options.bulk_in = buffer;
      if (expected > inline_limit) options.bulk_in_region = client.RegisteredRegion(buffer.data(), expected);
      return obj::Encode(req);
    }
    auto req = NewRequest<obj::UpdateRequest>();
    req.length = data.size();
    req.csum = ChecksumsForUpdate(cont->checksum_type(), client.options().checksum_chunk_size, data);
    options.bulk_out = data;
    if (data.size() > inline_limit) options.bulk_out_region = client.RegisteredRegion(data.data(), data.size());
    return obj::Encode(req);
  }

  // In eq->in_flight_ from the first send or scheduled resend until the
  // completion: a submission that fails leaves the queue as it was.
  void Count() {
    if (eq != nullptr && !counted) {
      ++eq->in_flight_;
      counted = true;
    }
  }

  // Routes, encodes and sends the request once; `phase` says how far it got.
  // `unchanged` is set when a refresh the policy asked for found the same
  // map (the failure that called for it is returned).
  Status SendOnce(CallPhase& phase, bool& unchanged) {
    phase = CallPhase::kConnecting;
    ROS2_ASSIGN_OR_RETURN(Route route, cont->RouteFor(oid, dkey, replica, first_copy));
    if (refresh_from != nullptr) {
      auto base = std::exchange(refresh_from, nullptr);
      if (!MapChanged(*base, *route.snapshot)) {
        // A StaleMap refusal names a newer map than the control endpoint
        // gave: it has not learned it yet, so the policy refreshes again
        // (within its window). Any other failure: placing again changes
        // nothing.
        unchanged = refresh_failure.code() != Status::Code::kStaleMap;
        return refresh_failure;
      }
    }
    shard.route = std::move(route);
    phase = CallPhase::kBeforeSend;
    transport::CallOptions options;
    ROS2_ASSIGN_OR_RETURN(auto payload, Encode(options));
    ROS2_RETURN_IF_ERROR(SendToShard(shared_from_this(), is_fetch ? obj::Opcode::kFetch : obj::Opcode::kUpdate,
                                     AsBytes(payload), options, [this] { return Name(); }, phase));
    Count();  // the reply cannot run before this returns
    return Status::Ok();
  }

  // The failure policy applied to `failure`: OK when a resend is scheduled
  // (a timer of this thread's queue), otherwise the failure to report.
  Status Recover(const Status& failure, CallPhase phase) {
    auto d = policy.Decide(failure, phase, idempotency(), Name());
    LogRecovery(failure, phase, d);
    if (d.recovery == Recovery::kGiveUp) return d.final;
    PrepareRecovery(d.recovery, *cont);
    if (d.recovery == Recovery::kRefreshMap) {
      refresh_from = shard.route.snapshot != nullptr ? shard.route.snapshot : cont->pool().CurrentMap();
      refresh_failure = failure;
    }
    io().Schedule(d.pause, [self = shared_from_this()] { self->Resend(); });
    return Status::Ok();
  }

  // The first attempt, from Submit*: never waits. A stale map (a recovery
  // would call the control plane) makes it a resend at once; a failure the
  // policy recovers from schedules one. Otherwise the failure is returned and
  // nothing is queued.
  Status Start() {
    if (cont->pool().map_stale()) {
      Count();
      io().Schedule(std::chrono::milliseconds(0), [self = shared_from_this()] { self->Resend(); });
      return Status::Ok();
    }
    CallPhase phase = CallPhase::kConnecting;
    bool unchanged = false;
    Status st = SendOnce(phase, unchanged);
    if (st.ok()) return st;
    ROS2_RETURN_IF_ERROR(Recover(st, phase));
    Count();
    return Status::Ok();
  }

  // A timer of the queue: the next attempt (outside completions).
  void Resend() {
    ++resends;
    CallPhase phase = CallPhase::kConnecting;
    bool unchanged = false;
    Status st = SendOnce(phase, unchanged);
    if (st.ok()) return;
    Status final = unchanged ? st : Recover(st, phase);
    if (final.ok()) return;
    IoResult r;
    r.status = policy.first_failure().ok() || !(final == st)
                   ? final
                   : final.WithContext(fmt::format("resend after '{}'", policy.first_failure().message()));
    Complete(r);
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
    r.status = VerifyFetched(cont->summary().checksum != ChecksumType::kNone, decoded->csum, buffer.first(pushed), "fetched data");
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
    CompletionScope scope(io());
    if (eq != nullptr) {
      counted = false;
      eq->Complete(user_data, callback, result);
    } else if (callback) {
      callback(result);
    }
  }

  // The reply (SendToShard has already noted a disconnected target). A
  // failure is resent (a timer) rather than reported when the policy says so.
  void OnReply(const transport::ReplyView& reply) {
    if (reply.status.IsCorruption() && TryAnotherCopy(reply.status)) return;
    if (!reply.status.ok()) {
      Status final = Recover(reply.status, PhaseOfReply(reply.status));
      if (final.ok()) return;
      if (!(final == reply.status)) {  // the window closed
        IoResult r;
        r.status = final;
        Complete(r);
        return;
      }
    }
    IoResult r = Finish(reply);
    if (r.status.IsCorruption() && (AskToVerify(r.status) || TryAnotherCopy(r.status))) return;
    Complete(r);
  }

  // The data of a fetch failed our checksum: read the same copy once more,
  // with its engine verifying what it stores. Damage on the way then reads
  // back whole; damage on the copy comes back as Corruption from the engine,
  // which counts it (ros2_engine_checksum_errors_total).
  bool AskToVerify(const Status& corruption) {
    if (!is_fetch || verify_stored) return false;
    verify_stored = true;
    ROS2_LOG_WARN("{}: data from target {} failed its checksum ({}); reading it again, verified by the engine", Name(),
                  shard.route.target, corruption.message());
    io().Schedule(std::chrono::milliseconds(0), [self = shared_from_this()] { self->Resend(); });
    return true;
  }

  // A fetch of a replicated object whose copy failed its checksum: reported
  // (a warning and the failover counter) and read from the next readable
  // copy, when there is one.
  bool TryAnotherCopy(const Status& corruption) {
    if (!is_fetch || ReplicaCount(oid.object_class()) < 2) return false;
    // The current map as it is: no recovery from inside a completion.
    auto copies = ReadTargets(cont->pool().CurrentMap()->map, oid, dkey);
    if (!copies.ok() || replica + 1 >= copies->size()) return false;
    CountReplicaChecksumFailover();
    ROS2_LOG_WARN("{}: copy {} on target {} failed its checksum ({}); reading copy {}", Name(), replica,
                  shard.route.target, corruption.message(), replica + 1);
    ++replica;
    verify_stored = false;
    io().Schedule(std::chrono::milliseconds(0), [self = shared_from_this()] { self->Resend(); });
    return true;
  }
};

namespace {

// What an update and a fetch share before their own checks: a new op for
// `args`' keys and value kind, checked, addressed to `io`'s thread and
// completing through `eq` (or `callback`). The caller adds what differs and
// Start()s it.
template <typename Args>
Result<std::shared_ptr<IoOp>> NewIoOp(bool is_fetch, const std::shared_ptr<ContainerCore>& cont, const ObjectId& oid,
                                      ThreadIo& io, EventQueue::Impl* eq, const Args& args, uint64_t user_data,
                                      IoCallback callback) {
  auto op = std::make_shared<IoOp>();
  op->is_fetch = is_fetch;
  op->oid = oid;
  op->dkey = args.dkey;
  op->akey = args.akey;
  const auto what = [&op] { return op->What(); };
  ROS2_RETURN_IF_ERROR(ValidateKeys(args.dkey, args.akey, true, what));
  const bool array = args.kind == ValueType::kArray;
  if (array && args.record_size == 0) return Status::InvalidArgument(op->What() + ": record size 0");
  if (!array && args.kind != ValueType::kSingle) return Status::InvalidArgument(op->What() + ": unknown value kind");
  op->cont = cont;
  op->policy = FailurePolicy(cont->pool().client().reconnect_timeout());
  op->shard.io = &io;
  op->shard.cont = cont.get();
  op->eq = eq;
  op->user_data = user_data;
  op->callback = std::move(callback);
  op->kind = args.kind;
  op->index = array ? args.index : 0;
  op->record_size = array ? args.record_size : 1;
  return op;
}

}  // namespace

// An update through `io`'s thread, completing through `eq` (or `callback`).
static Status SubmitUpdateTo(const std::shared_ptr<ContainerCore>& cont, const ObjectId& oid, ThreadIo& io,
                             EventQueue::Impl* eq, const UpdateArgs& args, uint64_t user_data, IoCallback callback) {
  ROS2_ASSIGN_OR_RETURN(auto op, NewIoOp(false, cont, oid, io, eq, args, user_data, std::move(callback)));
  if (args.kind == ValueType::kArray) {
    if (args.data.empty()) return Status::InvalidArgument(op->What() + ": an array update needs at least one record");
    if (args.data.size() % args.record_size != 0) {
      return Status::InvalidArgument(fmt::format("{}: {} bytes are not a whole number of {}-byte records", op->What(),
                                                 args.data.size(), args.record_size));
    }
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
  if (ReplicaCount(oid.object_class()) > 1) {
    return SubmitReplicatedUpdate(cont, oid, io, eq, args, op->flags, user_data, std::move(op->callback));
  }
  op->data = args.data;
  op->length = args.data.size();
  return op->Start();
}

// A fetch through `io`'s thread, completing through `eq` (or `callback`).
static Status SubmitFetchTo(const std::shared_ptr<ContainerCore>& cont, const ObjectId& oid, ThreadIo& io,
                            EventQueue::Impl* eq, const FetchArgs& args, uint64_t user_data, IoCallback callback) {
  ROS2_ASSIGN_OR_RETURN(auto op, NewIoOp(true, cont, oid, io, eq, args, user_data, std::move(callback)));
  uint64_t want = args.buffer.size();
  if (args.kind == ValueType::kArray) {
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
  }
  if (want > obj::kMaxIoSize) {
    return Status::InvalidArgument(fmt::format("{}: {} bytes (limit {})", op->What(), want, obj::kMaxIoSize));
  }
  if (args.want_array_end) {
    if (args.kind != ValueType::kArray) return Status::InvalidArgument(op->What() + ": array end of a single value");
    op->flags = obj::kFlagWantArrayEnd;
  }
  op->count = args.kind == ValueType::kArray ? args.count : 0;
  op->buffer = args.buffer.first(want);
  op->expected = want;
  if (ReplicaCount(oid.object_class()) > 1) {
    // Round-robin over the readable copies, per fetch of the process.
    static std::atomic<uint32_t> next_copy{0};
    op->first_copy = next_copy.fetch_add(1, std::memory_order_relaxed);
  }
  return op->Start();
}

Object::Object(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
const ObjectId& Object::id() const {
  return impl_->oid;
}

// --- asynchronous entry points ---

Status Object::SubmitUpdate(EventQueue& eq, const UpdateArgs& args, uint64_t user_data) const {
  ROS2_ASSIGN_OR_RETURN(ThreadIo * io, DirectIoOf(eq, "submit update"));
  return SubmitUpdateTo(impl_->cont, impl_->oid, *io, &eq.impl(), args, user_data, nullptr);
}
Status Object::SubmitUpdate(EventQueue& eq, const UpdateArgs& args, IoCallback callback) const {
  if (!callback) return Status::InvalidArgument("submit update: empty callback");
  ROS2_ASSIGN_OR_RETURN(ThreadIo * io, DirectIoOf(eq, "submit update"));
  return SubmitUpdateTo(impl_->cont, impl_->oid, *io, &eq.impl(), args, 0, std::move(callback));
}
Status Object::SubmitFetch(EventQueue& eq, const FetchArgs& args, uint64_t user_data) const {
  ROS2_ASSIGN_OR_RETURN(ThreadIo * io, DirectIoOf(eq, "submit fetch"));
  return SubmitFetchTo(impl_->cont, impl_->oid, *io, &eq.impl(), args, user_data, nullptr);
}
Status Object::SubmitFetch(EventQueue& eq, const FetchArgs& args, IoCallback callback) const {
  if (!callback) return Status::InvalidArgument("submit fetch: empty callback");
  ROS2_ASSIGN_OR_RETURN(ThreadIo * io, DirectIoOf(eq, "submit fetch"));
  return SubmitFetchTo(impl_->cont, impl_->oid, *io, &eq.impl(), args, 0, std::move(callback));
}

// --- blocking wrappers ---

Status Object::Update(const UpdateArgs& args) const {
  ROS2_ASSIGN_OR_RETURN(auto io, impl_->cont->pool().client().ThisThreadIo());
  auto r = RunBlocking(*io, [&](IoCallback cb) { return SubmitUpdateTo(impl_->cont, impl_->oid, *io, nullptr, args, 0, std::move(cb)); });
  return r.status();
}

Result<IoResult> Object::Fetch(const FetchArgs& args) const {
  ROS2_ASSIGN_OR_RETURN(auto io, impl_->cont->pool().client().ThisThreadIo());
  return RunBlocking(*io, [&](IoCallback cb) { return SubmitFetchTo(impl_->cont, impl_->oid, *io, nullptr, args, 0, std::move(cb)); });
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
  return Status::Busy(fmt::format("get {}: the value kept growing while being read", DescribeIo(impl_->oid, dkey, akey)));
}

// --- punch, list, query: blocking control of one or all shards ---

namespace {

// One decoded reply from each shard, or the first failure (in route order).
template <typename Reply>
Result<std::vector<Reply>> DecodeAll(std::vector<Result<std::vector<uint8_t>>> payloads,
                                     Result<Reply> (*decode)(std::span<const uint8_t>), const std::string& what) {
  std::vector<Reply> replies;
  replies.reserve(payloads.size());
  for (auto& payload : payloads) {
    if (!payload.ok()) return payload.status();
    auto decoded = decode(*payload);
    if (!decoded.ok()) return decoded.status().WithContext(what);
    replies.push_back(std::move(*decoded));
  }
  return replies;
}

}  // namespace

static Status PunchOnce(ContainerCore& cont, const ObjectId& oid, PunchScope scope, std::string_view dkey,
                        std::string_view akey, Condition condition, Epoch epoch, CallPhase& phase) {
  ROS2_ASSIGN_OR_RETURN(auto io, cont.pool().client().ThisThreadIo());
  const std::string what = "punch " + DescribeIo(oid, dkey, akey);
  if (scope != PunchScope::kObject) {
    ROS2_RETURN_IF_ERROR(ValidateKeys(dkey, akey, scope == PunchScope::kAkey, what));
  }
  if (condition != Condition::kNone && condition != Condition::kPresent) {
    return Status::InvalidArgument(what + ": a punch can only be conditional on the key being present");
  }
  if (scope != PunchScope::kObject && ReplicaCount(oid.object_class()) > 1) {
    const uint8_t flags = condition == Condition::kPresent ? obj::kFlagIfPresent : 0;
    return ReplicatedPunchOnce(cont, oid, scope, dkey, akey, flags, epoch, phase);
  }
  std::vector<Route> routes;
  if (scope == PunchScope::kObject) {
    ROS2_ASSIGN_OR_RETURN(routes, cont.ShardRoutes(&oid, /*write=*/true));
  } else {
    ROS2_ASSIGN_OR_RETURN(routes, cont.WriteRoutes(oid, dkey));
  }
  std::vector<std::vector<uint8_t>> payloads;
  for (const Route& route : routes) {
    obj::PunchRequest req;
    req.header = cont.Header(route);
    req.header.epoch = epoch;
    req.scope = scope;
    if (condition == Condition::kPresent) req.header.flags = obj::kFlagIfPresent;
    req.oid = oid;
    req.dkey = dkey;
    req.akey = akey;
    payloads.push_back(obj::Encode(req));
  }
  // An object punch goes to every shard at once.
  auto replies = DecodeAll(CallShards(*io, cont, what, std::move(routes), obj::Opcode::kPunch, payloads, &phase),
                           &obj::DecodePunchReply, what);
  return replies.status();
}

// A punch is not idempotent: resent only when none of its requests was sent
// (or an engine refused it before running it). A punch of a replicated
// object carries one epoch the client stamps (replicated_update.h): repeating
// it is harmless, conditional or not (its leader and copies remember the
// transaction they decided).
static Status Punch(ContainerCore& cont, const ObjectId& oid, PunchScope scope, std::string_view dkey,
                    std::string_view akey, Condition condition = Condition::kNone) {
  const bool replicated = ReplicaCount(oid.object_class()) > 1;
  const Epoch epoch = replicated ? ReplicaEpoch() : Epoch{0};
  const Idempotency idempotency =
      replicated && (condition == Condition::kNone || scope != PunchScope::kObject) ? Idempotency::kIdempotent
                                                                                    : Idempotency::kNotIdempotent;
  return WithRetry(cont, idempotency, "punch " + DescribeIo(oid, dkey, akey),
                   [&](CallPhase& phase) { return PunchOnce(cont, oid, scope, dkey, akey, condition, epoch, phase); });
}

Status Object::PunchObject() const {
  return Punch(*impl_->cont, impl_->oid, PunchScope::kObject, {}, {});
}
Status Object::PunchDkey(std::string_view dkey) const {
  return Punch(*impl_->cont, impl_->oid, PunchScope::kDkey, dkey, {});
}
Status Object::PunchAkey(std::string_view dkey, std::string_view akey) const {
  return Punch(*impl_->cont, impl_->oid, PunchScope::kAkey, dkey, akey);
}
Status Object::PunchDkey(std::string_view dkey, Condition condition) const {
  return Punch(*impl_->cont, impl_->oid, PunchScope::kDkey, dkey, {}, condition);
}
Status Object::PunchAkey(std::string_view dkey, std::string_view akey, Condition condition) const {
  return Punch(*impl_->cont, impl_->oid, PunchScope::kAkey, dkey, akey, condition);
}

// Pages through one list on every route until each reports eof: each round
// asks every target not yet at its end for its next page at once (one
// fan-out), so the list costs as many round trips as the longest shard has
// pages.
static Status ListAll(ThreadIo& io, ContainerCore& cont, const std::string& what, const std::vector<Route>& routes,
                      const obj::ListRequest& request, const std::function<void(obj::ListReply&)>& take,
                      CallPhase& phase) {
  std::vector<obj::ListRequest> reqs(routes.size(), request);
  std::vector<size_t> open;  // routes not yet at eof
  for (size_t i = 0; i < routes.size(); ++i) {
    reqs[i].header = cont.Header(routes[i]);
    reqs[i].max_entries = obj::kMaxListEntries;
    open.push_back(i);
  }
  for (int page = 0; !open.empty(); ++page) {
    if (page == 1'000'000) return Status::Protocol(what + ": too many pages");
    std::vector<Route> round;
    std::vector<std::vector<uint8_t>> payloads;
    for (size_t i : open) {
      round.push_back(routes[i]);
      payloads.push_back(obj::Encode(reqs[i]));
    }
    ROS2_ASSIGN_OR_RETURN(auto replies,
                          DecodeAll(CallShards(io, cont, what, std::move(round), obj::Opcode::kList, payloads, &phase),
                                    &obj::DecodeListReply, what));
    std::vector<size_t> still_open;
    for (size_t k = 0; k < open.size(); ++k) {
      obj::ListRequest& req = reqs[open[k]];
      obj::ListReply& reply = replies[k];
      take(reply);
      if (reply.anchor.eof) continue;
      if (reply.anchor == req.anchor) {
        return Status::Protocol(
            fmt::format("{} on target {}: the engine's anchor did not advance", what, routes[open[k]].target));
      }
      req.anchor = std::move(reply.anchor);
      still_open.push_back(open[k]);
    }
    open = std::move(still_open);
  }
  return Status::Ok();
}

static Result<std::vector<std::string>> ListKeysOnce(ContainerCore& cont, const ObjectId& oid, obj::ListKind kind,
                                                     std::string_view dkey, CallPhase& phase) {
  ROS2_ASSIGN_OR_RETURN(auto io, cont.pool().client().ThisThreadIo());
  const std::string what =
      fmt::format("list {} of {}", kind == obj::ListKind::kDkeys ? "dkeys" : "akeys", DescribeIo(oid, dkey, {}));
  std::vector<Route> routes;
  if (kind == obj::ListKind::kDkeys) {
    ROS2_ASSIGN_OR_RETURN(routes, cont.ShardRoutes(&oid));
  } else {
    ROS2_RETURN_IF_ERROR(ValidateKeys(dkey, {}, false, what));
    ROS2_ASSIGN_OR_RETURN(Route r, cont.RouteFor(oid, dkey));
    routes.push_back(std::move(r));
  }
  std::vector<std::string> keys;
  obj::ListRequest req;
  req.kind = kind;
  req.oid = oid;
  req.dkey = dkey;
  ROS2_RETURN_IF_ERROR(ListAll(*io, cont, what, routes, req, [&keys](obj::ListReply& r) {
    for (auto& k : r.keys) keys.push_back(std::move(k));
  }, phase));
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

static Result<std::vector<std::string>> ListKeys(ContainerCore& cont, const ObjectId& oid, obj::ListKind kind,
                                                 std::string_view dkey) {
  return WithRetry(cont, Idempotency::kIdempotent, "list keys of " + DescribeIo(oid, dkey, {}),
                   [&](CallPhase& phase) { return ListKeysOnce(cont, oid, kind, dkey, phase); });
}

Result<std::vector<std::string>> Object::ListDkeys() const {
  return ListKeys(*impl_->cont, impl_->oid, obj::ListKind::kDkeys, {});
}
Result<std::vector<std::string>> Object::ListAkeys(std::string_view dkey) const {
  return ListKeys(*impl_->cont, impl_->oid, obj::ListKind::kAkeys, dkey);
}

Result<std::vector<ObjectId>> DirectContainer::ListObjects() const {
  const std::string what = "list objects of container " + core_->summary().label;
  return WithRetry(*core_, Idempotency::kIdempotent, what, [&, this](CallPhase& phase) -> Result<std::vector<ObjectId>> {
    ROS2_ASSIGN_OR_RETURN(auto io, core_->pool().client().ThisThreadIo());
    ROS2_ASSIGN_OR_RETURN(auto routes, core_->ShardRoutes(nullptr));
    std::vector<ObjectId> objects;
    obj::ListRequest req;
    req.kind = obj::ListKind::kObjects;
    ROS2_RETURN_IF_ERROR(ListAll(*io, *core_, what, routes, req, [&objects](obj::ListReply& r) {
      objects.insert(objects.end(), r.objects.begin(), r.objects.end());
    }, phase));
    std::sort(objects.begin(), objects.end());
    objects.erase(std::unique(objects.begin(), objects.end()), objects.end());
    return objects;
  });
}

Result<std::optional<std::string>> Object::QueryMaxDkey() const {
  const std::string what = "query max dkey of " + DescribeIo(impl_->oid, {}, {});
  return WithRetry(*impl_->cont, Idempotency::kIdempotent, what, [&, this](CallPhase& phase) -> Result<std::optional<std::string>> {
    ROS2_ASSIGN_OR_RETURN(auto io, impl_->cont->pool().client().ThisThreadIo());
    ROS2_ASSIGN_OR_RETURN(auto routes, impl_->cont->ShardRoutes(&impl_->oid));
    const auto payloads = QueryPayloads(*impl_->cont, routes, impl_->oid, obj::QueryKind::kMaxDkey, {});
    // Every shard at once.
    ROS2_ASSIGN_OR_RETURN(auto replies,
                          DecodeAll(CallShards(*io, *impl_->cont, what, std::move(routes), obj::Opcode::kQuery, payloads, &phase),
                                    &obj::DecodeQueryReply, what));
    std::optional<std::string> best;
    for (auto& reply : replies) {
      if (reply.found && (!best || reply.max_dkey > *best)) best = std::move(reply.max_dkey);
    }
    return best;
  });
}

Result<std::optional<uint64_t>> Object::QueryArrayEnd(std::string_view dkey, std::string_view akey) const {
  const std::string what = "query array end of " + DescribeIo(impl_->oid, dkey, akey);
  return WithRetry(*impl_->cont, Idempotency::kIdempotent, what, [&, this](CallPhase& phase) -> Result<std::optional<uint64_t>> {
    ROS2_ASSIGN_OR_RETURN(auto io, impl_->cont->pool().client().ThisThreadIo());
    ROS2_RETURN_IF_ERROR(ValidateKeys(dkey, akey, true, what));
    ROS2_ASSIGN_OR_RETURN(Route route, impl_->cont->RouteFor(impl_->oid, dkey));
    obj::QueryRequest req;
    req.header = impl_->cont->Header(route);
    req.kind = obj::QueryKind::kArrayEnd;
    req.oid = impl_->oid;
    req.dkey = dkey;
    req.akey = akey;
    ROS2_ASSIGN_OR_RETURN(auto payload, CallShard(*io, *impl_->cont, what, route, obj::Opcode::kQuery, obj::Encode(req), &phase));
    auto decoded = obj::DecodeQueryReply(payload);
    if (!decoded.ok()) return decoded.status().WithContext(what);
    if (!decoded->found) return std::optional<uint64_t>();
    return std::optional<uint64_t>(decoded->array_end);
  });
}

}  // namespace ros2::client
