// ServeAuthenticated: the common frame of every control-plane gRPC handler —
// authenticate the caller from the call's metadata, run the operation with its
// Principal, log a failure at debug level and map the Status to a grpc::Status.
// Internal to the service implementations.
#pragma once

#include <string_view>

#include <grpcpp/server_context.h>

#include "common/log.h"
#include "control/credentials.h"
#include "control/grpc_status.h"
#include "control/tenant_registry.h"

namespace ros2::control {

template <typename Op>
grpc::Status ServeAuthenticated(TenantRegistry& tenants, grpc::ServerContext* ctx, std::string_view rpc, Op&& op) {
  Status st;
  auto who = AuthenticateCall(*ctx, tenants);
  if (!who.ok()) {
    st = who.status();
  } else {
    st = op(*who);
  }
  if (!st.ok()) ROS2_LOG_DEBUG("control: {} failed: {}", rpc, st.ToString());
  return ToGrpcStatus(st);
}

}  // namespace ros2::control
