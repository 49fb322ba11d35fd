#include "control/session_service.h"

#include <fmt/format.h>

#include "common/log.h"
#include "control/control_plane.h"
#include "control/service_call.h"

namespace ros2::control {

SessionService::SessionService(ControlPlane* plane)
    : plane_(plane), watchers_(std::make_unique<PoolMapWatchers>(plane)) {}

SessionService::~SessionService() = default;

grpc::Status SessionService::Connect(grpc::ServerContext* ctx, const rpc::ConnectRequest* req,
                                     rpc::ConnectResponse* resp) {
  return ServeAuthenticated(plane_->tenants(), ctx, "Session.Connect", [&](const Principal& who) -> Status {
    ROS2_ASSIGN_OR_RETURN(IssueWindow window, plane_->BeginIssue(who));
    ROS2_ASSIGN_OR_RETURN(Catalog::PoolAccess access, plane_->catalog().AccessPool(who, req->pool(), kRightRead));
    ROS2_ASSIGN_OR_RETURN(Uuid pool, Uuid::Parse(access.info.uuid()));
    uint64_t expiry = plane_->ExpiryFor(window);
    ROS2_ASSIGN_OR_RETURN(SessionRecord session, plane_->sessions().Open(who, pool, expiry));
    Capability cap{who.uuid, pool, Uuid(), session.session, access.rights, expiry};
    ROS2_ASSIGN_OR_RETURN(std::string blob, plane_->signer().Sign(cap));
    ROS2_ASSIGN_OR_RETURN(SessionKey key, plane_->signer().DeriveSessionKey(session.session));
    resp->set_session_key(std::string(reinterpret_cast<const char*>(key.data()), key.size()));
    resp->set_session_uuid(session.session.ToString());
    *resp->mutable_pool() = std::move(access.info);
    *resp->mutable_pool_map() = std::move(access.map);
    resp->set_capability(std::move(blob));
    resp->set_rights(access.rights);
    resp->set_expiry_ms(expiry);
    return Status::Ok();
  });
}

grpc::Status SessionService::OpenContainer(grpc::ServerContext* ctx, const rpc::OpenContainerRequest* req,
                                           rpc::OpenContainerResponse* resp) {
  return ServeAuthenticated(plane_->tenants(), ctx, "Session.OpenContainer", [&](const Principal& who) -> Status {
    ROS2_RETURN_IF_ERROR(ValidateRights(req->rights(), "open container: requested rights"));
    ROS2_ASSIGN_OR_RETURN(IssueWindow window, plane_->BeginIssue(who));
    ROS2_ASSIGN_OR_RETURN(SessionRecord session, plane_->sessions().Find(req->session_uuid(), who));
    ROS2_ASSIGN_OR_RETURN(Catalog::ContainerAccess access,
                          plane_->catalog().AccessContainer(who, session.pool.ToString(), req->container()));
    Rights wanted = req->rights() == 0 ? access.rights : static_cast<Rights>(req->rights());
    if (!HasRights(access.rights, wanted)) {
      return Status::PermissionDenied(fmt::format("tenant '{}' asked for '{}' on container '{}', its ACL grants '{}'",
                                                  who.name, RightsToString(wanted), access.info.label(),
                                                  RightsToString(access.rights)));
    }
    ROS2_ASSIGN_OR_RETURN(Uuid container, Uuid::Parse(access.info.uuid()));
    uint64_t expiry = plane_->ExpiryFor(window);
    // Extend before signing, atomically with the session's lookup: a
    // Disconnect racing this call either wins (NotFound here) or revokes the
    // session until at least this expiry.
    ROS2_RETURN_IF_ERROR(plane_->sessions().Extend(req->session_uuid(), who, expiry).status());
    Capability cap{who.uuid, session.pool, container, session.session, wanted, expiry};
    ROS2_ASSIGN_OR_RETURN(std::string blob, plane_->signer().Sign(cap));
    *resp->mutable_container() = std::move(access.info);
    resp->set_capability(std::move(blob));
    resp->set_rights(wanted);
    resp->set_expiry_ms(expiry);
    return Status::Ok();
  });
}

grpc::Status SessionService::GetPoolMap(grpc::ServerContext* ctx, const rpc::GetPoolMapRequest* req,
                                        rpc::PoolMap* resp) {
  return ServeAuthenticated(plane_->tenants(), ctx, "Session.GetPoolMap", [&](const Principal& who) -> Status {
    ROS2_ASSIGN_OR_RETURN(SessionRecord session, plane_->sessions().Find(req->session_uuid(), who));
    ROS2_ASSIGN_OR_RETURN(*resp, plane_->catalog().PoolMapFor(session.pool.ToString()));
    return Status::Ok();
  });
}

grpc::Status SessionService::Disconnect(grpc::ServerContext* ctx, const rpc::DisconnectRequest* req,
                                        rpc::DisconnectResponse* /*resp*/) {
  return ServeAuthenticated(plane_->tenants(), ctx, "Session.Disconnect",
                            [&](const Principal& who) { return plane_->sessions().Close(req->session_uuid(), who); });
}

grpc::ServerWriteReactor<rpc::PoolMapUpdate>* SessionService::WatchPoolMap(grpc::CallbackServerContext* ctx,
                                                                            const rpc::WatchPoolMapRequest* req) {
  return watchers_->Open(ctx, req);
}

}  // namespace ros2::control
