// FuseSession: one libfuse low-level session — created on a FuseFilesystem's
// operation table, mounted on a directory, served by libfuse's multi-threaded
// loop until an unmount (fusermount3 -u, umount) or SIGTERM/SIGINT/SIGHUP
// ends it — and torn down in reverse: signal handlers removed, the kernel
// mount dropped, the session destroyed (the destructor does whatever of this
// is still to do, so no error path leaves a mount behind).
//
// Owned by main(); Run() blocks the calling thread while the worker threads
// serve requests. Not thread-safe otherwise.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "fuse/fuse_filesystem.h"

namespace ros2::fuse {

class FuseSession {
 public:
  // `args` are libfuse's own arguments ("prog", "-o", "fsname=..."), parsed by fuse_session_new.
  static Result<std::unique_ptr<FuseSession>> Create(FuseFilesystem& filesystem, const std::vector<std::string>& args);
  ~FuseSession();
  FuseSession(const FuseSession&) = delete;
  FuseSession& operator=(const FuseSession&) = delete;

  // Mounts on `mountpoint` (an absolute path to a directory) and installs the
  // signal handlers that end the loop.
  Status Mount(const std::string& mountpoint);
  // Serves requests on up to `max_threads` worker threads (kept alive while
  // idle: each owns a data-plane worker) until the file system is unmounted
  // or a signal arrives; then unmounts.
  Status Run(unsigned max_threads);

 private:
  explicit FuseSession(fuse_session* session) : session_(session) {}
  void Unmount();

  fuse_session* session_;
  bool mounted_ = false;
  bool signals_installed_ = false;
};

}  // namespace ros2::fuse
