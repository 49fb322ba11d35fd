// SessionService: the gRPC Session service (proto/ros2/session.proto) over a
// ControlPlane. Connect authenticates the tenant, checks its read right on the
// pool, opens a session and returns the pool map (every target with its UCX
// worker address) and a signed pool capability; OpenContainer returns a
// container capability with the rights the container's ACL grants (or the
// requested subset); Disconnect revokes every capability of the session.
//
// Owned by ControlPlane; gRPC calls its methods from any of its threads.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "ros2/session.grpc.pb.h"

namespace ros2::control {

class ControlPlane;

class SessionService final : public rpc::Session::Service {
 public:
  explicit SessionService(ControlPlane* plane) : plane_(plane) {}

  grpc::Status Connect(grpc::ServerContext* ctx, const rpc::ConnectRequest* req, rpc::ConnectResponse* resp) override;
  grpc::Status OpenContainer(grpc::ServerContext* ctx, const rpc::OpenContainerRequest* req,
                             rpc::OpenContainerResponse* resp) override;
  grpc::Status GetPoolMap(grpc::ServerContext* ctx, const rpc::GetPoolMapRequest* req, rpc::PoolMap* resp) override;
  grpc::Status Disconnect(grpc::ServerContext* ctx, const rpc::DisconnectRequest* req,
                          rpc::DisconnectResponse* resp) override;
  // Holds one of the sync server's threads for the stream's lifetime, so
  // watches are capped: kMaxWatchesPerTenant a tenant, kMaxWatches in all;
  // one over either is refused with Busy (gRPC UNAVAILABLE) naming the limit.
  static constexpr uint32_t kMaxWatchesPerTenant = 32;
  static constexpr uint32_t kMaxWatches = 256;
  grpc::Status WatchPoolMap(grpc::ServerContext* ctx, const rpc::WatchPoolMapRequest* req,
                            grpc::ServerWriter<rpc::PoolMapUpdate>* writer) override;

 private:
  ControlPlane* plane_;
  std::mutex watch_mu_;
  std::map<std::string, uint32_t> watches_;  // GUARDED_BY(watch_mu_): open watches by tenant name
  uint32_t watch_total_ = 0;                 // GUARDED_BY(watch_mu_)
};

}  // namespace ros2::control
