// Encoding and validating decoding of the DFS records (layout: docs/dfs.md).
#include "dfs/entry_record.h"

#include <sys/stat.h>

#include <fmt/format.h>

namespace ros2::dfs {
namespace {

class Writer {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<std::byte>(v)); }
  void U16(uint16_t v) { Le(v, 2); }
  void U32(uint32_t v) { Le(v, 4); }
  void U64(uint64_t v) { Le(v, 8); }
  void Time(const timespec& t) {
    U64(static_cast<uint64_t>(t.tv_sec));
    U32(static_cast<uint32_t>(t.tv_nsec));
  }
  void Raw(std::string_view s) {
    for (char c : s) out_.push_back(static_cast<std::byte>(c));
  }
  std::vector<std::byte> Take() { return std::move(out_); }

 private:
  void Le(uint64_t v, int width) {
    for (int i = 0; i < width; ++i) out_.push_back(static_cast<std::byte>(v >> (8 * i)));
  }
  std::vector<std::byte> out_;
};

// Reads fields the caller has already checked the length for.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> b) : b_(b) {}
  uint64_t Le(int width) {
    uint64_t x = 0;
    for (int i = 0; i < width; ++i) x |= uint64_t{static_cast<uint8_t>(b_[pos_ + i])} << (8 * i);
    pos_ += width;
    return x;
  }
  timespec Time() {
    timespec t{};
    t.tv_sec = static_cast<time_t>(static_cast<int64_t>(Le(8)));
    t.tv_nsec = static_cast<long>(Le(4));
    return t;
  }
  size_t pos() const { return pos_; }

 private:
  std::span<const std::byte> b_;
  size_t pos_ = 0;
};

bool ValidTime(const timespec& t) {
  return t.tv_nsec >= 0 && t.tv_nsec < 1'000'000'000;
}

bool KnownType(mode_t mode) {
  return S_ISREG(mode) || S_ISDIR(mode) || S_ISLNK(mode) || S_ISFIFO(mode) || S_ISCHR(mode) || S_ISBLK(mode) ||
         S_ISSOCK(mode);
}

bool IsDevice(mode_t mode) {
  return S_ISCHR(mode) || S_ISBLK(mode);
}

}  // namespace

std::vector<std::byte> EncodeEntry(const EntryRecord& r) {
  if (r.linked) return EncodeLinkStub(r);
  Writer w;
  w.U8(kEntryRecordVersion);
  w.U8(0);  // flags: a full record
  w.U16(static_cast<uint16_t>(r.symlink_target.size()));
  w.U32(static_cast<uint32_t>(r.mode));
  w.U64(r.oid.hi);
  w.U64(r.oid.lo);
  w.U32(static_cast<uint32_t>(r.uid));
  w.U32(static_cast<uint32_t>(r.gid));
  w.Time(r.atime);
  w.Time(r.mtime);
  w.Time(r.ctime);
  w.U64(IsDevice(r.mode) ? r.rdev : r.chunk_size);
  w.Raw(r.symlink_target);
  return w.Take();
}

std::vector<std::byte> EncodeLinkStub(const EntryRecord& r) {
  Writer w;
  w.U8(kEntryRecordVersion);
  w.U8(kEntryFlagLinked);
  w.U16(0);
  w.U32(static_cast<uint32_t>(r.mode & S_IFMT));
  w.U64(r.oid.hi);
  w.U64(r.oid.lo);
  for (size_t i = 24; i < kEntryRecordFixedSize; ++i) w.U8(0);
  return w.Take();
}

