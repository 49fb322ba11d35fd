#include "control/management_client.h"

#include <fmt/format.h>

#include "control/control_channel.h"

namespace ros2::control {

using Stub = rpc::Management::Stub;

ManagementClient::ManagementClient(std::shared_ptr<grpc::Channel> channel, Credentials credentials,
                                   std::chrono::milliseconds timeout)
    : credentials_(std::move(credentials)), timeout_(timeout) {
  stubs_.push_back(rpc::Management::NewStub(channel));
}

ManagementClient::ManagementClient(std::vector<std::shared_ptr<grpc::Channel>> channels, Credentials credentials,
                                   std::chrono::milliseconds timeout)
    : credentials_(std::move(credentials)), timeout_(timeout) {
  for (auto& c : channels) stubs_.push_back(rpc::Management::NewStub(c));
}

Result<rpc::PoolInfo> ManagementClient::CreatePool(std::string_view label, uint64_t size_bytes, uint32_t target_count) {
  rpc::CreatePoolRequest req;
  req.set_label(std::string(label));
  req.set_size_bytes(size_bytes);
  req.set_target_count(target_count);
  return Invoke(&Stub::CreatePool, req, credentials_, timeout_, "Management.CreatePool");
}

Result<std::vector<rpc::PoolInfo>> ManagementClient::ListPools() {
  ROS2_ASSIGN_OR_RETURN(rpc::ListPoolsResponse resp, Invoke(&Stub::ListPools, rpc::ListPoolsRequest(), credentials_,
                                                            timeout_, "Management.ListPools"));
  return std::vector<rpc::PoolInfo>(resp.pools().begin(), resp.pools().end());
}

Result<rpc::PoolInfo> ManagementClient::QueryPool(std::string_view pool) {
  rpc::QueryPoolRequest req;
  req.set_pool(std::string(pool));
  return Invoke(&Stub::QueryPool, req, credentials_, timeout_, "Management.QueryPool");
}

Status ManagementClient::DestroyPool(std::string_view pool, bool force) {
  rpc::DestroyPoolRequest req;
  req.set_pool(std::string(pool));
  req.set_force(force);
  return Invoke(&Stub::DestroyPool, req, credentials_, timeout_, "Management.DestroyPool").status();
}

Result<rpc::ContainerInfo> ManagementClient::CreateContainer(std::string_view pool, std::string_view label,
                                                             const std::map<std::string, std::string>& properties) {
  rpc::CreateContainerRequest req;
  req.set_pool(std::string(pool));
  req.set_label(std::string(label));
  for (const auto& [k, v] : properties) (*req.mutable_properties())[k] = v;
  return Invoke(&Stub::CreateContainer, req, credentials_, timeout_, "Management.CreateContainer");
}

Result<std::vector<rpc::ContainerInfo>> ManagementClient::ListContainers(std::string_view pool) {
  rpc::ListContainersRequest req;
  req.set_pool(std::string(pool));
  ROS2_ASSIGN_OR_RETURN(rpc::ListContainersResponse resp,
                        Invoke(&Stub::ListContainers, req, credentials_, timeout_, "Management.ListContainers"));
  return std::vector<rpc::ContainerInfo>(resp.containers().begin(), resp.containers().end());
}

Result<rpc::ContainerInfo> ManagementClient::QueryContainer(std::string_view pool, std::string_view container) {
  rpc::QueryContainerRequest req;
  req.set_pool(std::string(pool));
  req.set_container(std::string(container));
  return Invoke(&Stub::QueryContainer, req, credentials_, timeout_, "Management.QueryContainer");
}

Status ManagementClient::DestroyContainer(std::string_view pool, std::string_view container) {
  rpc::DestroyContainerRequest req;
  req.set_pool(std::string(pool));
  req.set_container(std::string(container));
  return Invoke(&Stub::DestroyContainer, req, credentials_, timeout_, "Management.DestroyContainer").status();
}

Result<std::string> ManagementClient::CreateTenant(std::string_view name, std::string_view secret) {
  rpc::CreateTenantRequest req;
  req.set_name(std::string(name));
  req.set_secret(std::string(secret));
  ROS2_ASSIGN_OR_RETURN(rpc::CreateTenantResponse resp,
                        Invoke(&Stub::CreateTenant, req, credentials_, timeout_, "Management.CreateTenant"));
  return resp.secret();
}

Status ManagementClient::DeleteTenant(std::string_view name) {
  rpc::DeleteTenantRequest req;
  req.set_name(std::string(name));
  return Invoke(&Stub::DeleteTenant, req, credentials_, timeout_, "Management.DeleteTenant").status();
}

Result<std::vector<std::string>> ManagementClient::ListTenants() {
  ROS2_ASSIGN_OR_RETURN(rpc::ListTenantsResponse resp, Invoke(&Stub::ListTenants, rpc::ListTenantsRequest(),
                                                              credentials_, timeout_, "Management.ListTenants"));
  return std::vector<std::string>(resp.names().begin(), resp.names().end());
}

Result<std::vector<rpc::AclEntry>> ManagementClient::SetAcl(std::string_view pool, std::string_view container,
                                                            std::string_view tenant, Rights rights) {
  rpc::SetAclRequest req;
  req.set_pool(std::string(pool));
  req.set_container(std::string(container));
  req.set_tenant(std::string(tenant));
  req.set_rights(rights);
  ROS2_ASSIGN_OR_RETURN(rpc::SetAclResponse resp,
                        Invoke(&Stub::SetAcl, req, credentials_, timeout_, "Management.SetAcl"));
  return std::vector<rpc::AclEntry>(resp.acl().begin(), resp.acl().end());
}

Result<rpc::RegisterEngineResponse> ManagementClient::RegisterEngine(const EngineRegistration& registration) {
  rpc::RegisterEngineRequest req;
  req.set_engine_uuid(registration.engine.ToString());
  req.set_address(registration.address);
  req.set_capacity_bytes(registration.capacity_bytes);
  for (const auto& t : registration.targets) {
    rpc::TargetRegistration* tr = req.add_targets();
    tr->set_index(t.index);
    tr->set_worker_address(t.worker_address);
    tr->set_capacity_bytes(t.capacity_bytes);
  }
  return Invoke(&Stub::RegisterEngine, req, credentials_, timeout_, "Management.RegisterEngine");
}

Result<uint64_t> ManagementClient::SetTargetState(const Uuid& engine, uint32_t index, rpc::TargetState state,
                                                  std::string_view pool) {
  rpc::SetTargetStateRequest req;
  req.set_pool(std::string(pool));
  req.set_engine_uuid(engine.ToString());
  req.set_index(index);
  req.set_state(state);
  ROS2_ASSIGN_OR_RETURN(rpc::SetTargetStateResponse resp,
                        Invoke(&Stub::SetTargetState, req, credentials_, timeout_, "Management.SetTargetState"));
  return resp.map_version();
}

Result<rpc::EngineStatus> ManagementClient::GetEngineStatus() {
  return Invoke(&Stub::GetEngineStatus, rpc::GetEngineStatusRequest(), credentials_, timeout_,
                "Management.GetEngineStatus");
}

Result<size_t> ManagementClient::SyncRevocations(CapabilityVerifier* verifier, uint64_t* map_version) {
  ROS2_ASSIGN_OR_RETURN(rpc::ListRevocationsResponse resp,
                        Invoke(&Stub::ListRevocations, rpc::ListRevocationsRequest(), credentials_, timeout_,
                               "Management.ListRevocations"));
  for (const auto& r : resp.revocations()) {
    if (r.session_uuid().empty()) {
      auto tenant = Uuid::Parse(r.tenant_uuid());
      auto pool = r.pool_uuid().empty() ? Result<Uuid>(Uuid()) : Uuid::Parse(r.pool_uuid());
      if (!tenant.ok() || tenant->IsNil() || !pool.ok()) {
        return Status::Protocol(fmt::format("Management.ListRevocations: bad tenant revocation '{}' / '{}'",
                                            r.tenant_uuid(), r.pool_uuid()));
      }
      verifier->RevokeTenant(*tenant, *pool, r.until_ms());
      continue;
    }
    auto session = Uuid::Parse(r.session_uuid());
    if (!session.ok()) {
      return Status::Protocol(fmt::format("Management.ListRevocations: bad session uuid '{}'", r.session_uuid()));
    }
    verifier->Revoke(*session, r.until_ms());
  }
  verifier->PurgeExpiredRevocations();
  if (map_version != nullptr) *map_version = resp.map_version();
  return static_cast<size_t>(resp.revocations_size());
}

}  // namespace ros2::control
