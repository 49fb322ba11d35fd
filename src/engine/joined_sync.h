// JoinedSync: the background thread of an engine that joined another engine's
// management endpoint (Engine::JoinManagement). The management endpoint learns
// of closed sessions and destroyed pools/containers first; every
// `interval` this thread
//   1. fetches the endpoint's revocations into the engine's capability verifier
//      (ManagementClient::SyncRevocations), so a session disconnected there is
//      refused here too, and
//   2. reconciles container shards: it lists the shard directories under
//      <data_dir>/targets/<i>/<pool>/<container> and the shards opened since
//      start (ram-class shards have no directory), THEN lists the endpoint's pools
//      and their containers, and reports every local pool or container missing
//      from those lists as destroyed (the engine then tombstones it and deletes
//      its shards). Listing the local directories first makes a fresh container
//      safe: a directory seen before the listing belongs to a container that
//      existed before it, so only a destroyed one can be missing from it
//      (UUIDs are never reused).
// Failures (endpoint unreachable) are logged and retried next round; nothing is
// deleted on a failed listing.
//
// Owned by the Engine; Start/Stop from the engine's main thread. The callbacks
// run on the sync thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/uuid.h"
#include "control/capability.h"
#include "control/management_client.h"

namespace ros2::engine {

struct JoinedSyncOptions {
  std::string data_dir;
  std::chrono::milliseconds interval{2000};
  control::CapabilityVerifier* verifier = nullptr;
  // Shards opened since start (ram-class shards have no directory to list).
  std::function<std::vector<std::pair<Uuid, Uuid>>()> opened_shards;
  std::function<void(const Uuid& pool)> on_pool_destroyed;
  std::function<void(const Uuid& pool, const Uuid& container)> on_container_destroyed;
};

class JoinedSync {
 public:
  JoinedSync(std::unique_ptr<control::ManagementClient> client, JoinedSyncOptions options);
  ~JoinedSync();  // stops the thread
  JoinedSync(const JoinedSync&) = delete;
  JoinedSync& operator=(const JoinedSync&) = delete;

  void Start();
  void Stop();
  // One round, on the calling thread (the thread runs this every interval).
  Status RunOnce();

 private:
  void Loop();

  std::unique_ptr<control::ManagementClient> client_;
  JoinedSyncOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace ros2::engine
