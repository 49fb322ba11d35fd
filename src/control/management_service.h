// ManagementService: the gRPC Management service (proto/ros2/mgmt.proto) over a
// ControlPlane: pools, containers, tenants, ACLs, engine registration, target
// states and engine status. Every call authenticates its caller from the
// metadata (credentials.h), then defers to the Catalog / TenantRegistry /
// SystemMap, whose rules decide what the caller may do. Tenant management,
// engine registration and status need the admin tenant.
//
// In a cluster on etcd every engine serves every call, and writes (pools,
// containers, tenants, ACLs, target states) go through the leader: an engine
// that is not the leader forwards them, with the caller's credentials, to the
// leader's control endpoint (docs/cluster.md, "The leader").
//
// Owned by ControlPlane; gRPC calls its methods from any of its threads.
#pragma once

#include <optional>

#include "ros2/mgmt.grpc.pb.h"

namespace ros2::control {

class ControlPlane;

class ManagementService final : public rpc::Management::Service {
 public:
  explicit ManagementService(ControlPlane* plane) : plane_(plane) {}

  grpc::Status CreatePool(grpc::ServerContext* ctx, const rpc::CreatePoolRequest* req, rpc::PoolInfo* resp) override;
  grpc::Status ListPools(grpc::ServerContext* ctx, const rpc::ListPoolsRequest* req,
                         rpc::ListPoolsResponse* resp) override;
  grpc::Status QueryPool(grpc::ServerContext* ctx, const rpc::QueryPoolRequest* req, rpc::PoolInfo* resp) override;
  grpc::Status DestroyPool(grpc::ServerContext* ctx, const rpc::DestroyPoolRequest* req,
                           rpc::DestroyPoolResponse* resp) override;
  grpc::Status CreateContainer(grpc::ServerContext* ctx, const rpc::CreateContainerRequest* req,
                               rpc::ContainerInfo* resp) override;
  grpc::Status ListContainers(grpc::ServerContext* ctx, const rpc::ListContainersRequest* req,
                              rpc::ListContainersResponse* resp) override;
  grpc::Status QueryContainer(grpc::ServerContext* ctx, const rpc::QueryContainerRequest* req,
                              rpc::ContainerInfo* resp) override;
  grpc::Status DestroyContainer(grpc::ServerContext* ctx, const rpc::DestroyContainerRequest* req,
                                rpc::DestroyContainerResponse* resp) override;
  grpc::Status CreateTenant(grpc::ServerContext* ctx, const rpc::CreateTenantRequest* req,
                            rpc::CreateTenantResponse* resp) override;
  grpc::Status DeleteTenant(grpc::ServerContext* ctx, const rpc::DeleteTenantRequest* req,
                            rpc::DeleteTenantResponse* resp) override;
  grpc::Status ListTenants(grpc::ServerContext* ctx, const rpc::ListTenantsRequest* req,
                           rpc::ListTenantsResponse* resp) override;
  grpc::Status SetAcl(grpc::ServerContext* ctx, const rpc::SetAclRequest* req, rpc::SetAclResponse* resp) override;
  grpc::Status RegisterEngine(grpc::ServerContext* ctx, const rpc::RegisterEngineRequest* req,
                              rpc::RegisterEngineResponse* resp) override;
  grpc::Status SetTargetState(grpc::ServerContext* ctx, const rpc::SetTargetStateRequest* req,
                              rpc::SetTargetStateResponse* resp) override;
  grpc::Status GetEngineStatus(grpc::ServerContext* ctx, const rpc::GetEngineStatusRequest* req,
                               rpc::EngineStatus* resp) override;
  grpc::Status ListRevocations(grpc::ServerContext* ctx, const rpc::ListRevocationsRequest* req,
                               rpc::ListRevocationsResponse* resp) override;

 private:
  // nullopt: serve the call here (no cluster, or this engine leads);
  // otherwise the leader's answer to the forwarded call.
  template <typename Request, typename Response>
  std::optional<grpc::Status> ForwardToLeader(grpc::ServerContext* ctx,
                                              grpc::Status (rpc::Management::Stub::*method)(grpc::ClientContext*,
                                                                                            const Request&, Response*),
                                              const Request& req, Response* resp);

  ControlPlane* plane_;
};

}  // namespace ros2::control
