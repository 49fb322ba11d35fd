// Encoding and validating decoding of the object RPC messages
// (docs/object-protocol.md is the byte-level specification).
#include "object/obj_rpc.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace ros2::obj {
namespace {

// Appends little-endian fields to a byte vector.
class Writer {
 public:
  // Room for a request or reply without its bulk values up front: the
  // fields are appended a few bytes at a time, and growing from empty would
  // reallocate (and copy) the message several times for every RPC.
  explicit Writer(uint8_t version = kProtocolVersion) : out_(kInitialRoom) { U8(version); }
  void U8(uint8_t v) { *Room(1) = v; }
  void U16(uint16_t v) { Le<2>(v); }
  void U32(uint32_t v) { Le<4>(v); }
  void U64(uint64_t v) { Le<8>(v); }
  void Raw(const void* p, size_t n) {
    if (n != 0) std::memcpy(Room(n), p, n);
  }
  void Id(const Uuid& u) { Raw(u.bytes().data(), u.bytes().size()); }
  void Oid(const ObjectId& o) {
    U64(o.hi);
    U64(o.lo);
  }
  void Key(const std::string& k) {
    U16(static_cast<uint16_t>(k.size()));
    Raw(k.data(), k.size());
  }
  void Header(const RequestHeader& h) {
    U8(h.flags);
    Id(h.pool);
    Id(h.container);
    U32(h.target);
    U64(h.epoch);
    U64(h.map_version);
  }
  void Csum(const Checksums& c) {
    U8(static_cast<uint8_t>(c.type));
    U32(c.chunk_size);
    U32(static_cast<uint32_t>(c.values.size()));
    const int width = c.type == ChecksumType::kCrc64 ? 8 : 4;
    for (uint64_t v : c.values) Le(v, width);
  }
  void Anchor(const ListAnchor& a) {
    U8(a.eof ? 1 : 0);
    U32(static_cast<uint32_t>(a.position.size()));
    Raw(a.position.data(), a.position.size());
  }
  std::vector<uint8_t> Take() {
    out_.resize(len_);  // shrinks: no reallocation
    return std::move(out_);
  }

 private:
  static constexpr size_t kInitialRoom = 256;
  // The next n bytes of the message: the vector is sized ahead (kInitialRoom,
  // then doubling) and `len_` counts what is written, so a field is a bounds
  // check and a store, not a vector insert per field (a request header is a
  // dozen fields).
  uint8_t* Room(size_t n) {
    if (out_.size() - len_ < n) [[unlikely]]
      out_.resize(std::max(out_.size() * 2, len_ + n));
    uint8_t* p = out_.data() + len_;
    len_ += n;
    return p;
  }
  template <size_t W>
  void Le(uint64_t v) {
    uint8_t* p = Room(W);
    for (size_t i = 0; i < W; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
  }
  void Le(uint64_t v, int width) { width == 8 ? Le<8>(v) : Le<4>(v); }
  std::vector<uint8_t> out_;
  size_t len_ = 0;  // bytes written; out_.size() is the room
};

// Reads little-endian fields with bounds checks; the first failure sticks and
// names the message and the field.
class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, std::string_view what) : bytes_(bytes), what_(what) {}

