// The protocol steps every object operation of the client shares, in one
// place: a request to one shard's target (SendToShard), a request to many
// shards at once (FanOut, and its blocking form CallShards), and the wait of a
// blocking call (WaitFor).
//
// SendToShard connects the calling thread's endpoint to the target
// (ConnectTarget), builds the transport::CallOptions (ClientOptions::io_timeout
// and the container's current capability; the caller adds only its bulk
// buffers) and sends. A request whose send or reply fails with Disconnected
// drops that endpoint (the next request reconnects) and marks the pool's map
// stale (the next routing recovers it): ShardTarget::NoteFailure, which
// nothing else in the client repeats. Errors name the operation ("<what>:
// connect to target N", "<what> on target N").
//
// Thread safety: everything here runs on the thread that owns the ThreadIo.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "client/client_internal.h"

namespace ros2::client {

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

// Where one request goes: the sending thread's I/O state, the container and
// the route. The owner of a request keeps it (and the container) alive until
// the reply.
struct ShardTarget {
  ThreadIo* io = nullptr;
  ContainerCore* cont = nullptr;
  Route route;

  // What the client learns from a failed request: a Disconnected target
  // loses its endpoint and makes the pool's map stale. Other failures change
  // nothing here.
  void NoteFailure(const Status& status) const {
    if (status.code() != Status::Code::kDisconnected) return;
    io->DropEndpoint(route.address());
    cont->pool().MarkMapStale();
  }
};

// Sends an object request to `owner->shard`. `options` carries the caller's
// bulk buffers; its timeout and capability are set here. `phase` is set to how
// far it got (kConnecting, kBeforeSend; kSent on OK). On OK the request
// was handed to the transport and
// `owner->OnReply(reply)` runs exactly once, inside a later progress of the
// worker, after NoteFailure saw the reply; the callback holds `owner` (one
// shared_ptr, which std::function stores without an allocation). On error
// nothing was sent and nothing will run. Connecting may progress the worker:
// REQUIRES the endpoint to be connected already when called from inside a
// completion (ConnectTarget).
// Owner: has `ShardTarget shard` and `void OnReply(const transport::ReplyView&)`.
template <typename Owner, typename What>
Status SendToShard(const std::shared_ptr<Owner>& owner, obj::Opcode opcode, std::span<const uint8_t> payload,
                   transport::CallOptions& options, const What& what, CallPhase& phase) {
  const ShardTarget& shard = owner->shard;
  phase = CallPhase::kConnecting;
  auto ep = ConnectTarget(*shard.io, *shard.cont, shard.route);
  if (!ep.ok()) {
    return ep.status().WithContext(fmt::format("{}: connect to target {}", NameOf(what), shard.route.target));
  }
  ROS2_ASSIGN_OR_RETURN(auto grant, shard.cont->Capability());
  // The endpoint proves the capability's session first (once per session):
  // the engine accepts a capability only on a connection that did.
  if (Status st = (*ep)->AuthenticateSession(grant->session); !st.ok()) {
    shard.NoteFailure(st);
    return st.WithContext(fmt::format("{}: authenticate on target {}", NameOf(what), shard.route.target));
  }
  phase = CallPhase::kBeforeSend;
  options.timeout = shard.cont->pool().client().options().io_timeout;
  options.capability = AsCapability(grant->capability);
  Status st = (*ep)->Call(static_cast<uint16_t>(opcode), payload, options, [owner](const transport::ReplyView& reply) {
    owner->shard.NoteFailure(reply.status);
    owner->OnReply(reply);
  });
  if (!st.ok()) {
    shard.NoteFailure(st);
    return st.WithContext(fmt::format("{} on target {}", NameOf(what), shard.route.target));
  }
  phase = CallPhase::kSent;
  return Status::Ok();
}

// Progresses `io`'s worker until `done` is set (by a completion), running the
// thread's due timers (resends, ThreadIo::RunDueTimers) between passes. Every
// call completes (the transport fails it at its deadline; a resend at the end
// of its window), so this returns.
void WaitFor(ThreadIo& io, const bool& done);

// One request to each of several shards at once: an operation on every shard
// of an object (or every target of a pool) in one round trip. Make one, Send,
// then Release: `on_shard(i, reply)` runs for every shard as its reply
// arrives — the payload, or the failure ("<what> on target N"), also for a
// request that could not be sent (then inside Send) — and `on_done` runs once
// after the last reply and the Release. Replies run inside the worker's
// progress, in a CompletionScope. The functions are dropped after `on_done`.
class FanOut : public std::enable_shared_from_this<FanOut> {
 public:
  using ShardFn = std::function<void(size_t shard, const Result<std::span<const uint8_t>>& reply)>;

