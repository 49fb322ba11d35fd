#include "common/hlc.h"

#include <algorithm>
#include <chrono>

namespace ros2 {

uint64_t HybridClock::WallMillis() {
  using namespace std::chrono;
  return static_cast<uint64_t>(duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
}

HybridClock::HybridClock(std::function<uint64_t()> physical_ms)
    : physical_ms_(physical_ms ? std::move(physical_ms) : std::function<uint64_t()>(&HybridClock::WallMillis)) {}

Epoch HybridClock::Now() {
  Epoch physical = MakeEpoch(physical_ms_(), 0);
  Epoch last = last_.load(std::memory_order_acquire);
  for (;;) {
    // Physical time ahead of everything seen: take it. Otherwise advance the
    // logical counter (which carries into the millisecond field when it wraps,
    // keeping epochs strictly increasing), saturating at kMaxClockEpoch.
    Epoch next = physical > last ? physical : last < kMaxClockEpoch ? last + 1 : kMaxClockEpoch;
    if (last_.compare_exchange_weak(last, next, std::memory_order_acq_rel)) return next;
  }
}

void HybridClock::Update(Epoch remote) {
  remote = std::min(remote, kMaxClockEpoch);
  Epoch last = last_.load(std::memory_order_acquire);
  while (remote > last && !last_.compare_exchange_weak(last, remote, std::memory_order_acq_rel)) {
  }
}

bool HybridClock::WithinDrift(Epoch remote, uint64_t max_drift_ms) const {
  const uint64_t physical = physical_ms_();
  const uint64_t limit = physical > ~uint64_t{0} - max_drift_ms ? ~uint64_t{0} : physical + max_drift_ms;
  return EpochMillis(remote) <= limit;
}

}  // namespace ros2