  Status Version() {
    uint8_t v = 0;
    ROS2_RETURN_IF_ERROR(U8("version", &v));
    if (v != kProtocolVersion) {
      return Fail(fmt::format("version {} (this build speaks {})", v, kProtocolVersion));
    }
    return Status::Ok();
  }
  Status U8(const char* field, uint8_t* v) { return Le<1>(field, v); }
  Status U16(const char* field, uint16_t* v) { return Le<2>(field, v); }
  Status U32(const char* field, uint32_t* v) { return Le<4>(field, v); }
  Status U64(const char* field, uint64_t* v) { return Le<8>(field, v); }
  Status Bool(const char* field, bool* v) {
    uint8_t b = 0;
    ROS2_RETURN_IF_ERROR(U8(field, &b));
    if (b > 1) return Fail(fmt::format("{}: expected 0 or 1, got {}", field, b));
    *v = b == 1;
    return Status::Ok();
  }
  Status Id(const char* field, Uuid* u) {
    if (Remaining() < 16) return Truncated(field);
    std::array<uint8_t, 16> b{};
    std::memcpy(b.data(), bytes_.data() + pos_, 16);
    pos_ += 16;
    *u = Uuid::FromBytes(b);
    return Status::Ok();
  }
  Status Oid(const char* field, ObjectId* o) {
    ROS2_RETURN_IF_ERROR(U64(field, &o->hi));
    return U64(field, &o->lo);
  }
  Status Bytes(const char* field, size_t n, std::string* out) {
    if (Remaining() < n) return Truncated(field);
    out->assign(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return Status::Ok();
  }
  Status Key(const char* field, std::string* k) {
    uint16_t n = 0;
    ROS2_RETURN_IF_ERROR(U16(field, &n));
    if (n > kMaxKeySize) return Fail(fmt::format("{}: {} bytes exceeds the limit of {}", field, n, kMaxKeySize));
    return Bytes(field, n, k);
  }
  // `allowed`: the RequestFlags this message may carry.
  Status Header(RequestHeader* h, uint8_t allowed = 0) {
    uint8_t flags = 0;
    ROS2_RETURN_IF_ERROR(U8("flags", &flags));
    if ((flags & ~allowed) != 0) return Fail(fmt::format("flags: bits 0x{:02x} not valid here", flags & ~allowed));
    if ((flags & kFlagIfAbsent) != 0 && (flags & kFlagIfPresent) != 0) {
      return Fail("flags: if-absent and if-present together");
    }
    h->flags = flags;
    ROS2_RETURN_IF_ERROR(Id("pool", &h->pool));
    ROS2_RETURN_IF_ERROR(Id("container", &h->container));
    ROS2_RETURN_IF_ERROR(U32("target", &h->target));
    ROS2_RETURN_IF_ERROR(U64("epoch", &h->epoch));
    return U64("map version", &h->map_version);
  }
  Status Csum(Checksums* c) {
    uint8_t type = 0;
    uint32_t count = 0;
    ROS2_RETURN_IF_ERROR(U8("checksum type", &type));
    if (type > static_cast<uint8_t>(ChecksumType::kCrc64)) return Fail(fmt::format("checksum type {} unknown", type));
    c->type = static_cast<ChecksumType>(type);
    ROS2_RETURN_IF_ERROR(U32("checksum chunk size", &c->chunk_size));
    ROS2_RETURN_IF_ERROR(U32("checksum count", &count));
    if (count > kMaxChecksums) return Fail(fmt::format("checksum count {} exceeds {}", count, kMaxChecksums));
    const size_t width = c->type == ChecksumType::kCrc64 ? 8 : 4;
    if (c->type == ChecksumType::kNone && count != 0) return Fail("checksum values present with type none");
    if (Remaining() < count * width) return Truncated("checksum values");
    c->values.resize(count);
    for (uint32_t i = 0; i < count; ++i)
      ROS2_RETURN_IF_ERROR(Le("checksum value", static_cast<int>(width), &c->values[i]));
    return Status::Ok();
  }
  Status Anchor(ListAnchor* a) {
    uint32_t n = 0;
    ROS2_RETURN_IF_ERROR(Bool("anchor eof", &a->eof));
    ROS2_RETURN_IF_ERROR(U32("anchor size", &n));
    if (n > kMaxAnchorSize) return Fail(fmt::format("anchor: {} bytes exceeds the limit of {}", n, kMaxAnchorSize));
    return Bytes("anchor", n, &a->position);
  }
  Status Done() {
    if (Remaining() != 0) return Fail(fmt::format("{} trailing bytes", Remaining()));
    return Status::Ok();
  }
  Status Fail(std::string_view msg) const { return Status::Protocol(fmt::format("object rpc {}: {}", what_, msg)); }
  Status Invalid(std::string_view msg) const {
    return Status::InvalidArgument(fmt::format("object rpc {}: {}", what_, msg));
  }

 private:
  size_t Remaining() const { return bytes_.size() - pos_; }
  Status Truncated(const char* field) const {
    return Fail(fmt::format("truncated at {} (offset {} of {})", field, pos_, bytes_.size()));
  }
  template <size_t W, typename T>
  Status Le(const char* field, T* v) {
    if (Remaining() < W) [[unlikely]]
      return Truncated(field);
    const uint8_t* p = bytes_.data() + pos_;
    uint64_t x = 0;
    for (size_t i = 0; i < W; ++i) x |= uint64_t{p[i]} << (8 * i);
    pos_ += W;
    *v = static_cast<T>(x);
    return Status::Ok();
  }
  template <typename T>
  Status Le(const char* field, int width, T* v) {
    return width == 8 ? Le<8>(field, v) : Le<4>(field, v);
  }
  std::span<const uint8_t> bytes_;
  std::string_view what_;
  size_t pos_ = 0;
};

Status ReadValueType(Reader& r, ValueType* t) {
  uint8_t v = 0;
  ROS2_RETURN_IF_ERROR(r.U8("value type", &v));
  if (v != 1 && v != 2) return r.Fail(fmt::format("value type {} unknown", v));
  *t = static_cast<ValueType>(v);
  return Status::Ok();
}

Status RequireKey(const Reader& r, const std::string& key, const char* name) {
  if (key.empty()) return r.Invalid(fmt::format("{} is empty", name));
  return Status::Ok();
}

Status RequireEmpty(const Reader& r, const std::string& key, const char* name) {
  if (!key.empty()) return r.Fail(fmt::format("{} must be empty for this kind", name));
  return Status::Ok();
}

// The keys a request names must be set, the others empty (dkey checked first).
Status RequireKeys(const Reader& r, const std::string& dkey, bool names_dkey, const std::string& akey,
                   bool names_akey) {
  ROS2_RETURN_IF_ERROR(names_dkey ? RequireKey(r, dkey, "dkey") : RequireEmpty(r, dkey, "dkey"));
  return names_akey ? RequireKey(r, akey, "akey") : RequireEmpty(r, akey, "akey");
}

// Array shape: record_size > 0 and index + count and count * record_size do not
// overflow and stay within kMaxIoSize.
Status CheckArrayShape(const Reader& r, uint64_t index, uint64_t count, uint32_t record_size) {
  if (record_size == 0) return r.Invalid("array record size is 0");
  if (count > kMaxIoSize / record_size) {
    return r.Invalid(
        fmt::format("{} records of {} bytes exceed the I/O limit of {} bytes", count, record_size, kMaxIoSize));
  }
  if (index > std::numeric_limits<uint64_t>::max() - count) {
    return r.Invalid(fmt::format("extent [{}, +{}) overflows the index space", index, count));
  }
  return Status::Ok();
}

}  // namespace

