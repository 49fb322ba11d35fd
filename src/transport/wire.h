// The ROS2 data-plane wire format: encoder and the one decoder every received
// message goes through. Pure byte manipulation with no UCX dependency, so the
// libFuzzer targets link only this and ros2_common.
//
// A message is a fixed 48-byte little-endian header followed by variable
// sections in a fixed order: capability, bulk descriptors, status message,
// payload, inline bulk data. The header declares every section length; the
// decoder accepts a message only if every field is valid and the sections add up
// to exactly the received length. Decoded views point into the caller's buffer.
// The format and every validation rule are specified in docs/wire-format.md;
// keep the two in step.
//
// The worker address blob (Worker::address()) is a second, separate format:
// an envelope with the peer's host boot id and pid around the UCX address.
//
// Free functions and plain structs; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ros2::transport::wire {

inline constexpr uint16_t kMagic = 0x3252;  // bytes "R2" on the wire
inline constexpr uint8_t kVersion = 6;  // 3: kSegment bulk; 4: kBatch; 5: reply endpoints bind connections; 6: sessions
inline constexpr size_t kHeaderSize = 48;
inline constexpr size_t kBulkDescriptorSize = 24;  // fixed part, the packed rkey follows
inline constexpr size_t kMaxCapability = 1024;
inline constexpr size_t kMaxStatusMessage = 1024;
inline constexpr size_t kMaxRkey = 4096;
inline constexpr size_t kMaxBulkDescriptors = 2;  // at most one per direction
inline constexpr uint16_t kMaxUserOpcode = 0xEFFF;
// The one reserved opcode in use: the transport's own session authentication
// request (connection_auth.h), answered by the worker itself.
inline constexpr uint16_t kAuthenticateOpcode = 0xF000;
// Header flags bit 0: a 24-byte integrity trailer (u64 sequence number, then a
// 16-byte AES-GMAC tag over every byte before the trailer) follows the last
// section. Only on messages of a connection whose integrity is on, never on a
// batch entry.
inline constexpr uint16_t kFlagIntegrity = 1;
inline constexpr size_t kIntegrityTrailerSize = 24;
inline constexpr size_t kIntegrityTagSize = 16;
// Hard upper bound on payload and on inline data; the configured inline limit is
// enforced separately by the receiver.
inline constexpr uint32_t kMaxPayload = 1u << 20;
inline constexpr uint32_t kMaxInline = 1u << 20;

enum class Kind : uint8_t {
  kHello = 1,     // client -> server: open a connection; payload = client address blob
  kHelloAck = 2,  // server -> client: connection accepted
  kRequest = 3,   // client -> server: an RPC
  kReply = 4,     // server -> client: the answer to one request
  kPushData = 5,  // server -> client: bulk-in bytes carried as active-message data (am mode)
  kBye = 6,       // either side: the connection is closing
  kBatch = 7,     // either side: several requests (client -> server) or replies (server -> client) in one message
};

// A batch message carries, as its payload, up to kMaxBatchMessages entries,
// each a u32 length followed by one complete message of that many bytes: all
// requests or all replies of the batch's connection, none with bulk riding
// active messages (docs/wire-format.md, "Batches").
inline constexpr size_t kMaxBatchMessages = 64;
inline constexpr size_t kBatchEntryPrefix = 4;

enum class BulkDirection : uint8_t {
  kOut = 0,  // client buffer the server reads (Pull)
  kIn = 1,   // client buffer the server writes (Push)
};

// How one bulk buffer moves: the tag of its descriptor, and (re-exported as
// transport::BulkTransfer) the one name the transport uses for how bulk moves,
// an endpoint's default (EndpointInfo::bulk_mode) included.
enum class BulkTransfer : uint8_t {
  kInline = 0,         // bytes inside this message (out only)
  kRma = 1,            // remote address + packed rkey: server GETs / PUTs
  kActiveMessage = 2,  // bytes ride the UCX AM data of this message (out) or a kPushData message (in)
  kCma = 3,            // remote address in the client process: the server reads / writes it by cross-memory
                       // attach; only on a connection whose hello proved the client's pid
  kSegment = 4,        // a range of a shared segment the client created (SharedBuffer): the rkey section is a
                       // SegmentRef, remote_addr the offset in the segment; the server maps the segment and
                       // copies straight into / out of it. Same pid-proof requirement as kCma.
};
inline constexpr uint8_t kMaxBulkTransfer = 4;

// The rkey section of a kSegment descriptor: u64 segment id, i32 the client's
// file descriptor of the segment, u32 reserved (0).
inline constexpr size_t kSegmentRefSize = 16;
struct SegmentRef {
  uint64_t id = 0;
  int32_t fd = -1;
};
void EncodeSegmentRef(const SegmentRef& ref, std::span<uint8_t, kSegmentRefSize> out);
// Requires rkey.size() == kSegmentRefSize (the decoder checked it).
SegmentRef DecodeSegmentRef(std::span<const uint8_t> rkey);

