#include "ctl_context.h"

#include <fmt/format.h>

#include "control/control_channel.h"
#include "client/local_cluster.h"
#include "ros2/client.h"

namespace ros2::ctl {

Result<std::string> CtlContext::ControlAddress() const {
  client::ClientOptions o;
  o.control = options_.control;
  ROS2_RETURN_IF_ERROR(local_cluster::CompleteClientOptions(o, options_.data_dir));
  if (!o.control.empty()) return o.control;
  return Status::InvalidArgument(
      "no control endpoint: pass --data-dir DIR (a local cluster) or --control ENDPOINT "
      "(or set ROS2_DATA_DIR / ROS2_CONTROL)");
}

Result<control::Credentials> CtlContext::TenantCredentials() const {
  control::Credentials creds;
  creds.tenant = options_.tenant.empty() ? "admin" : options_.tenant;
  client::ClientOptions o;
  o.control = options_.control;
  o.tenant = creds.tenant;
  o.secret_file = options_.secret_file;
  ROS2_RETURN_IF_ERROR(local_cluster::CompleteClientOptions(o, options_.data_dir));
  const std::string& secret_file = o.secret_file;
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
  // "a,b,c": endpoints of several engines of one cluster (docs/cluster.md);
  // a call moves on to the next when one cannot be reached.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (size_t start = 0; start <= address.size();) {
    size_t comma = address.find(',', start);
    std::string one = address.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (one.empty()) return Status::InvalidArgument(fmt::format("--control '{}': an empty endpoint", address));
    ROS2_ASSIGN_OR_RETURN(
        auto channel,
        control::MakeControlChannel({one, one.starts_with("unix:") ? std::string() : options_.tls_ca, std::string()}));
    channels.push_back(std::move(channel));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  management_ = std::make_unique<control::ManagementClient>(std::move(channels), std::move(creds),
                                                            std::chrono::seconds(options_.timeout_s));
  return management_.get();
}

}  // namespace ros2::ctl
