// Conformance cases of files and attributes: open, chmod, chown, setuid and
// setgid clearing, truncate, utimensat, file types and timestamps
// (fuse_conformance.h).
#include "fuse/fuse_conformance.h"

namespace ros2::fuse::conformance {

namespace {

void OpenChmodCases(std::vector<Case>& c) {
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
}

void OwnerAndSizeCases(std::vector<Case>& c) {
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
}

void TypeAndTimeCases(std::vector<Case>& c) {
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
}

}  // namespace

void AddFileCases(std::vector<Case>& c) {
  OpenChmodCases(c);
  OwnerAndSizeCases(c);
  TypeAndTimeCases(c);
}

}  // namespace ros2::fuse::conformance
