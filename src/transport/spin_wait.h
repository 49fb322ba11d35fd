// Internal: the spin a worker runs before it sleeps, shared by the UCX worker
// (worker.cc) and the libfabric one (ofi/worker.cc); docs/transport.md,
// "Progress policy".
#pragma once

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "transport/transport.h"
#include "transport/worker_impl.h"

namespace ros2::transport {

// What a worker's Wait does before it sleeps. It polls once (`poll()`: the
// events one progress pass handled) before reading the clock: a busy peer's
// next message is often there already, and a clock read costs about a tenth
// of a shm round trip; then it reads the clock on every 64th Wait only
// (`housekeeping(now)`), so housekeeping still runs under load. Then it
// polls from `start` (now) until an event comes, `max_wait` passes or the
// spin budget is spent. A thread pinned to one CPU (checked every 4096th
// Wait) busy-polls for the first `pinned_busy_poll` and reads the clock on
// every 16th pass only: its peer, pinned elsewhere, cannot be queued behind
// it, and a poll costs about what a clock read does. After that every pass
// reads the clock and yields: on a loaded 2-core machine the peer we wait
// for may be queued on our core (4 KiB round trips over shm went from 223 us
// to 5 us; docs/transport.md).
// `events`: the events handled (> 0), 0 once `max_wait` passed, or -1: the
// spin is spent, sleep now (until `start` + `max_wait` at the latest).
struct SpinResult {
  int events = 0;
  Clock::time_point start;
};
template <class Poll, class Housekeeping>
SpinResult PollThenSpin(Poll&& poll, Housekeeping&& housekeeping, uint32_t& waits, bool& pinned,
                        std::chrono::microseconds max_wait, const TransportOptions& options) {
  const uint32_t wait_number = waits++;
  if (wait_number % 4096 == 0) pinned = CurrentThreadPinnedToOneCpu();
  if (const int events = poll(); events > 0) {
    if (wait_number % 64 == 63) housekeeping(Clock::now());
    return {events, {}};
  }
  const Clock::time_point start = Clock::now();
  housekeeping(start);
  const Clock::time_point spin_end = start + options.spin_budget;
  const Clock::time_point busy_end = pinned ? start + std::min(options.pinned_busy_poll, options.spin_budget) : start;
  bool busy_phase = pinned;
  for (uint32_t pass = 1;; ++pass) {
    if (const int events = poll(); events > 0) return {events, start};
    if (busy_phase && pass % 16 != 0) continue;
    const Clock::time_point now = Clock::now();
    housekeeping(now);
    if (now >= start + max_wait) return {0, start};
    if (now >= spin_end) return {-1, start};
    if (now < busy_end) continue;
    busy_phase = false;
    sched_yield();
  }
}

}  // namespace ros2::transport