// A hello's capability section is empty or this proof of the client's identity
// for cross-memory attach: a 16-byte token from the server's listener, then the
// u64 address (in the client) of a copy of the token the server reads back.
// The hello ack's payload is exactly kHelloAckSize bytes: a flags byte (bit 0:
// cma accepted; bit 1: the server requires integrity on this connection;
// bit 2, libfabric only: the server moves bulk above the inline limit by
// fi_read / fi_write against the client's registered buffers, kRma), then
// the server's 16-byte challenge for session authentication.
inline constexpr size_t kHelloProofSize = 24;
inline constexpr uint8_t kHelloAckCmaAccepted = 1;
inline constexpr uint8_t kHelloAckIntegrity = 2;
inline constexpr uint8_t kHelloAckRma = 4;
inline constexpr size_t kNonceSize = 16;
inline constexpr size_t kHelloAckSize = 1 + kNonceSize;

struct BulkDescriptor {
  BulkDirection direction = BulkDirection::kOut;
  BulkTransfer transfer = BulkTransfer::kInline;
  uint64_t length = 0;            // bytes offered (out) or accepted (in)
  uint64_t remote_addr = 0;       // kRma and kCma: client virtual address of the buffer
  std::span<const uint8_t> rkey;  // kRma only: packed rkey
};

// Everything in one message; the encoder reads it, the decoder fills it with
// views into the received bytes.
struct Message {
  Kind kind = Kind::kRequest;
  uint16_t opcode = 0;                  // kRequest: the RPC; 0 otherwise
  uint8_t status_code = 0;              // kReply: Status::Code of the result
  uint64_t request_id = 0;              // kRequest/kReply/kPushData: matches a reply to its request
  uint64_t connection_id = 0;           // the receiver's id of this connection (0 in kHello)
  uint64_t pushed_bytes = 0;            // kReply: bytes the server pushed into the bulk-in buffer
  std::span<const uint8_t> capability;  // kRequest only
  std::array<BulkDescriptor, kMaxBulkDescriptors> bulk{};
  uint8_t bulk_count = 0;
  std::string_view status_message;  // kReply only
  std::span<const uint8_t> payload;
  std::span<const uint8_t> inline_data;  // kRequest: inline bulk-out bytes; kReply: inline pushed bytes
  // Decoded only: the integrity trailer (kFlagIntegrity), empty without it.
  // The encoder never writes one; the sender seals the encoded bytes
  // (SealIntegrity).
  std::span<const uint8_t> integrity;

  // The descriptor for `dir`, or nullptr.
  const BulkDescriptor* FindBulk(BulkDirection dir) const;
};

// Bytes needed to encode `m`.
size_t EncodedSize(const Message& m);
// Encodes `m` into `out` (out.size() >= EncodedSize(m)); returns bytes written.
// InvalidArgument when `m` itself breaks a rule the decoder would reject.
Result<size_t> Encode(const Message& m, std::span<uint8_t> out);
// The same without the inline data section, which is last: the header still
// declares its length, and the sender transmits `m.inline_data` right after
// these bytes (an iovec send), so the inline bytes are not copied here.
size_t EncodedHeadSize(const Message& m);
Result<size_t> EncodeHead(const Message& m, std::span<uint8_t> out);
// Validates and decodes one message. Every field is checked before it is used:
// magic, version, kind, reserved bits, opcode range, status code, section
// lengths against their limits and against `bytes.size()`, descriptor rules.
// On failure returns kProtocol naming the first offending field.
Result<Message> Decode(std::span<const uint8_t> bytes);
// The same into `m` (every field is overwritten; on failure `m` holds a partial
// decode and must not be used): the receive path's form, which decodes into a
// message on its stack instead of moving one out of a Result.
Status Decode(std::span<const uint8_t> bytes, Message& m);

// Sets kFlagIntegrity in the encoded header at the start of `message` (the
// sender then appends the trailer). REQUIRES: message.size() >= kHeaderSize.
void SetIntegrityFlag(std::span<uint8_t> message);

// Writes the header of a batch whose entries (payload_len bytes) follow it:
// `out` must hold kHeaderSize bytes. InvalidArgument for an empty or oversize
// payload or connection id 0.
Status EncodeBatchHeader(uint64_t connection_id, size_t payload_len, std::span<uint8_t> out);
// Whether `m` may ride a batch: a request or a reply whose bulk does not ride
// active messages (the rule EncodeBatchEntry and DecodeBatch enforce).
bool Batchable(const Message& m);
// Bytes one batch entry of `m` takes (the length prefix and the message).
inline size_t BatchEntrySize(const Message& m) {
  return kBatchEntryPrefix + EncodedSize(m);
}
// Encodes `m` as one batch entry into `out` (out.size() >= BatchEntrySize(m));
// returns the bytes written. InvalidArgument as Encode, and for a kind other
// than request or reply or bulk riding active messages.
Result<size_t> EncodeBatchEntry(const Message& m, std::span<uint8_t> out);
// Decodes every entry of a decoded batch `batch` into `out` (whose size is the
// most entries accepted, at most kMaxBatchMessages) and their bytes into
// `entry_bytes` (same size); returns how many. The whole batch is checked
// before anything is returned: every entry must decode, be of one kind
// (request or reply), carry the batch's connection id, have no bulk riding
// active messages, and the entries must fill the payload exactly. Otherwise
// kProtocol naming the entry and the rule.
Result<size_t> DecodeBatch(const Message& batch, std::span<Message> out,
                           std::span<std::span<const uint8_t>> entry_bytes);

