// Conversions between ros2::Status and grpc::Status, both ways.
//
// ToGrpcStatus maps each ros2 code to the closest gRPC code (NotFound ->
// NOT_FOUND, InvalidArgument -> INVALID_ARGUMENT, PermissionDenied ->
// PERMISSION_DENIED, Unauthenticated -> UNAUTHENTICATED, ...) and carries the
// exact ros2 code in the status details ("ros2:<number>"), so FromGrpcStatus
// restores the original Status exactly; statuses from elsewhere (transport
// failures, deadlines) are mapped from their gRPC code. Free functions.
#pragma once

#include <string_view>

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace ros2::control {

grpc::Status ToGrpcStatus(const Status& status);
// `rpc` names the call in the message of statuses without ros2 details
// ("Management.CreatePool: failed to connect to all addresses").
Status FromGrpcStatus(const grpc::Status& status, std::string_view rpc = {});

grpc::StatusCode GrpcCodeFor(Status::Code code);
Status::Code CodeForGrpc(grpc::StatusCode code);

}  // namespace ros2::control
