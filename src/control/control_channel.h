// Client side plumbing of the control plane: making a gRPC channel to a
// control address (Unix socket or TCP, insecure or TLS) and making one
// authenticated unary call with a deadline, returning a ros2 Result.
// Free functions; channels are thread-safe and shared by the client wrappers.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include "common/status.h"
#include "control/credentials.h"
#include "control/grpc_status.h"

namespace ros2::control {

struct ChannelOptions {
  std::string address;             // "unix:/path" or "host:port"
  std::string tls_root_cert_path;  // PEM roots; TLS when set, insecure otherwise
  std::string tls_server_name;     // overrides the name checked in the certificate
  int max_receive_bytes = 0;       // largest answer accepted; 0: gRPC's default (4 MiB)
};

Result<std::shared_ptr<grpc::Channel>> MakeControlChannel(const ChannelOptions& options);

// Calls `method` (a Stub member such as &rpc::Management::Stub::CreatePool)
// with the credentials in the metadata and `timeout` as the deadline.
template <typename Stub, typename Request, typename Response>
Result<Response> CallControl(Stub* stub, grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                             const Request& request, const Credentials& credentials, std::chrono::milliseconds timeout,
                             std::string_view rpc) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  AttachCredentials(&ctx, credentials);
  Response response;
  grpc::Status st = (stub->*method)(&ctx, request, &response);
  if (!st.ok()) return FromGrpcStatus(st, rpc);
  return response;
}

}  // namespace ros2::control
