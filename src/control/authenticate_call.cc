// AuthenticateCall (declared in control/credentials.h): the server side of the
// credentials, kept out of credentials.cc so the control client library
// (ros2_control_client) does not reference the tenant registry and its state store.
#include "control/credentials.h"

namespace ros2::control {

Result<Principal> AuthenticateCall(const grpc::ServerContextBase& context, TenantRegistry& tenants) {
  const auto& md = context.client_metadata();
  auto tenant = md.find(grpc::string_ref(kTenantMetadataKey.data(), kTenantMetadataKey.size()));
  auto secret = md.find(grpc::string_ref(kSecretMetadataKey.data(), kSecretMetadataKey.size()));
  if (tenant == md.end() || secret == md.end()) {
    return Status::Unauthenticated("missing credentials: set the metadata 'ros2-tenant' and 'ros2-secret'");
  }
  return tenants.Authenticate(std::string_view(tenant->second.data(), tenant->second.size()),
                              std::string_view(secret->second.data(), secret->second.size()));
}

}  // namespace ros2::control
