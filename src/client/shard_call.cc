// Requests to shards: the fan-out and the blocking wait (shard_call.h).
#include "client/shard_call.h"

#include <utility>

namespace ros2::client {

namespace {

// How long one progress pass of a blocking wait lasts before it looks at
// queued resends again (the wait itself ends when its operation completes).
constexpr std::chrono::seconds kWaitSlice{5};

}  // namespace

void WaitFor(ThreadIo& io, const bool& done) {
  while (!done) {
    const auto slice = std::chrono::ceil<std::chrono::milliseconds>(io.UntilNextTimer(kWaitSlice));
    (void)io.worker().RunUntil([&done, &io] { return done || io.TimerDue(); }, slice);
    io.RunDueTimers();
  }
}

Status FanOut::Send(std::vector<Route> routes, obj::Opcode opcode, std::span<const std::vector<uint8_t>> payloads) {
  routes_ = std::move(routes);
  slots_.resize(routes_.size());
  for (size_t i = 0; i < routes_.size(); ++i) slots_[i] = Slot{ShardTarget{&io_, &cont_, routes_[i]}, this, i};
  remaining_ += routes_.size();
  auto self = shared_from_this();
  Status first_error;
  for (size_t i = 0; i < slots_.size(); ++i) {
    // The reply's callback holds the fan-out through its slot.
    std::shared_ptr<Slot> slot(self, &slots_[i]);
    transport::CallOptions options;
    CallPhase phase = CallPhase::kConnecting;
    Status st = SendToShard(slot, opcode, {payloads[i].data(), payloads[i].size()}, options, what_, phase);
    Reach(phase);
    if (!st.ok()) {
      if (first_error.ok()) first_error = st;
      --remaining_;
      on_shard_(i, st);
    }
  }
  return first_error;
}

void FanOut::OnReply(size_t index, const transport::ReplyView& reply) {
  CompletionScope scope(io_);  // on_done may run the caller's callback
  Reach(reply.status.ok() ? CallPhase::kAnswered : PhaseOfReply(reply.status));
  if (reply.status.ok()) {
    on_shard_(index, reply.payload);
  } else {
    on_shard_(index, reply.status.WithContext(fmt::format("{} on target {}", what_, routes_[index].target)));
  }
  Release();
}

void FanOut::Release() {
  if (--remaining_ > 0) return;
  auto done = std::move(on_done_);
  on_shard_ = nullptr;  // what the functions hold (often the owner of this fan-out) goes with them
  if (done) done();
}

std::vector<Result<std::vector<uint8_t>>> CallShards(ThreadIo& io, ContainerCore& cont, std::string what,
                                                     std::vector<Route> routes, obj::Opcode opcode,
                                                     std::span<const std::vector<uint8_t>> payloads,
                                                     CallPhase* phase) {
  std::vector<Result<std::vector<uint8_t>>> results(routes.size(), Status::Cancelled("not sent"));
  bool finished = false;
  auto fan = std::make_shared<FanOut>(
      io, cont, std::move(what),
      [&results](size_t i, const Result<std::span<const uint8_t>>& reply) {
        if (reply.ok()) {
          results[i] = std::vector<uint8_t>(reply->begin(), reply->end());
        } else {
          results[i] = reply.status();
        }
      },
      [&finished] { finished = true; });
  (void)fan->Send(std::move(routes), opcode, payloads);  // send failures are in `results`
  fan->Release();
  // The functions reference this frame: wait for every reply.
  WaitFor(io, finished);
  if (phase != nullptr) *phase = std::max(*phase, fan->reached());
  return results;
}

std::vector<std::vector<uint8_t>> QueryPayloads(ContainerCore& cont, const std::vector<Route>& routes,
                                                const ObjectId& oid, obj::QueryKind kind, std::string_view akey) {
  std::vector<std::vector<uint8_t>> payloads;
  payloads.reserve(routes.size());
  for (const Route& route : routes) {
    obj::QueryRequest req;
    req.header = cont.Header(route);
    req.kind = kind;
    req.oid = oid;
    req.akey = akey;
    payloads.push_back(obj::Encode(req));
  }
  return payloads;
}

Result<std::vector<uint8_t>> CallShard(ThreadIo& io, ContainerCore& cont, std::string what, const Route& route,
                                       obj::Opcode opcode, std::vector<uint8_t> payload, CallPhase* phase) {
  std::vector<std::vector<uint8_t>> payloads;
  payloads.push_back(std::move(payload));
  auto results = CallShards(io, cont, std::move(what), {route}, opcode, payloads, phase);
  return std::move(results.front());
}

}  // namespace ros2::client
