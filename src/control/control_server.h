// Listening for the control plane's gRPC services.
//
// AddControlListeningPort adds a listening port to a grpc::ServerBuilder that
// the caller (the engine) owns: a Unix socket ("unix:/path") or TCP
// ("host:port"), with insecure credentials by default or TLS
// (grpc::SslServerCredentials) when a certificate and key path are given.
// ControlServer is the small owner of a grpc::Server with the ControlPlane's
// services, for processes with no other gRPC service (tests, tools); it shuts
// the server down in its destructor (ending the plane's pool map watch streams
// first, SystemMap::StopWaiters). Thread-safe after Start().
#pragma once

#include <memory>
#include <string>

#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include "common/status.h"
#include "control/control_plane.h"

namespace ros2::control {

struct ListenOptions {
  // "unix:/abs/path" or "host:port"; empty: "unix:<data_dir>/control.sock".
  std::string address;
  std::string tls_cert_path;  // PEM certificate chain; TLS when set with tls_key_path
  std::string tls_key_path;   // PEM private key
};

// The default control address of an engine's data directory.
std::string DefaultControlAddress(const std::string& data_dir);

// Adds the port; for a Unix socket, removes a stale socket file first.
// `selected_port` (may be null) receives the bound TCP port after BuildAndStart.
Status AddControlListeningPort(grpc::ServerBuilder* builder, const ListenOptions& options, int* selected_port);

class ControlServer {
 public:
  // REQUIRES: `plane` outlives the server. An empty options.address listens on
  // DefaultControlAddress(plane->options().data_dir).
  static Result<std::unique_ptr<ControlServer>> Start(ControlPlane* plane, ListenOptions options);
  ~ControlServer();

  // The address clients dial ("unix:/..." or "host:port" with the bound port).
  const std::string& address() const { return address_; }
  void Shutdown();

 private:
  ControlServer() = default;
  std::string address_;
  std::unique_ptr<grpc::Server> server_;
  ControlPlane* plane_ = nullptr;
};

}  // namespace ros2::control
