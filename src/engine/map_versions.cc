#include "engine/map_versions.h"

#include <pthread.h>

#include "common/log.h"

namespace ros2::engine {

MapVersions::~MapVersions() {
  Stop();
}

void MapVersions::Advance(uint64_t version) {
  uint64_t seen = current_.load(std::memory_order_relaxed);
  while (version > seen && !current_.compare_exchange_weak(seen, version, std::memory_order_acq_rel)) {
  }
}

void MapVersions::NoteNewer(uint64_t /*version*/) {
  newer_requests_.fetch_add(1, std::memory_order_relaxed);
  if (!fetch_ || wanted_.exchange(true, std::memory_order_acq_rel)) return;  // one wake-up per refresh
  cv_.notify_one();
}

void MapVersions::StartRefresher(std::function<Result<uint64_t>()> fetch) {
  fetch_ = std::move(fetch);
  thread_ = std::thread([this] {
    ::pthread_setname_np(::pthread_self(), "ros2-mapver");
    RefreshLoop();
  });
}

void MapVersions::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MapVersions::RefreshLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    // A timed wait: NoteNewer notifies without the mutex, so a wake-up may
    // slip in between the check and the wait.
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_ || wanted_.load(std::memory_order_acquire); });
    if (stop_) return;
    if (!wanted_.load(std::memory_order_acquire)) continue;
    lock.unlock();
    auto version = fetch_();
    if (version.ok()) {
      Advance(*version);
    } else {
      ROS2_LOG_DEBUG("engine: refreshing the pool map version: {}", version.status().ToString());
    }
    std::this_thread::sleep_for(kRefreshSpacing);
    wanted_.store(false, std::memory_order_release);
    lock.lock();
  }
}

}  // namespace ros2::engine
