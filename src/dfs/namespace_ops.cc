// Name operations of Filesystem: lookup (by name and by path), open/create,
// mkdir, symlink/readlink, unlink, rmdir and rename. Every create is one
// conditional insert of the entry's dkey; removals are conditional punches
// (docs/dfs.md, "Operations").
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <deque>

#include <fmt/format.h>

#include "dfs/direct_filesystem.h"
#include "dfs/filesystem_core.h"
#include "dfs/path.h"

namespace ros2::dfs {
namespace {

constexpr int kMaxSymlinkHops = 40;
constexpr int kRaceRetries = 8;

Status RequireDirectory(const Entry& dir, std::string_view op) {
  if (dir.is_dir()) return Status::Ok();
  return Status::NotDirectory(fmt::format("dfs {}: {} ({}) is not a directory", op,
                                          dir.name.empty() ? dir.oid.ToString() : dir.name, dir.oid.ToString()));
}

int AccessFor(int flags) {
  switch (flags & O_ACCMODE) {
    case O_WRONLY: return W_OK;
    case O_RDWR: return R_OK | W_OK;
    default: return R_OK;
  }
}

// Whether directory object `dir` holds no entry.
Result<bool> DirectoryEmpty(const FilesystemCore& core, const ObjectId& dir) {
  ROS2_ASSIGN_OR_RETURN(client::Object obj, core.OpenObject(dir));
  client::KeyAnchor anchor;
  while (!anchor.eof) {
    ROS2_ASSIGN_OR_RETURN(auto keys, obj.ListDkeysPage(anchor, 2));
    for (const auto& key : keys) {
      if (key != kDirTimesDkey) return false;  // the directory's times value is no entry
    }
  }
  return true;
}

// Removes what an entry's object holds once its entry (one name of it) is
// gone (best effort: the name is already removed). A hard-linked entry loses
// one link, and its object goes with the last. A punch is a durable write on
// every shard, so it is skipped when there is nothing to remove: symlinks and
// special files have no object data, a directory is removed only when empty
// (only its times value is left), and a file that holds no chunk (the
// array-tail query, reads only, all shards at once) needs none.
Status PunchEntryObject(const FilesystemCore& core, const EntryRecord& rec) {
  if (rec.linked) return core.DropLink(rec.oid);
  if (S_ISDIR(rec.mode)) {
    ROS2_ASSIGN_OR_RETURN(client::Object dir, core.OpenObject(rec.oid));
    return dir.PunchDkey(kDirTimesDkey);
  }
  if (!S_ISREG(rec.mode)) return Status::Ok();
  ROS2_ASSIGN_OR_RETURN(client::Object obj, core.OpenObject(rec.oid));
  ROS2_ASSIGN_OR_RETURN(auto tail, obj.QueryArrayTail(kDataAkey));
  if (!tail) return Status::Ok();
  return obj.PunchObject();
}

// After a rename: both directories changed, a moved directory's marker
// moves with it (the link counts of both), and the moved entry's ctime
// (already in `moved` unless it is hard-linked: then in its inode record).
Status FinishRename(const FilesystemCore& core, const ObjectId& from, std::string_view name, const ObjectId& to,
                    std::string_view new_name, const EntryRecord& moved) {
  ROS2_RETURN_IF_ERROR(core.TouchDirectory(from));
  if (!(to == from)) ROS2_RETURN_IF_ERROR(core.TouchDirectory(to));
  if (S_ISDIR(moved.mode)) {
    ROS2_RETURN_IF_ERROR(core.AddSubdirectory(to, new_name));
    ROS2_RETURN_IF_ERROR(core.RemoveSubdirectory(from, name));
  }
  if (moved.linked) return core.ReplaceInode(moved);
  return Status::Ok();
}

}  // namespace

Result<Entry> DirectFilesystem::Lookup(const Entry& parent, std::string_view name) {
  ROS2_RETURN_IF_ERROR(RequireDirectory(parent, "lookup"));
  ROS2_RETURN_IF_ERROR(ValidateName(name));
  ROS2_RETURN_IF_ERROR(core_->CheckAccess(parent, X_OK, fmt::format("lookup of '{}'", name)));
  ROS2_ASSIGN_OR_RETURN(EntryRecord rec, core_->FetchRecord(parent.oid, name));
  return core_->MakeEntry(parent.oid, name, rec);
}

Result<std::pair<Entry, Attr>> DirectFilesystem::LookupWithAttr(const Entry& parent, std::string_view name) {
  ROS2_RETURN_IF_ERROR(RequireDirectory(parent, "lookup"));
  ROS2_RETURN_IF_ERROR(ValidateName(name));
  ROS2_RETURN_IF_ERROR(core_->CheckAccess(parent, X_OK, fmt::format("lookup of '{}'", name)));
  ROS2_ASSIGN_OR_RETURN(EntryRecord rec, core_->FetchRecord(parent.oid, name));
  uint64_t size = 0;
  if (S_ISREG(rec.mode)) {
    ROS2_ASSIGN_OR_RETURN(size, core_->FileSize(rec.oid, rec.chunk_size));
  }
  ROS2_ASSIGN_OR_RETURN(Attr attr, core_->AttrOf(rec, size));
  return std::make_pair(core_->MakeEntry(parent.oid, name, rec), attr);
}

Result<Entry> DirectFilesystem::LookupPath(std::string_view path) {
  ROS2_ASSIGN_OR_RETURN(auto parts, SplitPath(path));
  std::deque<std::string> todo(parts.begin(), parts.end());
  std::vector<Entry> stack{Root()};  // the directories walked through, for ".."
  int hops = 0;
  while (!todo.empty()) {
    std::string part = std::move(todo.front());
    todo.pop_front();
    if (part == "..") {
      if (stack.size() > 1) stack.pop_back();
      continue;
    }
    const Entry& dir = stack.back();
    if (!dir.is_dir()) return Status::NotDirectory(fmt::format("dfs: '{}': a component is not a directory", path));
    ROS2_RETURN_IF_ERROR(core_->CheckAccess(dir, X_OK, fmt::format("lookup of '{}'", path)));
    auto fetched = core_->FetchRecord(dir.oid, part);
    if (!fetched.ok()) return fetched.status().WithContext(fmt::format("dfs lookup of '{}'", path));
    EntryRecord rec = std::move(*fetched);
    if (S_ISLNK(rec.mode) && !todo.empty()) {
      if (++hops > kMaxSymlinkHops) {
        return Status::Loop(fmt::format("dfs: '{}': more than {} symbolic links", path, kMaxSymlinkHops));
      }
      const bool absolute = !rec.symlink_target.empty() && rec.symlink_target.front() == '/';
      const std::string target_path = absolute ? rec.symlink_target : "/" + rec.symlink_target;
      ROS2_ASSIGN_OR_RETURN(auto target, SplitPath(target_path));
      if (absolute) stack.resize(1);
      todo.insert(todo.begin(), target.begin(), target.end());
      continue;
    }
    stack.push_back(core_->MakeEntry(dir.oid, part, rec));
  }
  return stack.back();
}

Result<Entry> DirectFilesystem::MkdirAll(std::string_view path, mode_t mode, uint64_t* created) {
  ROS2_ASSIGN_OR_RETURN(auto parts, SplitPath(path));
  if (created != nullptr) *created = 0;
  Entry dir = Root();
  for (std::string_view part : parts) {
    auto next = Lookup(dir, part);
    if (!next.ok() && next.status().IsNotFound()) {
      next = Mkdir(dir, part, mode);
      if (next.ok() && created != nullptr) ++*created;
      if (!next.ok() && next.status().code() == Status::Code::kAlreadyExists) next = Lookup(dir, part);
    }
    if (!next.ok()) return next.status().WithContext(fmt::format("dfs mkdir -p '{}'", path));
    if (!next->is_dir()) {
      return Status::NotDirectory(fmt::format("dfs mkdir -p '{}': '{}' exists and is not a directory", path, part));
    }
    dir = std::move(*next);
  }
  return dir;
}

Result<Entry> DirectFilesystem::Open(const Entry& parent, std::string_view name, int flags, mode_t mode,
                                     bool* created) {
  if (created != nullptr) *created = false;
  ROS2_RETURN_IF_ERROR(RequireDirectory(parent, "open"));
  ROS2_RETURN_IF_ERROR(ValidateName(name));
  ROS2_RETURN_IF_ERROR(core_->CheckAccess(parent, X_OK, fmt::format("open of '{}'", name)));
  const std::string what = fmt::format("dfs open of {}", DescribeEntry(parent.oid, name));
  for (int attempt = 0; attempt < kRaceRetries; ++attempt) {
    if ((flags & O_CREAT) != 0) {
      ROS2_RETURN_IF_ERROR(core_->CheckAccess(parent, W_OK | X_OK, what));
      EntryRecord rec =
          core_->NewRecord(S_IFREG | (mode & 07777), core_->NewObjectId(ObjectType::kArray, core_->file_class()));
      Status st = core_->InsertRecord(parent.oid, name, rec);
      if (st.ok()) {
        ROS2_RETURN_IF_ERROR(core_->TouchDirectory(parent.oid));
        if (created != nullptr) *created = true;
        return core_->MakeEntry(parent.oid, name, rec);
      }
      if (st.code() != Status::Code::kAlreadyExists || (flags & O_EXCL) != 0) return st;
    }
    auto existing = core_->FetchRecord(parent.oid, name);
    if (!existing.ok()) {
      // Created and removed between our insert and this fetch: try again.
      if (existing.status().IsNotFound() && (flags & O_CREAT) != 0) continue;
      return existing.status();
    }
    EntryRecord& rec = *existing;
    if (S_ISDIR(rec.mode)) {
      if ((flags & O_CREAT) != 0 || (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC) != 0) {
        return Status::IsDirectory(what + ": is a directory");
      }
    }
    ROS2_RETURN_IF_ERROR(core_->CheckAccess(rec, AccessFor(flags), what));
    Entry entry = core_->MakeEntry(parent.oid, name, rec);
    if ((flags & O_TRUNC) != 0 && S_ISREG(rec.mode)) {  // as Linux: whatever the access mode
      ROS2_RETURN_IF_ERROR(Truncate(entry, 0));
    }
    return entry;
  }
  return Status::Busy(what + ": the entry kept being created and removed");
}

Result<Entry> DirectFilesystem::Mkdir(const Entry& parent, std::string_view name, mode_t mode) {
  ROS2_RETURN_IF_ERROR(RequireDirectory(parent, "mkdir"));
  ROS2_RETURN_IF_ERROR(ValidateName(name));
  ROS2_RETURN_IF_ERROR(core_->CheckAccess(parent, W_OK | X_OK, fmt::format("mkdir of '{}'", name)));
  EntryRecord rec =
      core_->NewRecord(S_IFDIR | (mode & 07777), core_->NewObjectId(ObjectType::kDirectory, core_->dir_class()));
  ROS2_RETURN_IF_ERROR(core_->InsertRecord(parent.oid, name, rec));
  ROS2_RETURN_IF_ERROR(core_->TouchDirectory(parent.oid));
  ROS2_RETURN_IF_ERROR(core_->AddSubdirectory(parent.oid, name));
  return core_->MakeEntry(parent.oid, name, rec);
}

Result<Entry> DirectFilesystem::Symlink(const Entry& parent, std::string_view name, std::string_view target) {
  ROS2_RETURN_IF_ERROR(RequireDirectory(parent, "symlink"));
  ROS2_RETURN_IF_ERROR(ValidateName(name));
  if (target.empty()) return Status::InvalidArgument("dfs symlink: empty target");
  if (target.size() > kMaxPathLength) {
    return Status::NameTooLong(
        fmt::format("dfs symlink: target of {} bytes exceeds {}", target.size(), kMaxPathLength));
  }
  if (target.find('\0') != std::string_view::npos) return Status::InvalidArgument("dfs symlink: target contains NUL");
  ROS2_RETURN_IF_ERROR(core_->CheckAccess(parent, W_OK | X_OK, fmt::format("symlink '{}'", name)));
  // A symlink has no data: its object id only gives it a stable inode number.
  EntryRecord rec = core_->NewRecord(S_IFLNK | 0777, core_->NewObjectId(ObjectType::kKeyValue, ObjectClass::kS1));
  rec.symlink_target = std::string(target);
  ROS2_RETURN_IF_ERROR(core_->InsertRecord(parent.oid, name, rec));
  ROS2_RETURN_IF_ERROR(core_->TouchDirectory(parent.oid));
  return core_->MakeEntry(parent.oid, name, rec);
}

Result<Entry> DirectFilesystem::Mknod(const Entry& parent, std::string_view name, mode_t mode, uint64_t rdev) {
  if (S_ISREG(mode) || (mode & S_IFMT) == 0) {
    return Open(parent, name, O_CREAT | O_EXCL | O_RDWR, mode & 07777);
  }
  if (!S_ISFIFO(mode) && !S_ISSOCK(mode) && !S_ISCHR(mode) && !S_ISBLK(mode)) {
    return Status::InvalidArgument(fmt::format("dfs mknod of '{}': type {:o} cannot be made", name, mode & S_IFMT));
  }
  ROS2_RETURN_IF_ERROR(RequireDirectory(parent, "mknod"));
  ROS2_RETURN_IF_ERROR(ValidateName(name));
  ROS2_RETURN_IF_ERROR(core_->CheckAccess(parent, W_OK | X_OK, fmt::format("mknod of '{}'", name)));
  // No data: as for a symlink, the object id only gives a stable inode number.
  EntryRecord rec =
      core_->NewRecord(mode & (S_IFMT | 07777), core_->NewObjectId(ObjectType::kKeyValue, ObjectClass::kS1));
  if (S_ISCHR(mode) || S_ISBLK(mode)) rec.rdev = rdev;
  ROS2_RETURN_IF_ERROR(core_->InsertRecord(parent.oid, name, rec));
  ROS2_RETURN_IF_ERROR(core_->TouchDirectory(parent.oid));
  return core_->MakeEntry(parent.oid, name, rec);
}

Result<Entry> DirectFilesystem::Link(const Entry& target, const Entry& new_parent, std::string_view new_name) {
  ROS2_RETURN_IF_ERROR(RequireDirectory(new_parent, "link"));
  ROS2_RETURN_IF_ERROR(ValidateName(new_name));
  const std::string what =
      fmt::format("dfs link of {} as {}", target.oid.ToString(), DescribeEntry(new_parent.oid, new_name));
  ROS2_RETURN_IF_ERROR(core_->CheckAccess(new_parent, W_OK | X_OK, what));
  if (target.is_dir() || target.name.empty()) {
    return Status::PermissionDenied(what + ": a directory cannot have another name");
  }
  ROS2_ASSIGN_OR_RETURN(EntryRecord rec, core_->RecordOf(target));
  if (S_ISDIR(rec.mode)) return Status::PermissionDenied(what + ": a directory cannot have another name");
  // Order (docs/dfs.md, "Hard links"): the inode record with the new count,
  // then the source's entry turned into a stub, then the new stub. A crash in
  // between over-counts (the object outlives its names), never under-counts.
  const timespec now = Now();
  rec.ctime = now;
  if (!rec.linked) {
    rec.linked = true;
    rec.nlink = 2;
    Status st = core_->InsertInode(rec);
    if (st.code() == Status::Code::kAlreadyExists) {
      // Left by an interrupted link of this file, or another client linking
      // it right now: if its entry is a stub by now, count on from there.
      ROS2_ASSIGN_OR_RETURN(EntryRecord raw, core_->FetchRawRecord(target.parent, target.name));
      if (raw.linked) return Link(target, new_parent, new_name);
      ROS2_RETURN_IF_ERROR(core_->ReplaceInode(rec));
    } else {
      ROS2_RETURN_IF_ERROR(st);
    }
    ROS2_RETURN_IF_ERROR(core_->ReplaceRecord(target.parent, target.name, rec));
  } else {
    ++rec.nlink;
    ROS2_RETURN_IF_ERROR(core_->ReplaceInode(rec));
  }
  Status st = core_->InsertRecord(new_parent.oid, new_name, rec);
  if (!st.ok()) {
    (void)core_->DropLink(rec.oid);  // give the count back (the stub stays: a linked entry with one name)
    return st;
  }
  ROS2_RETURN_IF_ERROR(core_->TouchDirectory(new_parent.oid));
  return core_->MakeEntry(new_parent.oid, new_name, rec);
}

Result<std::string> DirectFilesystem::Readlink(const Entry& link) {
  ROS2_ASSIGN_OR_RETURN(EntryRecord rec, core_->RecordOf(link));
  if (!S_ISLNK(rec.mode)) {
    return Status::InvalidArgument(fmt::format("dfs readlink: '{}' is not a symbolic link", link.name));
  }
  return rec.symlink_target;
}

Status DirectFilesystem::Unlink(const Entry& parent, std::string_view name) {
  ROS2_RETURN_IF_ERROR(RequireDirectory(parent, "unlink"));
  ROS2_RETURN_IF_ERROR(ValidateName(name));
  ROS2_RETURN_IF_ERROR(core_->CheckAccess(parent, W_OK | X_OK, fmt::format("unlink of '{}'", name)));
  ROS2_ASSIGN_OR_RETURN(EntryRecord rec, core_->FetchRecord(parent.oid, name));
  if (S_ISDIR(rec.mode)) {
    return Status::IsDirectory(fmt::format("dfs unlink: {} is a directory", DescribeEntry(parent.oid, name)));
  }
  ROS2_RETURN_IF_ERROR(core_->RemoveRecord(parent.oid, name));
  ROS2_RETURN_IF_ERROR(core_->TouchDirectory(parent.oid));
  return PunchEntryObject(*core_, rec);
}

Status DirectFilesystem::Rmdir(const Entry& parent, std::string_view name) {
  ROS2_RETURN_IF_ERROR(RequireDirectory(parent, "rmdir"));
  ROS2_RETURN_IF_ERROR(ValidateName(name));
  ROS2_RETURN_IF_ERROR(core_->CheckAccess(parent, W_OK | X_OK, fmt::format("rmdir of '{}'", name)));
  ROS2_ASSIGN_OR_RETURN(EntryRecord rec, core_->FetchRecord(parent.oid, name));
  if (!S_ISDIR(rec.mode)) {
    return Status::NotDirectory(fmt::format("dfs rmdir: {} is not a directory", DescribeEntry(parent.oid, name)));
  }
  ROS2_ASSIGN_OR_RETURN(bool empty, DirectoryEmpty(*core_, rec.oid));
  if (!empty) return Status::NotEmpty(fmt::format("dfs rmdir: {} is not empty", DescribeEntry(parent.oid, name)));
  ROS2_RETURN_IF_ERROR(core_->RemoveRecord(parent.oid, name));
  ROS2_RETURN_IF_ERROR(core_->TouchDirectory(parent.oid));
  ROS2_RETURN_IF_ERROR(core_->RemoveSubdirectory(parent.oid, name));
  return PunchEntryObject(*core_, rec);
}

Status DirectFilesystem::Rename(const Entry& parent, std::string_view name, const Entry& new_parent,
                                std::string_view new_name, unsigned flags) {
  ROS2_RETURN_IF_ERROR(RequireDirectory(parent, "rename"));
  ROS2_RETURN_IF_ERROR(RequireDirectory(new_parent, "rename"));
  ROS2_RETURN_IF_ERROR(ValidateName(name));
  ROS2_RETURN_IF_ERROR(ValidateName(new_name));
  if ((flags & ~static_cast<unsigned>(kRenameNoReplace)) != 0) {
    return Status::InvalidArgument(fmt::format("dfs rename: unknown flags 0x{:x}", flags));
  }
  const std::string what =
      fmt::format("dfs rename of {} to {}", DescribeEntry(parent.oid, name), DescribeEntry(new_parent.oid, new_name));
  ROS2_RETURN_IF_ERROR(core_->CheckAccess(parent, W_OK | X_OK, what));
  ROS2_RETURN_IF_ERROR(core_->CheckAccess(new_parent, W_OK | X_OK, what));
  ROS2_ASSIGN_OR_RETURN(EntryRecord src, core_->FetchRecord(parent.oid, name));
  if (parent.oid == new_parent.oid && name == new_name) return Status::Ok();
  if (S_ISDIR(src.mode) && new_parent.oid == src.oid) {
    return Status::InvalidArgument(what + ": a directory cannot move into itself");
  }
  EntryRecord moved = src;
  moved.ctime = Now();

  if ((flags & kRenameNoReplace) != 0) {
    ROS2_RETURN_IF_ERROR(core_->InsertRecord(new_parent.oid, new_name, moved));
    Status st = core_->RemoveRecord(parent.oid, name);
    if (st.IsNotFound()) (void)core_->RemoveRecord(new_parent.oid, new_name);  // the source vanished: undo
    ROS2_RETURN_IF_ERROR(st);
    return FinishRename(*core_, parent.oid, name, new_parent.oid, new_name, moved);
  }

  for (int attempt = 0; attempt < kRaceRetries; ++attempt) {
    auto dst = core_->FetchRecord(new_parent.oid, new_name);
    if (!dst.ok() && !dst.status().IsNotFound()) return dst.status();
    Status st;
    if (dst.ok()) {
      if (dst->oid == src.oid) return Status::Ok();  // both names already lead to it
      if (S_ISDIR(src.mode) && !S_ISDIR(dst->mode))
        return Status::NotDirectory(what + ": the target is not a directory");
      if (!S_ISDIR(src.mode) && S_ISDIR(dst->mode)) return Status::IsDirectory(what + ": the target is a directory");
      if (S_ISDIR(dst->mode)) {
        ROS2_ASSIGN_OR_RETURN(bool empty, DirectoryEmpty(*core_, dst->oid));
        if (!empty) return Status::NotEmpty(what + ": the target directory is not empty");
      }
      st = core_->ReplaceRecord(new_parent.oid, new_name, moved);
    } else {
      st = core_->InsertRecord(new_parent.oid, new_name, moved);
    }
    // The target changed between the fetch and the write: look again.
    if (st.IsNotFound() || st.code() == Status::Code::kAlreadyExists) continue;
    ROS2_RETURN_IF_ERROR(st);
    ROS2_RETURN_IF_ERROR(core_->RemoveRecord(parent.oid, name));
    if (dst.ok()) (void)PunchEntryObject(*core_, *dst);
    return FinishRename(*core_, parent.oid, name, new_parent.oid, new_name, moved);
  }
  return Status::Busy(what + ": the target kept changing");
}

}  // namespace ros2::dfs
