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

}  // namespace ros2::control