std::string_view OpcodeName(uint16_t opcode) {
  switch (static_cast<Opcode>(opcode)) {
    case Opcode::kPing: return "ping";
    case Opcode::kUpdate: return "update";
    case Opcode::kFetch: return "fetch";
    case Opcode::kPunch: return "punch";
    case Opcode::kList: return "list";
    case Opcode::kQuery: return "query";
    case Opcode::kLeader: return "leader";
    case Opcode::kForward: return "forward";
    case Opcode::kRebuildRead: return "rebuild read";
  }
  return "unknown";
}

Status ValidateChecksums(const Checksums& csum, uint64_t length, std::string_view what) {
  if (static_cast<uint8_t>(csum.type) > static_cast<uint8_t>(ChecksumType::kCrc64)) {
    return Status::InvalidArgument(fmt::format("{}: checksum type {} unknown", what, static_cast<int>(csum.type)));
  }
  if (csum.type == ChecksumType::kNone) {
    if (csum.chunk_size != 0 || !csum.values.empty()) {
      return Status::InvalidArgument(fmt::format("{}: checksum type none carries a chunk size or values", what));
    }
    return Status::Ok();
  }
  if (csum.chunk_size == 0) return Status::InvalidArgument(fmt::format("{}: checksum chunk size is 0", what));
  const uint64_t expected = (length + csum.chunk_size - 1) / csum.chunk_size;
  if (csum.values.size() != expected) {
    return Status::InvalidArgument(fmt::format("{}: {} checksums for {} bytes in chunks of {} (expected {})", what,
                                               csum.values.size(), length, csum.chunk_size, expected));
  }
  return Status::Ok();
}

