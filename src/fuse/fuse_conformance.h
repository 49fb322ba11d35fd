// The case table of the POSIX conformance suite of a ros2-fuse mount
// (fuse_conformance_test.cc): the helpers every case uses, the Case type, and
// the two halves of the table (files and attributes; names and directories).
// Test code only.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "testing/fuse_mount.h"

namespace ros2::fuse::conformance {

inline constexpr uid_t kUser = 65534;  // nobody
inline constexpr gid_t kGroup = 65534;
inline constexpr uid_t kOther = 65533;
inline constexpr gid_t kOtherGroup = 65533;

// errno of a call that returned `rc` (0 on success).
inline int E(long rc) {
  return rc < 0 ? errno : 0;
}

// Runs `fn` in a child process as uid/gid (no supplementary groups, or
// `groups`); returns what fn returned (an errno, 0 for success), or 255 when
// the child could not become that user.
inline int AsUser(uid_t uid, gid_t gid, const std::function<int()>& fn, std::vector<gid_t> groups = {}) {
  const int code = ros2::testing::RunInChild([&] {
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setresgid(gid, gid, gid) != 0 ||
        ::setresuid(uid, uid, uid) != 0) {
      return 255;
    }
    return fn();
  });
  return code > 255 ? 254 : code;
}

inline struct stat Lstat(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) ADD_FAILURE() << "lstat " << path << ": " << std::strerror(errno);
  return st;
}

inline bool Later(const timespec& a, const timespec& b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec;
}
inline bool Same(const timespec& a, const timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

inline int Create(const std::string& path, mode_t mode, const std::string& data = "") {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, mode);
  if (fd < 0) return errno;
  if (!data.empty() && ::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size())) return errno;
  ::close(fd);
  return ::chmod(path.c_str(), mode) == 0 ? 0 : errno;  // past the umask
}

inline std::string Slurp(const std::string& path) {
  return ros2::testing::ReadWholeFile(path);
}

// Times of a path, to compare before and after an operation.
struct Times {
  timespec atime, mtime, ctime;
};
inline Times TimesOf(const std::string& path) {
  struct stat st = Lstat(path);
  return {st.st_atim, st.st_mtim, st.st_ctim};
}
// The operation changed mtime and ctime of `path` (both later than before).
#define EXPECT_MODIFIED(path, before)                                                          \
  do {                                                                                         \
    Times after_ = TimesOf(path);                                                              \
    EXPECT_TRUE(Later(after_.mtime, (before).mtime)) << "mtime of " << (path) << " unchanged"; \
    EXPECT_TRUE(Later(after_.ctime, (before).ctime)) << "ctime of " << (path) << " unchanged"; \
  } while (0)
#define EXPECT_CHANGED_ONLY(path, before)                                                      \
  do {                                                                                         \
    Times after_ = TimesOf(path);                                                              \
    EXPECT_TRUE(Same(after_.mtime, (before).mtime)) << "mtime of " << (path) << " changed";    \
    EXPECT_TRUE(Later(after_.ctime, (before).ctime)) << "ctime of " << (path) << " unchanged"; \
  } while (0)
#define EXPECT_UNTOUCHED(path, before)                                                      \
  do {                                                                                      \
    Times after_ = TimesOf(path);                                                           \
    EXPECT_TRUE(Same(after_.mtime, (before).mtime)) << "mtime of " << (path) << " changed"; \
    EXPECT_TRUE(Same(after_.ctime, (before).ctime)) << "ctime of " << (path) << " changed"; \
  } while (0)

// One case: a category, a name, and the body, given a fresh directory `d`
// (mode 0777) on the mount.
struct Case {
  const char* category;
  const char* name;
  std::function<void(const std::string& d)> body;
};

// open, chmod, chown, setuid/setgid clearing, truncate, utimensat, types, times.
void AddFileCases(std::vector<Case>& c);
// link, unlink, rename, mkdir, rmdir, special files, symlink, path errors, link counts.
void AddNameCases(std::vector<Case>& c);

}  // namespace ros2::fuse::conformance
