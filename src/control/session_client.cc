#include "control/session_client.h"

#include <fmt/format.h>

#include "control/control_channel.h"

namespace ros2::control {

using Stub = rpc::Session::Stub;

SessionClient::SessionClient(std::shared_ptr<grpc::Channel> channel, std::chrono::milliseconds timeout)
    : stub_(rpc::Session::NewStub(channel)), timeout_(timeout) {}

Result<PoolConnection> SessionClient::Connect(std::string_view pool, const Credentials& credentials) {
  rpc::ConnectRequest req;
  req.set_pool(std::string(pool));
  ROS2_ASSIGN_OR_RETURN(rpc::ConnectResponse resp,
                        CallControl(stub_.get(), &Stub::Connect, req, credentials, timeout_, "Session.Connect"));
  PoolConnection conn;
  conn.session_uuid = resp.session_uuid();
  conn.pool = std::move(*resp.mutable_pool());
  conn.map = std::move(*resp.mutable_pool_map());
  conn.capability = std::move(*resp.mutable_capability());
  conn.rights = static_cast<Rights>(resp.rights());
  conn.expiry_ms = resp.expiry_ms();
  conn.session_key = std::move(*resp.mutable_session_key());
  if (conn.session_key.size() != 32) {
    return Status::Protocol(
        fmt::format("Session.Connect: session key of {} bytes (expected 32)", conn.session_key.size()));
  }
  return conn;
}

Result<ContainerHandle> SessionClient::OpenContainer(const Credentials& credentials, std::string_view session_uuid,
                                                     std::string_view container, Rights rights) {
  rpc::OpenContainerRequest req;
  req.set_session_uuid(std::string(session_uuid));
  req.set_container(std::string(container));
  req.set_rights(rights);
  ROS2_ASSIGN_OR_RETURN(rpc::OpenContainerResponse resp, CallControl(stub_.get(), &Stub::OpenContainer, req,
                                                                     credentials, timeout_, "Session.OpenContainer"));
  ContainerHandle handle;
  handle.container = std::move(*resp.mutable_container());
  handle.capability = std::move(*resp.mutable_capability());
  handle.rights = static_cast<Rights>(resp.rights());
  handle.expiry_ms = resp.expiry_ms();
  return handle;
}

Result<rpc::PoolMap> SessionClient::GetPoolMap(const Credentials& credentials, std::string_view session_uuid) {
  rpc::GetPoolMapRequest req;
  req.set_session_uuid(std::string(session_uuid));
  return CallControl(stub_.get(), &Stub::GetPoolMap, req, credentials, timeout_, "Session.GetPoolMap");
}

Status SessionClient::Disconnect(const Credentials& credentials, std::string_view session_uuid) {
  rpc::DisconnectRequest req;
  req.set_session_uuid(std::string(session_uuid));
  return CallControl(stub_.get(), &Stub::Disconnect, req, credentials, timeout_, "Session.Disconnect").status();
}

}  // namespace ros2::control
