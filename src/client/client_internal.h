// Internal state behind the public libros2 handles (include/ros2/client.h).
//
//   ClientCore    — options, the gRPC channel and Session client, the process's
//                   transport Context, and the per-thread I/O state (ThreadIo).
//   ThreadIo      — one thread's transport Worker and its endpoints, keyed by
//                   the target's worker address blob (made lazily).
//   PoolCore      — one pool session: capability and the current MapSnapshot.
//   ContainerCore — an open container: its properties and capability.
// The public handles hold shared_ptrs to these, so a Container keeps its pool
// session alive and a ThreadIo keeps the transport Context alive.
// Thread safety: ClientCore, PoolCore and ContainerCore are thread-safe; a
// ThreadIo is used only by the thread it was made for.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/uuid.h"
#include "control/credentials.h"
#include "control/management_client.h"
#include "control/session_client.h"
#include "object/obj_rpc.h"
#include "placement/placement.h"
#include "placement/pool_map.h"
#include "ros2/client.h"
#include "transport/transport.h"

namespace ros2::client {

// One version of a pool's map as the client places with it: the placement
// form plus, per global target index, the worker address and the engine-local
// target index the engine expects in RequestHeader::target.
struct MapSnapshot {
  PoolMap map;
  std::vector<std::string> addresses;
  std::vector<uint32_t> engine_index;
};

// Converts the control plane's map. InvalidArgument when it is empty or a
// target has no worker address.
Result<std::shared_ptr<const MapSnapshot>> MakeMapSnapshot(const rpc::PoolMap& map);

class ThreadIo {
 public:
  ThreadIo(std::shared_ptr<transport::Context> context, std::unique_ptr<transport::Worker> worker,
           std::thread::id owner)
      : context_(std::move(context)), worker_(std::move(worker)), owner_(owner) {}
  ~ThreadIo();

  transport::Worker& worker() { return *worker_; }
  transport::Context& context() { return *context_; }
  std::thread::id owner() const { return owner_; }
  // The endpoint to the worker at `address`, connecting on first use.
  Result<std::shared_ptr<transport::Endpoint>> EndpointFor(const std::string& address);
  // Forgets a failed endpoint so the next request reconnects.
  void DropEndpoint(const std::string& address);

 private:
  std::shared_ptr<transport::Context> context_;
  std::unique_ptr<transport::Worker> worker_;  // destroyed after the endpoints
  std::unordered_map<std::string, std::shared_ptr<transport::Endpoint>> endpoints_;
  std::thread::id owner_;
};

class ClientCore {
 public:
  static Result<std::shared_ptr<ClientCore>> Create(const ClientOptions& options);

  const ClientOptions& options() const { return options_; }
  const control::Credentials& credentials() const { return credentials_; }
  control::SessionClient& session() { return *session_; }
  // Management queries a tenant may make (pool space for statfs).
  control::ManagementClient& management() { return *management_; }
  transport::Context& context() { return *context_; }
  // The calling thread's I/O state, created on first use.
  Result<std::shared_ptr<ThreadIo>> ThisThreadIo();

 private:
  ClientOptions options_;
  control::Credentials credentials_;
  std::unique_ptr<control::SessionClient> session_;
  std::unique_ptr<control::ManagementClient> management_;
  std::shared_ptr<transport::Context> context_;
  std::mutex mu_;
  std::map<std::thread::id, std::shared_ptr<ThreadIo>> threads_;  // GUARDED_BY(mu_)
};

// Where one dkey of an object goes under one map version.
struct Route {
  std::shared_ptr<const MapSnapshot> snapshot;
  uint32_t target = 0;  // global target index
  const std::string& address() const { return snapshot->addresses[target]; }
  uint32_t engine_index() const { return snapshot->engine_index[target]; }
};

class PoolCore {
 public:
  PoolCore(std::shared_ptr<ClientCore> client, control::PoolConnection conn,
           std::shared_ptr<const MapSnapshot> snapshot);
  ~PoolCore();  // ends the session (best effort)

  ClientCore& client() { return *client_; }
  const control::PoolConnection& connection() const { return conn_; }
  const Uuid& uuid() const { return uuid_; }
  // The current map; refreshed first when a request saw a disconnected target.
  Result<std::shared_ptr<const MapSnapshot>> Map();
  Result<uint64_t> Refresh();
  void MarkMapStale() { map_stale_.store(true, std::memory_order_relaxed); }

 private:
  std::shared_ptr<ClientCore> client_;
  control::PoolConnection conn_;
  Uuid uuid_;
  std::atomic<bool> map_stale_{false};
  std::mutex mu_;
  std::shared_ptr<const MapSnapshot> snapshot_;  // GUARDED_BY(mu_)
};

class ContainerCore {
 public:
  ContainerCore(std::shared_ptr<PoolCore> pool, control::ContainerHandle handle, ContainerSummary summary, Uuid uuid);

  PoolCore& pool() { return *pool_; }
  const ContainerSummary& summary() const { return summary_; }
  const Uuid& uuid() const { return uuid_; }
  std::span<const uint8_t> capability() const {
    return {reinterpret_cast<const uint8_t*>(handle_.capability.data()), handle_.capability.size()};
  }
  ChecksumType checksum_type() const { return summary_.checksum ? ChecksumType::kCrc32c : ChecksumType::kNone; }
  // The target that serves `dkey` of `oid` under the current map.
  Result<Route> RouteFor(const ObjectId& oid, std::string_view dkey);
  // Every distinct target holding a shard of `oid` (all targets when oid is nil).
  Result<std::vector<Route>> ShardRoutes(const ObjectId* oid);
  obj::RequestHeader Header(const Route& route) const;

 private:
  std::shared_ptr<PoolCore> pool_;
  control::ContainerHandle handle_;
  ContainerSummary summary_;
  Uuid uuid_;
};

// "oid=... dkey='...' akey='...'" for error messages (keys shortened, escaped).
std::string DescribeIo(const ObjectId& oid, std::string_view dkey, std::string_view akey);

}  // namespace ros2::client
