// The operation table, the session's init, and the helpers the operations share.
#include "fuse/fuse_filesystem.h"

#include <cerrno>

#include "common/log.h"

namespace ros2::fuse {

namespace {

FuseFilesystem& Self(fuse_req_t req) {
  return *static_cast<FuseFilesystem*>(fuse_req_userdata(req));
}

}  // namespace

// Trampolines from libfuse's C callbacks to the FuseFilesystem methods.
struct OpTable {
  static void Init(void* userdata, fuse_conn_info* conn) { static_cast<FuseFilesystem*>(userdata)->Init(conn); }
  static void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) { Self(req).Lookup(req, parent, name); }
  static void Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
    Self(req).Forget(ino, nlookup);
    fuse_reply_none(req);
  }
  static void ForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
    for (size_t i = 0; i < count; ++i) Self(req).Forget(forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
  }
  static void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) { Self(req).GetAttr(req, ino); }
  static void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
    Self(req).SetAttr(req, ino, attr, to_set);
  }
  static void ReadLink(fuse_req_t req, fuse_ino_t ino) { Self(req).ReadLink(req, ino); }
  static void MkNod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
    Self(req).MkNod(req, parent, name, mode, rdev);
  }
  static void MkDir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
    Self(req).MkDir(req, parent, name, mode);
  }
  static void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name) { Self(req).Unlink(req, parent, name); }
  static void RmDir(fuse_req_t req, fuse_ino_t parent, const char* name) { Self(req).RmDir(req, parent, name); }
  static void SymLink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
    Self(req).SymLink(req, target, parent, name);
  }
  static void Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent, const char* new_name,
                     unsigned flags) {
    Self(req).Rename(req, parent, name, new_parent, new_name, flags);
  }
  static void Link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char* new_name) {
    Self(req).Link(req, ino, new_parent, new_name);
  }
  static void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) { Self(req).Open(req, ino, fi); }
  static void Read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
    Self(req).Read(req, size, off, fi);
  }
  static void Write(fuse_req_t req, fuse_ino_t, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
    Self(req).Write(req, buf, size, off, fi);
  }
  static void Flush(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) { Self(req).Flush(req, fi); }
  static void Release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) { Self(req).Release(req, fi); }
  static void FSync(fuse_req_t req, fuse_ino_t ino, int, fuse_file_info* fi) { Self(req).FSync(req, ino, fi); }
  static void Fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length, fuse_file_info*) {
    Self(req).Fallocate(req, ino, mode, offset, length);
  }
  static void OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) { Self(req).OpenDir(req, ino, fi); }
  static void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
    Self(req).ReadDir(req, ino, size, off, fi, /*plus=*/false);
  }
  static void ReadDirPlus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
    Self(req).ReadDir(req, ino, size, off, fi, /*plus=*/true);
  }
  static void ReleaseDir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) { Self(req).ReleaseDir(req, fi); }
  static void FSyncDir(fuse_req_t req, fuse_ino_t ino, int, fuse_file_info* fi) { Self(req).FSync(req, ino, fi); }
  static void StatFs(fuse_req_t req, fuse_ino_t) { Self(req).StatFs(req); }
  static void Access(fuse_req_t req, fuse_ino_t ino, int mask) { Self(req).Access(req, ino, mask); }
  static void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
    Self(req).Create(req, parent, name, mode, fi);
  }

  static fuse_lowlevel_ops Make() {
    fuse_lowlevel_ops ops{};
    ops.init = Init;
    ops.lookup = Lookup;
    ops.forget = Forget;
    ops.forget_multi = ForgetMulti;
    ops.getattr = GetAttr;
    ops.setattr = SetAttr;
    ops.readlink = ReadLink;
    ops.mknod = MkNod;
    ops.mkdir = MkDir;
    ops.unlink = Unlink;
    ops.rmdir = RmDir;
    ops.symlink = SymLink;
    ops.rename = Rename;
    ops.link = Link;
    ops.open = Open;
    ops.read = Read;
    ops.write = Write;
    ops.flush = Flush;
    ops.release = Release;
    ops.fsync = FSync;
    ops.fallocate = Fallocate;
    ops.opendir = OpenDir;
    ops.readdir = ReadDir;
    ops.readdirplus = ReadDirPlus;
    ops.releasedir = ReleaseDir;
    ops.fsyncdir = FSyncDir;
    ops.statfs = StatFs;
    ops.access = Access;
    ops.create = Create;
    return ops;
  }
};

const fuse_lowlevel_ops& FuseFilesystem::Operations() {
  static const fuse_lowlevel_ops ops = OpTable::Make();
  return ops;
}

FuseFilesystem::FuseFilesystem(dfs::Filesystem& fs, const CachePolicy& cache)
    : fs_(fs), cache_(cache), inodes_(fs.Root()) {}

