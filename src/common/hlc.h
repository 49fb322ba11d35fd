// Hybrid logical clock: the source of epochs that stamp every update.
//
// An epoch is 64 bits: the upper 48 bits are wall-clock milliseconds since the Unix epoch, the
// lower 16 bits a logical counter that orders events within one millisecond (and
// carries causality when a remote epoch runs ahead of the local clock). Epochs
// from one HybridClock are strictly increasing; Update() with a remote epoch
// makes every later Now() larger than it, as in Kulkarni et al.'s HLC.
//
// The clock saturates instead of wrapping: it never issues or accepts an epoch
// above kMaxClockEpoch (kEpochMax itself means "the latest state" to readers),
// and once there every Now() returns kMaxClockEpoch. A clock that wrapped to
// small epochs would hide every later write behind the earlier ones. Callers
// that merge epochs from untrusted peers bound them first (WithinDrift): the
// engine refuses a client epoch more than its configured drift ahead of wall
// time (docs/engine.md, "Epochs").
//
// Thread safety: Now() and Update() may be called from any thread concurrently.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

namespace ros2 {

using Epoch = uint64_t;
inline constexpr Epoch kEpochZero = 0;
inline constexpr Epoch kEpochMax = ~Epoch{0};
inline constexpr int kHlcLogicalBits = 16;
// The largest epoch a HybridClock issues (see the file comment).
inline constexpr Epoch kMaxClockEpoch = kEpochMax - 1;

// Milliseconds of wall-clock time encoded in an epoch.
inline uint64_t EpochMillis(Epoch e) { return e >> kHlcLogicalBits; }
inline Epoch MakeEpoch(uint64_t millis, uint64_t logical) { return (millis << kHlcLogicalBits) | logical; }

class HybridClock {
 public:
  // `physical_ms` returns wall-clock milliseconds; tests inject a fake one.
  explicit HybridClock(std::function<uint64_t()> physical_ms = nullptr);

  // A new epoch, larger than every epoch this clock returned or was updated
  // with (equal to it only once the clock has saturated at kMaxClockEpoch).
  Epoch Now();
  // Merges an epoch seen from a peer or read from storage; later Now() results
  // exceed it. An epoch above kMaxClockEpoch counts as kMaxClockEpoch.
  void Update(Epoch remote);
  // Whether `remote`'s wall-clock part is at most `max_drift_ms` milliseconds
  // ahead of this clock's physical time (the bound for untrusted epochs).
  bool WithinDrift(Epoch remote, uint64_t max_drift_ms) const;
  // The largest epoch issued or seen so far (without advancing).
  Epoch Last() const { return last_.load(std::memory_order_acquire); }

  static uint64_t WallMillis();

 private:
  std::function<uint64_t()> physical_ms_;
  std::atomic<Epoch> last_{0};
};

}  // namespace ros2