// A worker's buffers for decoding received batches, reused from batch to
// batch. A batch decoded while another one's entries are being handled (a
// handler that progresses the worker) gets buffers of its own.
struct BatchScratch {
  std::vector<Message> msgs;
  std::vector<std::span<const uint8_t>> bytes;
  bool busy = false;
};
// One received batch decoded (DecodeBatch) into `scratch`'s buffers, or its
// own when they are in use; holds them until it goes.
class DecodedBatch {
 public:
  DecodedBatch(BatchScratch& scratch, const Message& batch)
      : owner_(scratch.busy ? nullptr : &scratch),
        msgs_(owner_ != nullptr ? scratch.msgs : own_msgs_),
        bytes_(owner_ != nullptr ? scratch.bytes : own_bytes_) {
    if (owner_ != nullptr) owner_->busy = true;
    msgs_.resize(kMaxBatchMessages);
    bytes_.resize(kMaxBatchMessages);
    count = DecodeBatch(batch, msgs_, bytes_);
  }
  ~DecodedBatch() {
    if (owner_ != nullptr) owner_->busy = false;
  }
  DecodedBatch(const DecodedBatch&) = delete;
  DecodedBatch& operator=(const DecodedBatch&) = delete;

  Result<size_t> count = size_t{0};  // entries, or why the batch is malformed
  // True when the batch decoded and holds requests (false: replies).
  bool requests() const { return count.ok() && *count > 0 && msgs_[0].kind == Kind::kRequest; }
  const Message& msg(size_t i) const { return msgs_[i]; }
  std::span<const uint8_t> bytes(size_t i) const { return bytes_[i]; }

 private:
  BatchScratch* owner_;
  std::vector<Message> own_msgs_;
  std::vector<std::span<const uint8_t>> own_bytes_;
  std::vector<Message>& msgs_;
  std::vector<std::span<const uint8_t>>& bytes_;
};

// ---- Worker address blob --------------------------------------------------
inline constexpr uint32_t kAddressMagic = 0x41573252;  // bytes "R2WA"
inline constexpr uint8_t kAddressVersion = 1;
inline constexpr size_t kAddressHeaderSize = 32;
inline constexpr size_t kMaxUcxAddress = 64 * 1024;

struct WorkerAddress {
  std::array<uint8_t, 16> boot_id{};  // the host identity (LocalHostId: the boot id and namespaces)
  int32_t pid = 0;                    // process owning the worker
  uint8_t wire_version = kVersion;    // the message version (kVersion) the worker speaks; never 0
  std::span<const uint8_t> ucx_address;
};
// The host identity of the calling process, for WorkerAddress::boot_id: the
// boot id mixed with the process's PID and IPC namespaces. Processes of one
// kernel in other PID or IPC namespaces (containers, the hosts of `ros2ctl
// cluster up --hosts`) cannot name each other's pids or System V segments,
// and UCX counts them as other hosts too.
std::array<uint8_t, 16> LocalHostId();
size_t EncodedAddressSize(const WorkerAddress& a);
Result<size_t> EncodeAddress(const WorkerAddress& a, std::span<uint8_t> out);
// Decodes any wire_version (the connecting side decides what to do with a
// peer of another version: CheckPeerWireVersion below).
Result<WorkerAddress> DecodeAddress(std::span<const uint8_t> bytes);
// kNotSupported naming both message versions when `peer_version` is not ours;
// OK otherwise. `peer` names the peer in the message.
Status CheckPeerWireVersion(uint8_t peer_version, std::string_view peer);
// The request id and connection id of a message that decoding refused, when
// its header at least has our magic and version and the kind of a request:
// what a receiver needs to answer the sender's call with the decoder's error
// instead of leaving it to its deadline. The ids are the sender's claim; the
// receiver checks them against the endpoint the message came in on.
struct RequestHeader {
  uint64_t request_id = 0;
  uint64_t connection_id = 0;
};
std::optional<RequestHeader> PeekRequest(std::span<const uint8_t> bytes);
// The connection id of a batch that decoding refused (our magic and version,
// the kind of a batch), for the same purpose: the sender's claim.
std::optional<uint64_t> PeekBatchConnection(std::span<const uint8_t> bytes);
// The version byte of a received message whose magic is ours, or 0 when the
// bytes are too short or not a ROS2 message (lets a receiver tell a message of
// another version from noise).
uint8_t PeekVersion(std::span<const uint8_t> bytes);

}  // namespace ros2::transport::wire
