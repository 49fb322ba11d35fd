// Small helpers shared by the UCX-facing files of the transport (internal).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <ucs/type/status.h>

#include "common/status.h"

namespace ros2::transport {

// Maps a UCX status to a ros2 Status whose message is "<context>: <ucx text>".
inline Status UcsError(std::string_view context, ucs_status_t st) {
  std::string msg = fmt::format("{}: {}", context, ucs_status_string(st));
  switch (st) {
    case UCS_ERR_NO_DEVICE:
    case UCS_ERR_UNSUPPORTED:
    case UCS_ERR_UNREACHABLE: return Status::NotSupported(std::move(msg));
    case UCS_ERR_INVALID_PARAM: return Status::InvalidArgument(std::move(msg));
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_ENDPOINT_TIMEOUT: return Status::TimedOut(std::move(msg));
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_REJECTED: return Status::Disconnected(std::move(msg));
    case UCS_ERR_CANCELED: return Status::Cancelled(std::move(msg));
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_NO_RESOURCE:
    case UCS_ERR_EXCEEDS_LIMIT: return Status::Busy(std::move(msg));
    default: return Status::IOError(std::move(msg));
  }
}

// Runs `print` on a memory stream and returns what it wrote (for the UCX
// *_print_info functions).
inline std::string CaptureToString(const std::function<void(FILE*)>& print) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (f == nullptr) return {};
  print(f);
  fclose(f);
  std::string out(buf, len);
  free(buf);  // allocated by open_memstream
  return out;
}

}  // namespace ros2::transport
