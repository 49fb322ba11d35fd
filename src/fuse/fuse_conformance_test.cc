// POSIX conformance of a ros2-fuse mount: a table of cases in the categories
// of pjdfstest (open, chmod, chown, link, unlink, rename, mkdir, rmdir,
// mkfifo, mknod, sockets, symlink, truncate/ftruncate, utimensat, the
// timestamp rules on a file and its directory, permission checks for an
// unprivileged user, the sticky bit, setuid/setgid clearing). Each case runs
// in its own directory of one mount (made with --allow-other, as root);
// checks as another user run in a child process that drops to that user with
// setresuid. Cases that the mount does not pass by design are listed with
// their reason in kExclusions below and in docs/fuse.md ("POSIX
// conformance"), and are not run.
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
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fuse/fuse_test_harness.h"

namespace ros2::fuse {
namespace {

using ros2::testing::TestCluster;

constexpr uid_t kUser = 65534;  // nobody
constexpr gid_t kGroup = 65534;
constexpr uid_t kOther = 65533;
constexpr gid_t kOtherGroup = 65533;

// errno of a call that returned `rc` (0 on success).
int E(long rc) {
  return rc < 0 ? errno : 0;
}

// Runs `fn` in a child process as uid/gid (no supplementary groups, or
// `groups`); returns what fn returned (an errno, 0 for success), or 255 when
// the child could not become that user.
int AsUser(uid_t uid, gid_t gid, const std::function<int()>& fn, std::vector<gid_t> groups = {}) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setresgid(gid, gid, gid) != 0 ||
        ::setresuid(uid, uid, uid) != 0) {
      ::_exit(255);
    }
    ::_exit(fn() & 0xff);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 254;
}

struct stat Lstat(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) ADD_FAILURE() << "lstat " << path << ": " << std::strerror(errno);
  return st;
}

bool Later(const timespec& a, const timespec& b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec;
}
bool Same(const timespec& a, const timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

int Create(const std::string& path, mode_t mode, const std::string& data = "") {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, mode);
  if (fd < 0) return errno;
  if (!data.empty() && ::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size())) return errno;
  ::close(fd);
  return ::chmod(path.c_str(), mode) == 0 ? 0 : errno;  // past the umask
}

std::string Slurp(const std::string& path) {
  return ros2::testing::ReadWholeFile(path);
}

