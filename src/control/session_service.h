// SessionService: the gRPC Session service (proto/ros2/session.proto) over a
// ControlPlane. Connect authenticates the tenant, checks its read right on the
// pool, opens a session and returns the pool map (every target with its UCX
// worker address) and a signed pool capability; OpenContainer returns a
// container capability with the rights the container's ACL grants (or the
// requested subset); Disconnect revokes every capability of the session.
//
// WatchPoolMap is served on gRPC's callback API (PoolMapWatchers): an open
// watch holds no thread.
//
// Owned by ControlPlane; gRPC calls its methods from any of its threads.
#pragma once

#include <cstdint>
#include <memory>

#include "control/pool_map_watchers.h"
#include "ros2/session.grpc.pb.h"

namespace ros2::control {

class ControlPlane;

class SessionService final : public rpc::Session::WithCallbackMethod_WatchPoolMap<rpc::Session::Service> {
 public:
  explicit SessionService(ControlPlane* plane);
  ~SessionService() override;

  grpc::Status Connect(grpc::ServerContext* ctx, const rpc::ConnectRequest* req, rpc::ConnectResponse* resp) override;
  grpc::Status OpenContainer(grpc::ServerContext* ctx, const rpc::OpenContainerRequest* req,
                             rpc::OpenContainerResponse* resp) override;
  grpc::Status GetPoolMap(grpc::ServerContext* ctx, const rpc::GetPoolMapRequest* req, rpc::PoolMap* resp) override;
  grpc::Status Disconnect(grpc::ServerContext* ctx, const rpc::DisconnectRequest* req,
                          rpc::DisconnectResponse* resp) override;
  // Watches are capped (PoolMapWatchers): kMaxWatchesPerTenant a tenant,
  // kMaxWatches in all; one over either is refused with Busy (gRPC
  // UNAVAILABLE) naming the limits.
  static constexpr uint32_t kMaxWatchesPerTenant = PoolMapWatchers::kMaxWatchesPerTenant;
  static constexpr uint32_t kMaxWatches = PoolMapWatchers::kMaxWatches;
  grpc::ServerWriteReactor<rpc::PoolMapUpdate>* WatchPoolMap(grpc::CallbackServerContext* ctx,
                                                             const rpc::WatchPoolMapRequest* req) override;
  const PoolMapWatchers& watchers() const { return *watchers_; }

 private:
  ControlPlane* plane_;
  std::unique_ptr<PoolMapWatchers> watchers_;
};

}  // namespace ros2::control
