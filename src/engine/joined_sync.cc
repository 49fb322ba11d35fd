#include "engine/joined_sync.h"

#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/log.h"

namespace ros2::engine {
namespace {

// Every (pool, container) with a shard directory on some target.
std::map<Uuid, std::set<Uuid>> LocalShards(const std::string& data_dir) {
  std::map<Uuid, std::set<Uuid>> shards;
  std::error_code ec;
  for (const auto& target : std::filesystem::directory_iterator(data_dir + "/targets", ec)) {
    std::error_code ec2;
    for (const auto& pool_dir : std::filesystem::directory_iterator(target.path(), ec2)) {
      auto pool = Uuid::Parse(pool_dir.path().filename().string());
      if (!pool.ok()) continue;
      auto& containers = shards[*pool];
      std::error_code ec3;
      for (const auto& cont_dir : std::filesystem::directory_iterator(pool_dir.path(), ec3)) {
        auto cont = Uuid::Parse(cont_dir.path().filename().string());
        if (cont.ok()) containers.insert(*cont);
      }
    }
  }
  return shards;
}

}  // namespace

JoinedSync::JoinedSync(std::unique_ptr<control::ManagementClient> client,
                       std::unique_ptr<control::ManagementClient> revocations, JoinedSyncOptions options)
    : client_(std::move(client)), revocations_(std::move(revocations)), options_(std::move(options)) {}

JoinedSync::~JoinedSync() {
  Stop();
}

void JoinedSync::Start() {
  thread_ = std::thread([this] { Loop(options_.interval, &JoinedSync::RunOnce, "shard reconciliation"); });
  if (options_.verifier != nullptr) {
    revocation_thread_ = std::thread(
        [this] { Loop(options_.revocation_interval, &JoinedSync::SyncRevocationsOnce, "revocation sync"); });
  }
}

void JoinedSync::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (revocation_thread_.joinable()) revocation_thread_.join();
}

void JoinedSync::Loop(std::chrono::milliseconds interval, Status (JoinedSync::*round)(), const char* what) {
  std::unique_lock lock(mu_);
  bool failing = false;
  while (!cv_.wait_for(lock, interval, [this] { return stop_; })) {
    lock.unlock();
    Status st = (this->*round)();
    // Log the first failure of a run and the recovery, not every round.
    if (!st.ok() && !failing) ROS2_LOG_WARN("engine: {} with the management endpoint: {}", what, st.ToString());
    if (st.ok() && failing) ROS2_LOG_INFO("engine: {} with the management endpoint works again", what);
    failing = !st.ok();
    lock.lock();
  }
}

Status JoinedSync::SyncRevocationsOnce() {
  if (options_.verifier == nullptr || !revocations_) return Status::Ok();
  const auto sent = std::chrono::steady_clock::now();
  uint64_t map_version = 0;
  auto synced = revocations_->SyncRevocations(options_.verifier, &map_version);
  if (!synced.ok()) return synced.status().WithContext("revocations");
  options_.verifier->MarkFresh(sent);
  if (options_.on_map_version) options_.on_map_version(map_version);
  return Status::Ok();
}

Status JoinedSync::RunOnce() {
  // Local shards first, then the endpoint's lists (see the header).
  auto local = LocalShards(options_.data_dir);
  if (options_.opened_shards) {
    for (const auto& [pool, container] : options_.opened_shards()) local[pool].insert(container);
  }
  if (local.empty()) return Status::Ok();
  ROS2_ASSIGN_OR_RETURN(auto pools, client_->ListPools());
  std::set<Uuid> live_pools;
  for (const auto& p : pools) {
    auto id = Uuid::Parse(p.uuid());
    if (!id.ok()) return id.status().WithContext("Management.ListPools: pool uuid");
    live_pools.insert(*id);
  }
  for (const auto& [pool, containers] : local) {
    if (!live_pools.contains(pool)) {
      ROS2_LOG_INFO("engine: pool {} was destroyed at the management endpoint", pool.ToString());
      if (options_.on_pool_destroyed) options_.on_pool_destroyed(pool);
      continue;
    }
    if (containers.empty()) continue;
    auto listed = client_->ListContainers(pool.ToString());
    if (!listed.ok()) {
      if (listed.status().IsNotFound()) continue;  // destroyed since ListPools: next round
      return listed.status().WithContext(fmt::format("containers of pool {}", pool.ToString()));
    }
    std::set<Uuid> live;
    for (const auto& c : *listed) {
      auto id = Uuid::Parse(c.uuid());
      if (!id.ok()) return id.status().WithContext("Management.ListContainers: container uuid");
      live.insert(*id);
    }
    for (const auto& cont : containers) {
      if (live.contains(cont)) continue;
      ROS2_LOG_INFO("engine: container {} of pool {} was destroyed at the management endpoint", cont.ToString(),
                    pool.ToString());
      if (options_.on_container_destroyed) options_.on_container_destroyed(pool, cont);
    }
  }
  return Status::Ok();
}

}  // namespace ros2::engine