// Times of a path, to compare before and after an operation.
struct Times {
  timespec atime, mtime, ctime;
};
Times TimesOf(const std::string& path) {
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

// Cases not run, with the reason (the same list is in docs/fuse.md).
struct Exclusion {
  const char* category;
  const char* what;
  const char* reason;
};
const std::vector<Exclusion> kExclusions = {
    {"nlink", "st_nlink of a directory is 2 + its subdirectories",
     "a directory's st_nlink is 1 (no per-directory count is kept: it would be a second update per mkdir and rmdir; "
     "find and other tools treat 1 as 'unknown', as on many network file systems)"},
    {"times", "write(2) updates mtime and ctime at once",
     "the DFS does not stamp mtime per write (a file's size and data need no metadata update); the close "
     "(flush) or fsync of the descriptor that wrote stamps it (checked)"},
    {"times", "read(2) updates atime", "atime is not updated by reads (as with noatime)"},
    {"open", "unlinked files stay usable while open",
     "unlink removes the object at once (no orphan list): fstat on an open, unlinked file is ENOENT"},
    {"rename", "RENAME_EXCHANGE and RENAME_WHITEOUT", "not offered: EINVAL"},
    {"xattr", "extended attributes, POSIX ACLs", "no xattr operations: EOPNOTSUPP"},
};

std::vector<Case> Cases() {
  std::vector<Case> c;
  // --- open / creat ---
  c.push_back({"open", "O_CREAT makes a regular file with the mode, owner and group of the caller", [](auto& d) {
                 int fd = ::open((d + "/f").c_str(), O_WRONLY | O_CREAT, 0640);
                 ASSERT_GE(fd, 0) << std::strerror(errno);
                 ::close(fd);
                 struct stat st = Lstat(d + "/f");
                 EXPECT_TRUE(S_ISREG(st.st_mode));
                 EXPECT_EQ(st.st_mode & 07777, 0640u & ~0022u & 0640u);
                 EXPECT_EQ(st.st_uid, 0u);
                 EXPECT_EQ(st.st_nlink, 1u);
                 EXPECT_EQ(AsUser(kUser, kGroup,
                                  [&] {
                                    int f = ::open((d + "/g").c_str(), O_WRONLY | O_CREAT, 0600);
                                    return f < 0 ? errno : (::close(f), 0);
                                  }),
                           0);
                 st = Lstat(d + "/g");
                 EXPECT_EQ(st.st_uid, kUser);
                 EXPECT_EQ(st.st_gid, kGroup);
               }});
  c.push_back({"open", "errors: EEXIST, ENOENT, ENOTDIR, EISDIR, ENAMETOOLONG, ELOOP", [](auto& d) {
                 ASSERT_EQ(Create(d + "/f", 0644), 0);
                 ASSERT_EQ(::mkdir((d + "/dir").c_str(), 0755), 0);
                 EXPECT_EQ(E(::open((d + "/f").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644)), EEXIST);
                 EXPECT_EQ(E(::open((d + "/dir").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644)), EEXIST);
                 EXPECT_EQ(E(::open((d + "/missing").c_str(), O_RDONLY)), ENOENT);
                 EXPECT_EQ(E(::open((d + "/missing/x").c_str(), O_CREAT | O_WRONLY, 0644)), ENOENT);
                 EXPECT_EQ(E(::open((d + "/f/x").c_str(), O_RDONLY)), ENOTDIR);
                 EXPECT_EQ(E(::open((d + "/f").c_str(), O_RDONLY | O_DIRECTORY)), ENOTDIR);
                 EXPECT_EQ(E(::open((d + "/dir").c_str(), O_WRONLY)), EISDIR);
                 EXPECT_EQ(E(::open((d + "/dir").c_str(), O_RDWR)), EISDIR);
                 EXPECT_EQ(E(::open((d + "/" + std::string(256, 'x')).c_str(), O_CREAT | O_WRONLY, 0644)),
                           ENAMETOOLONG);
                 ASSERT_EQ(::symlink("f", (d + "/l").c_str()), 0);
                 EXPECT_EQ(E(::open((d + "/l").c_str(), O_RDONLY | O_NOFOLLOW)), ELOOP);
                 ASSERT_EQ(::symlink("loop2", (d + "/loop1").c_str()), 0);
                 ASSERT_EQ(::symlink("loop1", (d + "/loop2").c_str()), 0);
                 EXPECT_EQ(E(::open((d + "/loop1").c_str(), O_RDONLY)), ELOOP);
               }});
  c.push_back({"open", "O_TRUNC empties an existing file and updates its mtime and ctime", [](auto& d) {
                 ASSERT_EQ(Create(d + "/f", 0644, std::string(5000, 'x')), 0);
                 Times before = TimesOf(d + "/f");
                 int fd = ::open((d + "/f").c_str(), O_WRONLY | O_TRUNC);
                 ASSERT_GE(fd, 0);
                 ASSERT_EQ(::write(fd, "abc", 3), 3);
                 ::close(fd);
                 EXPECT_EQ(Slurp(d + "/f"), "abc");
                 EXPECT_MODIFIED(d + "/f", before);
                 // Existing file with O_CREAT|O_TRUNC (the usual "wb").
                 fd = ::open((d + "/f").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
                 ASSERT_GE(fd, 0);
                 ::close(fd);
                 EXPECT_EQ(Lstat(d + "/f").st_size, 0);
                 EXPECT_EQ(Lstat(d + "/f").st_mode & 0777, 0644u);  // the mode of an existing file stays
               }});
  c.push_back(
      {"open", "O_CREAT updates the directory's mtime and ctime; opening an existing file does not", [](auto& d) {
         Times before = TimesOf(d);
         ASSERT_EQ(Create(d + "/f", 0644), 0);
         EXPECT_MODIFIED(d, before);
         before = TimesOf(d);
         int fd = ::open((d + "/f").c_str(), O_WRONLY | O_CREAT, 0644);
         ASSERT_GE(fd, 0);
         ::close(fd);
         EXPECT_UNTOUCHED(d, before);
       }});
  c.push_back({"open", "permission checks for another user: EACCES by the mode bits", [](auto& d) {
                 ASSERT_EQ(Create(d + "/r", 0444), 0);
                 ASSERT_EQ(Create(d + "/w", 0222), 0);
                 ASSERT_EQ(Create(d + "/none", 0000), 0);
                 ASSERT_EQ(::mkdir((d + "/ro").c_str(), 0555), 0);
                 ASSERT_EQ(::mkdir((d + "/noexec").c_str(), 0666), 0);
                 ASSERT_EQ(Create(d + "/noexec/f", 0666), 0);
                 auto open_as = [&](const std::string& p, int flags) {
                   return AsUser(kUser, kGroup, [&] {
                     int fd = ::open(p.c_str(), flags, 0644);
                     return fd < 0 ? errno : (::close(fd), 0);
                   });
                 };
                 EXPECT_EQ(open_as(d + "/r", O_RDONLY), 0);
                 EXPECT_EQ(open_as(d + "/r", O_WRONLY), EACCES);
                 EXPECT_EQ(open_as(d + "/w", O_WRONLY), 0);
                 EXPECT_EQ(open_as(d + "/w", O_RDONLY), EACCES);
                 EXPECT_EQ(open_as(d + "/none", O_RDONLY), EACCES);
                 EXPECT_EQ(open_as(d + "/r", O_RDONLY | O_TRUNC), EACCES);
                 EXPECT_EQ(open_as(d + "/ro/new", O_WRONLY | O_CREAT), EACCES);
                 EXPECT_EQ(open_as(d + "/noexec/f", O_RDONLY), EACCES);
                 // Owner bits win over group and other bits.
                 ASSERT_EQ(::chown((d + "/r").c_str(), kUser, kGroup), 0);
                 ASSERT_EQ(::chmod((d + "/r").c_str(), 0077), 0);
                 EXPECT_EQ(open_as(d + "/r", O_RDONLY), EACCES);
                 // Group bits for a member of the group.
                 ASSERT_EQ(::chown((d + "/w").c_str(), 0, kGroup), 0);
                 ASSERT_EQ(::chmod((d + "/w").c_str(), 0640), 0);
                 EXPECT_EQ(open_as(d + "/w", O_RDONLY), 0);
                 EXPECT_EQ(open_as(d + "/w", O_WRONLY), EACCES);
               }});
  // --- chmod ---
  c.push_back({"chmod", "the owner changes the mode and the ctime; others get EPERM", [](auto& d) {
                 ASSERT_EQ(Create(d + "/f", 0644), 0);
                 ASSERT_EQ(::chown((d + "/f").c_str(), kUser, kGroup), 0);
                 Times before = TimesOf(d + "/f");
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::chmod((d + "/f").c_str(), 0600)); }), 0);
                 EXPECT_EQ(Lstat(d + "/f").st_mode & 07777, 0600u);
                 EXPECT_CHANGED_ONLY(d + "/f", before);
                 EXPECT_EQ(AsUser(kOther, kOtherGroup, [&] { return E(::chmod((d + "/f").c_str(), 0777)); }), EPERM);
                 EXPECT_EQ(Lstat(d + "/f").st_mode & 07777, 0600u);
                 for (mode_t m : {07777, 04755, 02755, 01755, 0}) {
                   ASSERT_EQ(::chmod((d + "/f").c_str(), m), 0);
                   EXPECT_EQ(Lstat(d + "/f").st_mode & 07777, m);
                 }
                 ASSERT_EQ(::mkdir((d + "/dir").c_str(), 0755), 0);
                 ASSERT_EQ(::chmod((d + "/dir").c_str(), 01777), 0);
                 EXPECT_EQ(Lstat(d + "/dir").st_mode & 07777, 01777u);
                 EXPECT_EQ(E(::chmod((d + "/missing").c_str(), 0644)), ENOENT);
               }});
  c.push_back({"chmod",
               "an unprivileged owner setting setgid on a file of another group loses the bit; the sticky "
               "bit on a file is kept (Linux)",
               [](auto& d) {
                 ASSERT_EQ(Create(d + "/f", 0644), 0);
                 ASSERT_EQ(::chown((d + "/f").c_str(), kUser, kOtherGroup), 0);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::chmod((d + "/f").c_str(), 02755)); }), 0);
                 EXPECT_EQ(Lstat(d + "/f").st_mode & 07777, 0755u);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::chmod((d + "/f").c_str(), 01755)); }), 0);
                 EXPECT_EQ(Lstat(d + "/f").st_mode & 07777, 01755u);
                 ASSERT_EQ(::chown((d + "/f").c_str(), kUser, kGroup), 0);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::chmod((d + "/f").c_str(), 02755)); }), 0);
                 EXPECT_EQ(Lstat(d + "/f").st_mode & 07777, 02755u);
               }});
  // --- chown ---
  c.push_back({"chown", "root changes owner and group; ctime changes; -1 keeps a field", [](auto& d) {
                 ASSERT_EQ(Create(d + "/f", 0644), 0);
                 Times before = TimesOf(d + "/f");
                 ASSERT_EQ(::chown((d + "/f").c_str(), 123, 456), 0);
                 struct stat st = Lstat(d + "/f");
                 EXPECT_EQ(st.st_uid, 123u);
                 EXPECT_EQ(st.st_gid, 456u);
                 EXPECT_CHANGED_ONLY(d + "/f", before);
                 ASSERT_EQ(::chown((d + "/f").c_str(), static_cast<uid_t>(-1), 789), 0);
                 st = Lstat(d + "/f");
                 EXPECT_EQ(st.st_uid, 123u);
                 EXPECT_EQ(st.st_gid, 789u);
                 ASSERT_EQ(::symlink("f", (d + "/l").c_str()), 0);
                 ASSERT_EQ(::lchown((d + "/l").c_str(), 321, 654), 0);
                 EXPECT_EQ(Lstat(d + "/l").st_uid, 321u);
                 EXPECT_EQ(Lstat(d + "/f").st_uid, 123u);
               }});
  c.push_back({"chown", "an unprivileged owner may change the group to its own only; others get EPERM", [](auto& d) {
                 ASSERT_EQ(Create(d + "/f", 0644), 0);
                 ASSERT_EQ(::chown((d + "/f").c_str(), kUser, kOtherGroup), 0);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::chown((d + "/f").c_str(), kOther, -1)); }), EPERM);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::chown((d + "/f").c_str(), -1, 4242)); }), EPERM);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::chown((d + "/f").c_str(), -1, kGroup)); }), 0);
                 EXPECT_EQ(Lstat(d + "/f").st_gid, kGroup);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::chown((d + "/f").c_str(), kUser, 4242)); }, {4242}),
                           0);  // a supplementary group counts
                 EXPECT_EQ(Lstat(d + "/f").st_gid, 4242u);
                 EXPECT_EQ(AsUser(kOther, kOtherGroup, [&] { return E(::chown((d + "/f").c_str(), -1, kOtherGroup)); }),
                           EPERM);
               }});
  c.push_back({"chown", "chown clears setuid and setgid of a regular file (and keeps a directory's)", [](auto& d) {
                 ASSERT_EQ(Create(d + "/f", 06755), 0);
                 ASSERT_EQ(::chown((d + "/f").c_str(), kUser, kGroup), 0);
                 EXPECT_EQ(Lstat(d + "/f").st_mode & 07777, 0755u);
                 ASSERT_EQ(::chmod((d + "/f").c_str(), 06755), 0);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::chown((d + "/f").c_str(), -1, kGroup)); }), 0);
                 EXPECT_EQ(Lstat(d + "/f").st_mode & 07777, 0755u);
                 ASSERT_EQ(::mkdir((d + "/dir").c_str(), 0755), 0);
                 ASSERT_EQ(::chmod((d + "/dir").c_str(), 02755), 0);
                 ASSERT_EQ(::chown((d + "/dir").c_str(), kUser, kGroup), 0);
                 EXPECT_EQ(Lstat(d + "/dir").st_mode & 07777, 02755u);
               }});
  // --- setuid / setgid on write and truncate ---
  c.push_back(
      {"setuid", "a write or truncate by an unprivileged user clears setuid (and setgid with group x)", [](auto& d) {
         for (const char* how : {"write", "truncate", "O_TRUNC"}) {
           std::string f = d + "/" + how;
           ASSERT_EQ(Create(f, 06777, "data"), 0);
           int rc = AsUser(kUser, kGroup, [&] {
             if (std::string(how) == "truncate") return E(::truncate(f.c_str(), 1));
             int fd = ::open(f.c_str(), std::string(how) == "write" ? O_WRONLY : O_WRONLY | O_TRUNC);
             if (fd < 0) return errno;
             int r = std::string(how) == "write" ? E(::write(fd, "x", 1)) : 0;
             ::close(fd);
             return r;
           });
           EXPECT_EQ(rc, 0) << how;
           EXPECT_EQ(Lstat(f).st_mode & 07777, 0777u) << how;
         }
         // Root keeps them.
         ASSERT_EQ(Create(d + "/root", 06777, "data"), 0);
         ASSERT_EQ(::truncate((d + "/root").c_str(), 1), 0);
         EXPECT_EQ(Lstat(d + "/root").st_mode & 07777, 06777u);
       }});
  // --- link ---
  c.push_back({"link", "a second name shares the inode, its data and attributes; counts and times follow", [](auto& d) {
                 ASSERT_EQ(::mkdir((d + "/sub").c_str(), 0755), 0);
                 ASSERT_EQ(Create(d + "/f", 0644, "shared"), 0);
                 Times file_before = TimesOf(d + "/f");
                 Times dir_before = TimesOf(d + "/sub");
                 ASSERT_EQ(::link((d + "/f").c_str(), (d + "/sub/g").c_str()), 0) << std::strerror(errno);
                 struct stat a = Lstat(d + "/f"), b = Lstat(d + "/sub/g");
                 EXPECT_EQ(a.st_ino, b.st_ino);
                 EXPECT_EQ(a.st_nlink, 2u);
                 EXPECT_EQ(b.st_nlink, 2u);
                 EXPECT_CHANGED_ONLY(d + "/f", file_before);
                 EXPECT_MODIFIED(d + "/sub", dir_before);
                 EXPECT_EQ(Slurp(d + "/sub/g"), "shared");
                 // Through one name, seen through the other.
                 int fd = ::open((d + "/sub/g").c_str(), O_WRONLY | O_APPEND);
                 ASSERT_GE(fd, 0);
                 ASSERT_EQ(::write(fd, "+more", 5), 5);
                 ::close(fd);
                 EXPECT_EQ(Slurp(d + "/f"), "shared+more");
                 ASSERT_EQ(::chmod((d + "/f").c_str(), 0600), 0);
                 EXPECT_EQ(Lstat(d + "/sub/g").st_mode & 07777, 0600u);
                 ASSERT_EQ(::link((d + "/sub/g").c_str(), (d + "/h").c_str()), 0);
                 EXPECT_EQ(Lstat(d + "/f").st_nlink, 3u);
                 // Removing names counts down; the data lives while a name does.
                 file_before = TimesOf(d + "/h");
                 ASSERT_EQ(::unlink((d + "/f").c_str()), 0);
                 EXPECT_EQ(Lstat(d + "/h").st_nlink, 2u);
                 EXPECT_CHANGED_ONLY(d + "/h", file_before);
                 ASSERT_EQ(::unlink((d + "/sub/g").c_str()), 0);
                 EXPECT_EQ(Lstat(d + "/h").st_nlink, 1u);
                 EXPECT_EQ(Slurp(d + "/h"), "shared+more");
                 ASSERT_EQ(::unlink((d + "/h").c_str()), 0);
                 EXPECT_EQ(E(::access((d + "/h").c_str(), F_OK)), ENOENT);
               }});
  c.push_back({"link", "every non-directory type links; errors EEXIST, ENOENT, EPERM (directory), EACCES", [](auto& d) {
                 ASSERT_EQ(Create(d + "/f", 0644), 0);
                 ASSERT_EQ(::mkfifo((d + "/fifo").c_str(), 0644), 0);
                 ASSERT_EQ(::symlink("f", (d + "/sym").c_str()), 0);
                 ASSERT_EQ(::mknod((d + "/chr").c_str(), S_IFCHR | 0644, makedev(1, 3)), 0);
                 for (const char* n : {"fifo", "sym", "chr"}) {
                   std::string from = d + "/" + n, to = d + "/" + n + "-2";
                   ASSERT_EQ(E(::link(from.c_str(), to.c_str())), 0) << n;
                   struct stat a = Lstat(from), b = Lstat(to);
                   EXPECT_EQ(a.st_nlink, 2u) << n;
                   EXPECT_EQ(a.st_mode, b.st_mode) << n;
                   EXPECT_EQ(a.st_rdev, b.st_rdev) << n;
                 }
                 char target[16] = {};
                 EXPECT_EQ(::readlink((d + "/sym-2").c_str(), target, sizeof(target)), 1);
                 EXPECT_EQ(E(::link((d + "/f").c_str(), (d + "/fifo").c_str())), EEXIST);
                 EXPECT_EQ(E(::link((d + "/missing").c_str(), (d + "/x").c_str())), ENOENT);
                 ASSERT_EQ(::mkdir((d + "/dir").c_str(), 0755), 0);
                 EXPECT_EQ(E(::link((d + "/dir").c_str(), (d + "/dir2").c_str())), EPERM);
                 ASSERT_EQ(::chmod((d + "/dir").c_str(), 0555), 0);
                 // The user's own file (fs.protected_hardlinks refuses links to others' files with EPERM).
                 ASSERT_EQ(::chown((d + "/f").c_str(), kUser, kGroup), 0);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::link((d + "/f").c_str(), (d + "/dir/x").c_str())); }),
                           EACCES);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::link((d + "/f").c_str(), (d + "/mine").c_str())); }),
                           0);
               }});
  // --- unlink ---
  c.push_back({"unlink", "removes a name and updates the directory's times; errors", [](auto& d) {
                 ASSERT_EQ(Create(d + "/f", 0644, "x"), 0);
                 ASSERT_EQ(::mkdir((d + "/dir").c_str(), 0755), 0);
                 Times before = TimesOf(d);
                 ASSERT_EQ(::unlink((d + "/f").c_str()), 0);
                 EXPECT_MODIFIED(d, before);
                 EXPECT_EQ(E(::unlink((d + "/f").c_str())), ENOENT);
                 EXPECT_EQ(E(::unlink((d + "/dir").c_str())), EISDIR);
                 ASSERT_EQ(Create(d + "/g", 0644), 0);
                 EXPECT_EQ(E(::unlink((d + "/g/x").c_str())), ENOTDIR);
                 ASSERT_EQ(::chmod((d + "/dir").c_str(), 0555), 0);
                 ASSERT_EQ(Create(d + "/dir/../h", 0644), 0);
                 ASSERT_EQ(::chmod((d + "/dir").c_str(), 0777), 0);
                 ASSERT_EQ(Create(d + "/dir/k", 0644), 0);
                 ASSERT_EQ(::chmod((d + "/dir").c_str(), 0555), 0);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::unlink((d + "/dir/k").c_str())); }), EACCES);
               }});
  c.push_back(
      {"sticky", "in a sticky directory only the owner of the entry or of the directory removes or renames it",
       [](auto& d) {
         ASSERT_EQ(::chmod(d.c_str(), 01777), 0);
         ASSERT_EQ(AsUser(kOther, kOtherGroup, [&] { return Create(d + "/theirs", 0666); }), 0);
         ASSERT_EQ(AsUser(kUser, kGroup, [&] { return Create(d + "/mine", 0666); }), 0);
         EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::unlink((d + "/theirs").c_str())); }), EPERM);
         EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::rename((d + "/theirs").c_str(), (d + "/stolen").c_str())); }),
                   EPERM);
         EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::rename((d + "/mine").c_str(), (d + "/mine2").c_str())); }),
                   0);
         EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::unlink((d + "/mine2").c_str())); }), 0);
         // The directory's owner may.
         ASSERT_EQ(::chown(d.c_str(), kUser, kGroup), 0);
         EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::unlink((d + "/theirs").c_str())); }), 0);
         ASSERT_EQ(::chown(d.c_str(), 0, 0), 0);
         ASSERT_EQ(::chmod(d.c_str(), 0777), 0);
       }});
  // --- rename ---
  c.push_back({"rename", "files and directories, over compatible targets; both directories' times", [](auto& d) {
                 ASSERT_EQ(::mkdir((d + "/a").c_str(), 0755), 0);
                 ASSERT_EQ(::mkdir((d + "/b").c_str(), 0755), 0);
                 ASSERT_EQ(Create(d + "/a/f", 0644, "one"), 0);
                 ASSERT_EQ(Create(d + "/b/g", 0644, "two"), 0);
                 Times a_before = TimesOf(d + "/a"), b_before = TimesOf(d + "/b"), f_before = TimesOf(d + "/a/f");
                 ino_t ino = Lstat(d + "/a/f").st_ino;
                 ASSERT_EQ(::rename((d + "/a/f").c_str(), (d + "/b/g").c_str()), 0);
                 EXPECT_EQ(Slurp(d + "/b/g"), "one");
                 EXPECT_EQ(Lstat(d + "/b/g").st_ino, ino);
                 EXPECT_EQ(E(::access((d + "/a/f").c_str(), F_OK)), ENOENT);
                 EXPECT_MODIFIED(d + "/a", a_before);
                 EXPECT_MODIFIED(d + "/b", b_before);
                 EXPECT_CHANGED_ONLY(d + "/b/g", f_before);
                 // Directory over an empty directory; over a non-empty one.
                 ASSERT_EQ(::mkdir((d + "/a/x").c_str(), 0755), 0);
                 ASSERT_EQ(::rename((d + "/a").c_str(), (d + "/empty").c_str()), 0);
                 ASSERT_EQ(::mkdir((d + "/e2").c_str(), 0755), 0);
                 ASSERT_EQ(::rename((d + "/e2").c_str(), (d + "/empty/x").c_str()), 0);
                 EXPECT_EQ(E(::rename((d + "/b").c_str(), (d + "/empty").c_str())), ENOTEMPTY);
                 ASSERT_EQ(Create(d + "/file", 0644), 0);
                 EXPECT_EQ(E(::rename((d + "/file").c_str(), (d + "/b").c_str())), EISDIR);
                 EXPECT_EQ(E(::rename((d + "/b").c_str(), (d + "/file").c_str())), ENOTDIR);
                 EXPECT_EQ(E(::rename((d + "/empty").c_str(), (d + "/empty/x/inside").c_str())), EINVAL);
                 EXPECT_EQ(E(::rename((d + "/missing").c_str(), (d + "/x").c_str())), ENOENT);
                 // Two names of one file: nothing happens.
                 ASSERT_EQ(::link((d + "/file").c_str(), (d + "/file2").c_str()), 0);
                 ASSERT_EQ(::rename((d + "/file").c_str(), (d + "/file2").c_str()), 0);
                 EXPECT_EQ(E(::access((d + "/file").c_str(), F_OK)), 0);
                 EXPECT_EQ(Lstat(d + "/file2").st_nlink, 2u);
                 // A hard-linked file renamed over another name keeps its count.
                 ASSERT_EQ(::rename((d + "/file2").c_str(), (d + "/b/g").c_str()), 0);
                 EXPECT_EQ(Lstat(d + "/file").st_nlink, 2u);
                 ASSERT_EQ(::unlink((d + "/b/g").c_str()), 0);
                 EXPECT_EQ(Lstat(d + "/file").st_nlink, 1u);
               }});
  c.push_back({"rename", "needs write and search on both directories", [](auto& d) {
                 ASSERT_EQ(::mkdir((d + "/ro").c_str(), 0755), 0);
                 ASSERT_EQ(Create(d + "/ro/f", 0666), 0);
                 EXPECT_EQ(
                     AsUser(kUser, kGroup, [&] { return E(::rename((d + "/ro/f").c_str(), (d + "/f").c_str())); }),
                     EACCES);
               }});
  // --- mkdir / rmdir ---
  c.push_back({"mkdir", "mode, owner, setgid inheritance, times, errors", [](auto& d) {
                 Times before = TimesOf(d);
                 ASSERT_EQ(::mkdir((d + "/x").c_str(), 0750), 0);
                 EXPECT_MODIFIED(d, before);
                 struct stat st = Lstat(d + "/x");
                 EXPECT_TRUE(S_ISDIR(st.st_mode));
                 EXPECT_EQ(st.st_mode & 07777, 0750u);
                 EXPECT_EQ(E(::mkdir((d + "/x").c_str(), 0755)), EEXIST);
                 EXPECT_EQ(E(::mkdir((d + "/missing/y").c_str(), 0755)), ENOENT);
                 ASSERT_EQ(::chmod((d + "/x").c_str(), 02777), 0);
                 ASSERT_EQ(::chown((d + "/x").c_str(), 0, 4242), 0);
                 ASSERT_EQ(AsUser(kUser, kGroup, [&] { return E(::mkdir((d + "/x/sub").c_str(), 0755)); }), 0);
                 ASSERT_EQ(AsUser(kUser, kGroup, [&] { return Create(d + "/x/file", 0644); }), 0);
                 st = Lstat(d + "/x/sub");
                 EXPECT_EQ(st.st_uid, kUser);
                 EXPECT_EQ(st.st_gid, 4242u);
                 EXPECT_NE(st.st_mode & S_ISGID, 0u);
                 EXPECT_EQ(Lstat(d + "/x/file").st_gid, 4242u);
                 ASSERT_EQ(::mkdir((d + "/ro").c_str(), 0555), 0);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::mkdir((d + "/ro/y").c_str(), 0755)); }), EACCES);
               }});
  c.push_back({"rmdir", "removes an empty directory; times; errors", [](auto& d) {
                 ASSERT_EQ(::mkdir((d + "/x").c_str(), 0755), 0);
                 ASSERT_EQ(::mkdir((d + "/full").c_str(), 0755), 0);
                 ASSERT_EQ(Create(d + "/full/f", 0644), 0);
                 ASSERT_EQ(Create(d + "/f", 0644), 0);
                 Times before = TimesOf(d);
                 ASSERT_EQ(::rmdir((d + "/x").c_str()), 0);
                 EXPECT_MODIFIED(d, before);
                 EXPECT_EQ(E(::rmdir((d + "/x").c_str())), ENOENT);
                 EXPECT_EQ(E(::rmdir((d + "/full").c_str())), ENOTEMPTY);
                 EXPECT_EQ(E(::rmdir((d + "/f").c_str())), ENOTDIR);
                 EXPECT_EQ(E(::rmdir((d + "/full/.").c_str())), EINVAL);
                 // A directory emptied again, and one that had its times changed, is empty.
                 ASSERT_EQ(::unlink((d + "/full/f").c_str()), 0);
                 EXPECT_EQ(::rmdir((d + "/full").c_str()), 0) << std::strerror(errno);
               }});
  // --- special files ---
  c.push_back({"mkfifo", "a FIFO is an entry of its type and mode that passes data", [](auto& d) {
                 Times before = TimesOf(d);
                 ASSERT_EQ(::mkfifo((d + "/p").c_str(), 0640), 0) << std::strerror(errno);
                 EXPECT_MODIFIED(d, before);
                 struct stat st = Lstat(d + "/p");
                 EXPECT_TRUE(S_ISFIFO(st.st_mode));
                 EXPECT_EQ(st.st_mode & 07777, 0640u);
                 EXPECT_EQ(E(::mkfifo((d + "/p").c_str(), 0640)), EEXIST);
                 int fd = ::open((d + "/p").c_str(), O_RDWR | O_NONBLOCK);
                 ASSERT_GE(fd, 0) << std::strerror(errno);
                 ASSERT_EQ(::write(fd, "ping", 4), 4);
                 char buf[8] = {};
                 EXPECT_EQ(::read(fd, buf, sizeof(buf)), 4);
                 EXPECT_STREQ(buf, "ping");
                 ::close(fd);
                 ASSERT_EQ(::unlink((d + "/p").c_str()), 0);
               }});
  c.push_back(
      {"mknod", "character and block devices keep their rdev; only root makes them", [](auto& d) {
         ASSERT_EQ(::mknod((d + "/c").c_str(), S_IFCHR | 0600, makedev(1, 3)), 0) << std::strerror(errno);
         ASSERT_EQ(::mknod((d + "/b").c_str(), S_IFBLK | 0640, makedev(7, 200)), 0);
         ASSERT_EQ(::mknod((d + "/r").c_str(), S_IFREG | 0600, 0), 0);
         struct stat st = Lstat(d + "/c");
         EXPECT_TRUE(S_ISCHR(st.st_mode));
         EXPECT_EQ(major(st.st_rdev), 1u);
         EXPECT_EQ(minor(st.st_rdev), 3u);
         st = Lstat(d + "/b");
         EXPECT_TRUE(S_ISBLK(st.st_mode));
         EXPECT_EQ(st.st_mode & 07777, 0640u);
         EXPECT_EQ(major(st.st_rdev), 7u);
         EXPECT_EQ(minor(st.st_rdev), 200u);
         EXPECT_TRUE(S_ISREG(Lstat(d + "/r").st_mode));
         // /dev/null's numbers: the kernel's driver answers, not the mount.
         int fd = ::open((d + "/c").c_str(), O_WRONLY);
         if (fd >= 0) {  // a nodev mount refuses it (EACCES); either is the kernel's call
           EXPECT_EQ(::write(fd, "gone", 4), 4);
           ::close(fd);
         } else {
           EXPECT_EQ(errno, EACCES);
         }
         EXPECT_EQ(
             AsUser(kUser, kGroup, [&] { return E(::mknod((d + "/c2").c_str(), S_IFCHR | 0600, makedev(1, 3))); }),
             EPERM);
         EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::mknod((d + "/p2").c_str(), S_IFIFO | 0600, 0)); }), 0);
         EXPECT_EQ(Lstat(d + "/p2").st_uid, kUser);
         ASSERT_EQ(::chmod((d + "/c").c_str(), 0666), 0);
         ASSERT_EQ(::chown((d + "/c").c_str(), kUser, kGroup), 0);
         st = Lstat(d + "/c");
         EXPECT_EQ(st.st_mode & 07777, 0666u);
         EXPECT_EQ(minor(st.st_rdev), 3u);
         ASSERT_EQ(::unlink((d + "/c").c_str()), 0);
       }});
  c.push_back({"socket", "a UNIX socket bound on the mount is an S_IFSOCK entry that accepts connections", [](auto& d) {
                 std::string path = d + "/s";
                 sockaddr_un addr{};
                 addr.sun_family = AF_UNIX;
                 ASSERT_LT(path.size(), sizeof(addr.sun_path));
                 std::strcpy(addr.sun_path, path.c_str());
                 int srv = ::socket(AF_UNIX, SOCK_STREAM, 0);
                 ASSERT_EQ(::bind(srv, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
                 ASSERT_EQ(::listen(srv, 1), 0);
                 EXPECT_TRUE(S_ISSOCK(Lstat(path).st_mode));
                 int cli = ::socket(AF_UNIX, SOCK_STREAM, 0);
                 EXPECT_EQ(::connect(cli, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
                 ::close(cli);
                 ::close(srv);
                 EXPECT_EQ(
                     E(::bind(::socket(AF_UNIX, SOCK_STREAM, 0), reinterpret_cast<sockaddr*>(&addr), sizeof(addr))),
                     EADDRINUSE);
                 ASSERT_EQ(::unlink(path.c_str()), 0);
               }});
  // --- symlink ---
  c.push_back({"symlink", "target, lstat, following, times, errors", [](auto& d) {
                 ASSERT_EQ(Create(d + "/f", 0644, "data"), 0);
                 Times before = TimesOf(d);
                 ASSERT_EQ(::symlink("f", (d + "/l").c_str()), 0);
                 EXPECT_MODIFIED(d, before);
                 struct stat st = Lstat(d + "/l");
                 EXPECT_TRUE(S_ISLNK(st.st_mode));
                 EXPECT_EQ(st.st_size, 1);
                 EXPECT_EQ(Slurp(d + "/l"), "data");
                 EXPECT_EQ(E(::symlink("x", (d + "/l").c_str())), EEXIST);
                 ASSERT_EQ(::symlink("nowhere", (d + "/dangling").c_str()), 0);
                 EXPECT_EQ(E(::open((d + "/dangling").c_str(), O_RDONLY)), ENOENT);
                 std::string long_target(4095, 'a');
                 EXPECT_EQ(E(::symlink(long_target.c_str(), (d + "/long").c_str())), 0);
                 char buf[4100];
                 EXPECT_EQ(::readlink((d + "/long").c_str(), buf, sizeof(buf)), 4095);
                 EXPECT_EQ(E(::readlink((d + "/f").c_str(), buf, sizeof(buf))), EINVAL);
               }});
  // --- truncate ---
  c.push_back({"truncate", "truncate and ftruncate grow and shrink; times; errors", [](auto& d) {
                 ASSERT_EQ(Create(d + "/f", 0644, "0123456789"), 0);
                 Times before = TimesOf(d + "/f");
                 ASSERT_EQ(::truncate((d + "/f").c_str(), 4), 0);
                 EXPECT_EQ(Slurp(d + "/f"), "0123");
                 EXPECT_MODIFIED(d + "/f", before);
                 int fd = ::open((d + "/f").c_str(), O_RDWR);
                 ASSERT_GE(fd, 0);
                 ASSERT_EQ(::ftruncate(fd, 100000), 0);
                 ::close(fd);
                 std::string data = Slurp(d + "/f");
                 ASSERT_EQ(data.size(), 100000u);
                 EXPECT_EQ(data.substr(0, 4), "0123");
                 EXPECT_EQ(data.find_first_not_of('\0', 4), std::string::npos);
                 ASSERT_EQ(::mkdir((d + "/dir").c_str(), 0755), 0);
                 EXPECT_EQ(E(::truncate((d + "/dir").c_str(), 0)), EISDIR);
                 EXPECT_EQ(E(::truncate((d + "/f").c_str(), -1)), EINVAL);
                 EXPECT_EQ(E(::truncate((d + "/missing").c_str(), 0)), ENOENT);
                 fd = ::open((d + "/f").c_str(), O_RDONLY);
                 EXPECT_EQ(E(::ftruncate(fd, 0)), EINVAL);
                 ::close(fd);
                 ASSERT_EQ(::chmod((d + "/f").c_str(), 0644), 0);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::truncate((d + "/f").c_str(), 0)); }), EACCES);
               }});
  // --- utimensat ---
  c.push_back(
      {"utimensat", "explicit times, UTIME_NOW, UTIME_OMIT; owner and write-permission rules", [](auto& d) {
         ASSERT_EQ(Create(d + "/f", 0666), 0);
         struct timespec t[2] = {{1000000000, 123}, {1100000000, 456}};
         Times before = TimesOf(d + "/f");
         ASSERT_EQ(::utimensat(AT_FDCWD, (d + "/f").c_str(), t, 0), 0);
         struct stat st = Lstat(d + "/f");
         EXPECT_EQ(st.st_atim.tv_sec, 1000000000);
         EXPECT_EQ(st.st_atim.tv_nsec, 123);
         EXPECT_EQ(st.st_mtim.tv_sec, 1100000000);
         EXPECT_EQ(st.st_mtim.tv_nsec, 456);
         EXPECT_TRUE(Later(st.st_ctim, before.ctime));
         struct timespec omit[2] = {{0, UTIME_OMIT}, {1200000000, 0}};
         ASSERT_EQ(::utimensat(AT_FDCWD, (d + "/f").c_str(), omit, 0), 0);
         st = Lstat(d + "/f");
         EXPECT_EQ(st.st_atim.tv_sec, 1000000000);
         EXPECT_EQ(st.st_mtim.tv_sec, 1200000000);
         ASSERT_EQ(::utimensat(AT_FDCWD, (d + "/f").c_str(), nullptr, 0), 0);
         EXPECT_GT(Lstat(d + "/f").st_mtim.tv_sec, 1200000000);
         // Another user: UTIME_NOW with write permission, explicit times only as the owner.
         EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::utimensat(AT_FDCWD, (d + "/f").c_str(), nullptr, 0)); }), 0);
         EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::utimensat(AT_FDCWD, (d + "/f").c_str(), t, 0)); }), EPERM);
         ASSERT_EQ(::chmod((d + "/f").c_str(), 0644), 0);
         EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::utimensat(AT_FDCWD, (d + "/f").c_str(), nullptr, 0)); }),
                   EACCES);
         // A directory and a symlink (AT_SYMLINK_NOFOLLOW).
         ASSERT_EQ(::mkdir((d + "/dir").c_str(), 0755), 0);
         ASSERT_EQ(Create(d + "/dir/x", 0644), 0);
         ASSERT_EQ(::utimensat(AT_FDCWD, (d + "/dir").c_str(), t, 0), 0);
         EXPECT_EQ(Lstat(d + "/dir").st_mtim.tv_sec, 1100000000);
         ASSERT_EQ(::symlink("f", (d + "/l").c_str()), 0);
         ASSERT_EQ(::utimensat(AT_FDCWD, (d + "/l").c_str(), t, AT_SYMLINK_NOFOLLOW), 0);
         EXPECT_EQ(Lstat(d + "/l").st_mtim.tv_sec, 1100000000);
       }});
  // --- every file type: chmod, chown, times ---
  c.push_back({"types",
               "chmod, chown and their ctime for every file type; setuid cleared by chown on all but "
               "directories",
               [](auto& d) {
                 ASSERT_EQ(Create(d + "/reg", 0644), 0);
                 ASSERT_EQ(::mkdir((d + "/dir").c_str(), 0755), 0);
                 ASSERT_EQ(::mkfifo((d + "/fifo").c_str(), 0644), 0);
                 ASSERT_EQ(::mknod((d + "/chr").c_str(), S_IFCHR | 0644, makedev(1, 5)), 0);
                 ASSERT_EQ(::mknod((d + "/blk").c_str(), S_IFBLK | 0644, makedev(7, 1)), 0);
                 ASSERT_EQ(::mknod((d + "/sock").c_str(), S_IFSOCK | 0644, 0), 0);
                 for (const char* n : {"reg", "dir", "fifo", "chr", "blk", "sock"}) {
                   const std::string p = d + "/" + n;
                   Times before = TimesOf(p);
                   ASSERT_EQ(::chmod(p.c_str(), 04751), 0) << n;
                   EXPECT_EQ(Lstat(p).st_mode & 07777, 04751u) << n;
                   EXPECT_CHANGED_ONLY(p, before);
                   before = TimesOf(p);
                   ASSERT_EQ(::chown(p.c_str(), kUser, kGroup), 0) << n;
                   struct stat st = Lstat(p);
                   EXPECT_EQ(st.st_uid, kUser) << n;
                   EXPECT_EQ(st.st_gid, kGroup) << n;
                   EXPECT_EQ(st.st_mode & 07777, std::string(n) == "dir" ? 04751u : 0751u) << n;
                   EXPECT_CHANGED_ONLY(p, before);
                   // The new owner may chmod it; another user may not.
                   EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::chmod(p.c_str(), 0700)); }), 0) << n;
                   EXPECT_EQ(Lstat(p).st_mode & 07777, 0700u) << n;
                   EXPECT_EQ(AsUser(kOther, kOtherGroup, [&] { return E(::chmod(p.c_str(), 0777)); }), EPERM) << n;
                   EXPECT_EQ(AsUser(kOther, kOtherGroup, [&] { return E(::lchown(p.c_str(), kOther, -1)); }), EPERM)
                       << n;
                   EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::lchown(p.c_str(), kOther, -1)); }), EPERM) << n;
                 }
                 EXPECT_EQ(Lstat(d + "/chr").st_rdev, makedev(1, 5));
               }});
  // --- errors every path operation shares ---
  c.push_back({"errors", "ENOENT, ENOTDIR and ENAMETOOLONG from every path operation", [](auto& d) {
                 ASSERT_EQ(Create(d + "/f", 0644), 0);
                 const std::string long_name = d + "/" + std::string(256, 'n');
                 struct Op {
                   const char* name;
                   std::function<int(const std::string&)> call;
                 };
                 const std::vector<Op> ops = {
                     {"open", [](auto& p) { return E(::open(p.c_str(), O_RDONLY)); }},
                     {"creat", [](auto& p) { return E(::open(p.c_str(), O_CREAT | O_WRONLY, 0644)); }},
                     {"mkdir", [](auto& p) { return E(::mkdir(p.c_str(), 0755)); }},
                     {"rmdir", [](auto& p) { return E(::rmdir(p.c_str())); }},
                     {"unlink", [](auto& p) { return E(::unlink(p.c_str())); }},
                     {"mkfifo", [](auto& p) { return E(::mkfifo(p.c_str(), 0644)); }},
                     {"symlink", [](auto& p) { return E(::symlink("t", p.c_str())); }},
                     {"chmod", [](auto& p) { return E(::chmod(p.c_str(), 0644)); }},
                     {"chown", [](auto& p) { return E(::chown(p.c_str(), 1, 1)); }},
                     {"truncate", [](auto& p) { return E(::truncate(p.c_str(), 0)); }},
                     {"utimensat", [](auto& p) { return E(::utimensat(AT_FDCWD, p.c_str(), nullptr, 0)); }},
                     {"lstat",
                      [](auto& p) {
                        struct stat st {};
                        return E(::lstat(p.c_str(), &st));
                      }},
                     {"readlink",
                      [](auto& p) {
                        char b[8];
                        return E(::readlink(p.c_str(), b, sizeof(b)));
                      }},
                 };
                 for (const Op& op : ops) {
                   const bool creates = std::string("creat mkdir mkfifo symlink").find(op.name) != std::string::npos;
                   EXPECT_EQ(op.call(d + "/missing/x"), ENOENT) << op.name;
                   if (!creates) {
                     EXPECT_EQ(op.call(d + "/missing"), ENOENT) << op.name;
                   }
                   EXPECT_EQ(op.call(d + "/f/x"), ENOTDIR) << op.name;
                   EXPECT_EQ(op.call(long_name), ENAMETOOLONG) << op.name;
                 }
                 EXPECT_EQ(E(::link((d + "/f").c_str(), long_name.c_str())), ENAMETOOLONG);
                 EXPECT_EQ(E(::rename((d + "/f").c_str(), long_name.c_str())), ENAMETOOLONG);
                 EXPECT_EQ(E(::link((d + "/f").c_str(), (d + "/f/x").c_str())), ENOTDIR);
                 EXPECT_EQ(E(::rename((d + "/f").c_str(), (d + "/missing/x").c_str())), ENOENT);
                 EXPECT_EQ(E(::symlink(std::string(4096, 't').c_str(), (d + "/l").c_str())), ENAMETOOLONG);
                 struct timespec bad[2] = {{0, 1000000000}, {0, 0}};
                 EXPECT_EQ(E(::utimensat(AT_FDCWD, (d + "/f").c_str(), bad, 0)), EINVAL);
               }});
  c.push_back({"open", "O_APPEND writes at the end; chmod and truncate follow a symlink", [](auto& d) {
                 ASSERT_EQ(Create(d + "/f", 0644, "head"), 0);
                 int fd = ::open((d + "/f").c_str(), O_WRONLY | O_APPEND);
                 ASSERT_GE(fd, 0);
                 ASSERT_EQ(::pwrite(fd, "-tail", 5, 0), 5);  // O_APPEND wins over the offset (Linux)
                 ::close(fd);
                 EXPECT_EQ(Slurp(d + "/f"), "head-tail");
                 ASSERT_EQ(::symlink("f", (d + "/l").c_str()), 0);
                 ASSERT_EQ(::chmod((d + "/l").c_str(), 0600), 0);
                 EXPECT_EQ(Lstat(d + "/f").st_mode & 07777, 0600u);
                 EXPECT_EQ(Lstat(d + "/l").st_mode & 07777, 0777u);
                 ASSERT_EQ(::truncate((d + "/l").c_str(), 2), 0);
                 EXPECT_EQ(Slurp(d + "/f"), "he");
               }});
  c.push_back({"rmdir", "an unprivileged user needs write and search on the parent", [](auto& d) {
                 ASSERT_EQ(::mkdir((d + "/p").c_str(), 0755), 0);
                 ASSERT_EQ(::mkdir((d + "/p/x").c_str(), 0777), 0);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::rmdir((d + "/p/x").c_str())); }), EACCES);
                 ASSERT_EQ(::chmod((d + "/p").c_str(), 0777), 0);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::rmdir((d + "/p/x").c_str())); }), 0);
               }});
  c.push_back(
      {"times", "a write moves mtime and ctime by the close of its descriptor; a read-only open does not", [](auto& d) {
         ASSERT_EQ(Create(d + "/f", 0644, "data"), 0);
         Times before = TimesOf(d + "/f");
         int fd = ::open((d + "/f").c_str(), O_RDONLY);
         ASSERT_GE(fd, 0);
         char b[8];
         EXPECT_EQ(::read(fd, b, sizeof(b)), 4);
         ::close(fd);
         EXPECT_UNTOUCHED(d + "/f", before);
         fd = ::open((d + "/f").c_str(), O_WRONLY);
         ASSERT_GE(fd, 0);
         ASSERT_EQ(::pwrite(fd, "x", 1, 2), 1);
         ::close(fd);
         EXPECT_MODIFIED(d + "/f", before);
         before = TimesOf(d + "/f");
         fd = ::open((d + "/f").c_str(), O_RDWR);
         ASSERT_GE(fd, 0);
         ASSERT_EQ(::write(fd, "y", 1), 1);
         ASSERT_EQ(::fsync(fd), 0);
         EXPECT_MODIFIED(d + "/f", before);
         ::close(fd);
       }});
  // --- timestamps of a new entry ---
  c.push_back({"times", "a new entry's atime, mtime and ctime are now and equal", [](auto& d) {
                 timespec start{};
                 ::clock_gettime(CLOCK_REALTIME, &start);
                 ASSERT_EQ(Create(d + "/f", 0644), 0);
                 ASSERT_EQ(::mkdir((d + "/dir").c_str(), 0755), 0);
                 for (const char* n : {"/dir"}) {
                   struct stat st = Lstat(d + n);
                   EXPECT_TRUE(Same(st.st_atim, st.st_mtim)) << n;
                   EXPECT_TRUE(Same(st.st_mtim, st.st_ctim)) << n;
                   EXPECT_GE(st.st_mtim.tv_sec, start.tv_sec) << n;
                 }
                 EXPECT_GE(Lstat(d + "/f").st_mtim.tv_sec, start.tv_sec);
                 // A failed operation changes nothing.
                 Times before = TimesOf(d);
                 EXPECT_EQ(E(::mkdir((d + "/dir").c_str(), 0755)), EEXIST);
                 EXPECT_EQ(E(::unlink((d + "/missing").c_str())), ENOENT);
                 EXPECT_UNTOUCHED(d, before);
               }});
  return c;
}

class FuseConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    cluster_ = StartNvmeClusterWithContainer(&error);
    ASSERT_NE(cluster_, nullptr) << error;
    // The other users must reach the mount point.
    ASSERT_EQ(::chmod(cluster_->dir().c_str(), 0711), 0);
    mount_ = FuseMount::Start(*cluster_, cluster_->dir() + "/mnt", {"--allow-other"}, &error);
    ASSERT_NE(mount_, nullptr) << error;
  }

  void TearDown() override {
    if (mount_) {
      EXPECT_EQ(mount_->Stop(), 0) << mount_->log();
      EXPECT_FALSE(IsMounted(mount_->path()));
    }
  }

  std::unique_ptr<TestCluster> cluster_;
  std::unique_ptr<FuseMount> mount_;
};

TEST_F(FuseConformanceTest, PosixCasesPassExceptListedExclusions) {
  ::umask(022);
  std::vector<Case> cases = Cases();
  int n = 0;
  for (const Case& c : cases) {
    std::string dir = mount_->path() + "/case" + std::to_string(n++);
    ASSERT_EQ(::mkdir(dir.c_str(), 0777), 0) << std::strerror(errno);
    ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
    SCOPED_TRACE(fmt::format("[{}] {}", c.category, c.name));
    const int failures_before = ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
    c.body(dir);
    const int failures_after = ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
    std::printf("%-4s [%s] %s\n", failures_after == failures_before ? "ok" : "FAIL", c.category, c.name);
  }
  std::printf("%zu cases run; excluded (docs/fuse.md, \"POSIX conformance\"):\n", cases.size());
  for (const Exclusion& e : kExclusions) std::printf("  [%s] %s: %s\n", e.category, e.what, e.reason);
}

}  // namespace
}  // namespace ros2::fuse
