#include "control/control_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <grpcpp/security/server_credentials.h>

#include "common/log.h"

namespace ros2::control {
namespace {

Result<std::string> ReadPem(const std::string& path, std::string_view what) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(fmt::format("control TLS: cannot read the {} file {}", what, path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) return Status::InvalidArgument(fmt::format("control TLS: the {} file {} is empty", what, path));
  return ss.str();
}

}  // namespace

std::string DefaultControlAddress(const std::string& data_dir) {
  return "unix:" + data_dir + "/control.sock";
}

Status AddControlListeningPort(grpc::ServerBuilder* builder, const ListenOptions& options, int* selected_port) {
  if (options.address.empty()) return Status::InvalidArgument("control listen: missing address");
  if (options.address.starts_with("unix:")) {
    std::string path = options.address.substr(5);
    if (path.size() >= 108) {
      return Status::InvalidArgument(fmt::format("control listen: Unix socket path {} is too long", path));
    }
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && ::unlink(path.c_str()) != 0) {
      return Status::FromErrno(errno, fmt::format("control listen: remove stale socket {}", path));
    }
  }
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (options.tls_cert_path.empty() != options.tls_key_path.empty()) {
    return Status::InvalidArgument("control TLS: give both tls_cert_path and tls_key_path, or neither");
  }
  if (!options.tls_cert_path.empty()) {
    ROS2_ASSIGN_OR_RETURN(std::string cert, ReadPem(options.tls_cert_path, "certificate"));
    ROS2_ASSIGN_OR_RETURN(std::string key, ReadPem(options.tls_key_path, "private key"));
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({key, cert});
    creds = grpc::SslServerCredentials(ssl);
  } else {
    creds = grpc::InsecureServerCredentials();
  }
  builder->AddListeningPort(options.address, creds, selected_port);
  return Status::Ok();
}

Result<std::unique_ptr<ControlServer>> ControlServer::Start(ControlPlane* plane, ListenOptions options) {
  if (options.address.empty()) options.address = DefaultControlAddress(plane->options().data_dir);
  std::unique_ptr<ControlServer> server(new ControlServer());
  grpc::ServerBuilder builder;
  int port = 0;
  ROS2_RETURN_IF_ERROR(AddControlListeningPort(&builder, options, &port));
  plane->RegisterServices(&builder);
  server->plane_ = plane;
  server->server_ = builder.BuildAndStart();
  if (!server->server_) {
    return Status::IOError(fmt::format("control: gRPC server failed to listen on {}", options.address));
  }
  server->address_ = options.address;
  if (!options.address.starts_with("unix:")) {
    if (port == 0) return Status::IOError(fmt::format("control: gRPC server did not bind {}", options.address));
    auto colon = options.address.rfind(':');
    server->address_ = fmt::format("{}:{}", options.address.substr(0, colon), port);
  }
  ROS2_LOG_INFO("control: listening on {}{}", server->address_, options.tls_cert_path.empty() ? "" : " (TLS)");
  return server;
}

void ControlServer::Shutdown() {
  if (server_) {
    // Pool map watch streams end now rather than at the shutdown deadline.
    plane_->system_map().StopWaiters();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
    server_.reset();
  }
}

ControlServer::~ControlServer() {
  Shutdown();
}

}  // namespace ros2::control
