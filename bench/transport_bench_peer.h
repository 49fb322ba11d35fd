// The contract between `ros2-bench transport` and its peer process
// (ros2-bench-transport-peer): the opcodes the peer serves and how it publishes
// its worker address.
//
// The suite spawns the peer with `--transport <kind> --address-file <path>
// --bulk-buffers shared|per-call` (and `--cpu N` when pinning). The
// peer creates a transport Context and one Worker, writes the worker's address
// blob as lower-case hex to <path>.tmp and renames it to <path> (so the suite
// never reads half a file), then serves requests until SIGTERM or SIGINT:
//   kOpNoop  — replies OK at once (no bulk);
//   kOpWrite — Pulls the client's whole bulk-out buffer into a peer buffer (its
//              own per call in flight, or one per size when shared), then
//              replies OK (the shape of a VOS update RPC);
//   kOpRead  — Pushes bulk_in_capacity() bytes from the peer's one source buffer
//              into the client's bulk-in buffer, then replies OK (the shape of a
//              fetch RPC).
// Failures of Pull/Push are returned as the reply status.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace ros2::bench::transport_peer {

// A transport name of the bench: "tcp", "shm", "rdma", "auto" on UCX, or
// "ofi-<kind>" for that kind on libfabric: the provider, and the kind's name.
inline std::pair<bool, std::string> SplitProvider(const std::string& name) {
  if (name.rfind("ofi-", 0) == 0) return {true, name.substr(4)};
  return {false, name};
}

inline constexpr uint16_t kOpNoop = 0x0B00;
inline constexpr uint16_t kOpWrite = 0x0B01;
inline constexpr uint16_t kOpRead = 0x0B02;

// Largest bulk the peer accepts per request.
inline constexpr uint64_t kMaxBulk = uint64_t{16} << 20;

inline constexpr const char* kPeerExecutable = "ros2-bench-transport-peer";

}  // namespace ros2::bench::transport_peer
