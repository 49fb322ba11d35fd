#include "control/control_channel.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

namespace ros2::control {

Result<std::shared_ptr<grpc::Channel>> MakeControlChannel(const ChannelOptions& options) {
  if (options.address.empty()) return Status::InvalidArgument("control channel: missing address");
  grpc::ChannelArguments args;
  // An engine that is starting, or restarting, is back within a second: retry
  // the connection at that pace rather than gRPC's default backoff, which
  // grows to tens of seconds and left callers waiting long after it was up.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  if (options.max_receive_bytes > 0) args.SetMaxReceiveMessageSize(options.max_receive_bytes);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (!options.tls_root_cert_path.empty()) {
    std::ifstream in(options.tls_root_cert_path);
    if (!in) {
      return Status::NotFound(fmt::format("control channel: cannot read TLS roots {}", options.tls_root_cert_path));
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ss.str();
    creds = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) args.SetSslTargetNameOverride(options.tls_server_name);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  auto channel = grpc::CreateCustomChannel(options.address, creds, args);
  if (!channel) return Status::Internal(fmt::format("control channel: cannot create a channel to {}", options.address));
  return channel;
}

}  // namespace ros2::control
