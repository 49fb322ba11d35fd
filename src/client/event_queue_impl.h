// The state behind a public EventQueue handle (include/ros2/client.h): the
// completed events not yet polled, the count of operations in flight, and
// the queue's one backend, chosen when the queue is made, which makes
// progress and waits:
//   DirectQueue (event_queue.cc) — the thread's I/O state (its transport
//     worker and its resend timers);
//   AgentQueue (offload/agent_queue.h) — offload mode: this queue's share
//     of the agent session.
// libros2's operations (IoOp, TailQuery, the DFS's offloaded I/O) complete
// through it.
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

class AgentQueue;  // client/offload/agent_queue.h

// How a queue makes progress and waits. Each method has the contract of the
// public EventQueue method of the same name, over the queue state `q`.
class QueueBackend {
 public:
  virtual ~QueueBackend() = default;
  virtual size_t Poll(EventQueue::Impl& q, std::span<Event> out) = 0;
  virtual Result<size_t> Wait(EventQueue::Impl& q, std::span<Event> out, size_t min_events,
                              std::chrono::milliseconds timeout) = 0;
  virtual size_t WaitAny(EventQueue::Impl& q, std::chrono::microseconds timeout) = 0;
  // Runs until the operations in flight completed (they reference the
  // queue), when the queue is destroyed.
  virtual void Quiesce(EventQueue::Impl& q) = 0;
  // The thread I/O state the client's object operations are sent through;
  // null when the queue is not a direct one.
  virtual ThreadIo* thread_io() { return nullptr; }
  // The agent side of an offload-mode queue; null when it is not one.
  virtual AgentQueue* agent() { return nullptr; }
};

class EventQueue::Impl {
 public:
  explicit Impl(std::unique_ptr<QueueBackend> backend) : backend_(std::move(backend)) {}
  ~Impl() { backend_->Quiesce(*this); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  size_t Poll(std::span<Event> out) { return backend_->Poll(*this, out); }
  Result<size_t> Wait(std::span<Event> out, size_t min_events, std::chrono::milliseconds timeout) {
    return backend_->Wait(*this, out, min_events, timeout);
  }
  size_t WaitAny(std::chrono::microseconds timeout) { return backend_->WaitAny(*this, timeout); }
  QueueBackend& backend() { return *backend_; }

  // One operation finished: its callback runs now, or its event is queued.
  void Complete(uint64_t user_data, IoCallback& callback, const IoResult& result);
  // Moves up to out.size() queued events into `out`.
  size_t Drain(std::span<Event> out);
  // The message of a Wait that saw fewer than `reachable` events in time.
  Status WaitTimedOut(size_t reachable, std::chrono::milliseconds timeout) const;

  std::deque<Event> ready_;
  size_t in_flight_ = 0;
  uint64_t completions_ = 0;  // operations completed (event or callback), ever

 private:
  std::unique_ptr<QueueBackend> backend_;
};

// A direct-mode queue: progress is the thread's transport worker, and the
// resends the failure policy scheduled run as its timers.
class DirectQueue final : public QueueBackend {
 public:
  explicit DirectQueue(std::shared_ptr<ThreadIo> io) : io_(std::move(io)) {}
  size_t Poll(EventQueue::Impl& q, std::span<Event> out) override;
  Result<size_t> Wait(EventQueue::Impl& q, std::span<Event> out, size_t min_events,
                      std::chrono::milliseconds timeout) override;
  size_t WaitAny(EventQueue::Impl& q, std::chrono::microseconds timeout) override;
  void Quiesce(EventQueue::Impl& q) override;
  ThreadIo* thread_io() override { return io_.get(); }

 private:
  std::shared_ptr<ThreadIo> io_;
};

// A new queue handle over `backend`.
inline std::unique_ptr<EventQueue> MakeEventQueue(std::unique_ptr<QueueBackend> backend) {
  return std::make_unique<EventQueue>(std::make_unique<EventQueue::Impl>(std::move(backend)));
}

// The calling thread's direct-mode I/O state behind `eq`; InvalidArgument
// naming `what` when eq is an offload-mode queue.
Result<ThreadIo*> DirectIoOf(EventQueue& eq, std::string_view what);

}  // namespace ros2::client
