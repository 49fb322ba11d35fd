// Attribute operations of Filesystem: stat, setattr (chmod, chown, utimens,
// truncate), truncate, statfs and sync. A file's size is derived from its
// object (FilesystemCore::FileSize), never stored; truncate changes the data
// so that the derived size is the new one (docs/dfs.md, "File size").
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "dfs/encrypted_io.h"
#include "dfs/filesystem_core.h"
#include "dfs/direct_filesystem.h"

namespace ros2::dfs {
namespace {

Status RequireFile(const EntryRecord& rec, std::string_view what) {
  if (S_ISREG(rec.mode)) return Status::Ok();
  if (S_ISDIR(rec.mode)) return Status::IsDirectory(fmt::format("dfs {}: is a directory", what));
  return Status::InvalidArgument(fmt::format("dfs {}: not a regular file", what));
}

// Makes `size` the file's size: punches chunks past it, rewrites the kept
// part of a partly cut chunk, and writes a zero byte at size - 1 when the
// data then ends before `size` (a grow, or a shrink into a hole).
Status TruncateData(const FilesystemCore& core, const EntryRecord& rec, uint64_t size) {
  if (core.cipher() != nullptr) return TruncateEncrypted(core, rec, size);
  const std::string what = fmt::format("dfs truncate of {} to {}", rec.oid.ToString(), size);
  ROS2_ASSIGN_OR_RETURN(client::Object obj, core.OpenObject(rec.oid));
  const uint64_t cs = rec.chunk_size;
  ROS2_ASSIGN_OR_RETURN(uint64_t current, core.FileSize(rec.oid, cs));
  if (size == current) return Status::Ok();
  if (size < current) {
    if (size == 0) {
      ROS2_RETURN_IF_ERROR(obj.PunchObject().WithContext(what));
      return Status::Ok();
    }
    const uint64_t first_dead = (size + cs - 1) / cs;  // first chunk wholly past the end
    ROS2_ASSIGN_OR_RETURN(auto dkeys, obj.ListDkeys());
    for (const auto& dkey : dkeys) {
      auto index = ChunkIndex(dkey);
      if (!index.ok()) continue;  // not a chunk (nothing else is stored in a file object)
      if (*index >= first_dead) ROS2_RETURN_IF_ERROR(obj.PunchDkey(dkey).WithContext(what));
    }
    if (size % cs != 0) {  // chunk size / cs keeps its first `keep` bytes
      const uint64_t chunk = size / cs, keep = size % cs;
      std::vector<std::byte> kept(keep);
      client::FetchArgs f;
      f.dkey = ChunkDkey(chunk);
      f.akey = kDataAkey;
      f.kind = client::ValueType::kArray;
      f.count = keep;
      f.buffer = kept;
      f.want_array_end = true;
      ROS2_ASSIGN_OR_RETURN(client::IoResult r, obj.Fetch(f));
      if (r.array_end > keep) {
        ROS2_RETURN_IF_ERROR(obj.PunchDkey(f.dkey).WithContext(what));
        client::UpdateArgs u;
        u.dkey = f.dkey;
        u.akey = kDataAkey;
        u.kind = client::ValueType::kArray;
        u.data = kept;
        ROS2_RETURN_IF_ERROR(obj.Update(u).WithContext(what));
      }
    }
    ROS2_ASSIGN_OR_RETURN(current, core.FileSize(rec.oid, cs));
    if (current >= size) return Status::Ok();
  }
  // Grow: the end becomes visible through one zero byte (the rest reads as a hole).
  const std::byte zero{0};
  client::UpdateArgs u;
  u.dkey = ChunkDkey((size - 1) / cs);
  u.akey = kDataAkey;
  u.kind = client::ValueType::kArray;
  u.index = (size - 1) % cs;
  u.data = std::span<const std::byte>(&zero, 1);
  return obj.Update(u).WithContext(what);
}

}  // namespace

Result<Attr> DirectFilesystem::Stat(const Entry& entry) {
  if (entry.is_file() && core_->cipher() == nullptr) {
    // The handle names the file's object: ask for its record and its size at
    // once (one round trip instead of two).
    FilesystemCore::Location loc = core_->LocationOf(entry);
    ROS2_ASSIGN_OR_RETURN(client::Object dir, core_->OpenObject(loc.object));
    ROS2_ASSIGN_OR_RETURN(client::Object file, core_->OpenObject(entry.oid));
    ROS2_ASSIGN_OR_RETURN(auto eq, core_->container().CreateEventQueue());
    std::vector<std::byte> value(kEntryRecordFixedSize + 180);
    client::IoResult fetched;
    Result<std::optional<client::ArrayTail>> tail = Status::Cancelled("not run");
    client::FetchArgs f;
    f.dkey = loc.dkey;
    f.akey = kEntryAkey;
    f.buffer = value;
    Status st = dir.SubmitFetch(*eq, f, [&](const client::IoResult& r) { fetched = r; });
    if (st.ok()) {
      st = file.SubmitQueryArrayTail(*eq, kDataAkey,
                                     [&](const Result<std::optional<client::ArrayTail>>& t) { tail = t; });
    }
    std::array<client::Event, 1> ignored;
    while (eq->in_flight() > 0) (void)eq->Wait(ignored, eq->in_flight(), std::chrono::seconds(5));
    ROS2_RETURN_IF_ERROR(st);
    ROS2_RETURN_IF_ERROR(fetched.status);
    if (fetched.size == 0) return StatSlow(entry);  // gone, or renamed away from a hard link's other names
    if (fetched.size > value.size()) {              // not a plain file record any more: take the slow path
      return StatSlow(entry);
    }
    value.resize(fetched.size);
    ROS2_ASSIGN_OR_RETURN(EntryRecord rec, DecodeEntry(value, DescribeEntry(loc.object, loc.dkey)));
    if (rec.oid != entry.oid || rec.linked) return StatSlow(entry);  // a stale handle, or a hard link's stub
    if (!tail.ok()) return tail.status();
    uint64_t size = 0;
    if (tail->has_value()) {
      ROS2_ASSIGN_OR_RETURN(uint64_t index, ChunkIndex((*tail)->dkey));
      size = index * rec.chunk_size + (*tail)->end;
    }
    return core_->MakeAttr(rec, size);
  }
  return StatSlow(entry);
}

Result<Attr> DirectFilesystem::StatSlow(const Entry& entry) {
  ROS2_ASSIGN_OR_RETURN(EntryRecord rec, core_->RecordOf(entry));
  uint64_t size = 0;
  if (S_ISREG(rec.mode)) {
    ROS2_ASSIGN_OR_RETURN(size, core_->FileSize(rec.oid, rec.chunk_size));
  }
  return core_->AttrOf(rec, size);
}

Result<Attr> DirectFilesystem::SetAttr(const Entry& entry, const SetAttrArgs& args) {
  const std::string what = fmt::format("setattr of '{}' ({})", entry.name, entry.oid.ToString());
  constexpr uint32_t kKnown =
      kSetMode | kSetUid | kSetGid | kSetSize | kSetAtime | kSetMtime | kSetAtimeNow | kSetMtimeNow;
  if ((args.mask & ~kKnown) != 0) return Status::InvalidArgument(fmt::format("dfs {}: unknown mask bits", what));
  ROS2_ASSIGN_OR_RETURN(EntryRecord rec, core_->RecordOf(entry));
  const bool root = core_->options().uid == 0;
  if ((args.mask & kSetMode) != 0) {
    ROS2_RETURN_IF_ERROR(core_->CheckOwner(rec, what));
    rec.mode = (rec.mode & S_IFMT) | (args.mode & 07777);
  }
  if ((args.mask & (kSetUid | kSetGid)) != 0) {
    const bool uid_change = (args.mask & kSetUid) != 0 && args.uid != rec.uid;
    const bool gid_change = (args.mask & kSetGid) != 0 && args.gid != rec.gid;
    if (!root &&
        (uid_change || (gid_change && (rec.uid != core_->options().uid || args.gid != core_->options().gid)))) {
      return Status::PermissionDenied(fmt::format("dfs {}: only root may change the owner", what));
    }
    if ((args.mask & kSetUid) != 0) rec.uid = args.uid;
    if ((args.mask & kSetGid) != 0) rec.gid = args.gid;
  }
  const timespec now = Now();
  if ((args.mask & (kSetAtime | kSetMtime)) != 0) ROS2_RETURN_IF_ERROR(core_->CheckOwner(rec, what));
  if ((args.mask & (kSetAtimeNow | kSetMtimeNow)) != 0 && core_->CheckOwner(rec, what).ok() == false) {
    ROS2_RETURN_IF_ERROR(core_->CheckAccess(rec, W_OK, what));
  }
  for (auto [bit, t] : {std::pair{kSetAtime, &args.atime}, std::pair{kSetMtime, &args.mtime}}) {
    if ((args.mask & bit) != 0 && (t->tv_nsec < 0 || t->tv_nsec >= 1'000'000'000)) {
      return Status::InvalidArgument(fmt::format("dfs {}: nanoseconds out of range", what));
    }
  }
  if ((args.mask & kSetAtime) != 0) rec.atime = args.atime;
  if ((args.mask & kSetMtime) != 0) rec.mtime = args.mtime;
  if ((args.mask & kSetAtimeNow) != 0) rec.atime = now;
  if ((args.mask & kSetMtimeNow) != 0) rec.mtime = now;
  std::optional<uint64_t> size;
  if ((args.mask & kSetSize) != 0) {
    ROS2_RETURN_IF_ERROR(RequireFile(rec, what));
    ROS2_RETURN_IF_ERROR(core_->CheckAccess(rec, W_OK, what));
    ROS2_RETURN_IF_ERROR(TruncateData(*core_, rec, args.size));
    size = args.size;
    if ((args.mask & (kSetMtime | kSetMtimeNow)) == 0) rec.mtime = now;
  }
  rec.ctime = now;
  ROS2_RETURN_IF_ERROR(core_->StoreAttributes(entry, rec));
  if (!size && S_ISREG(rec.mode)) {
    ROS2_ASSIGN_OR_RETURN(size, core_->FileSize(rec.oid, rec.chunk_size));
  }
  return core_->AttrOf(rec, size.value_or(0));
}

Status DirectFilesystem::Truncate(const Entry& file, uint64_t size) {
  SetAttrArgs args;
  args.mask = kSetSize;
  args.size = size;
  return SetAttr(file, args).status();
}

Result<StatFs> DirectFilesystem::Statfs() {
  ROS2_ASSIGN_OR_RETURN(client::PoolSpace space, core_->container().QueryPoolSpace());
  StatFs s;
  s.blocks = space.total_bytes / s.block_size;
  s.blocks_free = (space.total_bytes - space.used_bytes) / s.block_size;
  return s;
}

Status DirectFilesystem::Sync(const Entry& entry) {
  // Data and metadata are durable when acknowledged. A file's mtime is not
  // touched by each write (no extra round trip on the data path): Sync stamps
  // it, so a writer's flush/fsync/close publishes the modification time.
  ROS2_ASSIGN_OR_RETURN(EntryRecord rec, core_->RecordOf(entry));
  if (!S_ISREG(rec.mode)) return Status::Ok();
  rec.mtime = rec.ctime = Now();
  return core_->StoreAttributes(entry, rec);
}

}  // namespace ros2::dfs
