// FsSession: what one `ros2ctl fs` command holds while it runs — a libros2
// client connected to the cluster named by the global options, the pool, the
// container and the DFS namespace mounted on it — plus remote path handling
// (normalization, lookup, parent + name) with errors phrased the POSIX way:
// "stat '/a/b': No such file or directory". Owned by the command's runner and
// used from the main thread only.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ctl_context.h"
#include "ros2/client.h"
#include "ros2/dfs.h"

namespace ros2::ctl {

struct FsTarget {
  std::string pool;
  std::string container;
  std::string transport = "auto";
  std::string key_file;  // encrypted containers: the key file (MountOptions::encryption_key_file)
};

// "a//b/./c/" -> "/a/b/c"; ".." goes up lexically (never above the root).
// InvalidArgument for an empty path.
Result<std::string> NormalizeRemotePath(std::string_view path);
// "/a/b/c" -> {"/a/b", "c"}; "/" -> {"/", ""}. REQUIRES: a normalized path.
std::pair<std::string, std::string> SplitRemotePath(const std::string& path);
// "/a/b" + "c" -> "/a/b/c" (no doubled slash after the root).
std::string JoinRemotePath(const std::string& dir, std::string_view name);

// A failed DFS call as the user should read it: "<op> '<path>': <strerror>"
// keeping the status's code (so ros2ctl prints "NotFound: ..."); the library's
// own message is appended only when its code has no POSIX meaning.
Status FsError(const Status& status, std::string_view op, std::string_view path);
// An error made from an errno value of a local system call, same phrasing.
Status LocalError(int err, std::string_view op, std::string_view path);

// Every entry of a directory (Readdir from the start until its anchor says
// eof), sorted by name. Errors via FsError("ls", path).
Result<std::vector<dfs::DirEntry>> ReadWholeDirectory(dfs::Filesystem& fs, const dfs::Entry& dir,
                                                      const std::string& path);

class FsSession {
 public:
  static Result<std::unique_ptr<FsSession>> Open(CtlContext& ctx, const FsTarget& target);
  ~FsSession();
  FsSession(const FsSession&) = delete;
  FsSession& operator=(const FsSession&) = delete;

  dfs::Filesystem& fs() { return *fs_; }
  client::Client& client() { return *client_; }

  // The entry at a normalized path; errors via FsError(op, path).
  Result<dfs::Entry> Lookup(const std::string& path, std::string_view op);
  // The entry and its attributes (lstat: a symlink is not followed).
  Result<std::pair<dfs::Entry, dfs::Attr>> LookupWithAttr(const std::string& path, std::string_view op);
  // The directory holding a normalized path's last component. InvalidArgument
  // for the root (it has no parent); ENOTDIR when the parent is not a directory.
  Result<dfs::Entry> LookupParent(const std::string& path, std::string_view op);

 private:
  FsSession() = default;
  // Destroyed in reverse: the namespace, then container, pool and client.
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<client::Pool> pool_;
  std::unique_ptr<client::Container> container_;
  std::unique_ptr<dfs::Filesystem> fs_;
};

}  // namespace ros2::ctl
