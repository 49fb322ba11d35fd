// PoolMapWatch: a client's watch on one pool's map (docs/cluster.md, "Map
// versions"), so a new map reaches the client without a failed request.
//
// A thread holds a Session.WatchPoolMap stream (a gRPC server stream that any
// engine serves) and hands every map it receives, converted (MakeMapSnapshot),
// to `apply`, which installs it when it is newer than the pool's (PoolCore::
// AdoptMap; requests in flight keep the snapshot they were placed with). When
// the stream ends — the serving engine died or stopped — the watch re-opens it
// on the next endpoint it knows: the client's control endpoint first, then the
// control endpoints of the live engines each update lists, after a pause of
// 100 ms doubling to 1 s (5 s after a refusal: no read right, unknown pool).
// Each new stream asks from the version the pool holds, so a change made
// while no stream was open arrives at once.
//
// Owned by the PoolCore it feeds; Stop() (or the destructor) cancels the
// stream and joins the thread, after which `apply` never runs again.
//
// fork(): gRPC's fork handlers (registered by a process that enables gRPC's
// fork support: the Python package) do nothing while any thread is inside a
// gRPC call, and a watch's thread always is. PoolMapWatchesBeforeFork, run as
// a pthread_atfork prepare handler that runs before gRPC's (registered after
// them: prepare handlers run in reverse order), cancels every watch's stream
// and joins its thread; PoolMapWatchesAfterForkParent starts them again (each
// new stream asks from the pool's version, so nothing is missed), and
// PoolMapWatchesAfterForkChild leaves them stopped in the child (the parent's
// pools are not the child's to watch; a child opens its own).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "client/client_internal.h"
#include "control/credentials.h"
#include "ros2/session.grpc.pb.h"

namespace ros2::client {

struct PoolMapWatchOptions {
  std::string pool;                      // the pool's uuid
  std::string label;                     // for logs
  control::Credentials credentials;      // the tenant's (read right on the pool)
  std::string control;                   // the client's control endpoint (ClientOptions::control)
  std::shared_ptr<grpc::Channel> first;  // its channel (shared with the client's session calls)
  // The version the pool holds now (each new stream asks from it).
  std::function<uint64_t()> known_version;
  // Installs a newer map (called on the watch's thread).
  std::function<void(std::shared_ptr<const MapSnapshot>)> apply;
};

// The watches of this process now, and the streams they opened in all (a
// watch resumed after fork() opens a new one).
struct PoolMapWatchCounts {
  size_t live = 0;
  uint64_t streams_opened = 0;
};
PoolMapWatchCounts PoolMapWatchesOfProcess();

void PoolMapWatchesBeforeFork();
void PoolMapWatchesAfterForkParent();
void PoolMapWatchesAfterForkChild();

class PoolMapWatch {
 public:
  // Starts the thread.
  explicit PoolMapWatch(PoolMapWatchOptions options);
  ~PoolMapWatch();
  PoolMapWatch(const PoolMapWatch&) = delete;
  PoolMapWatch& operator=(const PoolMapWatch&) = delete;
  void Stop();

  // Maps received and handed to `apply` so far.
  uint64_t maps_received() const { return received_.load(std::memory_order_relaxed); }
  // Streams opened so far (more than one: the watch moved to another endpoint).
  uint64_t streams_opened() const { return opened_.load(std::memory_order_relaxed); }

  // Around fork() (PoolMapWatchesBeforeFork...): Suspend cancels the stream and
  // joins the thread; Resume starts a thread again unless stopped.
  void Suspend();
  void Resume();

 private:
  void StartThread();  // with every signal blocked
  void Run();
  // One stream on endpoint `at` until it ends; its final status.
  grpc::Status StreamOnce(size_t at);
  std::shared_ptr<grpc::Channel> ChannelFor(size_t at);
  void Learn(const rpc::PoolMapUpdate& update);

  PoolMapWatchOptions options_;
  std::atomic<uint64_t> received_{0};
  std::atomic<uint64_t> opened_{0};
  std::mutex mu_;
  bool stop_ = false;                                     // GUARDED_BY(mu_)
  bool suspended_ = false;                                // GUARDED_BY(mu_)
  grpc::ClientContext* ctx_ = nullptr;                    // GUARDED_BY(mu_): the open stream's
  std::vector<std::string> endpoints_;                    // GUARDED_BY(mu_): [0] is options_.control
  std::vector<std::shared_ptr<grpc::Channel>> channels_;  // GUARDED_BY(mu_): made on first use
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace ros2::client
