// MapVersions: the newest pool map version an engine knows, which every
// object request is checked against (docs/cluster.md, "Map versions").
//
// Pool maps are views of the system map and share its version, so one number
// serves every pool. It only goes up: the control plane's publishers raise it
// (Advance) — the embedded SystemMap's listener, fed by its own writes and,
// in an etcd cluster, by the etcd watch of the map; a joined engine's sync
// with its management endpoint. A request made with an older map is refused
// with StaleMap; one made with a newer map is served (the client's map, fresher
// than this engine's, placed it here) and wakes the refresher, which asks the
// control plane for its version in the background. The number a client sends
// is never adopted itself: a client cannot push other clients' requests into
// refusals by claiming a version that does not exist.
//
// Thread-safe: current() is one atomic load (the data path's check); the
// refresher runs on its own thread, started by the engine and stopped by
// Stop() or the destructor.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "common/status.h"

namespace ros2::engine {

class MapVersions {
 public:
  MapVersions() = default;
  ~MapVersions();
  MapVersions(const MapVersions&) = delete;
  MapVersions& operator=(const MapVersions&) = delete;

  uint64_t current() const { return current_.load(std::memory_order_acquire); }
  // Raises the known version to `version` (a lower one changes nothing).
  void Advance(uint64_t version);
  // A request was made with `version`, newer than current(): wakes the
  // refresher (when there is one). Never blocks.
  void NoteNewer(uint64_t version);
  // Requests made with a newer map so far (what woke the refresher).
  uint64_t newer_requests() const { return newer_requests_.load(std::memory_order_relaxed); }

  // Starts the refresher: after NoteNewer, `fetch` (blocking: a control-plane
  // read) gives the control plane's current version, at most once every
  // kRefreshSpacing. Call once.
  void StartRefresher(std::function<Result<uint64_t>()> fetch);
  void Stop();

  static constexpr std::chrono::milliseconds kRefreshSpacing{50};

 private:
  void RefreshLoop();

  std::atomic<uint64_t> current_{0};
  std::atomic<uint64_t> newer_requests_{0};
  std::atomic<bool> wanted_{false};  // a refresh was asked for and has not run yet
  std::function<Result<uint64_t>()> fetch_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace ros2::engine