void FuseFilesystem::Init(fuse_conn_info* conn) {
  // 1 MiB requests: libfuse's receive buffer holds 256 pages, and it asks the
  // kernel for max_pages = max_write / page size when the kernel allows it.
  conn->max_write = kMaxIoSize;
  conn->max_readahead = kMaxIoSize;
  conn->time_gran = 1;
  // Parallel requests: asynchronous direct I/O and readahead go out as
  // background requests; let enough of them be in flight to keep every
  // worker thread busy.
  conn->max_background = 64;
  conn->congestion_threshold = 48;
  auto want = [conn](unsigned cap, bool on) {
    if (on && (conn->capable & cap)) {
      conn->want |= cap;
    } else {
      conn->want &= ~cap;
    }
  };
  want(FUSE_CAP_ASYNC_READ, true);
  want(FUSE_CAP_ASYNC_DIO, true);
  want(FUSE_CAP_PARALLEL_DIROPS, true);
  want(FUSE_CAP_READDIRPLUS, true);
  want(FUSE_CAP_READDIRPLUS_AUTO, true);
  want(FUSE_CAP_WRITEBACK_CACHE, cache_.writeback_cache);
  // Without a data cache there is no page cache to keep coherent.
  want(FUSE_CAP_AUTO_INVAL_DATA, cache_.data_cache);
  want(FUSE_CAP_SPLICE_READ, false);
  want(FUSE_CAP_SPLICE_WRITE, false);
  want(FUSE_CAP_SPLICE_MOVE, false);
  // The kernel clears setuid/setgid on write, truncate and chown itself
  // (through a setattr of the mode) unless the file system claims to; libfuse
  // claims it by default, and the DFS does not do it.
  want(FUSE_CAP_HANDLE_KILLPRIV, false);
  ROS2_LOG_INFO("ros2-fuse: kernel FUSE {}.{}, max_write {}, capable {:#x}, want {:#x}", conn->proto_major,
                conn->proto_minor, conn->max_write, conn->capable, conn->want);
}

std::optional<dfs::Entry> FuseFilesystem::EntryOrReply(fuse_req_t req, fuse_ino_t ino) {
  auto entry = inodes_.Get(ino);
  if (!entry) fuse_reply_err(req, ESTALE);
  return entry;
}

void FuseFilesystem::ReplyError(fuse_req_t req, const Status& status, std::string_view op) {
  int err = dfs::Errno(status);
  if (err <= 0) err = EIO;
  switch (err) {
    case ENOENT:
    case EEXIST:
    case ENOTDIR:
    case EISDIR:
    case ENOTEMPTY:
    case ENAMETOOLONG:
    case EACCES:
    case EPERM:
    case EINVAL:
    case ELOOP: ROS2_LOG_DEBUG("ros2-fuse: {}: {}", op, status.ToString()); break;
    default: ROS2_LOG_WARN("ros2-fuse: {}: {}", op, status.ToString());
  }
  fuse_reply_err(req, err);
}

struct stat FuseFilesystem::ToStat(const dfs::Attr& attr, uint64_t ino) const {
  struct stat st {};
  st.st_ino = ino;
  st.st_mode = attr.mode;
  st.st_nlink = attr.nlink;
  st.st_rdev = static_cast<dev_t>(attr.rdev);
  st.st_uid = attr.uid;
  st.st_gid = attr.gid;
  st.st_size = static_cast<off_t>(attr.size);
  st.st_blocks = static_cast<blkcnt_t>(attr.blocks);
  st.st_blksize = attr.blksize != 0 ? static_cast<blksize_t>(attr.blksize) : kMaxIoSize;
  st.st_atim = attr.atime;
  st.st_mtim = attr.mtime;
  st.st_ctim = attr.ctime;
  return st;
}

fuse_entry_param FuseFilesystem::MakeEntryParam(const dfs::Entry& entry, const dfs::Attr& attr) {
  fuse_entry_param e{};
  e.ino = inodes_.Remember(entry, attr.ino);
  e.generation = 0;  // numbers come from object ids, which are never reused
  e.attr = ToStat(attr, e.ino);
  e.attr_timeout = cache_.attr_timeout_s;
  e.entry_timeout = cache_.entry_timeout_s;
  return e;
}

Status FuseFilesystem::ChownToCaller(fuse_req_t req, const dfs::Entry& parent, const dfs::Entry& entry,
                                     dfs::Attr& attr) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  if (ctx == nullptr) return Status::Ok();
  // POSIX (and Linux): the group of a new entry is the caller's, or the
  // directory's when the directory has the setgid bit, which a new
  // subdirectory then inherits.
  const bool inherit = (parent.mode & S_ISGID) != 0;
  const gid_t gid = inherit ? parent.gid : ctx->gid;
  dfs::SetAttrArgs args;
  if (ctx->uid != attr.uid) {
    args.mask |= dfs::kSetUid;
    args.uid = ctx->uid;
  }
  if (gid != attr.gid) {
    args.mask |= dfs::kSetGid;
    args.gid = gid;
  }
  if (inherit && S_ISDIR(attr.mode) && (attr.mode & S_ISGID) == 0) {
    args.mask |= dfs::kSetMode;
    args.mode = (attr.mode & 07777) | S_ISGID;
  }
  if (args.mask == 0) return Status::Ok();
  ROS2_ASSIGN_OR_RETURN(attr, fs_.SetAttr(entry, args));
  return Status::Ok();
}

void FuseFilesystem::ReplyNewEntry(fuse_req_t req, const dfs::Entry& parent, const dfs::Entry& entry,
                                   std::string_view op) {
  auto attr = fs_.Stat(entry);
  if (!attr.ok()) return ReplyError(req, attr.status(), op);
  if (Status s = ChownToCaller(req, parent, entry, *attr); !s.ok()) return ReplyError(req, s, op);
  dfs::Entry current = entry;  // the handle carries the final mode and owner
  current.mode = attr->mode;
  current.uid = attr->uid;
  current.gid = attr->gid;
  fuse_entry_param e = MakeEntryParam(current, *attr);
  // An interrupted request's reply is dropped and the kernel never counts the lookup.
  if (fuse_reply_entry(req, &e) != 0) inodes_.Forget(e.ino, 1);
}

}  // namespace ros2::fuse