// --- ping ---
std::vector<uint8_t> Encode(const PingRequest& m) {
  Writer w;
  w.U32(m.target);
  return w.Take();
}
Result<PingRequest> DecodePingRequest(std::span<const uint8_t> bytes) {
  Reader r(bytes, "ping request");
  PingRequest m;
  ROS2_RETURN_IF_ERROR(r.Version());
  ROS2_RETURN_IF_ERROR(r.U32("target", &m.target));
  ROS2_RETURN_IF_ERROR(r.Done());
  return m;
}
std::vector<uint8_t> Encode(const PingReply& m) {
  Writer w;
  w.U32(m.target);
  w.U32(m.target_count);
  w.Id(m.engine);
  return w.Take();
}
Result<PingReply> DecodePingReply(std::span<const uint8_t> bytes) {
  Reader r(bytes, "ping reply");
  PingReply m;
  ROS2_RETURN_IF_ERROR(r.Version());
  ROS2_RETURN_IF_ERROR(r.U32("target", &m.target));
  ROS2_RETURN_IF_ERROR(r.U32("target count", &m.target_count));
  ROS2_RETURN_IF_ERROR(r.Id("engine", &m.engine));
  ROS2_RETURN_IF_ERROR(r.Done());
  return m;
}

// --- update ---
std::vector<uint8_t> Encode(const UpdateRequest& m) {
  Writer w;
  w.Header(m.header);
  w.Oid(m.oid);
  w.Key(m.dkey);
  w.Key(m.akey);
  w.U8(static_cast<uint8_t>(m.type));
  w.U64(m.index);
  w.U32(m.record_size);
  w.U64(m.length);
  w.Csum(m.csum);
  return w.Take();
}
Result<UpdateRequest> DecodeUpdateRequest(std::span<const uint8_t> bytes) {
  Reader r(bytes, "update request");
  UpdateRequest m;
  ROS2_RETURN_IF_ERROR(r.Version());
  ROS2_RETURN_IF_ERROR(r.Header(&m.header, kUpdateFlags));
  ROS2_RETURN_IF_ERROR(r.Oid("oid", &m.oid));
  ROS2_RETURN_IF_ERROR(r.Key("dkey", &m.dkey));
  ROS2_RETURN_IF_ERROR(r.Key("akey", &m.akey));
  ROS2_RETURN_IF_ERROR(ReadValueType(r, &m.type));
  ROS2_RETURN_IF_ERROR(r.U64("index", &m.index));
  ROS2_RETURN_IF_ERROR(r.U32("record size", &m.record_size));
  ROS2_RETURN_IF_ERROR(r.U64("length", &m.length));
  ROS2_RETURN_IF_ERROR(r.Csum(&m.csum));
  ROS2_RETURN_IF_ERROR(r.Done());
  ROS2_RETURN_IF_ERROR(RequireKeys(r, m.dkey, true, m.akey, true));
  if (m.length > kMaxIoSize)
    return r.Invalid(fmt::format("length {} exceeds the I/O limit of {}", m.length, kMaxIoSize));
  if (m.type == ValueType::kSingle) {
    if (m.index != 0 || m.record_size != 1) return r.Invalid("single value with an index or record size");
  } else {
    ROS2_RETURN_IF_ERROR(CheckArrayShape(r, m.index, m.length / std::max<uint32_t>(m.record_size, 1), m.record_size));
    if (m.length % m.record_size != 0) {
      return r.Invalid(fmt::format("length {} is not a multiple of the record size {}", m.length, m.record_size));
    }
  }
  ROS2_RETURN_IF_ERROR(ValidateChecksums(m.csum, m.length, "object rpc update request"));
  return m;
}
std::vector<uint8_t> Encode(const UpdateReply& m) {
  Writer w;
  w.U64(m.epoch);
  return w.Take();
}
Result<UpdateReply> DecodeUpdateReply(std::span<const uint8_t> bytes) {
  Reader r(bytes, "update reply");
  UpdateReply m;
  ROS2_RETURN_IF_ERROR(r.Version());
  ROS2_RETURN_IF_ERROR(r.U64("epoch", &m.epoch));
  ROS2_RETURN_IF_ERROR(r.Done());
  return m;
}

