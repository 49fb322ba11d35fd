// How callers prove who they are on the control plane's gRPC channel.
//
// Every Management and Session call carries the tenant name and secret in the
// gRPC metadata keys "ros2-tenant" and "ros2-secret" (over a Unix socket in the
// engine's data directory, or TLS). AttachCredentials sets them on a client
// call; AuthenticateCall reads and checks them on the server. Free functions.
#pragma once

#include <string>
#include <string_view>

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>

#include "common/status.h"
#include "control/tenant_registry.h"

namespace ros2::control {

inline constexpr std::string_view kTenantMetadataKey = "ros2-tenant";
inline constexpr std::string_view kSecretMetadataKey = "ros2-secret";

struct Credentials {
  std::string tenant;
  std::string secret;
};

// Reads a secret file (the admin bootstrap file): its first line, trimmed.
Result<std::string> ReadSecretFile(const std::string& path);

void AttachCredentials(grpc::ClientContext* context, const Credentials& credentials);

// Unauthenticated when the metadata is missing or does not match a tenant.
Result<Principal> AuthenticateCall(const grpc::ServerContextBase& context, TenantRegistry& tenants);

}  // namespace ros2::control
