#include "control/management_service.h"

#include <map>

#include <fmt/format.h>

#include "common/log.h"
#include "control/control_plane.h"
#include "control/rebuild_state.h"
#include "control/service_call.h"
#include "control/target_admin.h"

namespace ros2::control {
namespace {

constexpr std::string_view kControlPlaneVersion = "ros2-control 0.1.0";

Status RequireAdmin(const Principal& who, std::string_view what) {
  if (who.is_admin()) return Status::Ok();
  return Status::PermissionDenied(fmt::format("tenant '{}' may not {}: only the admin tenant may", who.name, what));
}

Result<Uuid> ParseEngineUuid(const std::string& text) {
  if (text.empty()) return Status::InvalidArgument("missing engine_uuid");
  auto uuid = Uuid::Parse(text);
  if (!uuid.ok()) return Status::InvalidArgument(fmt::format("engine_uuid '{}' is a bad UUID", text));
  if (uuid->IsNil()) return Status::InvalidArgument("engine_uuid must not be the nil UUID");
  return uuid;
}

constexpr std::string_view kForwardedMetadataKey = "ros2-forwarded";

std::string Metadata(const grpc::ServerContext& ctx, std::string_view key) {
  auto it = ctx.client_metadata().find(grpc::string_ref(key.data(), key.size()));
  return it == ctx.client_metadata().end() ? std::string() : std::string(it->second.data(), it->second.size());
}

}  // namespace

template <typename Request, typename Response>
std::optional<grpc::Status> ManagementService::ForwardToLeader(
    grpc::ServerContext* ctx, grpc::Status (rpc::Management::Stub::*method)(grpc::ClientContext*, const Request&,
                                                                            Response*),
    const Request& req, Response* resp) {
  ClusterMember* member = plane_->cluster();
  if (member == nullptr || member->is_leader()) return std::nullopt;
  const std::string leader = member->leader_endpoint();
  // The last leader this engine knows is itself (it lost etcd meanwhile):
  // serving here gives the caller etcd's own error.
  if (leader == member->endpoint()) return std::nullopt;
  if (!Metadata(*ctx, kForwardedMetadataKey).empty()) {
    // Forwarded here by an engine that took this one for the leader: the
    // caller's client moves on to another endpoint, which forwards afresh.
    return ToGrpcStatus(Status::Disconnected("this engine is not the leader (leadership moved); try again"));
  }
  if (leader.empty()) {
    return ToGrpcStatus(Status::Disconnected(fmt::format("no leader elected in {} yet", plane_->store().Describe())));
  }
  auto channel = plane_->LeaderChannel(leader);
  if (!channel.ok()) return ToGrpcStatus(channel.status().WithContext("forwarding to the leader " + leader));
  grpc::ClientContext fwd;
  fwd.set_deadline(std::min(ctx->deadline(), std::chrono::system_clock::now() + std::chrono::seconds(30)));
  for (std::string_view key : {kTenantMetadataKey, kSecretMetadataKey}) {
    fwd.AddMetadata(std::string(key), Metadata(*ctx, key));
  }
  fwd.AddMetadata(std::string(kForwardedMetadataKey), "1");
  return (rpc::Management::NewStub(*channel).get()->*method)(&fwd, req, resp);
}

grpc::Status ManagementService::CreatePool(grpc::ServerContext* ctx, const rpc::CreatePoolRequest* req,
                                           rpc::PoolInfo* resp) {
  if (auto forwarded = ForwardToLeader(ctx, &rpc::Management::Stub::CreatePool, *req, resp)) return *forwarded;
  return ServeAuthenticated(plane_->tenants(), ctx, "Management.CreatePool", [&](const Principal& who) -> Status {
    ROS2_ASSIGN_OR_RETURN(*resp,
                          plane_->catalog().CreatePool(who, req->label(), req->size_bytes(), req->target_count()));
    return Status::Ok();
  });
}

grpc::Status ManagementService::ListPools(grpc::ServerContext* ctx, const rpc::ListPoolsRequest* /*req*/,
                                          rpc::ListPoolsResponse* resp) {
  return ServeAuthenticated(plane_->tenants(), ctx, "Management.ListPools", [&](const Principal& who) -> Status {
    ROS2_ASSIGN_OR_RETURN(auto pools, plane_->catalog().ListPools(who));
    for (auto& p : pools) *resp->add_pools() = std::move(p);
    return Status::Ok();
  });
}

grpc::Status ManagementService::QueryPool(grpc::ServerContext* ctx, const rpc::QueryPoolRequest* req,
                                          rpc::PoolInfo* resp) {
  return ServeAuthenticated(plane_->tenants(), ctx, "Management.QueryPool", [&](const Principal& who) -> Status {
    ROS2_ASSIGN_OR_RETURN(*resp, plane_->catalog().QueryPool(who, req->pool()));
    ROS2_ASSIGN_OR_RETURN(*resp->mutable_rebuild(), LoadRebuildStatus(plane_->store(), resp->uuid(), plane_->NowMs()));
    return Status::Ok();
  });
}

grpc::Status ManagementService::DestroyPool(grpc::ServerContext* ctx, const rpc::DestroyPoolRequest* req,
                                            rpc::DestroyPoolResponse* resp) {
  if (auto forwarded = ForwardToLeader(ctx, &rpc::Management::Stub::DestroyPool, *req, resp)) return *forwarded;
  return ServeAuthenticated(plane_->tenants(), ctx, "Management.DestroyPool", [&](const Principal& who) {
    return plane_->catalog().DestroyPool(who, req->pool(), req->force());
  });
}

grpc::Status ManagementService::CreateContainer(grpc::ServerContext* ctx, const rpc::CreateContainerRequest* req,
                                                rpc::ContainerInfo* resp) {
  if (auto forwarded = ForwardToLeader(ctx, &rpc::Management::Stub::CreateContainer, *req, resp)) return *forwarded;
  return ServeAuthenticated(plane_->tenants(), ctx, "Management.CreateContainer", [&](const Principal& who) -> Status {
    std::map<std::string, std::string> props(req->properties().begin(), req->properties().end());
    ROS2_ASSIGN_OR_RETURN(*resp, plane_->catalog().CreateContainer(who, req->pool(), req->label(), props));
    return Status::Ok();
  });
}

grpc::Status ManagementService::ListContainers(grpc::ServerContext* ctx, const rpc::ListContainersRequest* req,
                                               rpc::ListContainersResponse* resp) {
  return ServeAuthenticated(plane_->tenants(), ctx, "Management.ListContainers", [&](const Principal& who) -> Status {
    ROS2_ASSIGN_OR_RETURN(auto conts, plane_->catalog().ListContainers(who, req->pool()));
    for (auto& c : conts) *resp->add_containers() = std::move(c);
    return Status::Ok();
  });
}

grpc::Status ManagementService::QueryContainer(grpc::ServerContext* ctx, const rpc::QueryContainerRequest* req,
                                               rpc::ContainerInfo* resp) {
  return ServeAuthenticated(plane_->tenants(), ctx, "Management.QueryContainer", [&](const Principal& who) -> Status {
    ROS2_ASSIGN_OR_RETURN(*resp, plane_->catalog().QueryContainer(who, req->pool(), req->container()));
    return Status::Ok();
  });
}

grpc::Status ManagementService::DestroyContainer(grpc::ServerContext* ctx, const rpc::DestroyContainerRequest* req,
                                                 rpc::DestroyContainerResponse* resp) {
  if (auto forwarded = ForwardToLeader(ctx, &rpc::Management::Stub::DestroyContainer, *req, resp)) return *forwarded;
  return ServeAuthenticated(plane_->tenants(), ctx, "Management.DestroyContainer", [&](const Principal& who) {
    return plane_->catalog().DestroyContainer(who, req->pool(), req->container());
  });
}

grpc::Status ManagementService::CreateTenant(grpc::ServerContext* ctx, const rpc::CreateTenantRequest* req,
                                             rpc::CreateTenantResponse* resp) {
  if (auto forwarded = ForwardToLeader(ctx, &rpc::Management::Stub::CreateTenant, *req, resp)) return *forwarded;
  return ServeAuthenticated(plane_->tenants(), ctx, "Management.CreateTenant", [&](const Principal& who) -> Status {
    ROS2_RETURN_IF_ERROR(RequireAdmin(who, "create tenants"));
    ROS2_ASSIGN_OR_RETURN(std::string secret, plane_->tenants().CreateTenant(req->name(), req->secret()));
    resp->set_name(req->name());
    resp->set_secret(std::move(secret));
    return Status::Ok();
  });
}

grpc::Status ManagementService::DeleteTenant(grpc::ServerContext* ctx, const rpc::DeleteTenantRequest* req,
                                             rpc::DeleteTenantResponse* resp) {
  if (auto forwarded = ForwardToLeader(ctx, &rpc::Management::Stub::DeleteTenant, *req, resp)) return *forwarded;
  return ServeAuthenticated(plane_->tenants(), ctx, "Management.DeleteTenant", [&](const Principal& who) -> Status {
    ROS2_RETURN_IF_ERROR(RequireAdmin(who, "delete tenants"));
    // The record's deletion and the revocation are one atomic write (one etcd
    // Txn): every capability issued to the tenant so far expires before the
    // cut-off, and BeginIssue refuses the tenant once the record is gone.
    ROS2_ASSIGN_OR_RETURN(Principal gone,
                          plane_->tenants().DeleteTenant(req->name(), [&](const Principal& t, StoreBatch* b) {
                            return plane_->sessions().RevokeTenant(t.uuid, Uuid(), plane_->RevocationCutoff(), true, b);
                          }));
    ROS2_LOG_INFO("control: deleted tenant {} ({}) and revoked its capabilities", gone.name, gone.uuid.ToString());
    return Status::Ok();
  });
}

grpc::Status ManagementService::ListTenants(grpc::ServerContext* ctx, const rpc::ListTenantsRequest* /*req*/,
                                            rpc::ListTenantsResponse* resp) {
  return ServeAuthenticated(plane_->tenants(), ctx, "Management.ListTenants", [&](const Principal& who) -> Status {
    ROS2_RETURN_IF_ERROR(RequireAdmin(who, "list tenants"));
    ROS2_ASSIGN_OR_RETURN(auto names, plane_->tenants().ListTenants());
    for (auto& n : names) resp->add_names(std::move(n));
    return Status::Ok();
  });
}

grpc::Status ManagementService::SetAcl(grpc::ServerContext* ctx, const rpc::SetAclRequest* req,
                                       rpc::SetAclResponse* resp) {
  if (auto forwarded = ForwardToLeader(ctx, &rpc::Management::Stub::SetAcl, *req, resp)) return *forwarded;
  return ServeAuthenticated(plane_->tenants(), ctx, "Management.SetAcl", [&](const Principal& who) -> Status {
    Catalog::AclChange change;
    ROS2_ASSIGN_OR_RETURN(
        auto acl, plane_->catalog().SetAcl(who, req->pool(), req->container(), req->tenant(), req->rights(), &change));
    // A right taken away revokes what the tenant holds on the pool: the
    // capabilities issued before the new ACL was stored (it reconnects and
    // gets capabilities under the new ACL).
    if ((change.before & ~change.after) != 0 && !change.pool.IsNil()) {
      ROS2_RETURN_IF_ERROR(
          plane_->sessions().RevokeTenant(change.tenant, change.pool, plane_->RevocationCutoff(), false));
      ROS2_LOG_INFO("control: rights of tenant {} on pool {} narrowed from '{}' to '{}': its capabilities revoked",
                    req->tenant(), change.pool.ToString(), RightsToString(change.before), RightsToString(change.after));
    }
    for (auto& e : acl) *resp->add_acl() = std::move(e);
    return Status::Ok();
  });
}

grpc::Status ManagementService::RegisterEngine(grpc::ServerContext* ctx, const rpc::RegisterEngineRequest* req,
                                               rpc::RegisterEngineResponse* resp) {
  return ServeAuthenticated(plane_->tenants(), ctx, "Management.RegisterEngine", [&](const Principal& who) -> Status {
    ROS2_RETURN_IF_ERROR(RequireAdmin(who, "register engines"));
    EngineRegistration reg;
    ROS2_ASSIGN_OR_RETURN(reg.engine, ParseEngineUuid(req->engine_uuid()));
    reg.address = req->address();
    reg.capacity_bytes = req->capacity_bytes();
    for (const auto& t : req->targets()) {
      reg.targets.push_back(TargetRegistration{t.index(), t.worker_address(), t.capacity_bytes()});
    }
    ROS2_ASSIGN_OR_RETURN(uint64_t version, plane_->system_map().RegisterEngine(reg));
    resp->set_map_version(version);
    const CapabilityKey& key = plane_->capability_key();
    resp->set_capability_key(key.data(), key.size());
    ROS2_LOG_INFO("control: engine {} ({}) registered {} targets, map version {}", req->engine_uuid(), req->address(),
                  reg.targets.size(), version);
    return Status::Ok();
  });
}

grpc::Status ManagementService::SetTargetState(grpc::ServerContext* ctx, const rpc::SetTargetStateRequest* req,
                                               rpc::SetTargetStateResponse* resp) {
  if (auto forwarded = ForwardToLeader(ctx, &rpc::Management::Stub::SetTargetState, *req, resp)) return *forwarded;
  return ServeAuthenticated(plane_->tenants(), ctx, "Management.SetTargetState", [&](const Principal& who) -> Status {
    ROS2_RETURN_IF_ERROR(RequireAdmin(who, "change target states"));
    ROS2_ASSIGN_OR_RETURN(Uuid engine, ParseEngineUuid(req->engine_uuid()));
    ROS2_RETURN_IF_ERROR(CheckTargetStateChange(plane_, who, *req));
    ROS2_ASSIGN_OR_RETURN(uint64_t version, plane_->system_map().SetTargetState(engine, req->index(), req->state()));
    resp->set_map_version(version);
    return Status::Ok();
  });
}

grpc::Status ManagementService::GetEngineStatus(grpc::ServerContext* ctx, const rpc::GetEngineStatusRequest* /*req*/,
                                                rpc::EngineStatus* resp) {
  return ServeAuthenticated(plane_->tenants(), ctx, "Management.GetEngineStatus", [&](const Principal& who) -> Status {
    ROS2_RETURN_IF_ERROR(RequireAdmin(who, "read the engine status"));
    rpc::PoolMap map = plane_->system_map().Snapshot();
    resp->set_map_version(map.version());
    *resp->mutable_engines() = map.engines();
    *resp->mutable_targets() = map.targets();
    ROS2_ASSIGN_OR_RETURN(uint32_t pools, plane_->catalog().PoolCount());
    resp->set_pool_count(pools);
    ROS2_ASSIGN_OR_RETURN(auto tenants, plane_->tenants().ListTenants());
    resp->set_tenant_count(static_cast<uint32_t>(tenants.size()));
    resp->set_uptime_ms(plane_->uptime_ms());
    resp->set_version(std::string(kControlPlaneVersion));
    resp->set_store(plane_->store().Describe());
    if (ClusterMember* member = plane_->cluster(); member != nullptr) {
      resp->set_fenced(member->fenced());
      resp->set_held(member->held());
      resp->set_lease_age_ms(member->lease_age_ms());
      resp->set_leader(member->leader_endpoint());
      ROS2_ASSIGN_OR_RETURN(auto members, member->Members());
      for (const auto& m : members) {
        rpc::MemberStatus* out = resp->add_members();
        out->set_engine_uuid(m.engine_uuid);
        out->set_endpoint(m.endpoint);
        out->set_up(m.up);
        out->set_leader(m.leader);
        out->set_since_ms(m.since_ms);
        out->set_lease_ttl_s(m.lease_ttl_s);
        out->set_lease_remaining_s(m.lease_remaining_s);
      }
    }
    return Status::Ok();
  });
}

grpc::Status ManagementService::ListRevocations(grpc::ServerContext* ctx, const rpc::ListRevocationsRequest* /*req*/,
                                                rpc::ListRevocationsResponse* resp) {
  return ServeAuthenticated(plane_->tenants(), ctx, "Management.ListRevocations", [&](const Principal& who) -> Status {
    ROS2_RETURN_IF_ERROR(RequireAdmin(who, "list revocations"));
    ROS2_ASSIGN_OR_RETURN(auto revoked, plane_->sessions().ListRevocations(plane_->NowMs()));
    for (const auto& rec : revoked) {
      rpc::Revocation* r = resp->add_revocations();
      if (!rec.session.IsNil()) {
        r->set_session_uuid(rec.session.ToString());
      } else {
        r->set_tenant_uuid(rec.tenant.ToString());
        if (!rec.pool.IsNil()) r->set_pool_uuid(rec.pool.ToString());
      }
      r->set_until_ms(rec.until_ms);
    }
    resp->set_map_version(plane_->system_map().known_version());
    return Status::Ok();
  });
}

}  // namespace ros2::control
