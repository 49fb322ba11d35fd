// SessionClient: the typed client of the Session service, used by libros2 to
// connect to pools and open containers. Credentials are passed on each call
// (one channel may serve many tenants). The returned capability
// blobs are opaque to the client: it attaches them to its data-plane RPCs.
// Thread-safe: calls may run concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/channel.h>

#include "common/status.h"
#include "control/credentials.h"
#include "control/rights.h"
#include "ros2/session.grpc.pb.h"

namespace ros2::control {

// An open pool session: the map to place objects and reach targets, and the
// pool capability.
struct PoolConnection {
  std::string session_uuid;
  rpc::PoolInfo pool;
  rpc::PoolMap map;
  std::string capability;  // Capability::kEncodedSize bytes
  Rights rights = 0;
  uint64_t expiry_ms = 0;
  std::string session_key;  // 32 bytes (capability.h, SessionKey)
};

// An open container: its properties and the container capability.
struct ContainerHandle {
  rpc::ContainerInfo container;
  std::string capability;
  Rights rights = 0;
  uint64_t expiry_ms = 0;
};

class SessionClient {
 public:
  explicit SessionClient(std::shared_ptr<grpc::Channel> channel,
                         std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Several control endpoints of one cluster (engines sharing an etcd store):
  // a call goes to the current one and, when that one cannot be reached
  // (Disconnected), to the next, once around the list; the one that answered
  // stays current. REQUIRES: channels is not empty.
  explicit SessionClient(std::vector<std::shared_ptr<grpc::Channel>> channels,
                         std::chrono::milliseconds timeout = std::chrono::seconds(10));

  Result<PoolConnection> Connect(std::string_view pool, const Credentials& credentials);
  // `rights` 0 asks for every right the container's ACL grants the tenant.
  Result<ContainerHandle> OpenContainer(const Credentials& credentials, std::string_view session_uuid,
                                        std::string_view container, Rights rights = 0);
  Result<rpc::PoolMap> GetPoolMap(const Credentials& credentials, std::string_view session_uuid);
  // Closes the session; the engines refuse its capabilities from then on.
  Status Disconnect(const Credentials& credentials, std::string_view session_uuid);

  // The stub of the current endpoint.
  rpc::Session::Stub& stub() { return *stubs_[current_.load() % stubs_.size()]; }

 private:
  template <typename Request, typename Response>
  Result<Response> Invoke(grpc::Status (rpc::Session::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                          const Request& request, const Credentials& credentials, std::string_view rpc);

  std::vector<std::unique_ptr<rpc::Session::Stub>> stubs_;
  std::atomic<size_t> current_{0};
  std::chrono::milliseconds timeout_;
};

}  // namespace ros2::control
