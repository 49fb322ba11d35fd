// Hybrid logical clock: the source of epochs that stamp every update.
//
// An epoch is 64 bits: the upper 48 bits are wall-clock milliseconds since the Unix epoch, the
// lower 16 bits a logical counter that orders events within one millisecond (and
// carries causality when a remote epoch runs ahead of the local clock). Epochs
// from one HybridClock are strictly increasing; Update() with a remote epoch
// makes every later Now() larger than it, as in Kulkarni et al.'s HLC.
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

// Milliseconds of wall-clock time encoded in an epoch.
inline uint64_t EpochMillis(Epoch e) { return e >> kHlcLogicalBits; }
inline Epoch MakeEpoch(uint64_t millis, uint64_t logical) { return (millis << kHlcLogicalBits) | logical; }

class HybridClock {
 public:
  // `physical_ms` returns wall-clock milliseconds; tests inject a fake one.
  explicit HybridClock(std::function<uint64_t()> physical_ms = nullptr);

  // A new epoch, larger than every epoch this clock returned or was updated with.
  Epoch Now();
  // Merges an epoch seen from a peer; later Now() results exceed it.
  void Update(Epoch remote);
  // The largest epoch issued or seen so far (without advancing).
  Epoch Last() const { return last_.load(std::memory_order_acquire); }

  static uint64_t WallMillis();

 private:
  std::function<uint64_t()> physical_ms_;
  std::atomic<Epoch> last_{0};
};

}  // namespace ros2
