// Files: open, create, read, write, release, fsync, fallocate.
#include <fcntl.h>
#include <linux/fuse.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <limits>
#include <memory>

#include "common/log.h"
#include "fuse/fuse_filesystem.h"
#include "fuse/open_handles.h"

#ifndef FOPEN_NOFLUSH
#define FOPEN_NOFLUSH (1 << 5)
#endif
#ifndef FOPEN_PARALLEL_DIRECT_WRITES
#define FOPEN_PARALLEL_DIRECT_WRITES (1 << 6)
#endif

namespace ros2::fuse {

namespace {

// The thread group (process) of a thread: the kernel names a request's
// calling thread, not its process. 0 when it is gone or unreadable.
pid_t ProcessOf(pid_t tid) {
  std::ifstream status("/proc/" + std::to_string(tid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Tgid:", 0) == 0) return static_cast<pid_t>(std::atoi(line.c_str() + 5));
  }
  return 0;
}

// Whether thread `tid` belongs to the process of thread `opener`: the same
// thread (the common open-write-close) needs no look at /proc.
bool SameProcess(pid_t tid, pid_t opener) {
  if (tid == opener) return true;
  const pid_t process = ProcessOf(tid);
  return process != 0 && process == ProcessOf(opener);
}

}  // namespace


namespace {

// Each worker thread reads into its own buffer, reused across requests.
std::span<std::byte> ThreadReadBuffer(size_t size) {
  thread_local std::unique_ptr<std::byte[]> buffer;
  thread_local size_t capacity = 0;
  if (capacity < size) {
    capacity = std::max<size_t>(size, kMaxIoSize);
    buffer = std::make_unique_for_overwrite<std::byte[]>(capacity);
  }
  return {buffer.get(), size};
}

}  // namespace

Status FuseFilesystem::TruncateOnOpen(fuse_req_t req, const dfs::Entry& entry) {
  dfs::SetAttrArgs args;
  args.mask = dfs::kSetSize;
  args.size = 0;
  // The kernel's own suid/sgid clearing (its setattr for the open) is dropped
  // when the open truncates: do what it would have done for an unprivileged
  // caller.
  const fuse_ctx* ctx = fuse_req_ctx(req);
  if (ctx != nullptr && ctx->uid != 0 && (entry.mode & (S_ISUID | S_ISGID)) != 0) {
    auto attr = fs_.Stat(entry);
    if (!attr.ok()) return attr.status();
    mode_t mode = attr->mode & 07777;
    mode_t killed = mode & ~static_cast<mode_t>(S_ISUID);
    if ((killed & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP)) killed &= ~static_cast<mode_t>(S_ISGID);
    if (killed != mode) {
      args.mask |= dfs::kSetMode;
      args.mode = killed;
    }
  }
  auto updated = fs_.SetAttr(entry, args);
  if (!updated.ok()) return updated.status();
  if ((args.mask & dfs::kSetMode) != 0) {
    dfs::Entry refreshed = entry;
    refreshed.mode = updated->mode;
    inodes_.Refresh(refreshed);
  }
  return Status::Ok();
}

void FuseFilesystem::Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto entry = EntryOrReply(req, ino);
  if (!entry) return;
  if (entry->is_dir()) return (void)fuse_reply_err(req, EISDIR);
  // Permissions were checked by the kernel (default_permissions). O_TRUNC
  // comes in the open flags, not as a setattr first: libfuse 3 negotiates
  // FUSE_CAP_ATOMIC_O_TRUNC by default, and then the kernel leaves the
  // truncation to this open (it only drops its page cache). As on Linux, the
  // file is truncated whatever the access mode (the kernel asked for write
  // permission because of O_TRUNC).
  if ((fi->flags & O_TRUNC) != 0 && entry->is_file()) {
    if (Status s = TruncateOnOpen(req, *entry); !s.ok()) return ReplyError(req, s, "open(O_TRUNC)");
  }
  auto handle = std::make_unique<OpenFile>();
  handle->entry = *entry;
  handle->opener = fuse_req_ctx(req)->pid;
  open_files_.Opened(entry->oid);
  fi->fh = ReleaseToHandle(std::move(handle));
  // A handle that can write gets a flush on close, to publish the mtime of
  // what it wrote (the DFS does not stamp it per write); a read-only one
  // spares the kernel that round trip.
  const bool read_only = (fi->flags & O_ACCMODE) == O_RDONLY;
  if (!cache_.data_cache) {
    // Direct I/O: let the kernel run writes that stay inside the file's size
    // side by side (FOPEN_PARALLEL_DIRECT_WRITES, Linux 6.2+; older kernels
    // ignore the bit). libfuse 3.14's fuse_file_info has no field for it, so
    // the reply is the kernel's fuse_open_out, as fuse_reply_open would build it.
    fuse_open_out out{};
    out.fh = fi->fh;
    out.open_flags = FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES | (read_only ? FOPEN_NOFLUSH : 0);
    iovec iov{&out, sizeof(out)};
    if (fuse_reply_iov(req, &iov, 1) != 0) {
      TakeHandle<OpenFile>(fi->fh);
      open_files_.Closed(entry->oid);
    }
    return;
  }
  fi->keep_cache = 1;
  fi->noflush = read_only ? 1 : 0;
  if (fuse_reply_open(req, fi) != 0) {
    TakeHandle<OpenFile>(fi->fh);
    open_files_.Closed(entry->oid);
  }
}

void FuseFilesystem::Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  auto dir = EntryOrReply(req, parent);
  if (!dir) return;
  bool is_new = false;
  auto created = fs_.Open(*dir, name, (fi->flags & (O_ACCMODE | O_EXCL | O_TRUNC)) | O_CREAT, mode & 07777, &is_new);
  if (!created.ok()) return ReplyError(req, created.status(), "create");
  auto attr = fs_.Stat(*created);
  if (!attr.ok()) return ReplyError(req, attr.status(), "create");
  // A file that existed (made meanwhile, or unknown to the kernel's cache) keeps its owner.
  if (is_new) {
    if (Status s = ChownToCaller(req, *dir, *created, *attr); !s.ok()) return ReplyError(req, s, "create");
  }
  created->mode = attr->mode;
  created->uid = attr->uid;
  created->gid = attr->gid;
  fuse_entry_param e = MakeEntryParam(*created, *attr);
  auto handle = std::make_unique<OpenFile>();
  handle->entry = *created;
  handle->opener = fuse_req_ctx(req)->pid;
  open_files_.Opened(created->oid);
  fi->fh = ReleaseToHandle(std::move(handle));
  fi->direct_io = cache_.data_cache ? 0 : 1;
  fi->keep_cache = cache_.data_cache ? 1 : 0;
  fi->noflush = (fi->flags & O_ACCMODE) == O_RDONLY ? 1 : 0;
  if (fuse_reply_create(req, &e, fi) != 0) {
    inodes_.Forget(e.ino, 1);
    TakeHandle<OpenFile>(fi->fh);
    open_files_.Closed(created->oid);
  }
}

