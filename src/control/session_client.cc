#include "control/session_client.h"

#include <fmt/format.h>

#include "control/control_channel.h"

namespace ros2::control {

using Stub = rpc::Session::Stub;

SessionClient::SessionClient(std::shared_ptr<grpc::Channel> channel, std::chrono::milliseconds timeout)
    : timeout_(timeout) {
  stubs_.push_back(rpc::Session::NewStub(channel));
}

SessionClient::SessionClient(std::vector<std::shared_ptr<grpc::Channel>> channels, std::chrono::milliseconds timeout)
    : timeout_(timeout) {
  for (auto& c : channels) stubs_.push_back(rpc::Session::NewStub(c));
}

template <typename Request, typename Response>
Result<Response> SessionClient::Invoke(grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                                       const Request& request, const Credentials& credentials, std::string_view rpc) {
  Status last;
  for (size_t tried = 0; tried < stubs_.size(); ++tried) {
    size_t at = current_.load() % stubs_.size();
    auto r = CallControl(stubs_[at].get(), method, request, credentials, timeout_, rpc);
    if (r.ok() || stubs_.size() == 1 || r.status().code() != Status::Code::kDisconnected) return r;
    last = r.status();
    current_.compare_exchange_strong(at, (at + 1) % stubs_.size());
  }
  return last.WithContext(fmt::format("none of the {} control endpoints answered", stubs_.size()));
}

Result<PoolConnection> SessionClient::Connect(std::string_view pool, const Credentials& credentials) {
  rpc::ConnectRequest req;
  req.set_pool(std::string(pool));
  ROS2_ASSIGN_OR_RETURN(rpc::ConnectResponse resp,
                        Invoke(&Stub::Connect, req, credentials, "Session.Connect"));
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
  ROS2_ASSIGN_OR_RETURN(rpc::OpenContainerResponse resp, Invoke(&Stub::OpenContainer, req, credentials,
                                                                "Session.OpenContainer"));
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
  return Invoke(&Stub::GetPoolMap, req, credentials, "Session.GetPoolMap");
}

Status SessionClient::Disconnect(const Credentials& credentials, std::string_view session_uuid) {
  rpc::DisconnectRequest req;
  req.set_session_uuid(std::string(session_uuid));
  return Invoke(&Stub::Disconnect, req, credentials, "Session.Disconnect").status();
}

}  // namespace ros2::control
