// Handles of open files and directories, stored in fuse_file_info::fh.
//
// An OpenFile carries a copy of the file's DFS Entry taken at open, so reads
// and writes need no inode-table lookup, and whether it wrote since its last
// flush. An OpenDirectory carries the listing
// read so far: FUSE readdir offsets are indexes into it (0 is ".", 1 is "..",
// 2 + i is entry i), so a reader resuming at any offset it was given sees a
// stable sequence even while the directory changes. The kernel serializes
// readdir on one open directory; the mutex guards against misbehaving callers.
// Nothing may touch a handle after its reply is sent: the reply lets the
// program close the file or directory, and the release that follows (on any
// worker thread) destroys the handle. So ReadDir replies only after it
// released the mutex.
//
// A handle is created by open/opendir/create and destroyed by
// release/releasedir; fh holds its address in between (released ownership of
// a unique_ptr, taken back exactly once).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ros2/dfs.h"

namespace ros2::fuse {

struct OpenFile {
  dfs::Entry entry;
  // A write went through this handle since its last flush: the flush (on
  // close) stamps the file's mtime and ctime.
  std::atomic<bool> wrote{false};
  // The thread that opened it: only flushes from its process stamp at once
  // (see FuseFilesystem::Flush).
  pid_t opener = 0;
};

struct OpenDirectory {
  dfs::Entry dir;
  std::mutex mu;
  dfs::DirAnchor anchor;
  std::vector<dfs::DirEntry> listed;
};

template <typename T>
uint64_t ReleaseToHandle(std::unique_ptr<T> object) {
  return reinterpret_cast<uint64_t>(object.release());
}

template <typename T>
T& HandleObject(uint64_t fh) {
  return *reinterpret_cast<T*>(fh);
}

template <typename T>
std::unique_ptr<T> TakeHandle(uint64_t fh) {
  return std::unique_ptr<T>(reinterpret_cast<T*>(fh));
}

}  // namespace ros2::fuse
