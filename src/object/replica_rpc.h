// The replicated update protocol's messages (docs/replication.md, "Update
// protocol"): a client's update or punch of a replicated object goes to the
// leader of its group (Opcode::kLeader), which decides it and forwards it to
// the group's other live copies (Opcode::kForward).
//
// A leader request wraps the client's own update or punch request, addressed
// to the leader, and lists the other copies (their engine-local target index
// and worker address, from the client's pool map). A forward wraps the
// request the leader decided, addressed to one copy: unconditional (the
// leader checked the condition), at the client's epoch (the transaction id),
// with a MAC under the engines' forward key over the request and the client's
// capability, so nothing but an engine can make one (the key's derivation and
// the checks are in src/engine/replica_forward.cc, docs/security.md).
//
// Layout (little-endian), after the object protocol's version byte:
//   leader:  u16 opcode (kUpdate or kPunch) | u32 n | n bytes request |
//            u8 peers | per peer: u32 target, u16 n, n bytes address
//   forward: u16 opcode | u8 flags (kForwardDecided, kForwardWatermark, kForwardAbort) | u32 n | n bytes request |
//            u8 copies | per copy: u32 target, u16 n, n bytes address |
//            u64 seq | u64 watermark | 32 bytes MAC
// Decoding validates the opcode, the sizes against the payload and the limits
// below, the flags and trailing bytes (Protocol naming the field); the wrapped
// request is decoded by its own decoder (obj_rpc.h).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "object/obj_rpc.h"

namespace ros2::obj {

// The other copies one leader request may name (RP_3 with a fallback needs 3).
inline constexpr size_t kMaxReplicaPeers = 4;
// Bytes of one peer's worker address.
inline constexpr size_t kMaxPeerAddress = 8192;
// A forward's flag: the leader decided a conditional operation; the copy
// remembers the transaction id for the key, so a resend after a failure gets
// the same answer whichever copy leads it.
inline constexpr uint8_t kForwardDecided = 1u << 0;
// A forward's flag: no request (the body is empty), only the leader's
// watermark (docs/replication.md, "Read rule"): the leader sends it alone
// when no forward carried its latest one.
inline constexpr uint8_t kForwardWatermark = 1u << 1;
// A forward's flag: take the operation back (docs/replication.md, "Failed
// updates"). The body is the request the leader forwarded (no data: the
// transfer carries none), `seq` its position; the copy discards what it
// stored of it at its epoch and stops holding its dkey's reads.
inline constexpr uint8_t kForwardAbort = 1u << 2;

struct ReplicaPeer {
  uint32_t target = 0;  // the engine-local index of the copy's target
  std::string address;  // the target's worker address (transport envelope)
  friend bool operator==(const ReplicaPeer&, const ReplicaPeer&) = default;
};

struct LeaderRequest {
  Opcode op = Opcode::kUpdate;  // kUpdate or kPunch
  std::vector<uint8_t> body;    // Encode(UpdateRequest) or Encode(PunchRequest), addressed to the leader
  std::vector<ReplicaPeer> peers;
  friend bool operator==(const LeaderRequest&, const LeaderRequest&) = default;
};

struct ForwardRequest {
  Opcode op = Opcode::kUpdate;
  uint8_t flags = 0;          // kForwardDecided
  std::vector<uint8_t> body;  // the decided request, addressed to the copy
  // Every copy of the update, the leader first (at most kMaxReplicaPeers + 1):
  // a copy that holds it when the leader dies forwards it to the others
  // (docs/replication.md, "In-doubt updates").
  std::vector<ReplicaPeer> group;
  // The leader's position of this operation (0: a resolution, which no
  // leader numbered), and its watermark: every operation it numbered below
  // it has been answered by every copy it was forwarded to (0: none known).
  // The copy keeps the watermark per leader (group.front()); both are under
  // the MAC.
  uint64_t seq = 0;
  uint64_t watermark = 0;
  std::array<uint8_t, 32> mac{};
  friend bool operator==(const ForwardRequest&, const ForwardRequest&) = default;
};

std::vector<uint8_t> Encode(const LeaderRequest& m);
std::vector<uint8_t> Encode(const ForwardRequest& m);
Result<LeaderRequest> DecodeLeaderRequest(std::span<const uint8_t> bytes);
Result<ForwardRequest> DecodeForwardRequest(std::span<const uint8_t> bytes);

// What a forward's MAC covers: a label, the opcode, the flags, the request,
// the group, the position, the watermark and the client's capability (so none can be swapped under the MAC).
std::vector<uint8_t> ForwardMacInput(const ForwardRequest& m, std::span<const uint8_t> capability);

}  // namespace ros2::obj
