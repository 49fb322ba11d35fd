// Applying the failure policy: renewals before an attempt, and the timers of
// a thread's queue that carry resends (resend.h, client_internal.h).
#include "client/resend.h"

#include <algorithm>

#include "common/log.h"

namespace ros2::client {

void PrepareRecovery(Recovery recovery, ContainerCore& cont) {
  switch (recovery) {
    case Recovery::kGiveUp: return;
    case Recovery::kRetryHere: cont.MarkCapabilityStale(); return;
    case Recovery::kRefreshMap:
    case Recovery::kReconnect: cont.pool().MarkMapStale(); return;
  }
}

bool MapChanged(const MapSnapshot& before, const MapSnapshot& after) {
  return before.map.version != after.map.version || before.addresses != after.addresses;
}

void LogRecovery(const Status& failure, CallPhase phase, const FailurePolicy::Decision& decision) {
  ROS2_LOG_DEBUG("libros2: {} ({}): {}{}", failure.ToString(), PhaseName(phase), RecoveryName(decision.recovery),
                 decision.recovery == Recovery::kGiveUp ? "" : fmt::format(" in {} ms", decision.pause.count()));
}

// --- the timers of a thread's queue ---

namespace {

struct LaterFirst {
  template <typename Timer>
  bool operator()(const Timer& a, const Timer& b) const {
    return a.due != b.due ? a.due > b.due : a.seq > b.seq;
  }
};

}  // namespace

void ThreadIo::Schedule(std::chrono::milliseconds delay, std::function<void()> resend) {
  timers_.push_back(Timer{std::chrono::steady_clock::now() + delay, timer_seq_++, std::move(resend)});
  std::push_heap(timers_.begin(), timers_.end(), LaterFirst{});
}

bool ThreadIo::TimerDue() const {
  if (has_abandoned_.load(std::memory_order_acquire)) return true;
  return !timers_.empty() && timers_.front().due <= std::chrono::steady_clock::now();
}

std::chrono::microseconds ThreadIo::UntilNextTimer(std::chrono::microseconds cap) const {
  if (has_abandoned_.load(std::memory_order_acquire)) return std::chrono::microseconds(0);
  if (timers_.empty()) return cap;
  const auto left = timers_.front().due - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return std::chrono::microseconds(0);
  // Rounded up: a wait that ends just before the timer would spin.
  return std::min(cap, std::chrono::ceil<std::chrono::microseconds>(left));
}

void ThreadIo::AbandonPeers(const std::vector<std::string>& addresses) {
  {
    std::lock_guard<std::mutex> lock(abandon_mu_);
    abandoned_.insert(abandoned_.end(), addresses.begin(), addresses.end());
  }
  has_abandoned_.store(true, std::memory_order_release);
  worker_->Signal();  // wakes a wait of the owner thread
}

void ThreadIo::CloseAbandoned() {
  std::vector<std::string> addresses;
  {
    std::lock_guard<std::mutex> lock(abandon_mu_);
    addresses.swap(abandoned_);
    has_abandoned_.store(false, std::memory_order_release);
  }
  for (const std::string& address : addresses) {
    auto it = endpoints_.find(address);
    if (it == endpoints_.end()) continue;
    std::shared_ptr<transport::Endpoint> ep = std::move(it->second.ep);
    EraseEndpoint(it);
    if (ep->outstanding() > 0) {
      ROS2_LOG_INFO("libros2: {} call(s) to {} abandoned: the pool map marks its target DOWN", ep->outstanding(),
                    address);
    }
    ep->Close();  // fails the calls in flight with kCancelled; their resends go by the new map
  }
}

void ThreadIo::RunDueTimers() {
  if (in_completion()) return;
  if (has_abandoned_.load(std::memory_order_acquire)) CloseAbandoned();
  // Only the timers due on entry: a resend that schedules itself again (with
  // a pause of 0) runs at the next wait, not in this loop.
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::function<void()>> due;
  while (!timers_.empty() && timers_.front().due <= now) {
    std::pop_heap(timers_.begin(), timers_.end(), LaterFirst{});
    due.push_back(std::move(timers_.back().run));
    timers_.pop_back();
  }
  for (auto& run : due) run();
}

}  // namespace ros2::client