// --- fetch ---
std::vector<uint8_t> Encode(const FetchRequest& m) {
  Writer w;
  w.Header(m.header);
  w.Oid(m.oid);
  w.Key(m.dkey);
  w.Key(m.akey);
  w.U8(static_cast<uint8_t>(m.type));
  w.U64(m.index);
  w.U64(m.count);
  w.U32(m.record_size);
  return w.Take();
}
Result<FetchRequest> DecodeFetchRequest(std::span<const uint8_t> bytes) {
  Reader r(bytes, "fetch request");
  FetchRequest m;
  ROS2_RETURN_IF_ERROR(r.Version());
  ROS2_RETURN_IF_ERROR(r.Header(&m.header, kFetchFlags));
  ROS2_RETURN_IF_ERROR(r.Oid("oid", &m.oid));
  ROS2_RETURN_IF_ERROR(r.Key("dkey", &m.dkey));
  ROS2_RETURN_IF_ERROR(r.Key("akey", &m.akey));
  ROS2_RETURN_IF_ERROR(ReadValueType(r, &m.type));
  ROS2_RETURN_IF_ERROR(r.U64("index", &m.index));
  ROS2_RETURN_IF_ERROR(r.U64("count", &m.count));
  ROS2_RETURN_IF_ERROR(r.U32("record size", &m.record_size));
  ROS2_RETURN_IF_ERROR(r.Done());
  ROS2_RETURN_IF_ERROR(RequireKeys(r, m.dkey, true, m.akey, true));
  if (m.type == ValueType::kSingle) {
    if (m.index != 0 || m.count != 0 || m.record_size != 1) {
      return r.Invalid("single value with an index, count or record size");
    }
    if ((m.header.flags & kFlagWantArrayEnd) != 0) return r.Invalid("array end asked of a single value");
  } else {
    ROS2_RETURN_IF_ERROR(CheckArrayShape(r, m.index, m.count, m.record_size));
  }
  return m;
}
std::vector<uint8_t> Encode(const FetchReply& m) {
  Writer w;
  w.U64(m.size);
  w.Csum(m.csum);
  w.U64(m.array_end);
  return w.Take();
}
Result<FetchReply> DecodeFetchReply(std::span<const uint8_t> bytes) {
  Reader r(bytes, "fetch reply");
  FetchReply m;
  ROS2_RETURN_IF_ERROR(r.Version());
  ROS2_RETURN_IF_ERROR(r.U64("size", &m.size));
  ROS2_RETURN_IF_ERROR(r.Csum(&m.csum));
  ROS2_RETURN_IF_ERROR(r.U64("array end", &m.array_end));
  ROS2_RETURN_IF_ERROR(r.Done());
  if (m.csum.type != ChecksumType::kNone && m.csum.chunk_size == 0) return r.Fail("checksum chunk size is 0");
  return m;
}

// --- punch ---
std::vector<uint8_t> Encode(const PunchRequest& m) {
  Writer w;
  w.Header(m.header);
  w.U8(static_cast<uint8_t>(m.scope));
  w.Oid(m.oid);
  w.Key(m.dkey);
  w.Key(m.akey);
  return w.Take();
}
Result<PunchRequest> DecodePunchRequest(std::span<const uint8_t> bytes) {
  Reader r(bytes, "punch request");
  PunchRequest m;
  uint8_t scope = 0;
  ROS2_RETURN_IF_ERROR(r.Version());
  ROS2_RETURN_IF_ERROR(r.Header(&m.header, kPunchFlags));
  ROS2_RETURN_IF_ERROR(r.U8("scope", &scope));
  if (scope < 1 || scope > 3) return r.Fail(fmt::format("punch scope {} unknown", scope));
  m.scope = static_cast<PunchScope>(scope);
  ROS2_RETURN_IF_ERROR(r.Oid("oid", &m.oid));
  ROS2_RETURN_IF_ERROR(r.Key("dkey", &m.dkey));
  ROS2_RETURN_IF_ERROR(r.Key("akey", &m.akey));
  ROS2_RETURN_IF_ERROR(r.Done());
  if (m.scope == PunchScope::kObject && m.header.flags != 0) {
    return r.Invalid("a conditional punch of a whole object");
  }
  ROS2_RETURN_IF_ERROR(RequireKeys(r, m.dkey, m.scope != PunchScope::kObject, m.akey, m.scope == PunchScope::kAkey));
  return m;
}
std::vector<uint8_t> Encode(const PunchReply& m) {
  Writer w;
  w.U64(m.epoch);
  return w.Take();
}
Result<PunchReply> DecodePunchReply(std::span<const uint8_t> bytes) {
  Reader r(bytes, "punch reply");
  PunchReply m;
  ROS2_RETURN_IF_ERROR(r.Version());
  ROS2_RETURN_IF_ERROR(r.U64("epoch", &m.epoch));
  ROS2_RETURN_IF_ERROR(r.Done());
  return m;
}

