// The state behind a public EventQueue handle (include/ros2/client.h): the
// thread's I/O state the queue progresses (direct mode) or its share of the
// agent session (offload mode), the completed events not yet polled, and the
// count of operations in flight. libros2's operations (IoOp, TailQuery, the
// DFS's offloaded I/O) complete through it.
// Thread safety: bound to the thread that created the queue.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <utility>

#include "client/client_internal.h"
#include "ros2/client.h"

namespace ros2::client {

struct OffloadQueue;  // client/offload/agent_queue.h

class EventQueue::Impl {
 public:
  explicit Impl(std::shared_ptr<ThreadIo> io) : io_(std::move(io)) {}
  // Waits for the operations in flight (they reference the queue).
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  size_t Poll(std::span<Event> out);
  Result<size_t> Wait(std::span<Event> out, size_t min_events, std::chrono::milliseconds timeout);
  size_t WaitAny(std::chrono::microseconds timeout);

  // One operation finished: its callback runs now, or its event is queued.
  void Complete(uint64_t user_data, IoCallback& callback, const IoResult& result);
  size_t Drain(std::span<Event> out);
  // Offload mode: an operation that already ran; it completes (its callback
  // runs, or its event is queued) in the next Poll/Wait/WaitAny.
  void Defer(IoCallback callback, const IoResult& result);
  size_t RunDeferred();
  // Offload mode: reaps the agent's completions (waiting up to `wait` for
  // one when none is ready) and completes this queue's; returns how many.
  size_t ProgressOffload(std::chrono::microseconds wait);

  std::shared_ptr<ThreadIo> io_;           // null in offload mode
  std::shared_ptr<OffloadQueue> offload_;  // offload mode
  std::deque<std::pair<IoCallback, IoResult>> deferred_;
  std::deque<Event> ready_;
  size_t in_flight_ = 0;
  uint64_t completions_ = 0;  // operations completed (event or callback), ever
};

// A new queue handle over `impl`.
inline std::unique_ptr<EventQueue> MakeEventQueue(std::unique_ptr<EventQueue::Impl> impl) {
  return std::make_unique<EventQueue>(std::move(impl));
}

}  // namespace ros2::client
