// Replicated updates (replicated_update.h).
#include "client/replicated_update.h"

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "client/event_queue_impl.h"
#include "client/io_checksum.h"
#include "client/resend.h"
#include "client/shard_call.h"
#include "common/log.h"
#include "object/replica_rpc.h"

namespace ros2::client {

namespace {

HybridClock& ReplicaClock() {
  static HybridClock clock;
  return clock;
}

std::atomic<uint64_t> checksum_failovers{0};

// One update of a replicated object, from its submission to its completion:
// attempts (one request to the group's leader each) until every copy stored it
// or the failure policy gives up.
class ReplicatedUpdate : public std::enable_shared_from_this<ReplicatedUpdate> {
 public:
  // The leader's request of the current attempt (SendToShard's owner).
  struct Copy {
    ShardTarget shard;
    std::shared_ptr<ReplicatedUpdate> update;
    void OnReply(const transport::ReplyView& reply) { update->OnLeaderReply(shard.route.target, reply); }
  };

  std::shared_ptr<ContainerCore> cont;
  ThreadIo* io = nullptr;
  EventQueue::Impl* eq = nullptr;
  bool counted = false;
  uint64_t user_data = 0;
  IoCallback callback;
  ObjectId oid;
  UpdateArgs args;
  uint8_t flags = 0;
  Epoch epoch = 0;
  obj::Checksums csum;
  FailurePolicy policy{std::chrono::milliseconds(0)};
  // The map the current attempt was placed with (null until it was placed).
  std::shared_ptr<const MapSnapshot> placed_with;
  // After kRefreshMap: the map the failed attempt was placed with.
  std::shared_ptr<const MapSnapshot> refresh_from;
  // The current attempt: replies outstanding (plus the sender's hold), the
  // first failure and how far the furthest request got.
  size_t remaining = 0;
  Status failure;
  CallPhase failure_phase = CallPhase::kConnecting;

  std::string Name() const { return "replicated update " + DescribeIo(oid, args.dkey, args.akey); }
  // The epoch makes an update harmless to repeat on a copy; a conditional
  // one too, since the copies remember the transaction they decided
  // (docs/replication.md, "Update protocol").
  Idempotency idempotency() const { return Idempotency::kIdempotent; }

  void Count() {
    if (eq != nullptr && !counted) {
      ++eq->in_flight_;
      counted = true;
    }
  }

  void Complete(const IoResult& result) {
    CompletionScope scope(*io);
    if (eq != nullptr) {
      counted = false;
      eq->Complete(user_data, callback, result);
    } else if (callback) {
      callback(result);
    }
  }

  void Fail(const Status& st, CallPhase phase) {
    if (failure.ok()) {
      failure = st;
      failure_phase = phase;
    }
  }

  // Sends the update to the leader of the current map. Outside completions.
  void Attempt() {
    failure = Status::Ok();
    failure_phase = CallPhase::kConnecting;
    remaining = 1;  // the sender's hold
    placed_with = nullptr;
    auto routes = cont->WriteRoutes(oid, args.dkey);
    if (!routes.ok()) {
      Fail(routes.status(), CallPhase::kConnecting);
      return Release();
    }
    placed_with = routes->front().snapshot;
    if (refresh_from != nullptr) {
      auto base = std::exchange(refresh_from, nullptr);
      if (!MapChanged(*base, *routes->front().snapshot)) {
        // The map that failed is still the map: placing again changes
        // nothing, unless the failure was a StaleMap refusal, which names a
        // newer map the control endpoint has not learned yet: the policy
        // refreshes again (within its window).
        Fail(failure_on_refresh, CallPhase::kAnswered);
        give_up_now = failure_on_refresh.code() != Status::Code::kStaleMap;
        return Release();
      }
    }
    SendToLeader(std::move(*routes));
    Release();
  }

  // The update goes to the group's leader (the first copy of the map), which
  // forwards it to the others (LeaderPeers).
  void SendToLeader(std::vector<Route> routes) {
    auto copy = std::make_shared<Copy>();
    copy->shard = ShardTarget{io, cont.get(), routes.front()};
    copy->update = shared_from_this();
    obj::UpdateRequest req;
    req.header = cont->Header(copy->shard.route);
    req.header.flags = flags;
    req.header.epoch = epoch;
    req.oid = oid;
    req.dkey = args.dkey;
    req.akey = args.akey;
    req.type = args.kind;
    req.index = args.kind == ValueType::kArray ? args.index : 0;
    req.record_size = args.kind == ValueType::kArray ? args.record_size : 1;
    req.length = args.data.size();
    req.csum = csum;
    transport::CallOptions options;
    options.bulk_out = args.data;
    if (args.data.size() > io->context().options().inline_limit) {
      // The application's registration if it made one; else the transport
      // registers the buffer for this call alone when it moves by RMA.
      options.bulk_out_region = cont->pool().client().RegisteredRegion(args.data.data(), args.data.size());
    }
    obj::LeaderRequest lead;
    lead.op = obj::Opcode::kUpdate;
    lead.body = obj::Encode(req);
    lead.peers = LeaderPeers(routes);
    const auto payload = obj::Encode(lead);
    CallPhase phase = CallPhase::kConnecting;
    ++remaining;
    Status st = SendToShard(
        copy, obj::Opcode::kLeader, {payload.data(), payload.size()}, options, [this] { return Name(); }, phase);
    if (!st.ok()) {
      --remaining;
      Fail(st, phase);
    }
  }

