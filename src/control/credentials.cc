#include "control/credentials.h"

#include <fstream>

#include <fmt/format.h>

namespace ros2::control {

Result<std::string> ReadSecretFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(fmt::format("cannot read the secret file {}", path));
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ')) line.pop_back();
  if (line.empty()) return Status::InvalidArgument(fmt::format("the secret file {} is empty", path));
  return line;
}

void AttachCredentials(grpc::ClientContext* context, const Credentials& credentials) {
  context->AddMetadata(std::string(kTenantMetadataKey), credentials.tenant);
  context->AddMetadata(std::string(kSecretMetadataKey), credentials.secret);
}

Result<Principal> AuthenticateCall(const grpc::ServerContext& context, TenantRegistry& tenants) {
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
