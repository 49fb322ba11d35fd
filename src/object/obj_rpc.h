// Object RPC protocol: the messages between a client (libros2) and
// an engine target for object I/O, carried by the transport (transport.h).
//
// Each operation is one transport opcode (Opcode below). The request payload is
// a compact little-endian binary message that starts with a version byte; the
// reply's status (code + message) travels in the transport reply, and the reply
// payload (for OK replies only) is again a versioned binary message. Bulk data
// never appears in these payloads: an update's data is the call's bulk_out
// buffer, a fetch's destination is its bulk_in buffer, and the transport decides
// whether they travel inline or by RMA. The capability (control/capability.h)
// travels in CallOptions::capability. The byte layout is specified in
// docs/object-protocol.md.
//
// Decoding validates everything before any field is trusted: version, lengths
// against the payload and against the limits below, enum values, reserved bits,
// checksum shape (number of values versus data length and chunk size), overflow
// of index + count and count * record_size, and trailing bytes. A malformed
// payload yields Status kProtocol naming the message and the field; a payload
// that is well formed but asks for something invalid (empty dkey, zero record
// size) yields kInvalidArgument.
//
// Epochs: an update or punch with epoch 0 asks the engine to stamp it (from its
// hybrid logical clock); the reply returns the epoch used. A fetch, list or
// query with epoch 0 reads the latest state (kEpochMax).
//
// Free functions over value types; safe from any thread. The library
// (ros2_object) depends only on ros2_common.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/checksum.h"
#include "common/hlc.h"
#include "common/object_id.h"
#include "common/object_model.h"
#include "common/status.h"
#include "common/uuid.h"

