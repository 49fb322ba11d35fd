// Encoder and validating decoder of the data-plane messages (docs/wire-format.md).
#include "transport/wire.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include <fmt/format.h>

namespace ros2::transport::wire {
namespace {

// Fixed header offsets (little-endian).
constexpr size_t kOffMagic = 0, kOffVersion = 2, kOffKind = 3, kOffFlags = 4, kOffOpcode = 6;
constexpr size_t kOffRequestId = 8, kOffConnectionId = 16, kOffPayloadLen = 24, kOffCapLen = 28;
constexpr size_t kOffStatusMsgLen = 30, kOffInlineLen = 32, kOffBulkCount = 36, kOffStatusCode = 37;
constexpr size_t kOffReserved = 38, kOffPushedBytes = 40;
constexpr uint8_t kMaxStatusCode = static_cast<uint8_t>(Status::kLastCode);

// Little-endian field access: one load or store (and a byte swap on a
// big-endian host), not a byte-by-byte loop the compiler may not fold.
template <typename T>
T SwapBytes(T v) {
  T r = 0;
  for (size_t i = 0; i < sizeof(T); ++i) r = static_cast<T>((r << 8) | ((v >> (8 * i)) & 0xff));
  return r;
}
template <typename T>
void Put(uint8_t* p, T v) {
  static_assert(std::is_unsigned_v<T>);
  if constexpr (std::endian::native == std::endian::big && sizeof(T) > 1) v = SwapBytes(v);
  std::memcpy(p, &v, sizeof(T));
}
template <typename T>
T Get(const uint8_t* p) {
  static_assert(std::is_unsigned_v<T>);
  T v;
  std::memcpy(&v, p, sizeof(T));
  if constexpr (std::endian::native == std::endian::big && sizeof(T) > 1) v = SwapBytes(v);
  return v;
}

Status Bad(std::string_view what) {
  return Status::Protocol(fmt::format("wire: {}", what));
}

bool KindValid(uint8_t k) {
  return k >= static_cast<uint8_t>(Kind::kHello) && k <= static_cast<uint8_t>(Kind::kBatch);
}

// The rules shared by the encoder (to refuse building a message the decoder
// would reject) and the decoder. `m` is fully populated.
Status CheckSemantics(const Message& m) {
  const bool request = m.kind == Kind::kRequest, reply = m.kind == Kind::kReply;
  if (m.capability.size() > kMaxCapability)
    return Bad(fmt::format("capability length {} > {}", m.capability.size(), kMaxCapability));
  if (m.kind == Kind::kHello) {
    if (!m.capability.empty() && m.capability.size() != kHelloProofSize)
      return Bad(fmt::format("hello proof length {} (expected 0 or {})", m.capability.size(), kHelloProofSize));
  } else if (!request && !m.capability.empty()) {
    return Bad("capability outside a request or hello");
  }
  if (m.kind == Kind::kHelloAck && (m.payload.size() != kHelloAckSize ||
                                    (m.payload[0] & ~(kHelloAckCmaAccepted | kHelloAckIntegrity | kHelloAckRma)) != 0))
    return Bad(fmt::format("hello ack payload is not a flags byte and a {}-byte challenge", kNonceSize));
  if (m.status_message.size() > kMaxStatusMessage)
    return Bad(fmt::format("status message length {} > {}", m.status_message.size(), kMaxStatusMessage));
  if (!reply && (!m.status_message.empty() || m.status_code != 0)) return Bad("status outside a reply");
  if (reply && m.status_code > kMaxStatusCode) return Bad(fmt::format("unknown status code {}", m.status_code));
  if (reply && m.status_code == 0 && !m.status_message.empty()) return Bad("status message on an OK reply");
  if (!reply && m.pushed_bytes != 0) return Bad("pushed_bytes outside a reply");
  if (request && m.opcode > kMaxUserOpcode && m.opcode != kAuthenticateOpcode)
    return Bad(fmt::format("opcode {:#x} is reserved", m.opcode));
  if (!request && m.opcode != 0) return Bad("opcode outside a request");
  if (m.payload.size() > kMaxPayload) return Bad(fmt::format("payload length {} > {}", m.payload.size(), kMaxPayload));
  if (m.inline_data.size() > kMaxInline)
    return Bad(fmt::format("inline length {} > {}", m.inline_data.size(), kMaxInline));
  if (m.bulk_count > kMaxBulkDescriptors)
    return Bad(fmt::format("bulk count {} > {}", m.bulk_count, kMaxBulkDescriptors));
  if (!request && m.bulk_count != 0) return Bad("bulk descriptors outside a request");
  if (m.kind == Kind::kHello || m.kind == Kind::kHelloAck || m.kind == Kind::kBye || m.kind == Kind::kPushData ||
      m.kind == Kind::kBatch) {
    if (!m.inline_data.empty()) return Bad("inline data on a control message");
  }
  if (m.kind == Kind::kBatch) {
    if (m.request_id != 0) return Bad("request id on a batch");
    if (m.payload.size() < kBatchEntryPrefix + kHeaderSize) return Bad("batch without an entry");
  }
  if (m.kind == Kind::kHello && m.connection_id != 0) return Bad("hello with a connection id");
  if (m.kind != Kind::kHello && m.connection_id == 0) return Bad("connection id 0");
  if (m.kind == Kind::kPushData && !m.payload.empty()) return Bad("payload on push data");
  if (reply && !m.inline_data.empty() && m.inline_data.size() != m.pushed_bytes) {
    return Bad(fmt::format("reply inline length {} != pushed_bytes {}", m.inline_data.size(), m.pushed_bytes));
  }
  bool seen[2] = {false, false};
  const BulkDescriptor* out = nullptr;
  for (uint8_t i = 0; i < m.bulk_count; ++i) {
    const BulkDescriptor& d = m.bulk[i];
    const auto dir = static_cast<uint8_t>(d.direction), tr = static_cast<uint8_t>(d.transfer);
    if (dir > 1) return Bad(fmt::format("bulk[{}] direction {}", i, dir));
    if (tr > kMaxBulkTransfer) return Bad(fmt::format("bulk[{}] transfer {}", i, tr));
    if (seen[dir]) return Bad(fmt::format("bulk[{}] repeats direction {}", i, dir));
    seen[dir] = true;
    if (d.length == 0) return Bad(fmt::format("bulk[{}] has length 0", i));
    if (d.rkey.size() > kMaxRkey) return Bad(fmt::format("bulk[{}] rkey length {} > {}", i, d.rkey.size(), kMaxRkey));
    if (d.transfer == BulkTransfer::kRma || d.transfer == BulkTransfer::kCma) {
      const bool rma = d.transfer == BulkTransfer::kRma;
      if (rma && d.rkey.empty()) return Bad(fmt::format("bulk[{}] rma without rkey", i));
      if (!rma && !d.rkey.empty()) return Bad(fmt::format("bulk[{}] cma with an rkey", i));
      if (d.remote_addr == 0) return Bad(fmt::format("bulk[{}] {} at address 0", i, rma ? "rma" : "cma"));
      if (d.remote_addr + d.length < d.remote_addr) return Bad(fmt::format("bulk[{}] address range wraps", i));
    } else if (d.transfer == BulkTransfer::kSegment) {
      if (d.rkey.size() != kSegmentRefSize)
        return Bad(
            fmt::format("bulk[{}] segment reference of {} bytes (expected {})", i, d.rkey.size(), kSegmentRefSize));
      const SegmentRef ref = DecodeSegmentRef(d.rkey);
      if (ref.id == 0 || ref.fd < 0) return Bad(fmt::format("bulk[{}] segment id {} fd {}", i, ref.id, ref.fd));
      if (Get<uint32_t>(d.rkey.data() + 12) != 0)
        return Bad(fmt::format("bulk[{}] segment reference reserved bytes are not zero", i));
      if (d.remote_addr + d.length < d.remote_addr) return Bad(fmt::format("bulk[{}] segment range wraps", i));
    } else if (!d.rkey.empty() || d.remote_addr != 0) {
      return Bad(fmt::format("bulk[{}] rkey or address on an inline or am descriptor", i));
    }
    if (d.direction == BulkDirection::kIn && d.transfer == BulkTransfer::kInline) {
      // Inline bulk-in means "send the bytes back in the reply"; the client buffer
      // size is the length. Allowed.
    }
    if (d.direction == BulkDirection::kOut) out = &d;
  }
  if (request) {
    const bool inline_out = out != nullptr && out->transfer == BulkTransfer::kInline;
    if (inline_out && out->length != m.inline_data.size()) {
      return Bad(fmt::format("inline bulk length {} != inline section {}", out->length, m.inline_data.size()));
    }
    if (!inline_out && !m.inline_data.empty()) return Bad("inline section without an inline bulk descriptor");
  }
  return Status::Ok();
}

}  // namespace

void EncodeSegmentRef(const SegmentRef& ref, std::span<uint8_t, kSegmentRefSize> out) {
  Put<uint64_t>(out.data(), ref.id);
  Put<uint32_t>(out.data() + 8, static_cast<uint32_t>(ref.fd));
  Put<uint32_t>(out.data() + 12, 0);
}

SegmentRef DecodeSegmentRef(std::span<const uint8_t> rkey) {
  SegmentRef ref;
  ref.id = Get<uint64_t>(rkey.data());
  ref.fd = static_cast<int32_t>(Get<uint32_t>(rkey.data() + 8));
  return ref;
}

const BulkDescriptor* Message::FindBulk(BulkDirection dir) const {
  for (uint8_t i = 0; i < bulk_count && i < kMaxBulkDescriptors; ++i) {
    if (bulk[i].direction == dir) return &bulk[i];
  }
  return nullptr;
}

size_t EncodedSize(const Message& m) {
  size_t n = kHeaderSize + m.capability.size() + m.status_message.size() + m.payload.size() + m.inline_data.size();
  for (uint8_t i = 0; i < m.bulk_count && i < kMaxBulkDescriptors; ++i)
    n += kBulkDescriptorSize + m.bulk[i].rkey.size();
  return n;
}

size_t EncodedHeadSize(const Message& m) {
  return EncodedSize(m) - m.inline_data.size();
}

Result<size_t> Encode(const Message& m, std::span<uint8_t> out) {
  if (out.size() < EncodedSize(m))
    return Status::InvalidArgument(
        fmt::format("wire: encode needs {} bytes, buffer has {}", EncodedSize(m), out.size()));
  ROS2_ASSIGN_OR_RETURN(size_t off, EncodeHead(m, out));
  if (!m.inline_data.empty()) std::memcpy(out.data() + off, m.inline_data.data(), m.inline_data.size());
  return off + m.inline_data.size();
}

Result<size_t> EncodeHead(const Message& m, std::span<uint8_t> out) {
  if (!KindValid(static_cast<uint8_t>(m.kind))) return Status::InvalidArgument("wire: encode: unknown kind");
  if (Status st = CheckSemantics(m); !st.ok()) return Status::InvalidArgument("encode: " + st.message());
  const size_t need = EncodedHeadSize(m);
  if (out.size() < need)
    return Status::InvalidArgument(fmt::format("wire: encode needs {} bytes, buffer has {}", need, out.size()));
  uint8_t* p = out.data();
  std::memset(p, 0, kHeaderSize);
  Put<uint16_t>(p + kOffMagic, kMagic);
  p[kOffVersion] = kVersion;
  p[kOffKind] = static_cast<uint8_t>(m.kind);
  Put<uint16_t>(p + kOffFlags, 0);
  Put<uint16_t>(p + kOffOpcode, m.opcode);
  Put<uint64_t>(p + kOffRequestId, m.request_id);
  Put<uint64_t>(p + kOffConnectionId, m.connection_id);
  Put<uint32_t>(p + kOffPayloadLen, static_cast<uint32_t>(m.payload.size()));
  Put<uint16_t>(p + kOffCapLen, static_cast<uint16_t>(m.capability.size()));
  Put<uint16_t>(p + kOffStatusMsgLen, static_cast<uint16_t>(m.status_message.size()));
  Put<uint32_t>(p + kOffInlineLen, static_cast<uint32_t>(m.inline_data.size()));
  p[kOffBulkCount] = m.bulk_count;
  p[kOffStatusCode] = m.status_code;
  Put<uint16_t>(p + kOffReserved, 0);
  Put<uint64_t>(p + kOffPushedBytes, m.pushed_bytes);
  size_t off = kHeaderSize;
  auto append = [&](const void* src, size_t n) {
    if (n != 0) std::memcpy(p + off, src, n);
    off += n;
  };
  append(m.capability.data(), m.capability.size());
  for (uint8_t i = 0; i < m.bulk_count; ++i) {
    const BulkDescriptor& d = m.bulk[i];
    uint8_t* q = p + off;
    q[0] = static_cast<uint8_t>(d.direction);
    q[1] = static_cast<uint8_t>(d.transfer);
    Put<uint16_t>(q + 2, static_cast<uint16_t>(d.rkey.size()));
    Put<uint32_t>(q + 4, 0);
    Put<uint64_t>(q + 8, d.length);
    Put<uint64_t>(q + 16, d.remote_addr);
    off += kBulkDescriptorSize;
    append(d.rkey.data(), d.rkey.size());
  }
  append(m.status_message.data(), m.status_message.size());
  append(m.payload.data(), m.payload.size());
  return off;
}

Status Decode(std::span<const uint8_t> bytes, Message& m) {
  if (bytes.size() < kHeaderSize)
    return Bad(fmt::format("message of {} bytes is shorter than the {}-byte header", bytes.size(), kHeaderSize));
  const uint8_t* p = bytes.data();
  if (Get<uint16_t>(p + kOffMagic) != kMagic)
    return Bad(fmt::format("bad magic {:#06x}", Get<uint16_t>(p + kOffMagic)));
  if (p[kOffVersion] != kVersion)
    return Bad(fmt::format("unsupported version {} (this side speaks {})", p[kOffVersion], kVersion));
  if (!KindValid(p[kOffKind])) return Bad(fmt::format("unknown kind {}", p[kOffKind]));
  const uint16_t flags = Get<uint16_t>(p + kOffFlags);
  if ((flags & ~kFlagIntegrity) != 0) return Bad(fmt::format("unknown flags {:#06x}", flags));
  if (Get<uint16_t>(p + kOffReserved) != 0) return Bad("reserved header bytes are not zero");

  m.kind = static_cast<Kind>(p[kOffKind]);
  m.opcode = Get<uint16_t>(p + kOffOpcode);
  m.request_id = Get<uint64_t>(p + kOffRequestId);
  m.connection_id = Get<uint64_t>(p + kOffConnectionId);
  m.status_code = p[kOffStatusCode];
  m.pushed_bytes = Get<uint64_t>(p + kOffPushedBytes);
  const uint32_t payload_len = Get<uint32_t>(p + kOffPayloadLen);
  const uint16_t cap_len = Get<uint16_t>(p + kOffCapLen);
  const uint16_t msg_len = Get<uint16_t>(p + kOffStatusMsgLen);
  const uint32_t inline_len = Get<uint32_t>(p + kOffInlineLen);
  const uint8_t bulk_count = p[kOffBulkCount];
  // Check the limits before any length is used to index the buffer.
  if (cap_len > kMaxCapability) return Bad(fmt::format("capability length {} > {}", cap_len, kMaxCapability));
  if (msg_len > kMaxStatusMessage) return Bad(fmt::format("status message length {} > {}", msg_len, kMaxStatusMessage));
  if (payload_len > kMaxPayload) return Bad(fmt::format("payload length {} > {}", payload_len, kMaxPayload));
  if (inline_len > kMaxInline) return Bad(fmt::format("inline length {} > {}", inline_len, kMaxInline));
  if (bulk_count > kMaxBulkDescriptors) return Bad(fmt::format("bulk count {} > {}", bulk_count, kMaxBulkDescriptors));

  // From here every size is small enough that sums cannot overflow size_t.
  size_t off = kHeaderSize;
  const size_t total = bytes.size();
  // Takes the next n bytes into `view`; false (and `what` for the error) when
  // the message ends first.
  const char* short_in = nullptr;
  size_t short_need = 0;
  auto take = [&](size_t n, const char* what, std::span<const uint8_t>& view) {
    if (n > total - off) {
      short_in = what;
      short_need = n;
      return false;
    }
    view = bytes.subspan(off, n);
    off += n;
    return true;
  };
  auto truncated = [&] {
    return Bad(
        fmt::format("truncated in {}: needs {} bytes at offset {}, message has {}", short_in, short_need, off, total));
  };
  if (!take(cap_len, "capability", m.capability)) return truncated();
  m.bulk_count = bulk_count;
  for (uint8_t i = 0; i < bulk_count; ++i) {
    std::span<const uint8_t> fixed;
    if (!take(kBulkDescriptorSize, "bulk descriptor", fixed)) return truncated();
    BulkDescriptor& d = m.bulk[i];
    if (fixed[0] > 1) return Bad(fmt::format("bulk[{}] direction {}", i, fixed[0]));
    if (fixed[1] > kMaxBulkTransfer) return Bad(fmt::format("bulk[{}] transfer {}", i, fixed[1]));
    d.direction = static_cast<BulkDirection>(fixed[0]);
    d.transfer = static_cast<BulkTransfer>(fixed[1]);
    const uint16_t rkey_len = Get<uint16_t>(fixed.data() + 2);
    if (Get<uint32_t>(fixed.data() + 4) != 0) return Bad(fmt::format("bulk[{}] reserved bytes are not zero", i));
    d.length = Get<uint64_t>(fixed.data() + 8);
    d.remote_addr = Get<uint64_t>(fixed.data() + 16);
    if (rkey_len > kMaxRkey) return Bad(fmt::format("bulk[{}] rkey length {} > {}", i, rkey_len, kMaxRkey));
    if (!take(rkey_len, "rkey", d.rkey)) return truncated();
  }
  for (uint8_t i = bulk_count; i < kMaxBulkDescriptors; ++i) m.bulk[i] = BulkDescriptor{};
  std::span<const uint8_t> status_bytes;
  if (!take(msg_len, "status message", status_bytes)) return truncated();
  m.status_message = std::string_view(reinterpret_cast<const char*>(status_bytes.data()), status_bytes.size());
  if (!take(payload_len, "payload", m.payload)) return truncated();
  if (!take(inline_len, "inline data", m.inline_data)) return truncated();
  m.integrity = {};
  if ((flags & kFlagIntegrity) != 0 && !take(kIntegrityTrailerSize, "integrity trailer", m.integrity))
    return truncated();
  if (off != total) return Bad(fmt::format("{} trailing bytes after the declared sections", total - off));
  return CheckSemantics(m);
}

Result<Message> Decode(std::span<const uint8_t> bytes) {
  Message m;
  ROS2_RETURN_IF_ERROR(Decode(bytes, m));
  return m;
}

void SetIntegrityFlag(std::span<uint8_t> message) {
  Put<uint16_t>(message.data() + kOffFlags, Get<uint16_t>(message.data() + kOffFlags) | kFlagIntegrity);
}

// ---- Batches ------------------------------------------------------------------
Status EncodeBatchHeader(uint64_t connection_id, size_t payload_len, std::span<uint8_t> out) {
  if (out.size() < kHeaderSize) return Status::InvalidArgument("wire: batch header needs 48 bytes");
  if (connection_id == 0) return Status::InvalidArgument("wire: batch with connection id 0");
  if (payload_len < kBatchEntryPrefix + kHeaderSize || payload_len > kMaxPayload)
    return Status::InvalidArgument(fmt::format("wire: batch payload of {} bytes", payload_len));
  uint8_t* p = out.data();
  std::memset(p, 0, kHeaderSize);
  Put<uint16_t>(p + kOffMagic, kMagic);
  p[kOffVersion] = kVersion;
  p[kOffKind] = static_cast<uint8_t>(Kind::kBatch);
  Put<uint64_t>(p + kOffConnectionId, connection_id);
  Put<uint32_t>(p + kOffPayloadLen, static_cast<uint32_t>(payload_len));
  return Status::Ok();
}

bool Batchable(const Message& m) {
  if (m.kind != Kind::kRequest && m.kind != Kind::kReply) return false;
  for (uint8_t i = 0; i < m.bulk_count && i < kMaxBulkDescriptors; ++i) {
    if (m.bulk[i].transfer == BulkTransfer::kActiveMessage) return false;
  }
  return true;
}

namespace {
Status CheckBatchable(const Message& m) {
  if (m.kind != Kind::kRequest && m.kind != Kind::kReply) return Bad("batch entry is not a request or reply");
  if (!Batchable(m)) return Bad("batch entry with bulk riding active messages");
  return Status::Ok();
}
}  // namespace

Result<size_t> EncodeBatchEntry(const Message& m, std::span<uint8_t> out) {
  if (Status st = CheckBatchable(m); !st.ok()) return Status::InvalidArgument("encode: " + st.message());
  const size_t size = EncodedSize(m);
  if (out.size() < kBatchEntryPrefix + size)
    return Status::InvalidArgument(
        fmt::format("wire: batch entry needs {} bytes, buffer has {}", kBatchEntryPrefix + size, out.size()));
  Put<uint32_t>(out.data(), static_cast<uint32_t>(size));
  ROS2_ASSIGN_OR_RETURN(size_t n, Encode(m, out.subspan(kBatchEntryPrefix)));
  return kBatchEntryPrefix + n;
}

Result<size_t> DecodeBatch(const Message& batch, std::span<Message> out,
                           std::span<std::span<const uint8_t>> entry_bytes) {
  if (batch.kind != Kind::kBatch) return Bad("not a batch");
  std::span<const uint8_t> rest = batch.payload;
  const size_t limit = std::min({out.size(), entry_bytes.size(), kMaxBatchMessages});
  size_t n = 0;
  while (!rest.empty()) {
    if (n == limit) return Bad(fmt::format("batch of more than {} entries", limit));
    if (rest.size() < kBatchEntryPrefix) return Bad(fmt::format("batch entry {}: truncated length prefix", n));
    const uint32_t len = Get<uint32_t>(rest.data());
    if (len > rest.size() - kBatchEntryPrefix)
      return Bad(fmt::format("batch entry {}: length {} but {} bytes remain", n, len, rest.size() - kBatchEntryPrefix));
    std::span<const uint8_t> bytes = rest.subspan(kBatchEntryPrefix, len);
    if (Status st = Decode(bytes, out[n]); !st.ok()) return Bad(fmt::format("batch entry {}: {}", n, st.message()));
    if (Status st = CheckBatchable(out[n]); !st.ok()) return Bad(fmt::format("batch entry {}: {}", n, st.message()));
    if (!out[n].integrity.empty()) return Bad(fmt::format("batch entry {}: an integrity trailer inside a batch", n));
    if (out[n].kind != out[0].kind) return Bad(fmt::format("batch entry {}: mixes requests and replies", n));
    if (out[n].connection_id != batch.connection_id)
      return Bad(fmt::format("batch entry {}: connection id {} in a batch for {}", n, out[n].connection_id,
                             batch.connection_id));
    entry_bytes[n] = bytes;
    rest = rest.subspan(kBatchEntryPrefix + len);
    ++n;
  }
  return n;
}

// ---- Worker address blob ----------------------------------------------------
// The boot id's hex digits as 16 bytes, bytes 0-7 XORed with the PID
// namespace's inode and 8-15 with the IPC namespace's (docs/wire-format.md).
std::array<uint8_t, 16> LocalHostId() {
  std::array<uint8_t, 16> id{};
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string text;
  std::getline(in, text);
  size_t n = 0;
  for (size_t i = 0; i + 1 < text.size() && n < id.size(); ++i) {
    if (!isxdigit(static_cast<unsigned char>(text[i])) || !isxdigit(static_cast<unsigned char>(text[i + 1]))) continue;
    id[n++] = static_cast<uint8_t>(std::stoi(text.substr(i, 2), nullptr, 16));
    ++i;
  }
  size_t at = 0;
  for (const char* ns : {"/proc/self/ns/pid", "/proc/self/ns/ipc"}) {
    struct stat st {};
    const uint64_t ino = ::stat(ns, &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
    for (size_t b = 0; b < 8; ++b) id[at + b] ^= static_cast<uint8_t>(ino >> (8 * b));
    at += 8;
  }
  return id;
}

// Layout: magic u32, version u8, message wire version u8, reserved u8 x2, pid
// i32 (as u32), ucx address length u32, boot id 16 bytes, then the UCX address.
size_t EncodedAddressSize(const WorkerAddress& a) {
  return kAddressHeaderSize + a.ucx_address.size();
}

Result<size_t> EncodeAddress(const WorkerAddress& a, std::span<uint8_t> out) {
  if (a.ucx_address.empty() || a.ucx_address.size() > kMaxUcxAddress) {
    return Status::InvalidArgument(fmt::format("wire: UCX address of {} bytes", a.ucx_address.size()));
  }
  if (a.pid <= 0) return Status::InvalidArgument(fmt::format("wire: address pid {}", a.pid));
  if (a.wire_version == 0) return Status::InvalidArgument("wire: address with wire version 0");
  const size_t need = EncodedAddressSize(a);
  if (out.size() < need) return Status::InvalidArgument("wire: address buffer too small");
  uint8_t* p = out.data();
  std::memset(p, 0, kAddressHeaderSize);
  Put<uint32_t>(p, kAddressMagic);
  p[4] = kAddressVersion;
  p[5] = a.wire_version;
  Put<uint32_t>(p + 8, static_cast<uint32_t>(a.pid));
  Put<uint32_t>(p + 12, static_cast<uint32_t>(a.ucx_address.size()));
  std::memcpy(p + 16, a.boot_id.data(), a.boot_id.size());
  std::memcpy(p + kAddressHeaderSize, a.ucx_address.data(), a.ucx_address.size());
  return need;
}

Result<WorkerAddress> DecodeAddress(std::span<const uint8_t> bytes) {
  auto bad = [](std::string_view what) { return Status::InvalidArgument(fmt::format("worker address: {}", what)); };
  if (bytes.size() < kAddressHeaderSize)
    return bad(fmt::format("{} bytes is shorter than the {}-byte header", bytes.size(), kAddressHeaderSize));
  const uint8_t* p = bytes.data();
  if (Get<uint32_t>(p) != kAddressMagic) return bad("bad magic (not a ROS2 worker address)");
  if (p[4] != kAddressVersion)
    return bad(fmt::format("address format version {} (this side reads version {})", p[4], kAddressVersion));
  if (p[5] == 0) return bad("wire version 0");
  if (p[6] != 0 || p[7] != 0) return bad("reserved bytes are not zero");
  WorkerAddress a;
  a.wire_version = p[5];
  a.pid = static_cast<int32_t>(Get<uint32_t>(p + 8));
  if (a.pid <= 0) return bad(fmt::format("pid {}", a.pid));
  const uint32_t len = Get<uint32_t>(p + 12);
  if (len == 0 || len > kMaxUcxAddress) return bad(fmt::format("UCX address length {}", len));
  if (len != bytes.size() - kAddressHeaderSize) {
    return bad(
        fmt::format("UCX address length {} but {} bytes follow the header", len, bytes.size() - kAddressHeaderSize));
  }
  std::memcpy(a.boot_id.data(), p + 16, a.boot_id.size());
  a.ucx_address = bytes.subspan(kAddressHeaderSize, len);
  return a;
}

Status CheckPeerWireVersion(uint8_t peer_version, std::string_view peer) {
  if (peer_version == kVersion) return Status::Ok();
  return Status::NotSupported(
      fmt::format("transport: {} speaks data-plane wire version {}, this side speaks version {}; both ends must run "
                  "the same wire version",
                  peer, peer_version, kVersion));
}

std::optional<RequestHeader> PeekRequest(std::span<const uint8_t> bytes) {
  if (bytes.size() < kHeaderSize) return std::nullopt;
  const uint8_t* p = bytes.data();
  if (Get<uint16_t>(p + kOffMagic) != kMagic || p[kOffVersion] != kVersion) return std::nullopt;
  if (p[kOffKind] != static_cast<uint8_t>(Kind::kRequest)) return std::nullopt;
  return RequestHeader{Get<uint64_t>(p + kOffRequestId), Get<uint64_t>(p + kOffConnectionId)};
}

std::optional<uint64_t> PeekBatchConnection(std::span<const uint8_t> bytes) {
  if (bytes.size() < kHeaderSize) return std::nullopt;
  const uint8_t* p = bytes.data();
  if (Get<uint16_t>(p + kOffMagic) != kMagic || p[kOffVersion] != kVersion) return std::nullopt;
  if (p[kOffKind] != static_cast<uint8_t>(Kind::kBatch)) return std::nullopt;
  return Get<uint64_t>(p + kOffConnectionId);
}

uint8_t PeekVersion(std::span<const uint8_t> bytes) {
  if (bytes.size() < kOffVersion + 1 || Get<uint16_t>(bytes.data() + kOffMagic) != kMagic) return 0;
  return bytes[kOffVersion];
}

}  // namespace ros2::transport::wire
