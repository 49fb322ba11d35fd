// FuseFilesystem: the FUSE low-level operations of a ros2-fuse mount,
// answered from a DFS namespace (ros2::dfs::Filesystem).
//
// Each kernel request arrives on one of libfuse's worker threads and is
// answered synchronously there with the DFS's blocking calls: every worker
// thread does its I/O through its own libros2 data-plane worker, so requests
// on different threads run in parallel without sharing a lock on the data
// path. Inode numbers map to DFS entries through the InodeTable; an open file
// or directory is a small handle object whose address is the FUSE `fh`.
// Errors are replied as the errno of the DFS status (dfs::Errno).
//
// Owned by main() for the lifetime of the FUSE session; the dfs::Filesystem it
// serves must outlive it. Thread-safe (called from all worker threads).
#pragma once

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "fuse/inode_table.h"
#include "fuse/mount_options.h"
#include "fuse/orphans.h"
#include "ros2/dfs.h"

namespace ros2::fuse {

struct OpenDirectory;  // open_handles.h

// Largest read or write the kernel sends in one request (FUSE's 256-page cap).
inline constexpr uint32_t kMaxIoSize = uint32_t{1} << 20;

class FuseFilesystem {
 public:
  FuseFilesystem(dfs::Filesystem& fs, const CachePolicy& cache);
  FuseFilesystem(const FuseFilesystem&) = delete;
  FuseFilesystem& operator=(const FuseFilesystem&) = delete;

  // The operation table to pass to fuse_session_new with `this` as userdata.
  static const fuse_lowlevel_ops& Operations();

  InodeTable& inodes() { return inodes_; }

 private:
  // Trampolines (one per operation) live in the .cc files and call these.
  friend struct OpTable;

  // --- session ---
  void Init(fuse_conn_info* conn);

  // --- names and attributes (fuse_namespace_ops.cc) ---
  void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  void Forget(fuse_ino_t ino, uint64_t nlookup);
  void GetAttr(fuse_req_t req, fuse_ino_t ino);
  void SetAttr(fuse_req_t req, fuse_ino_t ino, const struct stat* attr, int to_set);
  void ReadLink(fuse_req_t req, fuse_ino_t ino);
  void MkNod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev);
  void Link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char* new_name);
  void MkDir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode);
  void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name);
  void RmDir(fuse_req_t req, fuse_ino_t parent, const char* name);
  void SymLink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name);
  void Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent, const char* new_name,
              unsigned flags);
  void StatFs(fuse_req_t req);
  void Access(fuse_req_t req, fuse_ino_t ino, int mask);

  // --- files (fuse_file_ops.cc) ---
  void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi);
  void Read(fuse_req_t req, size_t size, off_t off, fuse_file_info* fi);
  void Write(fuse_req_t req, const char* buf, size_t size, off_t off, fuse_file_info* fi);
  void Flush(fuse_req_t req, fuse_file_info* fi);
  void Release(fuse_req_t req, fuse_file_info* fi);
  void FSync(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void Fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length);

  // --- directories (fuse_dir_ops.cc) ---
  void OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi, bool plus);
  void ReleaseDir(fuse_req_t req, fuse_file_info* fi);
  // Fills `reply` (its size is the kernel's) with the entries of `d` from
  // offset `off` (off >= 0), listing more of the directory as needed; returns
  // the bytes used, or the failure when it came before the first entry.
  // Replies nothing: ReadDir replies once it released d.mu, since the reply
  // lets the kernel release the handle. REQUIRES: d.mu held.
  Result<size_t> FillDirectoryReply(fuse_req_t req, OpenDirectory& d, fuse_ino_t ino, off_t off, bool plus,
                                    std::vector<char>& reply);

  // --- helpers (fuse_filesystem.cc) ---
  // The entry of `ino`, or replies ESTALE and returns nullopt.
  std::optional<dfs::Entry> EntryOrReply(fuse_req_t req, fuse_ino_t ino);
  // Replies the errno of a failed status (logged when it is not an ordinary POSIX answer).
  void ReplyError(fuse_req_t req, const Status& status, std::string_view op);
  // Fills a fuse_entry_param for `entry` (registering one lookup in the table).
  fuse_entry_param MakeEntryParam(const dfs::Entry& entry, const dfs::Attr& attr);
  // Gives a new entry in `parent` to the requesting user when that user is not
  // the mount's owner (DFS creates entries as the mount's uid/gid), with the
  // directory's group when it has the setgid bit; updates `attr`.
  Status ChownToCaller(fuse_req_t req, const dfs::Entry& parent, const dfs::Entry& entry, dfs::Attr& attr);
  // open(O_TRUNC) of an existing file: size 0, and the suid/sgid bits cleared
  // for an unprivileged caller (as the kernel's truncate would).
  Status TruncateOnOpen(fuse_req_t req, const dfs::Entry& entry);
  // Stat + MakeEntryParam + fuse_reply_entry (undoing the lookup when the reply fails).
  void ReplyNewEntry(fuse_req_t req, const dfs::Entry& parent, const dfs::Entry& entry, std::string_view op);
  struct stat ToStat(const dfs::Attr& attr, uint64_t ino) const;

  // --- files removed while open (orphans.h) ---
  // Whether `name` in `parent` is this mount's hidden orphan directory.
  bool IsOrphanDirectory(const dfs::Entry& parent, std::string_view name) const;
  // The orphan directory (made on first use); `create` false: nullopt when absent.
  Result<std::optional<dfs::Entry>> OrphanDirectory(bool create);
  // Removes `name` of `parent`; when it is the last name of a file open on
  // this mount, first links the file into the orphan directory.
  Status UnlinkKeepingOpenFile(const dfs::Entry& parent, std::string_view name);
  // The last handle of orphan `entry` closed: removes its orphan link.
  void DropOrphan(const dfs::Entry& entry);

  dfs::Filesystem& fs_;
  CachePolicy cache_;
  InodeTable inodes_;
  OpenFiles open_files_;
  std::mutex orphan_dir_mu_;
  std::optional<dfs::Entry> orphan_dir_;  // guarded by orphan_dir_mu_
  bool orphan_dir_absent_ = false;        // guarded by orphan_dir_mu_
};

}  // namespace ros2::fuse
