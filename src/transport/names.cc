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

std::string_view ProviderName(Provider p) {
  return p == Provider::kOfi ? "ofi" : "ucx";
}

Result<Provider> ParseProvider(std::string_view name) {
  if (name == "ucx") return Provider::kUcx;
  if (name == "ofi") return Provider::kOfi;
  return Status::InvalidArgument(fmt::format("transport: unknown provider '{}' (expected ucx or ofi)", name));
}

std::string_view BulkTransferName(BulkTransfer transfer) {
  switch (transfer) {
    case BulkTransfer::kInline: return "inline";
    case BulkTransfer::kRma: return "rma";
    case BulkTransfer::kCma: return "cma";
    case BulkTransfer::kSegment: return "segment";
    case BulkTransfer::kActiveMessage: break;
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

bool EndpointInfo::PeerKeysBound() const {
  if (lanes.empty()) return false;
  return std::all_of(lanes.begin(), lanes.end(), [](const std::string& l) {
    const std::string_view tl = TlOf(l);
    // tcp: UCX emulates RMA by asking the peer, which touches only its own
    // memory. rc/dc/ud (verbs): a key works only in the protection domain it
    // was made in. self: this process. Every other lane (posix, sysv, cma,
    // knem, xpmem, and any lane this list does not know) resolves a key by
    // the process id, file descriptor or segment id written in it.
    return tl == "tcp" || tl == "self" || tl.rfind("rc", 0) == 0 || tl.rfind("dc", 0) == 0 || tl.rfind("ud", 0) == 0;
  });
}

bool EndpointInfo::UsesTcp() const {
  return std::any_of(lanes.begin(), lanes.end(), [](const std::string& l) { return TlOf(l) == "tcp"; });
}

}  // namespace ros2::transport
