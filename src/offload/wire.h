// Argument blocks and results in the arena (docs/agent.md, "Argument blocks"):
// a little-endian sequence of fields — u32, u64, i64, a string (u32 length +
// bytes), an entry (a WireEntry record followed by its name as a string), an
// Attr (17 u64). ArgWriter builds one into a vector; ArgReader parses one
// from a copy, refusing anything that runs past the end. Header-only; used by
// both the agent and the host library.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "offload/ring.h"
#include "ros2/dfs.h"

namespace ros2::agent {

inline WireEntry ToWire(const dfs::Entry& e) {
  WireEntry w{};
  w.oid_hi = e.oid.hi;
  w.oid_lo = e.oid.lo;
  w.parent_hi = e.parent.hi;
  w.parent_lo = e.parent.lo;
  w.chunk_size = e.chunk_size;
  w.mode = static_cast<uint32_t>(e.mode);
  w.uid = static_cast<uint32_t>(e.uid);
  w.gid = static_cast<uint32_t>(e.gid);
  return w;
}

inline dfs::Entry FromWire(const WireEntry& w, std::string name) {
  dfs::Entry e;
  e.oid = ObjectId{w.oid_hi, w.oid_lo};
  e.parent = ObjectId{w.parent_hi, w.parent_lo};
  e.name = std::move(name);
  e.mode = static_cast<mode_t>(w.mode);
  e.uid = static_cast<uid_t>(w.uid);
  e.gid = static_cast<gid_t>(w.gid);
  e.chunk_size = w.chunk_size;
  return e;
}

// A submission of `op` on entry `e` of mount `mount` (the other fields zero).
inline SubmitEntry MakeEntry(RingOp op, uint32_t mount, const dfs::Entry& e) {
  SubmitEntry s{};
  s.opcode = static_cast<uint8_t>(op);
  s.mount = static_cast<uint16_t>(mount);
  s.entry = ToWire(e);
  return s;
}

// A string argument's layout (ArgWriter::Str's): its length (u32), then its
// bytes. PutStr writes it to `out`, which holds StrSize(s) bytes (a batched
// I/O writes its name straight into its arena block this way).
inline size_t StrSize(std::string_view s) { return sizeof(uint32_t) + s.size(); }
inline void PutStr(std::byte* out, std::string_view s) {
  const auto n = static_cast<uint32_t>(s.size());
  std::memcpy(out, &n, sizeof n);
  std::memcpy(out + sizeof n, s.data(), s.size());
}

class ArgWriter {
 public:
  void U32(uint32_t v) { Raw(&v, sizeof v); }
  void U64(uint64_t v) { Raw(&v, sizeof v); }
  void I64(int64_t v) { Raw(&v, sizeof v); }
  void Str(std::string_view s) {  // PutStr's layout
    U32(static_cast<uint32_t>(s.size()));
    Raw(s.data(), s.size());
  }
  void Entry(const dfs::Entry& e) {
    WireEntry w = ToWire(e);
    Raw(&w, sizeof w);
    Str(e.name);
  }
  void Attr(const dfs::Attr& a) {
    for (uint64_t v :
         {a.ino, uint64_t{a.mode}, uint64_t{a.uid}, uint64_t{a.gid}, a.size, a.blocks, uint64_t{a.nlink}, a.rdev,
          uint64_t{a.blksize}, static_cast<uint64_t>(a.atime.tv_sec), static_cast<uint64_t>(a.atime.tv_nsec),
          static_cast<uint64_t>(a.mtime.tv_sec), static_cast<uint64_t>(a.mtime.tv_nsec),
          static_cast<uint64_t>(a.ctime.tv_sec), static_cast<uint64_t>(a.ctime.tv_nsec), a.oid.hi, a.oid.lo}) {
      U64(v);
    }
  }
  void Raw(const void* p, size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  const std::vector<std::byte>& bytes() const { return bytes_; }
  size_t size() const { return bytes_.size(); }

 private:
  std::vector<std::byte> bytes_;
};

// Parses fields from `data` (a private copy: the arena may change under it).
// Every getter returns false once the block is exhausted or malformed.
class ArgReader {
 public:
  explicit ArgReader(std::span<const std::byte> data) : data_(data) {}
  bool U32(uint32_t* v) { return Raw(v, sizeof *v); }
  bool U64(uint64_t* v) { return Raw(v, sizeof *v); }
  bool I64(int64_t* v) { return Raw(v, sizeof *v); }
  bool Str(std::string* s, size_t max) {
    uint32_t n = 0;
    if (!U32(&n) || n > max || n > data_.size() - pos_) return false;
    s->assign(reinterpret_cast<const char*>(data_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  bool Entry(dfs::Entry* e) {
    WireEntry w{};
    std::string name;
    if (!Raw(&w, sizeof w) || !Str(&name, dfs::kMaxNameLength)) return false;
    *e = FromWire(w, std::move(name));
    return true;
  }
  bool Attr(dfs::Attr* a) {
    uint64_t v[17];
    for (auto& x : v) {
      if (!U64(&x)) return false;
    }
    a->ino = v[0];
    a->mode = static_cast<mode_t>(v[1]);
    a->uid = static_cast<uid_t>(v[2]);
    a->gid = static_cast<gid_t>(v[3]);
    a->size = v[4];
    a->blocks = v[5];
    a->nlink = static_cast<uint32_t>(v[6]);
    a->rdev = v[7];
    a->blksize = static_cast<uint32_t>(v[8]);
    a->atime = {static_cast<time_t>(v[9]), static_cast<long>(v[10])};
    a->mtime = {static_cast<time_t>(v[11]), static_cast<long>(v[12])};
    a->ctime = {static_cast<time_t>(v[13]), static_cast<long>(v[14])};
    a->oid = ObjectId{v[15], v[16]};
    return true;
  }
  bool Raw(void* p, size_t n) {
    if (n > data_.size() - pos_) return false;
    std::memcpy(p, data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  size_t remaining() const { return data_.size() - pos_; }

 private:
  std::span<const std::byte> data_;
  size_t pos_ = 0;
};

// Bytes of one encoded Readdir record besides its name (oid, ino, mode, name length).
inline constexpr uint64_t kDirRecordFixed = 8 + 8 + 8 + 4 + 4;
// Room a Readdir result reserves for its header and anchor.
inline constexpr uint64_t kReaddirHeaderReserve = 4096 + 16;

}  // namespace ros2::agent
