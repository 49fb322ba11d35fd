// The agent's operation table: one row and one handler per opcode (op_call.h).
// A handler parses what its layout leaves of the argument block, calls the
// mount's Filesystem and writes the result (docs/agent.md, "Opcodes", is the
// layout of each).
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <iterator>

#include "agent/op_call.h"

namespace ros2::agent {
namespace {

void Nop(OpCall&) {}
void Mount(OpCall& c) {
  c.MountContainer();
}
void Unmount(OpCall& c) {
  c.UnmountMount();
}

void Lookup(OpCall& c) {
  std::string name;
  if (!c.Str(&name)) return c.BadArgs();
  c.PutEntry(c.fs->Lookup(c.entry, name));
}

void LookupPath(OpCall& c) {
  std::string path;
  if (!c.Str(&path)) return c.BadArgs();
  c.PutEntry(c.fs->LookupPath(path));
}

void LookupWithAttr(OpCall& c) {
  std::string name;
  if (!c.Str(&name)) return c.BadArgs();
  auto ea = c.fs->LookupWithAttr(c.entry, name);
  if (!ea.ok()) return c.Fail(ea.status());
  ArgWriter w;
  w.Entry(ea->first);
  w.Attr(ea->second);
  c.Put(w.bytes());
}

void Open(OpCall& c) {
  std::string name;
  if (!c.Str(&name)) return c.BadArgs();
  bool created = false;
  auto e = c.fs->Open(c.entry, name, static_cast<int>(c.sqe.op_flags), static_cast<mode_t>(c.sqe.mode), &created);
  c.PutEntry(e);
  if (e.ok() && c.cqe.result == 0) c.cqe.result = created ? 1 : 0;
}

void Mkdir(OpCall& c) {
  std::string name;
  if (!c.Str(&name)) return c.BadArgs();
  c.PutEntry(c.fs->Mkdir(c.entry, name, static_cast<mode_t>(c.sqe.mode)));
}

void MkdirAll(OpCall& c) {
  std::string path;
  if (!c.Str(&path)) return c.BadArgs();
  uint64_t created = 0;
  auto e = c.fs->MkdirAll(path, static_cast<mode_t>(c.sqe.mode), &created);
  c.PutEntry(e);
  if (e.ok() && c.cqe.result == 0) c.cqe.result = static_cast<int64_t>(created);
}

void Symlink(OpCall& c) {
  std::string name, target;
  if (!c.Str(&name) || !c.Str(&target)) return c.BadArgs();
  c.PutEntry(c.fs->Symlink(c.entry, name, target));
}

void Mknod(OpCall& c) {
  std::string name;
  if (!c.Str(&name)) return c.BadArgs();
  c.PutEntry(c.fs->Mknod(c.entry, name, static_cast<mode_t>(c.sqe.mode), c.sqe.offset));
}

void Link(OpCall& c) {
  dfs::Entry new_parent;
  std::string name;
  if (!c.args.Entry(&new_parent) || !c.Str(&name)) return c.BadArgs();
  c.PutEntry(c.fs->Link(c.entry, new_parent, name));
}

void Readlink(OpCall& c) {
  auto t = c.fs->Readlink(c.entry);
  if (!t.ok()) return c.Fail(t.status());
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(t->data()),
                               reinterpret_cast<const std::byte*>(t->data()) + t->size());
  if (c.Put(bytes)) c.cqe.result = static_cast<int64_t>(t->size());
}

void Unlink(OpCall& c) {
  std::string name;
  if (!c.Str(&name)) return c.BadArgs();
  c.Done(c.fs->Unlink(c.entry, name));
}

void Rmdir(OpCall& c) {
  std::string name;
  if (!c.Str(&name)) return c.BadArgs();
  c.Done(c.fs->Rmdir(c.entry, name));
}

void Rename(OpCall& c) {
  std::string name, new_name;
  dfs::Entry new_parent;
  if (!c.Str(&name) || !c.args.Entry(&new_parent) || !c.Str(&new_name)) return c.BadArgs();
  c.Done(c.fs->Rename(c.entry, name, new_parent, new_name, c.sqe.op_flags));
}

void PutAttr(OpCall& c, const Result<dfs::Attr>& a) {
  if (!a.ok()) return c.Fail(a.status());
  ArgWriter w;
  w.Attr(*a);
  c.Put(w.bytes());
}

void Stat(OpCall& c) {
  PutAttr(c, c.fs->Stat(c.entry));
}

void SetAttr(OpCall& c) {
  dfs::SetAttrArgs s;
  uint32_t mode = 0, uid = 0, gid = 0;
  int64_t as = 0, an = 0, ms = 0, mn = 0;
  ArgReader& r = c.args;
  if (!r.U32(&mode) || !r.U32(&uid) || !r.U32(&gid) || !r.U64(&s.size) || !r.I64(&as) || !r.I64(&an) || !r.I64(&ms) ||
      !r.I64(&mn)) {
    return c.BadArgs();
  }
  s.mask = c.sqe.op_flags;
  s.mode = static_cast<mode_t>(mode);
  s.uid = static_cast<uid_t>(uid);
  s.gid = static_cast<gid_t>(gid);
  s.atime = {static_cast<time_t>(as), static_cast<long>(an)};
  s.mtime = {static_cast<time_t>(ms), static_cast<long>(mn)};
  PutAttr(c, c.fs->SetAttr(c.entry, s));
}

void Truncate(OpCall& c) {
  c.Done(c.fs->Truncate(c.entry, c.sqe.offset));
}

void Statfs(OpCall& c) {
  auto s = c.fs->Statfs();
  if (!s.ok()) return c.Fail(s.status());
  ArgWriter w;
  for (uint64_t v : {s->block_size, s->blocks, s->blocks_free, s->files, s->files_free, uint64_t{s->name_max}}) {
    w.U64(v);
  }
  c.Put(w.bytes());
}

void Readdir(OpCall& c) {
  dfs::DirAnchor anchor;
  uint32_t eof = 0;
  if (!c.args.U32(&anchor.shard) || !c.args.U32(&eof) || !c.args.Str(&anchor.position, 4000)) return c.BadArgs();
  anchor.eof = eof != 0;
  // No more entries than the result area holds at their largest.
  const uint64_t per = kDirRecordFixed + dfs::kMaxNameLength;
  const uint64_t fit = c.sqe.buf_len > kReaddirHeaderReserve ? (c.sqe.buf_len - kReaddirHeaderReserve) / per : 0;
  const uint64_t max = std::min<uint64_t>(c.sqe.op_flags, fit);
  if (max == 0) {
    return c.Fail(ERANGE, Status::InvalidArgument(fmt::format("agent readdir: max {} or result area {} holds no entry",
                                                              c.sqe.op_flags, c.sqe.buf_len)));
  }
  auto list = c.fs->Readdir(c.entry, anchor, max);
  if (!list.ok()) return c.Fail(list.status());
  ArgWriter w;
  w.U32(static_cast<uint32_t>(list->size()));
  w.U32(anchor.shard);
  w.U32(anchor.eof ? 1 : 0);
  w.Str(anchor.position);
  for (const auto& d : *list) {
    w.U64(d.oid.hi);
    w.U64(d.oid.lo);
    w.U64(d.ino);
    w.U32(static_cast<uint32_t>(d.mode));
    w.Str(d.name);
  }
  if (c.Put(w.bytes())) c.cqe.result = static_cast<int64_t>(list->size());
}

void Read(OpCall& c) {
  c.SubmitIo(true);
}
void Write(OpCall& c) {
  c.SubmitIo(false);
}
void Sync(OpCall& c) {
  c.Done(c.fs->Sync(c.entry));
}

// Indexed by opcode.
constexpr OpSpec kOps[] = {
    {RingOp::kNop, "nop", ArgLayout::kSession, &Nop},
    {RingOp::kMount, "mount", ArgLayout::kSession, &Mount},
    {RingOp::kUnmount, "unmount", ArgLayout::kMount, &Unmount},
    {RingOp::kLookup, "lookup", ArgLayout::kEntry, &Lookup},
    {RingOp::kLookupPath, "lookup_path", ArgLayout::kMount, &LookupPath},
    {RingOp::kLookupWithAttr, "lookup_attr", ArgLayout::kEntry, &LookupWithAttr},
    {RingOp::kOpen, "open", ArgLayout::kEntry, &Open},
    {RingOp::kMkdir, "mkdir", ArgLayout::kEntry, &Mkdir},
    {RingOp::kMkdirAll, "mkdir_all", ArgLayout::kMount, &MkdirAll},
    {RingOp::kSymlink, "symlink", ArgLayout::kEntry, &Symlink},
    {RingOp::kMknod, "mknod", ArgLayout::kEntry, &Mknod},
    {RingOp::kLink, "link", ArgLayout::kEntry, &Link},
    {RingOp::kReadlink, "readlink", ArgLayout::kEntry, &Readlink},
    {RingOp::kUnlink, "unlink", ArgLayout::kEntry, &Unlink},
    {RingOp::kRmdir, "rmdir", ArgLayout::kEntry, &Rmdir},
    {RingOp::kRename, "rename", ArgLayout::kEntry, &Rename},
    {RingOp::kStat, "stat", ArgLayout::kEntry, &Stat},
    {RingOp::kSetAttr, "setattr", ArgLayout::kEntry, &SetAttr},
    {RingOp::kTruncate, "truncate", ArgLayout::kEntry, &Truncate},
    {RingOp::kStatfs, "statfs", ArgLayout::kMount, &Statfs},
    {RingOp::kReaddir, "readdir", ArgLayout::kEntry, &Readdir},
    {RingOp::kRead, "read", ArgLayout::kEntryData, &Read},
    {RingOp::kWrite, "write", ArgLayout::kEntryData, &Write},
    {RingOp::kSync, "sync", ArgLayout::kEntry, &Sync},
};
constexpr bool RowsMatchOpcodes() {
  for (size_t i = 0; i < std::size(kOps); ++i) {
    if (static_cast<size_t>(kOps[i].op) != i) return false;
  }
  return std::size(kOps) == size_t{kLastRingOp} + 1;
}
static_assert(RowsMatchOpcodes(), "kOps has one row per opcode, in opcode order");

}  // namespace

const OpSpec* FindOp(uint8_t op) {
  return op < std::size(kOps) ? &kOps[op] : nullptr;
}

const char* OpName(uint8_t op) {
  const OpSpec* spec = FindOp(op);
  return spec != nullptr ? spec->name : "unknown";
}

}  // namespace ros2::agent
