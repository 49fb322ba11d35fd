// Names of the transport enums and EndpointInfo predicates.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "transport/transport.h"

namespace ros2::transport {

std::string_view TransportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kAuto: return "auto";
    case TransportKind::kTcp: return "tcp";
    case TransportKind::kShm: return "shm";
    case TransportKind::kRdma: return "rdma";
  }
  return "unknown";
}

Result<TransportKind> ParseTransportKind(std::string_view name) {
  for (TransportKind k : {TransportKind::kAuto, TransportKind::kTcp, TransportKind::kShm, TransportKind::kRdma}) {
    if (name == TransportKindName(k)) return k;
  }
  return Status::InvalidArgument(fmt::format("transport: unknown kind '{}' (expected auto, tcp, shm or rdma)", name));
}

std::string_view BulkModeName(BulkMode mode) {
  switch (mode) {
    case BulkMode::kRma: return "rma";
    case BulkMode::kCma: return "cma";
    case BulkMode::kActiveMessage: break;
  }
  return "am";
}

std::string_view FailureDetectionName(FailureDetection d) {
  return d == FailureDetection::kUcxPeer ? "ucx-peer" : "pid-watch";
}

namespace {
std::string_view TlOf(const std::string& lane) {
  return std::string_view(lane).substr(0, lane.find('/'));
}
}  // namespace

bool EndpointInfo::IsSharedMemoryOnly() const {
  if (lanes.empty()) return false;
  return std::all_of(lanes.begin(), lanes.end(), [](const std::string& l) {
    std::string_view tl = TlOf(l);
    return tl == "posix" || tl == "sysv" || tl == "cma" || tl == "self" || tl == "knem" || tl == "xpmem";
  });
}

bool EndpointInfo::UsesTcp() const {
  return std::any_of(lanes.begin(), lanes.end(), [](const std::string& l) { return TlOf(l) == "tcp"; });
}

}  // namespace ros2::transport
