// Where a read's time goes inside the engine: per-stage time accumulators of
// one thread, a debug counter set (docs/engine.md, "Where a small read waits").
//
// An engine target thread that times its reads points `io_stages::t_current`
// at its own StageSet (engine config `metrics.stages`); everything that runs on
// that thread (the target's handlers, VOS, the extent store's io_uring) adds
// the time each read spent in a stage to it. With the pointer null (the
// default, and on every other thread) nothing reads the clock. The scrape adds
// the targets' sets up (ros2_engine_io_stage_*); nothing is logged per I/O.
//
// The stages of one read, in order:
//   queue   the request arrived in a progress pass and waits for its handler
//           (behind the requests handled before it in that pass);
//   lookup  decode, admission, budget and the VOS metadata lookup, until the
//           read is queued on the extent store (ram: until its copy is reaped);
//   submit  queued on the io_uring until the io_uring_enter that hands it to
//           the kernel (nvme);
//   device  in the kernel until the target reaps the completion (nvme);
//   reply   reaped until the reply is handed to the transport (checksums,
//           the bulk push);
//   total   arrival until the reply.
// Beside them the extent stores integrate the number of I/Os the kernel holds
// over time (`device_inflight_ns`): its rate is the device's mean queue depth.
//
// Thread-safety: Add()/Integrate() from the owning thread only (a relaxed load
// and store each); Read from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>

namespace ros2::io_stages {

enum Stage : uint8_t { kQueue = 0, kLookup, kSubmit, kDevice, kReply, kTotal };
inline constexpr size_t kStages = 6;
inline constexpr std::array<std::string_view, kStages> kStageNames{"queue",  "lookup", "submit",
                                                                   "device", "reply",  "total"};

using Clock = std::chrono::steady_clock;

inline uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

struct StageSet {
  std::array<std::atomic<uint64_t>, kStages> nanos{};
  std::array<std::atomic<uint64_t>, kStages> count{};
  std::atomic<uint64_t> device_inflight_ns{0};  // sum over time of (I/Os in the kernel) x ns

  // The thread's per-read context, not read by other threads.
  uint64_t pass_start = 0;     // when the current progress pass began
  uint64_t read_arrived = 0;   // the read being handled: its pass's start (0: none)
  uint64_t read_handled = 0;   // when its handler began (0: lookup already counted)
  uint64_t last_reaped = 0;    // when the completion whose callback runs now was reaped

  void Add(Stage s, uint64_t from, uint64_t to) {
    if (to < from) return;
    Bump(nanos[s], to - from);
    Bump(count[s], 1);
  }
  void Integrate(uint64_t depth_ns) { Bump(device_inflight_ns, depth_ns); }
  static void Bump(std::atomic<uint64_t>& v, uint64_t n) {
    v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
};

// The set of the calling thread, or null when it does not time its reads.
inline thread_local StageSet* t_current = nullptr;

}  // namespace ros2::io_stages
