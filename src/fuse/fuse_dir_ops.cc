// Directories: opendir, readdir, readdirplus, releasedir.
#include <cerrno>
#include <memory>
#include <vector>

#include "fuse/fuse_filesystem.h"
#include "fuse/open_handles.h"

namespace ros2::fuse {

namespace {

// Entries asked of the DFS per Readdir call while filling a reply.
constexpr size_t kListBatch = 512;

}  // namespace

void FuseFilesystem::OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto entry = EntryOrReply(req, ino);
  if (!entry) return;
  if (!entry->is_dir()) return (void)fuse_reply_err(req, ENOTDIR);
  auto handle = std::make_unique<OpenDirectory>();
  handle->dir = *entry;
  fi->fh = ReleaseToHandle(std::move(handle));
  // Listings change with every create: let the kernel drop cached pages.
  fi->cache_readdir = 0;
  if (fuse_reply_open(req, fi) != 0) TakeHandle<OpenDirectory>(fi->fh);
}

void FuseFilesystem::ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi, bool plus) {
  if (off < 0) return (void)fuse_reply_err(req, EINVAL);
  // The reply is sent only after the handle's lock is released: once the
  // kernel has the reply, the program may close the directory, and its
  // releasedir (on another worker thread) frees the handle, mutex included.
  std::vector<char> reply(size);
  Result<size_t> used = 0;
  {
    OpenDirectory& d = HandleObject<OpenDirectory>(fi->fh);
    std::lock_guard<std::mutex> lock(d.mu);
    used = FillDirectoryReply(req, d, ino, off, plus, reply);
  }
  if (!used.ok()) return ReplyError(req, used.status(), plus ? "readdirplus" : "readdir");
  fuse_reply_buf(req, reply.data(), *used);
}

Result<size_t> FuseFilesystem::FillDirectoryReply(fuse_req_t req, OpenDirectory& d, fuse_ino_t ino, off_t off,
                                                  bool plus, std::vector<char>& reply) {
  const size_t size = reply.size();
  if (off == 0) {
    // A fresh pass (opendir or rewinddir): list the directory anew.
    d.anchor = dfs::DirAnchor{};
    d.listed.clear();
  }
  size_t used = 0;
  auto pos = static_cast<uint64_t>(off);
  while (true) {
    char* out = reply.data() + used;
    size_t room = size - used;
    size_t need = 0;
    if (pos < 2) {
      // "." and ".." (their lookup counts are not touched by readdirplus).
      const char* name = pos == 0 ? "." : "..";
      if (plus) {
        fuse_entry_param e{};
        e.attr.st_ino = ino;
        e.attr.st_mode = S_IFDIR;
        need = fuse_add_direntry_plus(req, out, room, name, &e, static_cast<off_t>(pos + 1));
      } else {
        struct stat st {};
        st.st_ino = ino;
        st.st_mode = S_IFDIR;
        need = fuse_add_direntry(req, out, room, name, &st, static_cast<off_t>(pos + 1));
      }
      if (need > room) break;
      used += need;
      ++pos;
      continue;
    }
    size_t index = pos - 2;
    if (index >= d.listed.size()) {
      if (d.anchor.eof) break;
      auto batch = fs_.Readdir(d.dir, d.anchor, kListBatch);
      if (!batch.ok()) {
        if (used > 0) break;  // reply what we have; the error comes back on the next call
        return batch.status();
      }
      for (auto& item : *batch) {
        if (!IsOrphanDirectory(d.dir, item.name)) d.listed.push_back(std::move(item));
      }
      continue;
    }
    const dfs::DirEntry& item = d.listed[index];
    if (plus) {
      auto child = fs_.LookupWithAttr(d.dir, item.name);
      if (!child.ok()) {
        if (child.status().IsNotFound()) {  // removed since it was listed: skip it
          ++pos;
          continue;
        }
        if (used > 0) break;
        return child.status();
      }
      fuse_entry_param e = MakeEntryParam(child->first, child->second);
      need = fuse_add_direntry_plus(req, out, room, item.name.c_str(), &e, static_cast<off_t>(pos + 1));
      if (need > room) {
        inodes_.Forget(e.ino, 1);  // not sent: the kernel will not count it
        break;
      }
    } else {
      struct stat st {};
      st.st_ino = item.ino;
      st.st_mode = item.mode;
      need = fuse_add_direntry(req, out, room, item.name.c_str(), &st, static_cast<off_t>(pos + 1));
      if (need > room) break;
    }
    used += need;
    ++pos;
  }
  return used;
}

void FuseFilesystem::ReleaseDir(fuse_req_t req, fuse_file_info* fi) {
  TakeHandle<OpenDirectory>(fi->fh);
  fuse_reply_err(req, 0);
}

}  // namespace ros2::fuse