// --- list ---
std::vector<uint8_t> Encode(const ListRequest& m) {
  Writer w;
  w.Header(m.header);
  w.U8(static_cast<uint8_t>(m.kind));
  w.Oid(m.oid);
  w.Key(m.dkey);
  w.Key(m.akey);
  w.Anchor(m.anchor);
  w.U32(m.max_entries);
  return w.Take();
}
Result<ListRequest> DecodeListRequest(std::span<const uint8_t> bytes) {
  Reader r(bytes, "list request");
  ListRequest m;
  uint8_t kind = 0;
  ROS2_RETURN_IF_ERROR(r.Version());
  ROS2_RETURN_IF_ERROR(r.Header(&m.header));
  ROS2_RETURN_IF_ERROR(r.U8("kind", &kind));
  if (kind < 1 || kind > 4) return r.Fail(fmt::format("list kind {} unknown", kind));
  m.kind = static_cast<ListKind>(kind);
  ROS2_RETURN_IF_ERROR(r.Oid("oid", &m.oid));
  ROS2_RETURN_IF_ERROR(r.Key("dkey", &m.dkey));
  ROS2_RETURN_IF_ERROR(r.Key("akey", &m.akey));
  ROS2_RETURN_IF_ERROR(r.Anchor(&m.anchor));
  ROS2_RETURN_IF_ERROR(r.U32("max entries", &m.max_entries));
  ROS2_RETURN_IF_ERROR(r.Done());
  if (m.max_entries == 0 || m.max_entries > kMaxListEntries) {
    return r.Invalid(fmt::format("max entries {} outside 1 .. {}", m.max_entries, kMaxListEntries));
  }
  if (m.kind == ListKind::kObjects && m.oid != ObjectId{}) return r.Fail("oid must be zero when listing objects");
  const bool names_dkey = m.kind == ListKind::kAkeys || m.kind == ListKind::kExtents;
  ROS2_RETURN_IF_ERROR(RequireKeys(r, m.dkey, names_dkey, m.akey, m.kind == ListKind::kExtents));
  return m;
}
std::vector<uint8_t> Encode(const ListReply& m) {
  Writer w;
  w.U8(static_cast<uint8_t>(m.kind));
  switch (m.kind) {
    case ListKind::kObjects:
      w.U32(static_cast<uint32_t>(m.objects.size()));
      for (const auto& o : m.objects) w.Oid(o);
      break;
    case ListKind::kDkeys:
    case ListKind::kAkeys:
      w.U32(static_cast<uint32_t>(m.keys.size()));
      for (const auto& k : m.keys) w.Key(k);
      break;
    case ListKind::kExtents:
      w.U32(static_cast<uint32_t>(m.extents.size()));
      for (const auto& e : m.extents) {
        w.U64(e.index);
        w.U64(e.count);
        w.U32(e.record_size);
        w.U64(e.epoch);
      }
      break;
  }
  w.Anchor(m.anchor);
  return w.Take();
}
Result<ListReply> DecodeListReply(std::span<const uint8_t> bytes) {
  Reader r(bytes, "list reply");
  ListReply m;
  uint8_t kind = 0;
  uint32_t n = 0;
  ROS2_RETURN_IF_ERROR(r.Version());
  ROS2_RETURN_IF_ERROR(r.U8("kind", &kind));
  if (kind < 1 || kind > 4) return r.Fail(fmt::format("list kind {} unknown", kind));
  m.kind = static_cast<ListKind>(kind);
  ROS2_RETURN_IF_ERROR(r.U32("entry count", &n));
  if (n > kMaxListEntries) return r.Fail(fmt::format("{} entries exceed the limit of {}", n, kMaxListEntries));
  for (uint32_t i = 0; i < n; ++i) {
    switch (m.kind) {
      case ListKind::kObjects: ROS2_RETURN_IF_ERROR(r.Oid("object", &m.objects.emplace_back())); break;
      case ListKind::kDkeys:
      case ListKind::kAkeys: ROS2_RETURN_IF_ERROR(r.Key("key", &m.keys.emplace_back())); break;
      case ListKind::kExtents: {
        ExtentEntry& e = m.extents.emplace_back();
        ROS2_RETURN_IF_ERROR(r.U64("extent index", &e.index));
        ROS2_RETURN_IF_ERROR(r.U64("extent count", &e.count));
        ROS2_RETURN_IF_ERROR(r.U32("extent record size", &e.record_size));
        ROS2_RETURN_IF_ERROR(r.U64("extent epoch", &e.epoch));
        break;
      }
    }
  }
  ROS2_RETURN_IF_ERROR(r.Anchor(&m.anchor));
  ROS2_RETURN_IF_ERROR(r.Done());
  return m;
}

