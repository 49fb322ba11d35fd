// EventQueue: completion of asynchronous I/O for one thread.
#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>

#include "client/event_queue_impl.h"
#include "client/offload/agent_queue.h"
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

EventQueue::Impl::~Impl() {
  if (!io_) {
    // Offload mode: the agent completes every entry or the session fails
    // them all; bounded in case the agent hangs (then what is left is never
    // run: its callbacks may reference what the caller is destroying).
    const auto end = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (offload_ && in_flight_ > deferred_.size() && std::chrono::steady_clock::now() < end) {
      ProgressOffload(std::chrono::milliseconds(10));
    }
    RunDeferred();
    return;
  }
  if (in_flight_ == 0) return;
  // Operations reference this queue until their completion runs; the transport
  // fails each at its deadline, so this loop ends.
  while (in_flight_ > 0) {
    const auto slice = std::chrono::ceil<std::chrono::milliseconds>(io_->UntilNextTimer(std::chrono::seconds(5)));
    (void)io_->worker().RunUntil([this] { return in_flight_ == 0 || io_->TimerDue(); }, slice);
    io_->RunDueTimers();
    if (in_flight_ > 0)
      ROS2_LOG_WARN("libros2: event queue destroyed with {} operations in flight; waiting", in_flight_);
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

void EventQueue::Impl::Defer(IoCallback callback, const IoResult& result) {
  ++in_flight_;
  deferred_.emplace_back(std::move(callback), result);
}

size_t EventQueue::Impl::RunDeferred() {
  size_t ran = 0;
  while (!deferred_.empty()) {
    auto [callback, result] = std::move(deferred_.front());
    deferred_.pop_front();
    Complete(0, callback, result);
    ++ran;
  }
  return ran;
}

size_t EventQueue::Impl::Drain(std::span<Event> out) {
  size_t n = std::min(out.size(), ready_.size());
  for (size_t i = 0; i < n; ++i) {
    out[i] = std::move(ready_.front());
    ready_.pop_front();
  }
  return n;
}

size_t EventQueue::Impl::Poll(std::span<Event> out) {
  if (!io_) {  // offload mode
    ProgressOffload(std::chrono::milliseconds(0));
    RunDeferred();
    return Drain(out);
  }
  // Progress until the worker is idle (bounded: a burst of replies is reaped in one call).
  for (int pass = 0; pass < 64 && io_->worker().Progress() > 0; ++pass) {
  }
  io_->RunDueTimers();  // resends the failure policy scheduled
  return Drain(out);
}

Result<size_t> EventQueue::Impl::Wait(std::span<Event> out, size_t min_events, std::chrono::milliseconds timeout) {
  if (!io_) {
    RunDeferred();
    const size_t reachable = std::min(min_events, std::min(out.size(), ready_.size() + in_flight_));
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (ready_.size() < reachable && in_flight_ > 0) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= end) break;
      ProgressOffload(std::min<std::chrono::microseconds>(
          std::chrono::duration_cast<std::chrono::microseconds>(end - now), std::chrono::milliseconds(10)));
      RunDeferred();
    }
    if (ready_.size() < reachable && in_flight_ > 0) {
      return Status::TimedOut(fmt::format("event queue: {} of {} events completed within {} ms ({} still in flight)",
                                          ready_.size(), reachable, timeout.count(), in_flight_));
    }
    return Drain(out);
  }
  size_t reachable = std::min(min_events, std::min(out.size(), ready_.size() + in_flight_));
  if (ready_.size() < reachable) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    Status st;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(end - std::chrono::steady_clock::now());
      const auto slice = std::chrono::ceil<std::chrono::milliseconds>(
          io_->UntilNextTimer(std::max(left, std::chrono::microseconds(0))));
      st = io_->worker().RunUntil(
          [this, reachable] { return ready_.size() >= reachable || in_flight_ == 0 || io_->TimerDue(); }, slice);
      io_->RunDueTimers();
      if (ready_.size() >= reachable || in_flight_ == 0) {
        st = Status::Ok();
        break;
      }
      if (std::chrono::steady_clock::now() >= end) {
        if (st.ok()) st = Status::TimedOut("event queue wait");
        break;
      }
      st = Status::Ok();
    }
    if (!st.ok() && ready_.size() < reachable) {
      // Nothing is drained: the events that did complete stay for the next Poll.
      return Status::TimedOut(fmt::format("event queue: {} of {} events completed within {} ms ({} still in flight)",
                                          ready_.size(), reachable, timeout.count(), in_flight_));
    }
  }
  return Poll(out);
}

size_t EventQueue::Impl::WaitAny(std::chrono::microseconds timeout) {
  if (!io_) {
    const uint64_t before = completions_;
    const auto end = std::chrono::steady_clock::now() + timeout;
    RunDeferred();
    while (completions_ == before && in_flight_ > 0) {
      // To the microsecond: a wait rounded down to whole milliseconds would
      // poll without sleeping through the last one.
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      ProgressOffload(std::min<std::chrono::microseconds>(left, std::chrono::milliseconds(10)));
      RunDeferred();
    }
    return static_cast<size_t>(completions_ - before);
  }
  const uint64_t before = completions_;
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (completions_ == before && in_flight_ > 0) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= end) break;
    io_->worker().Wait(io_->UntilNextTimer(std::chrono::duration_cast<std::chrono::microseconds>(end - now)));
    io_->RunDueTimers();
  }
  return static_cast<size_t>(completions_ - before);
}

}  // namespace ros2::client
