// Internal: the spin a worker runs before it sleeps, shared by the UCX worker
// (worker.cc) and the libfabric one (ofi/worker.cc); docs/transport.md,
// "Progress policy".
#pragma once

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "transport/worker_impl.h"

namespace ros2::transport {

// Polls (`poll()`: the events one progress pass handled) from `start` until
// an event comes, `max_wait` passes or the spin budget is spent. A thread
// pinned to one CPU busy-polls for the first `pinned_busy_poll` and reads the
// clock (running `housekeeping(now)` and checking the windows) on every 16th
// pass only: its peer, pinned elsewhere, cannot be queued behind it, and a
// poll costs about what a clock read does. After that every pass reads the
// clock and yields: on a loaded 2-core machine the peer we wait for may be
// queued on our core (4 KiB round trips over shm went from 223 us to 5 us;
// docs/transport.md).
// Returns the events (> 0), 0 once `max_wait` passed, or -1: spin spent,
// sleep now.
template <class Poll, class Housekeeping>
int SpinBeforeSleep(Poll&& poll, Housekeeping&& housekeeping, Clock::time_point start,
                    std::chrono::microseconds max_wait, std::chrono::microseconds spin_budget,
                    std::chrono::microseconds pinned_busy_poll, bool pinned) {
  const Clock::time_point spin_end = start + spin_budget;
  const Clock::time_point busy_end = pinned ? start + std::min(pinned_busy_poll, spin_budget) : start;
  bool busy_phase = pinned;
  for (uint32_t pass = 1;; ++pass) {
    if (const int events = poll(); events > 0) return events;
    if (busy_phase && pass % 16 != 0) continue;
    const Clock::time_point now = Clock::now();
    housekeeping(now);
    if (now >= start + max_wait) return 0;
    if (now >= spin_end) return -1;
    if (now < busy_end) continue;
    busy_phase = false;
    sched_yield();
  }
}

}  // namespace ros2::transport
