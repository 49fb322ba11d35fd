// ManagementClient: the typed client of the Management service, for ros2ctl,
// engines registering with a management endpoint, and tests. Every call is
// authenticated with the credentials given at construction and bounded by the
// timeout; failures come back as ros2::Status with the server's code and
// message (FromGrpcStatus). Thread-safe: calls may run concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <grpcpp/channel.h>

#include "common/status.h"
#include "control/capability.h"
#include "control/control_channel.h"
#include "control/credentials.h"
#include "control/rights.h"
#include "control/system_map.h"
#include "ros2/mgmt.grpc.pb.h"

namespace ros2::control {

class ManagementClient {
 public:
  ManagementClient(std::shared_ptr<grpc::Channel> channel, Credentials credentials,
                   std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Several endpoints of one cluster (engines sharing an etcd store): a call
  // goes to the current one and, when that one cannot be reached
  // (Disconnected), to the next, once around the list; the one that answered
  // stays current. REQUIRES: channels is not empty.
  ManagementClient(std::vector<std::shared_ptr<grpc::Channel>> channels, Credentials credentials,
                   std::chrono::milliseconds timeout = std::chrono::seconds(10));

  Result<rpc::PoolInfo> CreatePool(std::string_view label, uint64_t size_bytes, uint32_t target_count = 0);
  Result<std::vector<rpc::PoolInfo>> ListPools();
  Result<rpc::PoolInfo> QueryPool(std::string_view pool);
  Status DestroyPool(std::string_view pool, bool force = false);

  Result<rpc::ContainerInfo> CreateContainer(std::string_view pool, std::string_view label,
                                             const std::map<std::string, std::string>& properties = {});
  Result<std::vector<rpc::ContainerInfo>> ListContainers(std::string_view pool);
  Result<rpc::ContainerInfo> QueryContainer(std::string_view pool, std::string_view container);
  Status DestroyContainer(std::string_view pool, std::string_view container);

  // Returns the tenant's secret (generated when `secret` is empty).
  Result<std::string> CreateTenant(std::string_view name, std::string_view secret = {});
  Status DeleteTenant(std::string_view name);
  Result<std::vector<std::string>> ListTenants();
  // Container empty: the pool's ACL. Rights 0 removes the tenant's entry.
  Result<std::vector<rpc::AclEntry>> SetAcl(std::string_view pool, std::string_view container, std::string_view tenant,
                                            Rights rights);

  Result<rpc::RegisterEngineResponse> RegisterEngine(const EngineRegistration& registration);
  // With `pool`: refused (Busy) while that pool rebuilds; empty: while any does.
  Result<uint64_t> SetTargetState(const Uuid& engine, uint32_t index, rpc::TargetState state,
                                  std::string_view pool = {});
  Result<rpc::EngineStatus> GetEngineStatus();
  // Fetches the endpoint's revocations and applies them to `verifier`: an
  // engine that is not the management endpoint calls this periodically so
  // sessions closed elsewhere stop working on it too. Returns how many;
  // `map_version` (when given) receives the endpoint's pool map version.
  Result<size_t> SyncRevocations(CapabilityVerifier* verifier, uint64_t* map_version = nullptr);

  // The raw stub of the current endpoint (tests send malformed requests through it).
  rpc::Management::Stub& stub() { return *stubs_[current_.load() % stubs_.size()]; }
  const Credentials& credentials() const { return credentials_; }

 private:
  template <typename Request, typename Response>
  Result<Response> Invoke(grpc::Status (rpc::Management::Stub::*method)(grpc::ClientContext*, const Request&,
                                                                        Response*),
                          const Request& request, const Credentials& credentials, std::chrono::milliseconds timeout,
                          std::string_view rpc) {
    Status last;
    for (size_t tried = 0; tried < stubs_.size(); ++tried) {
      size_t at = current_.load() % stubs_.size();
      auto r = CallControl(stubs_[at].get(), method, request, credentials, timeout, rpc);
      if (r.ok() || stubs_.size() == 1 || r.status().code() != Status::Code::kDisconnected) return r;
      last = r.status();
      current_.compare_exchange_strong(at, (at + 1) % stubs_.size());
    }
    return last.WithContext(fmt::format("none of the {} control endpoints answered", stubs_.size()));
  }

  std::vector<std::unique_ptr<rpc::Management::Stub>> stubs_;
  std::atomic<size_t> current_{0};
  Credentials credentials_;
  std::chrono::milliseconds timeout_;
};

}  // namespace ros2::control
