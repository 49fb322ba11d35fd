// Opcodes spoken between the transport tests and transport_test_peer (the
// server process they start). Test-only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ros2::transport::testing {

// Reply payload = request payload. If the request offers bulk-out data, the peer
// pulls it, and pushes it back into bulk-in (up to its capacity). The reply
// payload is then 4 bytes of CRC32C of the pulled data followed by the request payload.
inline constexpr uint16_t kOpEcho = 1;
// The peer pulls bulk-out (if any) and then keeps the request without replying.
inline constexpr uint16_t kOpHold = 2;
// Reply payload: 8 bytes, the number of requests currently held.
inline constexpr uint16_t kOpHeldCount = 3;
// The handler drops the request without replying.
inline constexpr uint16_t kOpDrop = 4;
// Reply payload: WorkerStats fields of the peer as 10 x uint64: malformed_messages,
// peers_lost, bulk_rma_bytes, bulk_am_bytes, wire_version_mismatches,
// bulk_cma_bytes, cma_refused, bulk_segment_bytes, segments_mapped,
// segments_refused.
inline constexpr uint16_t kOpStats = 5;
// Replies with Status::NotFound("no such thing").
inline constexpr uint16_t kOpFail = 6;

// The peer pushes bulk_in_capacity() bytes (a fixed pattern) into bulk-in and
// replies with an empty payload: the "fetch" direction of a bandwidth probe.
inline constexpr uint16_t kOpFill = 7;
// The peer pulls bulk-out into a scratch buffer and replies with an empty
// payload: the "update" direction of a bandwidth probe.
inline constexpr uint16_t kOpSink = 8;
// The peer writes FillByte(i) at every byte i of the client's bulk-in buffer
// straight into it (IncomingRequest::DirectBulkIn) when that is a shared
// segment, and replies NotSupported otherwise.
inline constexpr uint16_t kOpFillDirect = 9;
// Echo (as kOpEcho, without bulk) answered later, outside the request's receive
// callback: the peer keeps the request and answers every kept one after its
// next progress pass, then flushes. The peer runs with reply batching on
// (Worker::SetReplyBatching), so those answers leave in batches.
inline constexpr uint16_t kOpEchoLater = 10;
// Kept without pulling: after the peer's next progress pass (when the receive
// buffer the request arrived in may hold later messages) it pulls the bulk-out
// bytes and replies with their CRC32C (4 bytes).
inline constexpr uint16_t kOpPullLater = 11;
inline std::byte FillByte(uint64_t i) {
  return static_cast<std::byte>((i * 131 + 7) & 0xff);
}

}  // namespace ros2::transport::testing
