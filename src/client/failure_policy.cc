// The failure policy's table and the per-operation window (failure_policy.h).
#include "client/failure_policy.h"

#include <algorithm>

#include <fmt/format.h>

namespace ros2::client {

std::string_view PhaseName(CallPhase phase) {
  switch (phase) {
    case CallPhase::kConnecting: return "connecting";
    case CallPhase::kBeforeSend: return "before send";
    case CallPhase::kSent: return "sent, not answered";
    case CallPhase::kAnswered: return "answered";
  }
  return "unknown phase";
}

std::string_view RecoveryName(Recovery recovery) {
  switch (recovery) {
    case Recovery::kGiveUp: return "give up";
    case Recovery::kRetryHere: return "retry here";
    case Recovery::kRefreshMap: return "refresh the map and resend";
    case Recovery::kReconnect: return "reconnect";
  }
  return "unknown recovery";
}

Recovery Classify(Status::Code code, CallPhase phase, Idempotency idempotency) {
  using C = Status::Code;
  const bool nothing_sent = phase == CallPhase::kConnecting || phase == CallPhase::kBeforeSend;
  switch (code) {
    case C::kStaleMap:
      // An engine checks the map version before it runs anything, and our
      // own placement finds it before anything is sent: safe in every phase.
      return Recovery::kRefreshMap;
    case C::kUnauthenticated:
      // Sent or answered: an engine refused the capability before running
      // the request. Connecting: the control plane refused the tenant.
      return nothing_sent ? Recovery::kGiveUp : Recovery::kRetryHere;
    case C::kDisconnected:
    case C::kCancelled:
      // The peer went away (or is shutting down). A write in flight has an
      // unknown outcome and is never resent.
      if (nothing_sent || idempotency == Idempotency::kIdempotent) return Recovery::kReconnect;
      return Recovery::kGiveUp;
    case C::kTimedOut:
      // Reaching the target or the control plane may succeed later; a request
      // that timed out after io_timeout is final.
      return phase == CallPhase::kConnecting ? Recovery::kReconnect : Recovery::kGiveUp;
    case C::kBusy:
      // Reaching the target or the control plane may succeed later. An
      // engine answers Busy before it runs anything: fenced (its etcd lease
      // unrenewed, until it renews or the map marks it DOWN), still starting,
      // or over its request budget. A request whose resend is harmless (a
      // read; a replicated update, which carries its transaction id) waits
      // that out, the map refreshed before each attempt; a plain write is
      // the caller's to pace.
      if (phase == CallPhase::kConnecting) return Recovery::kReconnect;
      return phase == CallPhase::kAnswered && idempotency == Idempotency::kIdempotent ? Recovery::kReconnect
                                                                                       : Recovery::kGiveUp;
    case C::kNotSupported:
    case C::kProtocol:
      // Connecting to a target's address failed outright (no transport of
      // ours reaches it; a peer that no longer listens is Disconnected): the
      // map may name a new one.
      return phase == CallPhase::kConnecting ? Recovery::kRefreshMap : Recovery::kGiveUp;
    case C::kOk:
    case C::kNotFound:
    case C::kCorruption:
    case C::kInvalidArgument:
    case C::kIOError:
    case C::kNoSpace:
    case C::kAlreadyExists:
    case C::kPermissionDenied:
    case C::kNotEmpty:
    case C::kInternal:
    case C::kNotDirectory:
    case C::kIsDirectory:
    case C::kNameTooLong:
    case C::kLoop: return Recovery::kGiveUp;
  }
  return Recovery::kGiveUp;
}

CallPhase PhaseOfReply(const Status& status) {
  switch (status.code()) {
    case Status::Code::kDisconnected:
    case Status::Code::kTimedOut:
    case Status::Code::kCancelled: return CallPhase::kSent;
    default: return CallPhase::kAnswered;
  }
}

std::chrono::milliseconds FailurePolicy::PauseBefore(int attempt) {
  if (attempt <= 0) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds(10 << std::min(attempt - 1, 4));
}

FailurePolicy::Decision FailurePolicy::Decide(const Status& failure, CallPhase phase, Idempotency idempotency,
                                              std::string_view what, Clock::time_point now) {
  Decision d;
  d.final = failure;
  d.recovery = Classify(failure.code(), phase, idempotency);
  if (d.recovery == Recovery::kGiveUp) return d;
  if (d.recovery == Recovery::kRetryHere && ++renewals_ > 2) {  // a refusal that persists is real
    d.recovery = Recovery::kGiveUp;
    return d;
  }
  if (first_failure_.ok()) {
    first_failure_ = failure;
    deadline_ = now + window_;
  }
  if (window_.count() == 0) {  // no waiting: the failure as it is
    d.recovery = Recovery::kGiveUp;
    return d;
  }
  if (now >= deadline_) {
    d.recovery = Recovery::kGiveUp;
    d.final = Status::Disconnected(
        fmt::format("{}: not reachable again within {} ms (reconnect_timeout; {} attempts; first failure: {}): {}",
                    what, window_.count(), recoveries_ + 1, first_failure_.message(), failure.ToString()));
    return d;
  }
  d.pause = std::min<std::chrono::milliseconds>(
      PauseBefore(recoveries_), std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - now));
  ++recoveries_;
  return d;
}

}  // namespace ros2::client
