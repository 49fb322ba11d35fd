// The client's failure policy on its own: the decision for every status in
// every phase of a call, for idempotent and non-idempotent calls, and the
// per-operation window, renewals and pauses.
#include "client/failure_policy.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace ros2::client {
namespace {

using C = Status::Code;
using std::chrono::milliseconds;

// One row per status code: the decision in each phase (connecting, before
// send, sent, answered), as letters: G give up, H retry here, M refresh the
// map and resend, R reconnect; first for a non-idempotent call (a write),
// then for an idempotent one (a read).
const std::map<C, std::pair<std::string, std::string>>& Table() {
  static const std::map<C, std::pair<std::string, std::string>> table = {
      {C::kOk, {"GGGG", "GGGG"}},
      {C::kNotFound, {"GGGG", "GGGG"}},
      {C::kCorruption, {"GGGG", "GGGG"}},
      {C::kInvalidArgument, {"GGGG", "GGGG"}},
      {C::kIOError, {"GGGG", "GGGG"}},
      {C::kNoSpace, {"GGGG", "GGGG"}},
      {C::kAlreadyExists, {"GGGG", "GGGG"}},
      {C::kPermissionDenied, {"GGGG", "GGGG"}},
      // The engine refused the capability before running anything: renew it
      // and send again; the control plane refusing the tenant is final.
      {C::kUnauthenticated, {"GGHH", "GGHH"}},
      // Reaching a target may work later; a sent request that timed out is final.
      {C::kTimedOut, {"RGGG", "RGGG"}},
      // A write that was sent has an unknown outcome: never resent.
      {C::kDisconnected, {"RRGG", "RRRR"}},
      // Answered Busy (fenced, starting, over budget: nothing ran): a read or
      // a replicated update waits it out; a plain write is the caller's.
      {C::kBusy, {"RGGG", "RGGR"}},
      // Connecting to an address no transport of ours reaches: the map may
      // name a new one.
      {C::kNotSupported, {"MGGG", "MGGG"}},
      {C::kCancelled, {"RRGG", "RRRR"}},
      {C::kProtocol, {"MGGG", "MGGG"}},
      {C::kNotEmpty, {"GGGG", "GGGG"}},
      {C::kInternal, {"GGGG", "GGGG"}},
      {C::kNotDirectory, {"GGGG", "GGGG"}},
      {C::kIsDirectory, {"GGGG", "GGGG"}},
      {C::kNameTooLong, {"GGGG", "GGGG"}},
      {C::kLoop, {"GGGG", "GGGG"}},
      // Refused before anything ran, in every phase: refresh and resend.
      {C::kStaleMap, {"MMMM", "MMMM"}},
  };
  return table;
}

char Letter(Recovery r) {
  switch (r) {
    case Recovery::kGiveUp: return 'G';
    case Recovery::kRetryHere: return 'H';
    case Recovery::kRefreshMap: return 'M';
    case Recovery::kReconnect: return 'R';
  }
  return '?';
}

TEST(FailurePolicyTest, EveryStatusInEveryPhaseHasItsDecision) {
  for (int c = 0; c <= static_cast<int>(Status::kLastCode); ++c) {
    const C code = static_cast<C>(c);
    auto row = Table().find(code);
    ASSERT_NE(row, Table().end()) << "no row for status code " << c << " (" << CodeName(code) << ")";
    std::string write, read;
    for (CallPhase phase : kAllPhases) {
      write += Letter(Classify(code, phase, Idempotency::kNotIdempotent));
      read += Letter(Classify(code, phase, Idempotency::kIdempotent));
    }
    EXPECT_EQ(write, row->second.first) << CodeName(code) << ", non-idempotent";
    EXPECT_EQ(read, row->second.second) << CodeName(code) << ", idempotent";
  }
}

TEST(FailurePolicyTest, AReplyFailedByTheTransportWasSentButNotAnswered) {
  EXPECT_EQ(PhaseOfReply(Status::Disconnected("peer died")), CallPhase::kSent);
  EXPECT_EQ(PhaseOfReply(Status::TimedOut("deadline")), CallPhase::kSent);
  EXPECT_EQ(PhaseOfReply(Status::Cancelled("worker shut down")), CallPhase::kSent);
  EXPECT_EQ(PhaseOfReply(Status::Unauthenticated("expired")), CallPhase::kAnswered);
  EXPECT_EQ(PhaseOfReply(Status::StaleMap("map v3 < v4")), CallPhase::kAnswered);
  EXPECT_EQ(PhaseOfReply(Status::NotFound("x")), CallPhase::kAnswered);
  EXPECT_EQ(RecoveryName(Recovery::kRefreshMap), "refresh the map and resend");
  EXPECT_EQ(PhaseName(CallPhase::kSent), "sent, not answered");
}

TEST(FailurePolicyTest, PausesGrowWithinTheWindowThenTheFailureIsFinal) {
  FailurePolicy policy(milliseconds(1000));
  const auto t0 = FailurePolicy::Clock::now();
  const Status gone = Status::Disconnected("transport: peer pid 1 died");
  // An answer that is never recovered does not open the window.
  auto d = policy.Decide(Status::NotFound("x"), CallPhase::kAnswered, Idempotency::kIdempotent, "fetch", t0);
  EXPECT_EQ(d.recovery, Recovery::kGiveUp);
  EXPECT_EQ(d.final, Status::NotFound("x"));
  EXPECT_TRUE(policy.first_failure().ok());

  const int expected_ms[] = {0, 10, 20, 40, 80, 160, 160};
  for (int i = 0; i < 7; ++i) {
    d = policy.Decide(gone, CallPhase::kConnecting, Idempotency::kNotIdempotent, "update", t0 + milliseconds(i));
    EXPECT_EQ(d.recovery, Recovery::kReconnect) << i;
    EXPECT_EQ(d.pause, milliseconds(expected_ms[i])) << i;
  }
  EXPECT_EQ(policy.first_failure(), gone);
  EXPECT_EQ(policy.recoveries(), 7);
  // Near the end of the window the pause ends at its edge.
  d = policy.Decide(gone, CallPhase::kConnecting, Idempotency::kIdempotent, "fetch", t0 + milliseconds(995));
  EXPECT_EQ(d.recovery, Recovery::kReconnect);
  EXPECT_EQ(d.pause, milliseconds(5));
  // Past it: Disconnected naming the operation, the window and both failures.
  const Status late = Status::Cancelled("engine target 0: shutting down");
  d = policy.Decide(late, CallPhase::kBeforeSend, Idempotency::kIdempotent, "fetch oid=1.2", t0 + milliseconds(1000));
  EXPECT_EQ(d.recovery, Recovery::kGiveUp);
  EXPECT_EQ(d.final.code(), C::kDisconnected);
  for (const char* part : {"fetch oid=1.2", "1000 ms", "reconnect_timeout", "peer pid 1 died", "shutting down"}) {
    EXPECT_NE(d.final.message().find(part), std::string::npos) << part << " in " << d.final.message();
  }
  // A write sent when the window closed is reported as it failed.
  d = policy.Decide(gone, CallPhase::kSent, Idempotency::kNotIdempotent, "update", t0 + milliseconds(2000));
  EXPECT_EQ(d.recovery, Recovery::kGiveUp);
  EXPECT_EQ(d.final, gone);
}

TEST(FailurePolicyTest, ACapabilityIsRenewedTwiceAtMost) {
  FailurePolicy policy(milliseconds(60000));
  const Status refused = Status::Unauthenticated("expired capability");
  EXPECT_EQ(policy.Decide(refused, CallPhase::kAnswered, Idempotency::kNotIdempotent, "update").recovery,
            Recovery::kRetryHere);
  EXPECT_EQ(policy.Decide(refused, CallPhase::kAnswered, Idempotency::kNotIdempotent, "update").recovery,
            Recovery::kRetryHere);
  auto third = policy.Decide(refused, CallPhase::kAnswered, Idempotency::kNotIdempotent, "update");
  EXPECT_EQ(third.recovery, Recovery::kGiveUp);  // a refusal that persists is real
  EXPECT_EQ(third.final, refused);
}

TEST(FailurePolicyTest, WithoutAWindowEveryFailureIsReportedAsItIs) {
  FailurePolicy policy(milliseconds(0));
  const Status gone = Status::Disconnected("transport: peer pid 1 died");
  auto d = policy.Decide(gone, CallPhase::kConnecting, Idempotency::kIdempotent, "fetch");
  EXPECT_EQ(d.recovery, Recovery::kGiveUp);
  EXPECT_EQ(d.final, gone);
}

}  // namespace
}  // namespace ros2::client
