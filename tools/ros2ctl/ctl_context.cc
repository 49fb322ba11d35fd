#include "ctl_context.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "control/control_channel.h"

namespace ros2::ctl {

std::string NormalizeControlAddress(const std::string& endpoint) {
  if (!endpoint.empty() && endpoint.front() == '/') return "unix:" + endpoint;
  return endpoint;
}

Result<nlohmann::json> ReadClusterFile(const std::string& data_dir) {
  std::string path = (std::filesystem::path(data_dir) / kClusterFileName).string();
  std::ifstream in(path);
  if (!in) {
    return Status::NotFound(
        fmt::format("no local cluster in {} ({} is missing; start one with "
                    "`ros2ctl cluster up --data-dir {}`)",
                    data_dir, path, data_dir));
  }
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::Corruption(fmt::format("{} is not valid JSON", path));
  return j;
}

Result<std::string> CtlContext::ControlAddress() const {
  if (!options_.control.empty()) return NormalizeControlAddress(options_.control);
  if (!options_.data_dir.empty()) {
    ROS2_ASSIGN_OR_RETURN(auto cluster, ReadClusterFile(options_.data_dir));
    if (!cluster.contains("control") || !cluster["control"].is_string()) {
      return Status::Corruption(fmt::format("{}/{} has no control endpoint", options_.data_dir, kClusterFileName));
    }
    return cluster["control"].get<std::string>();
  }
  return Status::InvalidArgument(
      "no control endpoint: pass --data-dir DIR (a local cluster) or --control ENDPOINT "
      "(or set ROS2_DATA_DIR / ROS2_CONTROL)");
}

Result<control::Credentials> CtlContext::TenantCredentials() const {
  control::Credentials creds;
  creds.tenant = options_.tenant.empty() ? "admin" : options_.tenant;
  std::string secret_file = options_.secret_file;
  if (secret_file.empty() && !options_.data_dir.empty()) {
    ROS2_ASSIGN_OR_RETURN(auto cluster, ReadClusterFile(options_.data_dir));
    if (creds.tenant == "admin" && cluster.contains("admin_secret_file")) {
      secret_file = cluster["admin_secret_file"].get<std::string>();
    }
  }
  if (secret_file.empty()) {
    return Status::InvalidArgument(fmt::format(
        "no secret for tenant '{}': pass --secret-file FILE (or --data-dir DIR of a local cluster for admin)",
        creds.tenant));
  }
  ROS2_ASSIGN_OR_RETURN(creds.secret, control::ReadSecretFile(secret_file));
  return creds;
}

Result<control::ManagementClient*> CtlContext::Management() {
  if (management_) return management_.get();
  ROS2_ASSIGN_OR_RETURN(std::string address, ControlAddress());
  ROS2_ASSIGN_OR_RETURN(auto creds, TenantCredentials());
  ROS2_ASSIGN_OR_RETURN(auto channel, control::MakeControlChannel({.address = address}));
  management_ = std::make_unique<control::ManagementClient>(std::move(channel), std::move(creds),
                                                            std::chrono::seconds(options_.timeout_s));
  return management_.get();
}

}  // namespace ros2::ctl
