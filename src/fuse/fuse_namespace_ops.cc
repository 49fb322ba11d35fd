// Names and attributes: lookup, forget, getattr, setattr, readlink, mknod,
// mkdir, unlink, rmdir, symlink, rename, statfs, access.
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "fuse/fuse_filesystem.h"

namespace ros2::fuse {

void FuseFilesystem::Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto dir = EntryOrReply(req, parent);
  if (!dir) return;
  auto found = IsOrphanDirectory(*dir, name)
                   ? Result<std::pair<dfs::Entry, dfs::Attr>>(Status::NotFound("the mount's orphan directory"))
                   : fs_.LookupWithAttr(*dir, name);
  if (!found.ok()) {
    if (found.status().IsNotFound() && cache_.negative_timeout_s > 0) {
      // ino 0: the kernel caches "no such name" for entry_timeout.
      fuse_entry_param e{};
      e.entry_timeout = cache_.negative_timeout_s;
      fuse_reply_entry(req, &e);
      return;
    }
    return ReplyError(req, found.status(), "lookup");
  }
  fuse_entry_param e = MakeEntryParam(found->first, found->second);
  if (fuse_reply_entry(req, &e) != 0) inodes_.Forget(e.ino, 1);
}

void FuseFilesystem::Forget(fuse_ino_t ino, uint64_t nlookup) {
  inodes_.Forget(ino, nlookup);
}

void FuseFilesystem::GetAttr(fuse_req_t req, fuse_ino_t ino) {
  auto entry = EntryOrReply(req, ino);
  if (!entry) return;
  auto attr = fs_.Stat(*entry);
  if (!attr.ok()) return ReplyError(req, attr.status(), "getattr");
  // Links this mount keeps for itself do not count: an orphan's, and the
  // root's subdirectory that holds them.
  if (attr->nlink > 0 && entry->is_file() && open_files_.IsOrphan(entry->oid)) --attr->nlink;
  if (ino == InodeTable::kRootIno) {
    auto orphans = OrphanDirectory(false);
    if (orphans.ok() && orphans->has_value() && attr->nlink > 2) --attr->nlink;
  }
  struct stat st = ToStat(*attr, ino);
  fuse_reply_attr(req, &st, cache_.attr_timeout_s);
}

void FuseFilesystem::SetAttr(fuse_req_t req, fuse_ino_t ino, const struct stat* attr, int to_set) {
  auto entry = EntryOrReply(req, ino);
  if (!entry) return;
  dfs::SetAttrArgs args;
  if (to_set & FUSE_SET_ATTR_MODE) {
    args.mask |= dfs::kSetMode;
    args.mode = attr->st_mode & 07777;
  }
  if (to_set & FUSE_SET_ATTR_UID) {
    args.mask |= dfs::kSetUid;
    args.uid = attr->st_uid;
  }
  if (to_set & FUSE_SET_ATTR_GID) {
    args.mask |= dfs::kSetGid;
    args.gid = attr->st_gid;
  }
  if (to_set & FUSE_SET_ATTR_SIZE) {
    if (attr->st_size < 0) return (void)fuse_reply_err(req, EINVAL);
    args.mask |= dfs::kSetSize;
    args.size = static_cast<uint64_t>(attr->st_size);
  }
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
    args.mask |= dfs::kSetAtimeNow;
  } else if (to_set & FUSE_SET_ATTR_ATIME) {
    args.mask |= dfs::kSetAtime;
    args.atime = attr->st_atim;
  }
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
    args.mask |= dfs::kSetMtimeNow;
  } else if (to_set & FUSE_SET_ATTR_MTIME) {
    args.mask |= dfs::kSetMtime;
    args.mtime = attr->st_mtim;
  }
  // FUSE_SET_ATTR_CTIME alone (the kernel's own bookkeeping) changes nothing here.
  auto updated = args.mask != 0 ? fs_.SetAttr(*entry, args) : fs_.Stat(*entry);
  if (!updated.ok()) return ReplyError(req, updated.status(), "setattr");
  if (args.mask & (dfs::kSetMode | dfs::kSetUid | dfs::kSetGid)) {
    // The DFS checks permissions inside a directory against the handle's
    // mode and owner: keep the inode's handle current.
    entry->mode = updated->mode;
    entry->uid = updated->uid;
    entry->gid = updated->gid;
    inodes_.Refresh(*entry);
  }
  struct stat st = ToStat(*updated, ino);
  fuse_reply_attr(req, &st, cache_.attr_timeout_s);
}

void FuseFilesystem::ReadLink(fuse_req_t req, fuse_ino_t ino) {
  auto entry = EntryOrReply(req, ino);
  if (!entry) return;
  auto target = fs_.Readlink(*entry);
  if (!target.ok()) return ReplyError(req, target.status(), "readlink");
  fuse_reply_readlink(req, target->c_str());
}