std::vector<std::byte> EncodeInode(const EntryRecord& r) {
  EntryRecord full = r;
  full.linked = false;
  std::vector<std::byte> body = EncodeEntry(full);
  Writer w;
  w.U32(r.nlink);
  std::vector<std::byte> out = w.Take();
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

Result<EntryRecord> DecodeInode(std::span<const std::byte> bytes, std::string_view what) {
  if (bytes.size() < kInodeRecordHeaderSize) {
    return Status::Corruption(fmt::format("dfs inode record of {}: {} bytes", what, bytes.size()));
  }
  Reader rd(bytes);
  const auto nlink = static_cast<uint32_t>(rd.Le(4));
  ROS2_ASSIGN_OR_RETURN(EntryRecord r, DecodeEntry(bytes.subspan(kInodeRecordHeaderSize), what));
  if (r.linked || nlink == 0 || S_ISDIR(r.mode)) {
    return Status::Corruption(fmt::format("dfs inode record of {}: a stub, no links or a directory", what));
  }
  r.linked = true;
  r.nlink = nlink;
  return r;
}

Result<EntryRecord> DecodeEntry(std::span<const std::byte> bytes, std::string_view what) {
  auto bad = [&](std::string_view why) {
    return Status::Corruption(fmt::format("dfs entry record of {}: {}", what, why));
  };
  if (bytes.size() < kEntryRecordFixedSize) {
    return bad(fmt::format("{} bytes, at least {} expected", bytes.size(), kEntryRecordFixedSize));
  }
  Reader rd(bytes);
  const auto version = static_cast<uint8_t>(rd.Le(1));
  if (version != kEntryRecordVersion) return bad(fmt::format("version {} (this build reads {})", version, 1));
  const auto flags = static_cast<uint8_t>(rd.Le(1));
  if ((flags & ~kEntryFlagLinked) != 0) return bad("reserved flags set");
  const auto target_len = static_cast<size_t>(rd.Le(2));
  if (bytes.size() != kEntryRecordFixedSize + target_len) {
    return bad(fmt::format("{} bytes for a {}-byte symlink target", bytes.size(), target_len));
  }
  EntryRecord r;
  r.mode = static_cast<mode_t>(rd.Le(4));
  if (!KnownType(r.mode)) return bad(fmt::format("mode {:o}", r.mode));
  r.oid.hi = rd.Le(8);
  r.oid.lo = rd.Le(8);
  if ((flags & kEntryFlagLinked) != 0) {
    if (S_ISDIR(r.mode) || target_len != 0) return bad("a link stub of a directory or with a target");
    r.linked = true;
    r.nlink = 0;  // unknown until the inode record is read
    return r;
  }
  r.uid = static_cast<uid_t>(rd.Le(4));
  r.gid = static_cast<gid_t>(rd.Le(4));
  r.atime = rd.Time();
  r.mtime = rd.Time();
  r.ctime = rd.Time();
  if (!ValidTime(r.atime) || !ValidTime(r.mtime) || !ValidTime(r.ctime)) return bad("nanoseconds out of range");
  r.chunk_size = rd.Le(8);
  if (IsDevice(r.mode)) {
    r.rdev = r.chunk_size;
    r.chunk_size = 0;
  }
  if (S_ISREG(r.mode) && r.chunk_size == 0) return bad("regular file with chunk size 0");
  if (!S_ISLNK(r.mode) && target_len != 0) return bad("symlink target on a non-symlink");
  r.symlink_target.assign(reinterpret_cast<const char*>(bytes.data() + rd.pos()), target_len);
  return r;
}

std::vector<std::byte> EncodeSuperblock(const SuperblockRecord& r) {
  Writer w;
  w.U64(kSuperblockMagic);
  w.U32(r.layout_version);
  w.U32(0);  // reserved
  w.U64(r.chunk_size);
  w.U8(static_cast<uint8_t>(r.file_class));
  w.U8(static_cast<uint8_t>(r.dir_class));
  w.U16(0);
  w.U32(0);
  w.U64(r.root.hi);
  w.U64(r.root.lo);
  return w.Take();
}

Result<SuperblockRecord> DecodeSuperblock(std::span<const std::byte> bytes) {
  auto bad = [](std::string_view why) { return Status::Corruption(fmt::format("dfs superblock: {}", why)); };
  if (bytes.size() != kSuperblockRecordSize) {
    return bad(fmt::format("{} bytes, {} expected", bytes.size(), kSuperblockRecordSize));
  }
  Reader rd(bytes);
  if (rd.Le(8) != kSuperblockMagic) return bad("bad magic (not a DFS container?)");
  SuperblockRecord r;
  r.layout_version = static_cast<uint32_t>(rd.Le(4));
  if (r.layout_version != kLayoutVersion) {
    return bad(fmt::format("layout version {} (this build reads {})", r.layout_version, kLayoutVersion));
  }
  (void)rd.Le(4);
  r.chunk_size = rd.Le(8);
  if (r.chunk_size == 0) return bad("chunk size 0");
  r.file_class = static_cast<ObjectClass>(rd.Le(1));
  r.dir_class = static_cast<ObjectClass>(rd.Le(1));
  if (ObjectClassName(r.file_class) == "unknown" || ObjectClassName(r.dir_class) == "unknown") {
    return bad("unknown object class");
  }
  (void)rd.Le(2);
  (void)rd.Le(4);
  r.root.hi = rd.Le(8);
  r.root.lo = rd.Le(8);
  if (r.root.type() != ObjectType::kDirectory) return bad("root is not a directory object");
  return r;
}

}  // namespace ros2::dfs
