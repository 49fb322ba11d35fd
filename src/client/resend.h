// Where the failure policy (client/failure_policy.h) is applied: what a
// recovery renews before the next attempt (PrepareRecovery), whether a map
// refresh changed anything (MapChanged), and the loop of the blocking calls
// (WithRetry). The asynchronous I/O (IoOp, TailQuery) applies the same
// decisions with a timer of the thread's queue instead of a sleep
// (ThreadIo::Schedule), so a Submit* call never waits.
//
// Thread safety: everything here runs on the thread that owns the ThreadIo.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "client/client_internal.h"
#include "client/failure_policy.h"

namespace ros2::client {

// Renews what `recovery` calls for, so that the next attempt's routing picks
// it up: the container capability (kRetryHere), the pool's map (kRefreshMap),
// the pool's session and map (kReconnect; a dead endpoint was dropped when
// its failure was seen, ShardTarget::NoteFailure). Never blocks.
void PrepareRecovery(Recovery recovery, ContainerCore& cont);

// Whether `after` places differently from `before`: a newer version or other
// target addresses.
bool MapChanged(const MapSnapshot& before, const MapSnapshot& after);

// Logs a resend decision (debug level).
void LogRecovery(const Status& failure, CallPhase phase, const FailurePolicy::Decision& decision);

inline const Status& StatusOf(const Status& s) {
  return s;
}
template <typename T>
Status StatusOf(const Result<T>& r) {
  return r.status();
}

// Runs a blocking operation made of synchronous calls, again after the
// failures the failure policy recovers from. `attempt(phase)` sets `phase` to
// how far its calls got (CallShards does); it starts as kConnecting.
// `what` names the operation for the closed-window error.
template <typename Attempt>
auto WithRetry(ContainerCore& cont, Idempotency idempotency, const std::string& what, Attempt attempt)
    -> decltype(attempt(std::declval<CallPhase&>())) {
  using R = decltype(attempt(std::declval<CallPhase&>()));
  auto io = cont.pool().client().ThisThreadIo();
  if (!io.ok()) return R(io.status());
  PoolCore& pool = cont.pool();
  FailurePolicy policy(pool.client().reconnect_timeout());
  for (;;) {
    const auto placed_with = pool.CurrentMap();
    CallPhase phase = CallPhase::kConnecting;
    R r = attempt(phase);
    const Status st = StatusOf(r);
    if (st.ok() || (*io)->in_completion()) return r;
    auto d = policy.Decide(st, phase, idempotency, what);
    LogRecovery(st, phase, d);
    if (d.recovery == Recovery::kGiveUp) return d.final == st ? std::move(r) : R(d.final);
    PrepareRecovery(d.recovery, cont);
    if (d.pause.count() > 0) std::this_thread::sleep_for(d.pause);
    if (d.recovery == Recovery::kRefreshMap) {
      auto refreshed = pool.Map();  // a failure here is the next attempt's to meet
      if (refreshed.ok() && !MapChanged(*placed_with, **refreshed)) return r;
    }
  }
}

}  // namespace ros2::client
