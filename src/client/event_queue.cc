// EventQueue: completion of asynchronous I/O for one thread.
#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>

#include "client/event_queue_impl.h"
#include "common/log.h"

namespace ros2::client {

EventQueue::EventQueue(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EventQueue::~EventQueue() = default;
size_t EventQueue::Poll(std::span<Event> out) {
  return impl_->Poll(out);
}
Result<size_t> EventQueue::Wait(std::span<Event> out, size_t min_events, std::chrono::milliseconds timeout) {
  return impl_->Wait(out, min_events, timeout);
}
size_t EventQueue::WaitAny(std::chrono::microseconds timeout) {
  return impl_->WaitAny(timeout);
}
size_t EventQueue::in_flight() const {
  return impl_->in_flight_;
}
size_t EventQueue::ready() const {
  return impl_->ready_.size();
}

void DirectQueue::Quiesce(EventQueue::Impl& q) {
  if (q.in_flight_ == 0) return;
  // Operations reference this queue until their completion runs; the transport
  // fails each at its deadline, so this loop ends.
  while (q.in_flight_ > 0) {
    const auto slice = std::chrono::ceil<std::chrono::milliseconds>(io_->UntilNextTimer(std::chrono::seconds(5)));
    (void)io_->worker().RunUntil([this, &q] { return q.in_flight_ == 0 || io_->TimerDue(); }, slice);
    io_->RunDueTimers();
    if (q.in_flight_ > 0)
      ROS2_LOG_WARN("libros2: event queue destroyed with {} operations in flight; waiting", q.in_flight_);
  }
}

void EventQueue::Impl::Complete(uint64_t user_data, IoCallback& callback, const IoResult& result) {
  --in_flight_;
  ++completions_;
  if (callback) {
    callback(result);
  } else {
    ready_.push_back(Event{user_data, result});
  }
}

size_t EventQueue::Impl::Drain(std::span<Event> out) {
  size_t n = std::min(out.size(), ready_.size());
  for (size_t i = 0; i < n; ++i) {
    out[i] = std::move(ready_.front());
    ready_.pop_front();
  }
  return n;
}

Status EventQueue::Impl::WaitTimedOut(size_t reachable, std::chrono::milliseconds timeout) const {
  return Status::TimedOut(fmt::format("event queue: {} of {} events completed within {} ms ({} still in flight)",
                                      ready_.size(), reachable, timeout.count(), in_flight_));
}

Result<ThreadIo*> DirectIoOf(EventQueue& eq, std::string_view what) {
  ThreadIo* io = eq.impl().backend().thread_io();
  if (io == nullptr) {
    return Status::InvalidArgument(
        fmt::format("{}: the event queue is an offload-mode one (the object API needs a direct-mode queue)", what));
  }
  return io;
}

size_t DirectQueue::Poll(EventQueue::Impl& q, std::span<Event> out) {
  // Progress until the worker is idle (bounded: a burst of replies is reaped in one call).
  for (int pass = 0; pass < 64 && io_->worker().Progress() > 0; ++pass) {
  }
  io_->RunDueTimers();  // resends the failure policy scheduled
  return q.Drain(out);
}

Result<size_t> DirectQueue::Wait(EventQueue::Impl& q, std::span<Event> out, size_t min_events,
                                 std::chrono::milliseconds timeout) {
  size_t reachable = std::min(min_events, std::min(out.size(), q.ready_.size() + q.in_flight_));
  if (q.ready_.size() < reachable) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    Status st;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(end - std::chrono::steady_clock::now());
      const auto slice = std::chrono::ceil<std::chrono::milliseconds>(
          io_->UntilNextTimer(std::max(left, std::chrono::microseconds(0))));
      st = io_->worker().RunUntil(
          [this, &q, reachable] { return q.ready_.size() >= reachable || q.in_flight_ == 0 || io_->TimerDue(); },
          slice);
      io_->RunDueTimers();
      if (q.ready_.size() >= reachable || q.in_flight_ == 0) {
        st = Status::Ok();
        break;
      }
      if (std::chrono::steady_clock::now() >= end) {
        if (st.ok()) st = Status::TimedOut("event queue wait");
        break;
      }
      st = Status::Ok();
    }
    if (!st.ok() && q.ready_.size() < reachable) {
      // Nothing is drained: the events that did complete stay for the next Poll.
      return q.WaitTimedOut(reachable, timeout);
    }
  }
  return Poll(q, out);
}

size_t DirectQueue::WaitAny(EventQueue::Impl& q, std::chrono::microseconds timeout) {
  const uint64_t before = q.completions_;
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (q.completions_ == before && q.in_flight_ > 0) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= end) break;
    io_->worker().Wait(io_->UntilNextTimer(std::chrono::duration_cast<std::chrono::microseconds>(end - now)));
    io_->RunDueTimers();
  }
  return static_cast<size_t>(q.completions_ - before);
}

}  // namespace ros2::client
