// The host library of offload mode, its operation encoding: each
// dfs::Filesystem call as a submission entry and argument block, and its
// result decoded (docs/agent.md, "Opcodes"; the agent's side is
// src/agent/op_table.cc). The ring mechanics are in host_session.cc.
#include <algorithm>
#include <cstring>

#include "client/offload/host_session.h"
#include "offload/wire.h"

namespace ros2::agent {

namespace {

// Bytes a bounced Read/Write copies through the arena at a time.
constexpr uint64_t kBounceMax = uint64_t{8} << 20;

std::vector<std::byte> NameArgs(const dfs::Entry& e, std::initializer_list<std::string_view> more = {}) {
  ArgWriter w;
  w.Str(e.name);
  for (auto s : more) w.Str(s);
  return w.bytes();
}

constexpr uint64_t kEntryResult = sizeof(WireEntry) + 4 + dfs::kMaxNameLength + 64;
constexpr uint64_t kAttrResult = 17 * 8;

Status CheckMount(uint32_t mount) {
  if (mount > 0xffff) return Status::InvalidArgument("offload: mount index out of range");
  return Status::Ok();
}

}  // namespace

Result<OffloadMount> HostSession::Mount(std::string_view pool, std::string_view container,
                                        const dfs::MountOptions& options) {
  ArgWriter w;
  w.Str(pool);
  w.Str(container);
  w.U64(options.chunk_size);
  w.U32(options.create ? 1 : 0);
  w.U32(static_cast<uint32_t>(options.file_class));
  w.U32(static_cast<uint32_t>(options.dir_class));
  SubmitEntry s{};
  s.opcode = static_cast<uint8_t>(RingOp::kMount);
  std::vector<std::byte> out;
  ROS2_ASSIGN_OR_RETURN(CompleteEntry c, Call(s, w.bytes(), kEntryResult + 8, &out));
  ArgReader r(out);
  OffloadMount m;
  m.index = static_cast<uint32_t>(c.result);
  if (!r.Entry(&m.root) || !r.U64(&m.chunk_size)) return Status::Protocol("offload: malformed mount result");
  return m;
}

Status HostSession::Unmount(uint32_t mount) {
  ROS2_RETURN_IF_ERROR(CheckMount(mount));
  SubmitEntry s{};
  s.opcode = static_cast<uint8_t>(RingOp::kUnmount);
  s.mount = static_cast<uint16_t>(mount);
  auto c = Call(s, {}, 0, nullptr);
  return c.ok() ? Status::Ok() : c.status();
}

Result<dfs::Entry> HostSession::EntryCall(RingOp op, uint32_t mount, const dfs::Entry& entry,
                                          const std::vector<std::byte>& args, uint32_t op_flags, uint32_t mode,
                                          uint64_t offset, int64_t* value) {
  ROS2_RETURN_IF_ERROR(CheckMount(mount));
  SubmitEntry s = MakeEntry(op, mount, entry);
  s.op_flags = op_flags;
  s.mode = mode;
  s.offset = offset;
  std::vector<std::byte> out;
  ROS2_ASSIGN_OR_RETURN(CompleteEntry c, Call(s, args, kEntryResult, &out));
  if (value != nullptr) *value = c.result;
  ArgReader r(out);
  dfs::Entry e;
  if (!r.Entry(&e)) return Status::Protocol("offload: malformed entry result");
  return e;
}

Status HostSession::SimpleCall(RingOp op, uint32_t mount, const dfs::Entry& entry, const std::vector<std::byte>& args,
                               uint32_t op_flags, uint64_t offset) {
  ROS2_RETURN_IF_ERROR(CheckMount(mount));
  SubmitEntry s = MakeEntry(op, mount, entry);
  s.op_flags = op_flags;
  s.offset = offset;
  auto c = Call(s, args, 0, nullptr);
  return c.ok() ? Status::Ok() : c.status();
}

Result<dfs::Entry> HostSession::Lookup(uint32_t mount, const dfs::Entry& parent, std::string_view name) {
  return EntryCall(RingOp::kLookup, mount, parent, NameArgs(parent, {name}));
}

namespace {

// What the DFS answers for a path over its limit, before it would overflow
// the arguments of a submission.
Status CheckPathLength(std::string_view path) {
  if (path.size() <= dfs::kMaxPathLength) return Status::Ok();
  return Status::NameTooLong("dfs: path of " + std::to_string(path.size()) + " bytes exceeds the limit of " +
                             std::to_string(dfs::kMaxPathLength));
}

}  // namespace

Result<dfs::Entry> HostSession::LookupPath(uint32_t mount, std::string_view path) {
  ROS2_RETURN_IF_ERROR(CheckPathLength(path));
  ArgWriter w;
  w.Str(path);
  return EntryCall(RingOp::kLookupPath, mount, dfs::Entry{}, w.bytes());
}

Result<std::pair<dfs::Entry, dfs::Attr>> HostSession::LookupWithAttr(uint32_t mount, const dfs::Entry& parent,
                                                                     std::string_view name) {
  ROS2_RETURN_IF_ERROR(CheckMount(mount));
  std::vector<std::byte> out;
  ROS2_RETURN_IF_ERROR(Call(MakeEntry(RingOp::kLookupWithAttr, mount, parent), NameArgs(parent, {name}),
                            kEntryResult + kAttrResult, &out)
                           .status());
  ArgReader r(out);
  std::pair<dfs::Entry, dfs::Attr> ea;
  if (!r.Entry(&ea.first) || !r.Attr(&ea.second)) return Status::Protocol("offload: malformed lookup result");
  return ea;
}

Result<dfs::Entry> HostSession::Open(uint32_t mount, const dfs::Entry& parent, std::string_view name, int flags,
                                     mode_t mode, bool* created) {
  int64_t v = 0;
  auto e = EntryCall(RingOp::kOpen, mount, parent, NameArgs(parent, {name}), static_cast<uint32_t>(flags), mode, 0, &v);
  if (e.ok() && created != nullptr) *created = v == 1;
  return e;
}

Result<dfs::Entry> HostSession::Mkdir(uint32_t mount, const dfs::Entry& parent, std::string_view name, mode_t mode) {
  return EntryCall(RingOp::kMkdir, mount, parent, NameArgs(parent, {name}), 0, mode);
}

Result<dfs::Entry> HostSession::MkdirAll(uint32_t mount, std::string_view path, mode_t mode, uint64_t* created) {
  ROS2_RETURN_IF_ERROR(CheckPathLength(path));
  ArgWriter w;
  w.Str(path);
  int64_t v = 0;
  auto e = EntryCall(RingOp::kMkdirAll, mount, dfs::Entry{}, w.bytes(), 0, mode, 0, &v);
  if (e.ok() && created != nullptr) *created = static_cast<uint64_t>(v);
  return e;
}

Result<dfs::Entry> HostSession::Symlink(uint32_t mount, const dfs::Entry& parent, std::string_view name,
                                        std::string_view target) {
  return EntryCall(RingOp::kSymlink, mount, parent, NameArgs(parent, {name, target}));
}

Result<dfs::Entry> HostSession::Mknod(uint32_t mount, const dfs::Entry& parent, std::string_view name, mode_t mode,
                                      uint64_t rdev) {
  return EntryCall(RingOp::kMknod, mount, parent, NameArgs(parent, {name}), 0, mode, rdev);
}

Result<dfs::Entry> HostSession::Link(uint32_t mount, const dfs::Entry& target, const dfs::Entry& new_parent,
                                     std::string_view new_name) {
  ArgWriter w;
  w.Str(target.name);
  w.Entry(new_parent);
  w.Str(new_name);
  return EntryCall(RingOp::kLink, mount, target, w.bytes());
}

Result<std::string> HostSession::Readlink(uint32_t mount, const dfs::Entry& link) {
  ROS2_RETURN_IF_ERROR(CheckMount(mount));
  std::vector<std::byte> out;
  ROS2_RETURN_IF_ERROR(
      Call(MakeEntry(RingOp::kReadlink, mount, link), NameArgs(link), dfs::kMaxPathLength + 64, &out).status());
  return std::string(reinterpret_cast<const char*>(out.data()), out.size());
}

Status HostSession::Unlink(uint32_t mount, const dfs::Entry& parent, std::string_view name) {
  return SimpleCall(RingOp::kUnlink, mount, parent, NameArgs(parent, {name}));
}

Status HostSession::Rmdir(uint32_t mount, const dfs::Entry& parent, std::string_view name) {
  return SimpleCall(RingOp::kRmdir, mount, parent, NameArgs(parent, {name}));
}

Status HostSession::Rename(uint32_t mount, const dfs::Entry& parent, std::string_view name,
                           const dfs::Entry& new_parent, std::string_view new_name, unsigned flags) {
  ArgWriter w;
  w.Str(parent.name);
  w.Str(name);
  w.Entry(new_parent);
  w.Str(new_name);
  return SimpleCall(RingOp::kRename, mount, parent, w.bytes(), flags);
}

Result<dfs::Attr> HostSession::Stat(uint32_t mount, const dfs::Entry& entry) {
  ROS2_RETURN_IF_ERROR(CheckMount(mount));
  std::vector<std::byte> out;
  ROS2_RETURN_IF_ERROR(Call(MakeEntry(RingOp::kStat, mount, entry), NameArgs(entry), kAttrResult, &out).status());
  ArgReader r(out);
  dfs::Attr a;
  if (!r.Attr(&a)) return Status::Protocol("offload: malformed stat result");
  return a;
}

Result<dfs::Attr> HostSession::SetAttr(uint32_t mount, const dfs::Entry& entry, const dfs::SetAttrArgs& args) {
  ROS2_RETURN_IF_ERROR(CheckMount(mount));
  ArgWriter w;
  w.Str(entry.name);
  w.U32(static_cast<uint32_t>(args.mode));
  w.U32(static_cast<uint32_t>(args.uid));
  w.U32(static_cast<uint32_t>(args.gid));
  w.U64(args.size);
  w.I64(args.atime.tv_sec);
  w.I64(args.atime.tv_nsec);
  w.I64(args.mtime.tv_sec);
  w.I64(args.mtime.tv_nsec);
  SubmitEntry s = MakeEntry(RingOp::kSetAttr, mount, entry);
  s.op_flags = args.mask;
  std::vector<std::byte> out;
  ROS2_RETURN_IF_ERROR(Call(s, w.bytes(), kAttrResult, &out).status());
  ArgReader r(out);
  dfs::Attr a;
  if (!r.Attr(&a)) return Status::Protocol("offload: malformed setattr result");
  return a;
}

Status HostSession::Truncate(uint32_t mount, const dfs::Entry& file, uint64_t size) {
  return SimpleCall(RingOp::kTruncate, mount, file, NameArgs(file), 0, size);
}

Result<dfs::StatFs> HostSession::Statfs(uint32_t mount) {
  ROS2_RETURN_IF_ERROR(CheckMount(mount));
  std::vector<std::byte> out;
  ROS2_RETURN_IF_ERROR(Call(MakeEntry(RingOp::kStatfs, mount, dfs::Entry{}), {}, 6 * 8, &out).status());
  ArgReader r(out);
  dfs::StatFs s;
  uint64_t name_max = 0;
  if (!r.U64(&s.block_size) || !r.U64(&s.blocks) || !r.U64(&s.blocks_free) || !r.U64(&s.files) ||
      !r.U64(&s.files_free) || !r.U64(&name_max)) {
    return Status::Protocol("offload: malformed statfs result");
  }
  s.name_max = static_cast<uint32_t>(name_max);
  return s;
}

Result<std::vector<dfs::DirEntry>> HostSession::Readdir(uint32_t mount, const dfs::Entry& dir, dfs::DirAnchor& anchor,
                                                        size_t max) {
  ROS2_RETURN_IF_ERROR(CheckMount(mount));
  if (max == 0) return Status::InvalidArgument("offload readdir: max must be at least 1");
  max = std::min<size_t>(max, 1024);
  ArgWriter w;
  w.Str(dir.name);
  w.U32(anchor.shard);
  w.U32(anchor.eof ? 1 : 0);
  w.Str(anchor.position);
  SubmitEntry s = MakeEntry(RingOp::kReaddir, mount, dir);
  s.op_flags = static_cast<uint32_t>(max);
  std::vector<std::byte> out;
  ROS2_RETURN_IF_ERROR(
      Call(s, w.bytes(), kReaddirHeaderReserve + max * (kDirRecordFixed + dfs::kMaxNameLength), &out).status());
  ArgReader r(out);
  uint32_t count = 0, eof = 0;
  dfs::DirAnchor next;
  if (!r.U32(&count) || !r.U32(&next.shard) || !r.U32(&eof) || !r.Str(&next.position, 4096)) {
    return Status::Protocol("offload: malformed readdir result");
  }
  next.eof = eof != 0;
  std::vector<dfs::DirEntry> list;
  for (uint32_t i = 0; i < count; ++i) {
    dfs::DirEntry d;
    uint32_t mode = 0;
    if (!r.U64(&d.oid.hi) || !r.U64(&d.oid.lo) || !r.U64(&d.ino) || !r.U32(&mode) ||
        !r.Str(&d.name, dfs::kMaxNameLength)) {
      return Status::Protocol("offload: malformed readdir entry");
    }
    d.mode = static_cast<mode_t>(mode);
    list.push_back(std::move(d));
  }
  anchor = std::move(next);
  return list;
}

Result<uint64_t> HostSession::DataCall(RingOp op, uint32_t mount, const dfs::Entry& file, uint64_t offset,
                                       const ArenaBuffer& buf) {
  ROS2_RETURN_IF_ERROR(CheckMount(mount));
  SubmitEntry s = MakeEntry(op, mount, file);
  s.offset = offset;
  s.buf_off = buf.offset;
  s.buf_len = buf.size;
  ROS2_ASSIGN_OR_RETURN(CompleteEntry c, Call(s, NameArgs(file), 0, nullptr));
  return static_cast<uint64_t>(c.result);
}

namespace {

// The largest piece of one entry: the agent refuses entries spanning more
// than kMaxChunksPerIo chunks.
uint64_t PieceLimit(const dfs::Entry& file) {
  return file.chunk_size != 0 ? (kMaxChunksPerIo - 1) * file.chunk_size : ~uint64_t{0};
}

}  // namespace

Result<uint64_t> HostSession::Read(uint32_t mount, const dfs::Entry& file, uint64_t offset,
                                   std::span<std::byte> buffer) {
  return Transfer(RingOp::kRead, mount, file, offset, buffer.data(), buffer.size());
}

Result<uint64_t> HostSession::Write(uint32_t mount, const dfs::Entry& file, uint64_t offset,
                                    std::span<const std::byte> data) {
  return Transfer(RingOp::kWrite, mount, file, offset, const_cast<std::byte*>(data.data()), data.size());
}

Result<uint64_t> HostSession::Transfer(RingOp op, uint32_t mount, const dfs::Entry& file, uint64_t offset,
                                       std::byte* data, uint64_t size) {
  if (size == 0) return uint64_t{0};
  const bool read = op == RingOp::kRead;
  const bool in_arena = InArena(data, size);
  const uint64_t piece = std::min<uint64_t>({size, PieceLimit(file), in_arena ? ~uint64_t{0} : kBounceMax,
                                             in_arena ? ~uint64_t{0} : geometry_.arena_size / 2});
  ArenaBuffer bounce;
  if (!in_arena) {
    ROS2_ASSIGN_OR_RETURN(bounce, Allocate(piece));
  }
  uint64_t done = 0;
  Status st;
  while (done < size) {
    const uint64_t n = std::min<uint64_t>(piece, size - done);
    ArenaBuffer b = in_arena ? ArenaBuffer{data + done, static_cast<uint64_t>(data + done - arena()), n}
                             : ArenaBuffer{bounce.data, bounce.offset, n};
    if (!in_arena && !read) std::memcpy(bounce.data, data + done, n);
    auto moved = DataCall(op, mount, file, offset + done, b);
    if (!moved.ok()) {
      st = moved.status();
      break;
    }
    if (!in_arena && read) std::memcpy(data + done, bounce.data, *moved);
    done += *moved;
    if (read && *moved < n) break;  // end of the file
  }
  // A timed-out read may still land in the bounce buffer: leave it allocated.
  if (bounce && st.code() != Status::Code::kTimedOut) Free(bounce);
  if (!st.ok()) return st;
  return done;
}

Status HostSession::Sync(uint32_t mount, const dfs::Entry& entry) {
  return SimpleCall(RingOp::kSync, mount, entry, NameArgs(entry));
}

}  // namespace ros2::agent