  FanOut(ThreadIo& io, ContainerCore& cont, std::string what, ShardFn on_shard, std::function<void()> on_done)
      : io_(io), cont_(cont), what_(std::move(what)), on_shard_(std::move(on_shard)), on_done_(std::move(on_done)) {}
  FanOut(const FanOut&) = delete;
  FanOut& operator=(const FanOut&) = delete;

  // Sets `on_done` (before Send; for an owner that needs the fan-out's address in it).
  void SetOnDone(std::function<void()> on_done) { on_done_ = std::move(on_done); }
  // Sends payloads[i] to routes[i] (call once). Returns the first send
  // failure (every failed shard was also given to `on_shard`).
  Status Send(std::vector<Route> routes, obj::Opcode opcode, std::span<const std::vector<uint8_t>> payloads);
  // Drops the sender's hold: `on_done` runs now when every reply is in,
  // otherwise after the last one.
  void Release();

  const std::string& what() const { return what_; }
  const std::vector<Route>& routes() const { return routes_; }
  // How far the furthest request got: kSent once one was sent, kAnswered
  // once an engine answered one (the failure policy's phase of the whole).
  CallPhase reached() const { return reached_; }

 private:
  // One shard's request: what SendToShard needs, and where its reply goes.
  struct Slot {
    ShardTarget shard;
    FanOut* fan = nullptr;
    size_t index = 0;
    void OnReply(const transport::ReplyView& reply) { fan->OnReply(index, reply); }
  };
  void OnReply(size_t index, const transport::ReplyView& reply);

  ThreadIo& io_;
  ContainerCore& cont_;
  std::string what_;
  ShardFn on_shard_;
  std::function<void()> on_done_;
  std::vector<Route> routes_;
  std::vector<Slot> slots_;  // never resized after Send began (replies point into it)
  size_t remaining_ = 1;     // replies outstanding, plus the sender's hold
  CallPhase reached_ = CallPhase::kConnecting;
  void Reach(CallPhase phase) { reached_ = std::max(reached_, phase); }
};

// Blocking fan-out: sends payloads[i] to routes[i] at once and waits for
// every reply. results[i] is shard i's reply payload or its failure; `phase`
// (when given) is raised to FanOut::reached().
std::vector<Result<std::vector<uint8_t>>> CallShards(ThreadIo& io, ContainerCore& cont, std::string what,
                                                     std::vector<Route> routes, obj::Opcode opcode,
                                                     std::span<const std::vector<uint8_t>> payloads,
                                                     CallPhase* phase = nullptr);
// The encoded obj::QueryRequest of `kind` for each of `routes` (one per
// shard of `oid`), in route order: what a query of every shard sends.
std::vector<std::vector<uint8_t>> QueryPayloads(ContainerCore& cont, const std::vector<Route>& routes,
                                                const ObjectId& oid, obj::QueryKind kind, std::string_view akey);

// One request, blocking: CallShards with one route.
Result<std::vector<uint8_t>> CallShard(ThreadIo& io, ContainerCore& cont, std::string what, const Route& route,
                                       obj::Opcode opcode, std::vector<uint8_t> payload, CallPhase* phase = nullptr);

}  // namespace ros2::client
