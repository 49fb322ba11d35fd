// JoinedSync: the background threads of an engine that joined another engine's
// management endpoint (Engine::JoinManagement). The management endpoint learns
// of closed sessions, revoked tenants and destroyed pools/containers first.
//   1. Every `revocation_interval` the revocation thread fetches the endpoint's
//      revocations into the engine's capability verifier
//      (ManagementClient::SyncRevocations) and, on success, marks the verifier
//      fresh as of the moment the request was sent. The verifier fails closed
//      (CapabilityVerifier::RequireFreshness, set up by the engine) when no
//      sync succeeded for its grace period, so a revocation made at the
//      endpoint takes effect here within that grace period whether the
//      endpoint is reachable or not.
//   2. Every `interval` the reconcile thread reconciles container shards: it lists the shard directories under
//      <data_dir>/targets/<i>/<pool>/<container> and the shards opened since
//      start (ram-class shards have no directory), THEN lists the endpoint's pools
//      and their containers, and reports every local pool or container missing
//      from those lists as destroyed (the engine then tombstones it and deletes
//      its shards). Listing the local directories first makes a fresh container
//      safe: a directory seen before the listing belongs to a container that
//      existed before it, so only a destroyed one can be missing from it
//      (UUIDs are never reused).
//   3. Every revocation sync also brings the endpoint's pool map version
//      (on_map_version): how a joined engine learns new maps.
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
  std::chrono::milliseconds interval{2000};            // shard reconciliation
  std::chrono::milliseconds revocation_interval{200};  // revocation sync
  control::CapabilityVerifier* verifier = nullptr;
  // Shards opened since start (ram-class shards have no directory to list).
  std::function<std::vector<std::pair<Uuid, Uuid>>()> opened_shards;
  std::function<void(const Uuid& pool)> on_pool_destroyed;
  std::function<void(const Uuid& pool, const Uuid& container)> on_container_destroyed;
  // After every revocation sync: the endpoint's pool map version.
  std::function<void(uint64_t version)> on_map_version;
};

class JoinedSync {
 public:
  // `revocations` is used by the revocation thread only (its own deadline).
  JoinedSync(std::unique_ptr<control::ManagementClient> client, std::unique_ptr<control::ManagementClient> revocations,
             JoinedSyncOptions options);
  ~JoinedSync();  // stops the thread
  JoinedSync(const JoinedSync&) = delete;
  JoinedSync& operator=(const JoinedSync&) = delete;

  void Start();
  void Stop();
  // One reconciliation round, on the calling thread.
  Status RunOnce();
  // One revocation sync, on the calling thread.
  Status SyncRevocationsOnce();

 private:
  void Loop(std::chrono::milliseconds interval, Status (JoinedSync::*round)(), const char* what);

  std::unique_ptr<control::ManagementClient> client_;
  std::unique_ptr<control::ManagementClient> revocations_;
  JoinedSyncOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
  std::thread revocation_thread_;
};

}  // namespace ros2::engine