// --- query ---
std::vector<uint8_t> Encode(const QueryRequest& m) {
  Writer w;
  w.Header(m.header);
  w.U8(static_cast<uint8_t>(m.kind));
  w.Oid(m.oid);
  w.Key(m.dkey);
  w.Key(m.akey);
  return w.Take();
}
Result<QueryRequest> DecodeQueryRequest(std::span<const uint8_t> bytes) {
  Reader r(bytes, "query request");
  QueryRequest m;
  uint8_t kind = 0;
  ROS2_RETURN_IF_ERROR(r.Version());
  ROS2_RETURN_IF_ERROR(r.Header(&m.header));
  ROS2_RETURN_IF_ERROR(r.U8("kind", &kind));
  if (kind < 1 || kind > 3) return r.Fail(fmt::format("query kind {} unknown", kind));
  m.kind = static_cast<QueryKind>(kind);
  ROS2_RETURN_IF_ERROR(r.Oid("oid", &m.oid));
  ROS2_RETURN_IF_ERROR(r.Key("dkey", &m.dkey));
  ROS2_RETURN_IF_ERROR(r.Key("akey", &m.akey));
  ROS2_RETURN_IF_ERROR(r.Done());
  // kMaxDkey names neither key, kArrayTail only the akey, kArrayEnd both.
  ROS2_RETURN_IF_ERROR(RequireKeys(r, m.dkey, m.kind == QueryKind::kArrayEnd, m.akey, m.kind != QueryKind::kMaxDkey));
  return m;
}
std::vector<uint8_t> Encode(const QueryReply& m) {
  Writer w;
  w.U8(static_cast<uint8_t>(m.kind));
  w.U8(m.found ? 1 : 0);
  if (m.kind != QueryKind::kArrayEnd) w.Key(m.max_dkey);
  if (m.kind != QueryKind::kMaxDkey) w.U64(m.array_end);
  return w.Take();
}
Result<QueryReply> DecodeQueryReply(std::span<const uint8_t> bytes) {
  Reader r(bytes, "query reply");
  QueryReply m;
  uint8_t kind = 0;
  ROS2_RETURN_IF_ERROR(r.Version());
  ROS2_RETURN_IF_ERROR(r.U8("kind", &kind));
  if (kind < 1 || kind > 3) return r.Fail(fmt::format("query kind {} unknown", kind));
  m.kind = static_cast<QueryKind>(kind);
  ROS2_RETURN_IF_ERROR(r.Bool("found", &m.found));
  if (m.kind != QueryKind::kArrayEnd) ROS2_RETURN_IF_ERROR(r.Key("max dkey", &m.max_dkey));
  if (m.kind != QueryKind::kMaxDkey) ROS2_RETURN_IF_ERROR(r.U64("array end", &m.array_end));
  ROS2_RETURN_IF_ERROR(r.Done());
  return m;
}

// --- stale map refusal ---
std::vector<uint8_t> Encode(const StaleMapReply& m) {
  Writer w;
  w.U64(m.engine_version);
  w.U64(m.request_version);
  return w.Take();
}
Result<StaleMapReply> DecodeStaleMapReply(std::span<const uint8_t> bytes) {
  Reader r(bytes, "stale map reply");
  StaleMapReply m;
  ROS2_RETURN_IF_ERROR(r.Version());
  ROS2_RETURN_IF_ERROR(r.U64("engine version", &m.engine_version));
  ROS2_RETURN_IF_ERROR(r.U64("request version", &m.request_version));
  ROS2_RETURN_IF_ERROR(r.Done());
  if (m.engine_version <= m.request_version) {
    return r.Fail(
        fmt::format("engine version {} is not newer than the request's {}", m.engine_version, m.request_version));
  }
  return m;
}

}  // namespace ros2::obj