void FuseFilesystem::Read(fuse_req_t req, size_t size, off_t off, fuse_file_info* fi) {
  const OpenFile& file = HandleObject<OpenFile>(fi->fh);
  if (off < 0) return (void)fuse_reply_err(req, EINVAL);
  std::span<std::byte> buffer = ThreadReadBuffer(size);
  auto n = fs_.Read(file.entry, static_cast<uint64_t>(off), buffer);
  if (!n.ok()) return ReplyError(req, n.status(), "read");
  fuse_reply_buf(req, reinterpret_cast<const char*>(buffer.data()), *n);
}

void FuseFilesystem::Write(fuse_req_t req, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  OpenFile& file = HandleObject<OpenFile>(fi->fh);
  if (off < 0) return (void)fuse_reply_err(req, EINVAL);
  file.wrote.store(true, std::memory_order_relaxed);
  auto n = fs_.Write(file.entry, static_cast<uint64_t>(off), {reinterpret_cast<const std::byte*>(buf), size});
  if (!n.ok()) return ReplyError(req, n.status(), "write");
  fuse_reply_write(req, *n);
}

void FuseFilesystem::Flush(fuse_req_t req, fuse_file_info* fi) {
  // close(2) of a descriptor (with the writeback cache, after the kernel sent
  // the dirty pages): publish the mtime of what this handle wrote, before
  // close returns, so what the closing program does next (stat, utimens,
  // rename) comes after it. Only a close by the process that opened the file
  // stamps: every close of a copy of the descriptor flushes too, including
  // the implicit ones of exec in a forked child, and such a child must not
  // wait for the engine (it may be the very program that starts the engine
  // again). What another process wrote is stamped by the opener's close, or
  // at release.
  OpenFile& file = HandleObject<OpenFile>(fi->fh);
  if (file.wrote.load(std::memory_order_relaxed) && SameProcess(fuse_req_ctx(req)->pid, file.opener) &&
      file.wrote.exchange(false, std::memory_order_relaxed)) {
    Status s = fs_.Sync(file.entry);
    if (!s.ok() && !s.IsNotFound()) return ReplyError(req, s, "flush");  // a removed file has no mtime to keep
  }
  fuse_reply_err(req, 0);
}