void FuseFilesystem::MkNod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  // FIFOs, sockets and devices are entries with a type and rdev: the kernel
  // opens them itself (a pipe, a socket, a driver), never through this file system.
  auto dir = EntryOrReply(req, parent);
  if (!dir) return;
  auto created = fs_.Mknod(*dir, name, mode & (S_IFMT | 07777), static_cast<uint64_t>(rdev));
  if (!created.ok()) return ReplyError(req, created.status(), "mknod");
  ReplyNewEntry(req, *dir, *created, "mknod");
}

void FuseFilesystem::Link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char* new_name) {
  auto target = EntryOrReply(req, ino);
  if (!target) return;
  auto dir = EntryOrReply(req, new_parent);
  if (!dir) return;
  auto linked = fs_.Link(*target, *dir, new_name);
  if (!linked.ok()) return ReplyError(req, linked.status(), "link");
  auto attr = fs_.Stat(*linked);
  if (!attr.ok()) return ReplyError(req, attr.status(), "link");
  fuse_entry_param e = MakeEntryParam(*linked, *attr);
  if (fuse_reply_entry(req, &e) != 0) inodes_.Forget(e.ino, 1);
}

void FuseFilesystem::MkDir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  auto dir = EntryOrReply(req, parent);
  if (!dir) return;
  auto created = fs_.Mkdir(*dir, name, mode & 07777);
  if (!created.ok()) return ReplyError(req, created.status(), "mkdir");
  ReplyNewEntry(req, *dir, *created, "mkdir");
}

void FuseFilesystem::Unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto dir = EntryOrReply(req, parent);
  if (!dir) return;
  Status s = UnlinkKeepingOpenFile(*dir, name);
  if (!s.ok()) return ReplyError(req, s, "unlink");
  fuse_reply_err(req, 0);
}

void FuseFilesystem::RmDir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto dir = EntryOrReply(req, parent);
  if (!dir) return;
  Status s = fs_.Rmdir(*dir, name);
  if (!s.ok()) return ReplyError(req, s, "rmdir");
  fuse_reply_err(req, 0);
}

void FuseFilesystem::SymLink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  auto dir = EntryOrReply(req, parent);
  if (!dir) return;
  auto created = fs_.Symlink(*dir, name, target);
  if (!created.ok()) return ReplyError(req, created.status(), "symlink");
  ReplyNewEntry(req, *dir, *created, "symlink");
}

void FuseFilesystem::Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
                            const char* new_name, unsigned flags) {
  // RENAME_EXCHANGE (swap two names) and RENAME_WHITEOUT (overlayfs) are not offered.
  if ((flags & ~static_cast<unsigned>(RENAME_NOREPLACE)) != 0) return (void)fuse_reply_err(req, EINVAL);
  auto from = EntryOrReply(req, parent);
  if (!from) return;
  auto to = EntryOrReply(req, new_parent);
  if (!to) return;
  Status s = fs_.Rename(*from, name, *to, new_name, (flags & RENAME_NOREPLACE) ? dfs::kRenameNoReplace : 0u);
  if (!s.ok()) return ReplyError(req, s, "rename");
  // The moved object's inode (if the kernel holds one) now lives under the new name.
  if (auto moved = fs_.Lookup(*to, new_name); moved.ok()) inodes_.Refresh(*moved);
  fuse_reply_err(req, 0);
}

void FuseFilesystem::StatFs(fuse_req_t req) {
  auto totals = fs_.Statfs();
  if (!totals.ok()) return ReplyError(req, totals.status(), "statfs");
  struct statvfs st {};
  st.f_bsize = totals->block_size;
  st.f_frsize = totals->block_size;
  st.f_blocks = totals->blocks;
  st.f_bfree = totals->blocks_free;
  st.f_bavail = totals->blocks_free;
  st.f_files = totals->files;
  st.f_ffree = totals->files_free;
  st.f_favail = totals->files_free;
  st.f_namemax = totals->name_max;
  fuse_reply_statfs(req, &st);
}

void FuseFilesystem::Access(fuse_req_t req, fuse_ino_t ino, int mask) {
  auto entry = EntryOrReply(req, ino);
  if (!entry) return;
  auto attr = fs_.Stat(*entry);
  if (!attr.ok()) return ReplyError(req, attr.status(), "access");
  if (mask == F_OK) return (void)fuse_reply_err(req, 0);
  const fuse_ctx* ctx = fuse_req_ctx(req);
  mode_t bits = attr->mode;
  if (ctx->uid == 0) {
    // root may do anything but execute a file no one may execute.
    bool exec_denied = (mask & X_OK) && !S_ISDIR(bits) && (bits & 0111) == 0;
    return (void)fuse_reply_err(req, exec_denied ? EACCES : 0);
  }
  int granted;
  if (ctx->uid == attr->uid) {
    granted = static_cast<int>((bits >> 6) & 7);
  } else if (ctx->gid == attr->gid) {
    granted = static_cast<int>((bits >> 3) & 7);
  } else {
    granted = static_cast<int>(bits & 7);
  }
  fuse_reply_err(req, (mask & ~granted) != 0 ? EACCES : 0);
}

}  // namespace ros2::fuse