  void OnLeaderReply(uint32_t target, const transport::ReplyView& reply) {
    CompletionScope scope(*io);
    if (!reply.status.ok()) {
      Fail(reply.status.WithContext(fmt::format("{}: leader on target {}", Name(), target)),
           PhaseOfReply(reply.status));
    } else {
      auto decoded = obj::DecodeUpdateReply(reply.payload);
      if (!decoded.ok()) Fail(decoded.status().WithContext(Name()), CallPhase::kAnswered);
    }
    Release();
  }

  // Drops one outstanding reply (or the sender's hold); after the last one
  // the attempt is decided: OK when every copy stored the update.
  void Release() {
    if (--remaining > 0) return;
    if (failure.ok()) {
      IoResult r;
      r.size = args.data.size();
      r.epoch = epoch;
      return Complete(r);
    }
    Status final = failure;
    if (!give_up_now) {
      auto d = policy.Decide(failure, failure_phase, idempotency(), Name());
      LogRecovery(failure, failure_phase, d);
      if (d.recovery != Recovery::kGiveUp) {
        PrepareRecovery(d.recovery, *cont);
        if (d.recovery == Recovery::kRefreshMap) {
          // The map the failed attempt used, not the pool's current one: a
          // newer map the watch installed while the attempt was in flight
          // must count as a change, or the resend would never be sent.
          refresh_from = placed_with != nullptr ? placed_with : cont->pool().CurrentMap();
          failure_on_refresh = failure;
        }
        io->Schedule(d.pause, [self = shared_from_this()] { self->Attempt(); });
        return;
      }
      final = d.final;
    }
    IoResult r;
    r.status = final;
    Complete(r);
  }

  Status failure_on_refresh;
  bool give_up_now = false;
};

}  // namespace

std::vector<obj::ReplicaPeer> LeaderPeers(const std::vector<Route>& routes) {
  std::vector<obj::ReplicaPeer> peers;
  for (size_t i = 1; i < routes.size(); ++i) peers.push_back({routes[i].engine_index(), routes[i].address()});
  return peers;
}

Status ReplicatedPunchOnce(ContainerCore& cont, const ObjectId& oid, PunchScope scope, std::string_view dkey,
                           std::string_view akey, uint8_t flags, Epoch epoch, CallPhase& phase) {
  ROS2_ASSIGN_OR_RETURN(auto io, cont.pool().client().ThisThreadIo());
  const std::string what = "punch " + DescribeIo(oid, dkey, akey);
  ROS2_ASSIGN_OR_RETURN(auto routes, cont.WriteRoutes(oid, dkey));
  obj::PunchRequest req;
  req.header = cont.Header(routes.front());
  req.header.epoch = epoch;
  req.header.flags = flags;
  req.scope = scope;
  req.oid = oid;
  req.dkey = dkey;
  req.akey = akey;
  obj::LeaderRequest lead;
  lead.op = obj::Opcode::kPunch;
  lead.body = obj::Encode(req);
  lead.peers = LeaderPeers(routes);
  std::vector<std::vector<uint8_t>> payloads{obj::Encode(lead)};
  routes.resize(1);
  auto replies = CallShards(*io, cont, what, std::move(routes), obj::Opcode::kLeader, payloads, &phase);
  if (!replies.front().ok()) return replies.front().status();
  return obj::DecodePunchReply(*replies.front()).status().WithContext(what);
}

Epoch ReplicaEpoch() {
  return ReplicaClock().Now();
}

uint64_t ReplicaChecksumFailovers() {
  return checksum_failovers.load(std::memory_order_relaxed);
}
void CountReplicaChecksumFailover() {
  checksum_failovers.fetch_add(1, std::memory_order_relaxed);
}

Status SubmitReplicatedUpdate(const std::shared_ptr<ContainerCore>& cont, const ObjectId& oid, ThreadIo& io,
                              EventQueue::Impl* eq, const UpdateArgs& args, uint8_t flags, uint64_t user_data,
                              IoCallback callback) {
  auto op = std::make_shared<ReplicatedUpdate>();
  op->cont = cont;
  op->io = &io;
  op->eq = eq;
  op->user_data = user_data;
  op->callback = std::move(callback);
  op->oid = oid;
  op->args = args;
  op->flags = flags;
  op->epoch = ReplicaEpoch();
  op->csum = ChecksumsForUpdate(cont->checksum_type(), cont->pool().client().options().checksum_chunk_size, args.data);
  op->policy = FailurePolicy(cont->pool().client().reconnect_timeout());
  op->Count();
  // From inside a completion (which may not connect or recover the map), or
  // with a stale map, the first attempt is a timer of this thread.
  if (io.in_completion() || cont->pool().map_stale()) {
    io.Schedule(std::chrono::milliseconds(0), [op] { op->Attempt(); });
  } else {
    op->Attempt();
  }
  return Status::Ok();
}

}  // namespace ros2::client