void FuseFilesystem::Release(fuse_req_t req, fuse_file_info* fi) {
  std::unique_ptr<OpenFile> file = TakeHandle<OpenFile>(fi->fh);
  fuse_reply_err(req, 0);  // no process waits for a release
  if (file && file->wrote.load(std::memory_order_relaxed)) {
    Status s = fs_.Sync(file->entry);  // writes no opener's flush stamped
    if (!s.ok() && !s.IsNotFound()) {
      ROS2_LOG_WARN("ros2-fuse: the mtime of '{}' after its writes was not published: {}", file->entry.name,
                    s.ToString());
    }
  }
  if (file && open_files_.Closed(file->entry.oid)) DropOrphan(file->entry);
}

void FuseFilesystem::FSync(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  // Also fsyncdir's: the inode, not the handle (which is an OpenDirectory there).
  auto entry = EntryOrReply(req, ino);
  if (!entry) return;
  Status s = fs_.Sync(*entry);
  if (!s.ok()) return ReplyError(req, s, "fsync");
  fuse_reply_err(req, 0);
}

// fallocate(2), as DAOS's dfuse does it: mode 0 grows the file to
// offset + length when that is larger (a sparse extension: extents are only
// allocated when written), after checking that the pool has that much space
// free (ENOSPC otherwise); FALLOC_FL_KEEP_SIZE alone only checks the space.
// Nothing is reserved, so a later write can still meet a full pool written
// meanwhile by others. Punching holes and the other modes are EOPNOTSUPP.
// Growing the size first matters for direct I/O: the kernel runs extending
// direct writes to a FUSE file one at a time, and fio preallocates its files
// with fallocate before writing them.
void FuseFilesystem::Fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length) {
  if (mode != 0 && mode != FALLOC_FL_KEEP_SIZE) return (void)fuse_reply_err(req, EOPNOTSUPP);
  if (offset < 0 || length <= 0) return (void)fuse_reply_err(req, EINVAL);
  const uint64_t end = static_cast<uint64_t>(offset) + static_cast<uint64_t>(length);
  if (end < static_cast<uint64_t>(offset) || end > static_cast<uint64_t>(std::numeric_limits<off_t>::max()))
    return (void)fuse_reply_err(req, EFBIG);
  auto entry = EntryOrReply(req, ino);
  if (!entry) return;
  auto attr = fs_.Stat(*entry);
  if (!attr.ok()) return ReplyError(req, attr.status(), "fallocate");
  if (!S_ISREG(attr->mode)) return (void)fuse_reply_err(req, S_ISDIR(attr->mode) ? EISDIR : ENODEV);
  const uint64_t growth = end > attr->size ? end - attr->size : 0;
  if (growth > 0) {
    auto totals = fs_.Statfs();
    if (!totals.ok()) return ReplyError(req, totals.status(), "fallocate");
    if (growth > totals->blocks_free * totals->block_size) return (void)fuse_reply_err(req, ENOSPC);
  }
  if (mode == 0 && growth > 0) {
    Status s = fs_.Truncate(*entry, end);
    if (!s.ok()) return ReplyError(req, s, "fallocate");
  }
  fuse_reply_err(req, 0);
}

}  // namespace ros2::fuse