namespace ros2::obj {

// Version 2: request flags (conditional update and punch, fetch with the
// array's end), the fetch reply's array end, and the array-tail query.
// Version 3: every request header carries the client's pool map version, and
// a StaleMap refusal carries a StaleMapReply.
inline constexpr uint8_t kProtocolVersion = 3;

// Limits enforced by the decoders (and by the encoders' callers).
inline constexpr size_t kMaxKeySize = 1024;                // dkey and akey bytes
inline constexpr size_t kMaxAnchorSize = 8192;             // opaque enumeration position
inline constexpr uint64_t kMaxIoSize = uint64_t{1} << 32;  // bytes of one update or fetch
inline constexpr size_t kMaxChecksums = 1u << 20;          // chunk checksums in one message
inline constexpr uint32_t kMaxListEntries = 4096;          // entries one list request may ask for
// A list reply never encodes more than this many bytes; the engine returns fewer
// entries (with an anchor to continue) rather than exceed it.
inline constexpr size_t kMaxListReplyBytes = 64 * 1024;

// Transport opcodes of the object protocol (0x0100 .. 0x01FF is reserved for it).
enum class Opcode : uint16_t {
  kPing = 0x0100,    // target info; needs no capability
  kUpdate = 0x0101,  // write a single value or array extent (data = bulk_out)
  kFetch = 0x0102,   // read a single value or array extent (data -> bulk_in)
  kPunch = 0x0103,   // remove an object, a dkey or an akey at an epoch
  kList = 0x0104,    // enumerate objects, dkeys, akeys or array extents
  kQuery = 0x0105,   // largest dkey of an object, end of an array akey
  // Replicated objects (replica_rpc.h): a client's update or punch to the
  // leader of its group, and the leader's forward of it to another replica.
  kLeader = 0x0106,
  kForward = 0x0107,
  // Rebuild (proto/ros2/rebuild.proto, RebuildReadRequest): a fallback target
  // reads array extents from the source target, engine to engine only.
  kRebuildRead = 0x0108,
};
std::string_view OpcodeName(uint16_t opcode);  // "update", ...; "unknown" otherwise

// The data-model vocabulary the messages speak, shared with VOS and the client
// (common/object_model.h): one definition each, named here for the protocol's
// users.
using ros2::Checksums;
using ros2::ListAnchor;
using ros2::PunchScope;
using ros2::ValueType;

// Bits of RequestHeader::flags. Each message accepts only the bits listed; any
// other set bit is a protocol error.
enum RequestFlags : uint8_t {
  // update: store only if the akey has no visible value (else AlreadyExists).
  kFlagIfAbsent = 1u << 0,
  // update: store only if the akey has a visible value; punch of a dkey or an
  // akey: only if it is visible (else NotFound).
  kFlagIfPresent = 1u << 1,
  // fetch of an array: the reply carries the akey's array end.
  kFlagWantArrayEnd = 1u << 2,
  // fetch: the engine verifies the stored checksums of what it sends instead
  // of passing them through for the client to check (the client asks after
  // its own check of this copy's data failed: Corruption then means the
  // stored data is damaged, and the engine counts it).
  kFlagVerifyStored = 1u << 3,
};
inline constexpr uint8_t kUpdateFlags = kFlagIfAbsent | kFlagIfPresent;
inline constexpr uint8_t kPunchFlags = kFlagIfPresent;
inline constexpr uint8_t kFetchFlags = kFlagWantArrayEnd | kFlagVerifyStored;

// Fields every object request (all but ping) starts with.
struct RequestHeader {
  // RequestFlags; kIfAbsent and kIfPresent exclude each other. The engine
  // serialises conditional operations per (object, dkey) so the check and the
  // write are atomic against each other.
  uint8_t flags = 0;
  Uuid pool;
  Uuid container;
  // The engine-local index of the target the client addressed
  // (TargetInfo::engine_index of the pool map); the engine refuses requests
  // that arrive at another target.
  uint32_t target = 0;
  Epoch epoch = 0;  // see the file comment for what 0 means
  // The version of the pool map the client placed the request with. A target
  // whose map is newer refuses the request with StaleMap and a StaleMapReply
  // (docs/cluster.md, "Map versions").
  uint64_t map_version = 0;
  friend bool operator==(const RequestHeader&, const RequestHeader&) = default;
};

// The payload of a StaleMap refusal (the only error reply with a payload):
// the target's map version and the one the request was made with. The client
// fetches a map at least as new as `engine_version` and resends.
struct StaleMapReply {
  uint64_t engine_version = 0;
  uint64_t request_version = 0;
  friend bool operator==(const StaleMapReply&, const StaleMapReply&) = default;
};

struct PingRequest {
  uint32_t target = 0;
  friend bool operator==(const PingRequest&, const PingRequest&) = default;
};
struct PingReply {
  uint32_t target = 0;        // index of the target that answered
  uint32_t target_count = 0;  // targets of its engine
  Uuid engine;                // the engine's id (stable across restarts)
  friend bool operator==(const PingReply&, const PingReply&) = default;
};

struct UpdateRequest {
  RequestHeader header;
  ObjectId oid;
  std::string dkey;  // 1 .. kMaxKeySize bytes
  std::string akey;  // 1 .. kMaxKeySize bytes
  ValueType type = ValueType::kSingle;
  uint64_t index = 0;        // kArray: first record; 0 for kSingle
  uint32_t record_size = 1;  // kArray: bytes per record (> 0); 1 for kSingle
  uint64_t length = 0;       // data bytes; must equal the call's bulk_out size
  Checksums csum;            // over the data; kNone lets the engine compute them
  friend bool operator==(const UpdateRequest&, const UpdateRequest&) = default;
};
struct UpdateReply {
  Epoch epoch = 0;  // the epoch the update was stored at
  friend bool operator==(const UpdateReply&, const UpdateReply&) = default;
};

struct FetchRequest {
  RequestHeader header;
  ObjectId oid;
  std::string dkey;
  std::string akey;
  ValueType type = ValueType::kSingle;
  uint64_t index = 0;        // kArray: first record
  uint64_t count = 0;        // kArray: records to read; count * record_size <= bulk_in capacity
  uint32_t record_size = 1;  // kArray: must match the stored record size
  friend bool operator==(const FetchRequest&, const FetchRequest&) = default;
};
struct FetchReply {
  // kSingle: the value's full size; when larger than the bulk_in capacity only
  // the first `capacity` bytes were pushed and `csum` is empty (fetch again with
  // a buffer of `size` bytes). kArray: count * record_size, holes read as zeros.
  uint64_t size = 0;
  Checksums csum;  // over the pushed bytes, chunked from their start
  // With kFlagWantArrayEnd: one past the highest visible record of the akey
  // (the whole akey, not only the fetched range); 0 when none or not asked.
  uint64_t array_end = 0;
  friend bool operator==(const FetchReply&, const FetchReply&) = default;
};

struct PunchRequest {
  RequestHeader header;
  PunchScope scope = PunchScope::kObject;
  ObjectId oid;
  std::string dkey;  // required for kDkey and kAkey, empty for kObject
  std::string akey;  // required for kAkey, empty otherwise
  friend bool operator==(const PunchRequest&, const PunchRequest&) = default;
};
struct PunchReply {
  Epoch epoch = 0;
  friend bool operator==(const PunchReply&, const PunchReply&) = default;
};

enum class ListKind : uint8_t { kObjects = 1, kDkeys = 2, kAkeys = 3, kExtents = 4 };
struct ListRequest {
  RequestHeader header;
  ListKind kind = ListKind::kObjects;
  ObjectId oid;              // ignored (zero) for kObjects
  std::string dkey;          // required for kAkeys and kExtents
  std::string akey;          // required for kExtents
  ListAnchor anchor;         // position: at most kMaxAnchorSize bytes, opaque to the client
  uint32_t max_entries = 0;  // 1 .. kMaxListEntries
  friend bool operator==(const ListRequest&, const ListRequest&) = default;
};

struct ExtentEntry {
  uint64_t index = 0;
  uint64_t count = 0;
  uint32_t record_size = 0;
  Epoch epoch = 0;
  friend bool operator==(const ExtentEntry&, const ExtentEntry&) = default;
};
struct ListReply {
  ListKind kind = ListKind::kObjects;
  std::vector<ObjectId> objects;     // kObjects
  std::vector<std::string> keys;     // kDkeys, kAkeys
  std::vector<ExtentEntry> extents;  // kExtents
  ListAnchor anchor;                 // where to continue; eof when complete
  friend bool operator==(const ListReply&, const ListReply&) = default;
};

// kArrayTail: the largest visible dkey of the object on this target and the
// array end of `akey` under it, in one request (a file's size in one round
// trip to every shard).
enum class QueryKind : uint8_t { kMaxDkey = 1, kArrayEnd = 2, kArrayTail = 3 };
struct QueryRequest {
  RequestHeader header;
  QueryKind kind = QueryKind::kMaxDkey;
  ObjectId oid;
  std::string dkey;  // kArrayEnd only
  std::string akey;  // kArrayEnd and kArrayTail
  friend bool operator==(const QueryRequest&, const QueryRequest&) = default;
};
struct QueryReply {
  QueryKind kind = QueryKind::kMaxDkey;
  bool found = false;      // false: no visible dkey / no visible record
  std::string max_dkey;    // kMaxDkey, kArrayTail
  uint64_t array_end = 0;  // kArrayEnd, kArrayTail: one past the highest visible record index (0: none)
  friend bool operator==(const QueryReply&, const QueryReply&) = default;
};

// --- encoding (requests and replies) ---
std::vector<uint8_t> Encode(const PingRequest& m);
std::vector<uint8_t> Encode(const PingReply& m);
std::vector<uint8_t> Encode(const UpdateRequest& m);
std::vector<uint8_t> Encode(const UpdateReply& m);
std::vector<uint8_t> Encode(const FetchRequest& m);
std::vector<uint8_t> Encode(const FetchReply& m);
std::vector<uint8_t> Encode(const PunchRequest& m);
std::vector<uint8_t> Encode(const PunchReply& m);
std::vector<uint8_t> Encode(const ListRequest& m);
std::vector<uint8_t> Encode(const ListReply& m);
std::vector<uint8_t> Encode(const QueryRequest& m);
std::vector<uint8_t> Encode(const QueryReply& m);
std::vector<uint8_t> Encode(const StaleMapReply& m);

// --- decoding: full validation, see the file comment ---
Result<PingRequest> DecodePingRequest(std::span<const uint8_t> bytes);
Result<PingReply> DecodePingReply(std::span<const uint8_t> bytes);
Result<UpdateRequest> DecodeUpdateRequest(std::span<const uint8_t> bytes);
Result<UpdateReply> DecodeUpdateReply(std::span<const uint8_t> bytes);
Result<FetchRequest> DecodeFetchRequest(std::span<const uint8_t> bytes);
Result<FetchReply> DecodeFetchReply(std::span<const uint8_t> bytes);
Result<PunchRequest> DecodePunchRequest(std::span<const uint8_t> bytes);
Result<PunchReply> DecodePunchReply(std::span<const uint8_t> bytes);
Result<ListRequest> DecodeListRequest(std::span<const uint8_t> bytes);
Result<ListReply> DecodeListReply(std::span<const uint8_t> bytes);
Result<QueryRequest> DecodeQueryRequest(std::span<const uint8_t> bytes);
Result<QueryReply> DecodeQueryReply(std::span<const uint8_t> bytes);
Result<StaleMapReply> DecodeStaleMapReply(std::span<const uint8_t> bytes);

// Encoded size of one list entry, for callers that budget a ListReply against
// kMaxListReplyBytes (the fixed part of a reply is kListReplyOverhead plus the
// anchor's position size).
inline constexpr size_t kListReplyOverhead = 1 + 1 + 4 + 4 + 1;
inline constexpr size_t kObjectEntrySize = 16;
inline constexpr size_t kExtentEntrySize = 8 + 8 + 4 + 8;
inline size_t KeyEntrySize(size_t key_bytes) {
  return 2 + key_bytes;
}

// Validates checksums against a data length: type known; kNone has no chunk
// size and no values; otherwise chunk_size > 0 and exactly
// ceil(length / chunk_size) values. `what` names the message in errors.
Status ValidateChecksums(const Checksums& csum, uint64_t length, std::string_view what);

}  // namespace ros2::obj
