// The client's one failure policy: what to do when a call to the storage
// fails, decided from the failure's Status code, how far the call had got
// (its CallPhase) and whether running it twice is harmless (Idempotency).
//
//   kGiveUp      — report the failure to the caller.
//   kRetryHere   — send the same request to the same target again, with a
//                  renewed container capability: the engine refused the
//                  capability (Unauthenticated) before running anything.
//   kRefreshMap  — the pool map the request was placed with may be out of
//                  date (the target's address no longer answers; an engine
//                  answered StaleMap: its map version is newer):
//                  fetch the map, place the request again
//                  and resend it, but only when the new map differs from the
//                  one that failed (resending to the same place changes
//                  nothing).
//   kReconnect   — the target or the control plane went away (the engine
//                  died, is restarting or shutting down): drop the endpoint,
//                  recover the pool's session and map, and resend; a request
//                  whose outcome is unknown (a write that was sent) is never
//                  resent.
//
// Classify is a pure function (the table is unit tested for every status in
// every phase). FailurePolicy adds what one operation remembers across its
// attempts: the window that bounds the waiting (ClientOptions::
// reconnect_timeout from the first failure), the capability renewals (two at
// most: a refusal that persists is real) and the pause before each attempt.
// The appliers (client/resend.h) are the only code that acts on a decision.
// Thread safety: Classify is; a FailurePolicy belongs to one operation.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace ros2::client {

// How far a call had got when it failed.
enum class CallPhase : uint8_t {
  kConnecting,  // reaching the target or the control plane: the session, the
                // map, the container capability, the endpoint. Nothing sent.
  kBeforeSend,  // the request was built but not handed to the transport.
  kSent,        // handed to the transport, no answer: the transport failed it
                // (the peer died, the connection closed, the deadline passed).
                // A write may or may not have been applied.
  kAnswered,    // the engine answered with this status.
};
inline constexpr CallPhase kAllPhases[] = {CallPhase::kConnecting, CallPhase::kBeforeSend, CallPhase::kSent,
                                           CallPhase::kAnswered};

// Whether running the request twice is harmless: reads and queries are,
// updates and punches are not (a second conditional update, or a punch after
// a newer update, changes the outcome).
enum class Idempotency : uint8_t { kIdempotent, kNotIdempotent };

enum class Recovery : uint8_t { kGiveUp, kRetryHere, kRefreshMap, kReconnect };

std::string_view PhaseName(CallPhase phase);
std::string_view RecoveryName(Recovery recovery);

// The decision for a failure with `code` in `phase` (kOk: kGiveUp, nothing to
// recover). docs/client.md, "Failure policy", has the table.
Recovery Classify(Status::Code code, CallPhase phase, Idempotency idempotency);

// The phase of a failed reply: kSent when the transport failed the call
// (Disconnected, TimedOut, Cancelled: no answer arrived), kAnswered otherwise.
CallPhase PhaseOfReply(const Status& status);

// What one operation does after each failure: Classify, bounded by its window
// and renewal count, with the pause before the next attempt.
class FailurePolicy {
 public:
  using Clock = std::chrono::steady_clock;
  struct Decision {
    Recovery recovery = Recovery::kGiveUp;
    std::chrono::milliseconds pause{0};  // before the next attempt
    Status final;  // kGiveUp: what to report (the failure, or the closed window)
  };

  // `window`: ClientOptions::reconnect_timeout (0: every failure is final).
  explicit FailurePolicy(std::chrono::milliseconds window) : window_(window) {}

  // Decides after `failure` (not OK) seen at `now`. The window starts at the
  // first failure that calls for a recovery; once it has passed, a failure
  // that would be recovered is reported as Disconnected naming `what`, the
  // window (reconnect_timeout), the attempts and the failure. The pause
  // before attempt n is 0 for the first, then 10 ms doubling to 200 ms.
  Decision Decide(const Status& failure, CallPhase phase, Idempotency idempotency, std::string_view what,
                  Clock::time_point now = Clock::now());

  // The first failure that was recovered from (OK until then).
  const Status& first_failure() const { return first_failure_; }
  // Recoveries decided so far.
  int recoveries() const { return recoveries_; }

  static std::chrono::milliseconds PauseBefore(int attempt);

 private:
  std::chrono::milliseconds window_;
  Clock::time_point deadline_{};
  Status first_failure_;
  int recoveries_ = 0;
  int renewals_ = 0;
};

}  // namespace ros2::client
