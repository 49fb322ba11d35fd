#include "control/grpc_status.h"

#include <charconv>

#include <fmt/format.h>

namespace ros2::control {
namespace {
constexpr std::string_view kDetailPrefix = "ros2:";
}  // namespace

grpc::StatusCode GrpcCodeFor(Status::Code code) {
  using C = Status::Code;
  switch (code) {
    case C::kOk: return grpc::StatusCode::OK;
    case C::kNotFound: return grpc::StatusCode::NOT_FOUND;
    case C::kCorruption: return grpc::StatusCode::DATA_LOSS;
    case C::kInvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case C::kIOError: return grpc::StatusCode::INTERNAL;
    case C::kNoSpace: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case C::kAlreadyExists: return grpc::StatusCode::ALREADY_EXISTS;
    case C::kPermissionDenied: return grpc::StatusCode::PERMISSION_DENIED;
    case C::kUnauthenticated: return grpc::StatusCode::UNAUTHENTICATED;
    case C::kTimedOut: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case C::kDisconnected: return grpc::StatusCode::UNAVAILABLE;
    case C::kBusy: return grpc::StatusCode::UNAVAILABLE;
    case C::kNotSupported: return grpc::StatusCode::UNIMPLEMENTED;
    case C::kCancelled: return grpc::StatusCode::CANCELLED;
    case C::kProtocol: return grpc::StatusCode::INTERNAL;
    case C::kNotEmpty: return grpc::StatusCode::FAILED_PRECONDITION;
    case C::kInternal: return grpc::StatusCode::INTERNAL;
    case C::kNotDirectory:
    case C::kIsDirectory:
    case C::kNameTooLong: return grpc::StatusCode::INVALID_ARGUMENT;
    case C::kLoop:
    case C::kStaleMap: return grpc::StatusCode::FAILED_PRECONDITION;
  }
  return grpc::StatusCode::UNKNOWN;
}

Status::Code CodeForGrpc(grpc::StatusCode code) {
  using C = Status::Code;
  switch (code) {
    case grpc::StatusCode::OK: return C::kOk;
    case grpc::StatusCode::CANCELLED: return C::kCancelled;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE: return C::kInvalidArgument;
    case grpc::StatusCode::DEADLINE_EXCEEDED: return C::kTimedOut;
    case grpc::StatusCode::NOT_FOUND: return C::kNotFound;
    case grpc::StatusCode::ALREADY_EXISTS: return C::kAlreadyExists;
    case grpc::StatusCode::PERMISSION_DENIED: return C::kPermissionDenied;
    case grpc::StatusCode::UNAUTHENTICATED: return C::kUnauthenticated;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return C::kBusy;
    case grpc::StatusCode::FAILED_PRECONDITION: return C::kNotEmpty;
    case grpc::StatusCode::ABORTED: return C::kBusy;
    case grpc::StatusCode::UNIMPLEMENTED: return C::kNotSupported;
    case grpc::StatusCode::UNAVAILABLE: return C::kDisconnected;
    case grpc::StatusCode::DATA_LOSS: return C::kCorruption;
    default: return C::kInternal;
  }
}

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(GrpcCodeFor(status.code()), status.message(),
                      fmt::format("{}{}", kDetailPrefix, static_cast<unsigned>(status.code())));
}

Status FromGrpcStatus(const grpc::Status& status, std::string_view rpc) {
  if (status.ok()) return Status::Ok();
  const std::string& details = status.error_details();
  if (details.starts_with(kDetailPrefix)) {
    unsigned code = 0;
    const char* first = details.data() + kDetailPrefix.size();
    const char* last = details.data() + details.size();
    auto [ptr, ec] = std::from_chars(first, last, code);
    if (ec == std::errc() && ptr == last && code > 0 && code <= 255) {
      return Status::FromCode(static_cast<uint8_t>(code), status.error_message());
    }
  }
  std::string msg = rpc.empty() ? status.error_message() : fmt::format("{}: {}", rpc, status.error_message());
  Status::Code code = CodeForGrpc(status.error_code());
  return Status::FromCode(static_cast<uint8_t>(code), std::move(msg));
}

}  // namespace ros2::control
