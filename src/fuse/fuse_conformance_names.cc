// Conformance cases of names and directories: link, unlink, rename, mkdir,
// rmdir, special files, symlink, the errors of path operations, link counts
// (fuse_conformance.h).
#include "fuse/fuse_conformance.h"

namespace ros2::fuse::conformance {

namespace {

void LinkUnlinkCases(std::vector<Case>& c) {
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
}

void RenameDirectoryCases(std::vector<Case>& c) {
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
}

void SpecialFileCases(std::vector<Case>& c) {
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
}

void PathErrorCases(std::vector<Case>& c) {
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
  c.push_back({"rmdir", "an unprivileged user needs write and search on the parent", [](auto& d) {
                 ASSERT_EQ(::mkdir((d + "/p").c_str(), 0755), 0);
                 ASSERT_EQ(::mkdir((d + "/p/x").c_str(), 0777), 0);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::rmdir((d + "/p/x").c_str())); }), EACCES);
                 ASSERT_EQ(::chmod((d + "/p").c_str(), 0777), 0);
                 EXPECT_EQ(AsUser(kUser, kGroup, [&] { return E(::rmdir((d + "/p/x").c_str())); }), 0);
               }});
}

void LinkCountCases(std::vector<Case>& c) {
  // --- link counts ---
  c.push_back({"nlink", "a directory's st_nlink is 2 + its subdirectories through mkdir, rmdir and rename", [](auto& d) {
                 auto links = [](const std::string& p) { return Lstat(p).st_nlink; };
                 EXPECT_EQ(links(d), 2u);
                 ASSERT_EQ(::mkdir((d + "/a").c_str(), 0755), 0);
                 ASSERT_EQ(::mkdir((d + "/b").c_str(), 0755), 0);
                 ASSERT_EQ(Create(d + "/f", 0644), 0);  // files do not count
                 EXPECT_EQ(links(d), 4u);
                 EXPECT_EQ(links(d + "/a"), 2u);
                 ASSERT_EQ(::mkdir((d + "/a/x").c_str(), 0755), 0);
                 EXPECT_EQ(links(d + "/a"), 3u);
                 // Across directories: one loses it, the other gains it.
                 ASSERT_EQ(::rename((d + "/a/x").c_str(), (d + "/b/x").c_str()), 0);
                 EXPECT_EQ(links(d + "/a"), 2u);
                 EXPECT_EQ(links(d + "/b"), 3u);
                 // A new name in the same directory changes no count.
                 ASSERT_EQ(::rename((d + "/b/x").c_str(), (d + "/b/y").c_str()), 0);
                 EXPECT_EQ(links(d + "/b"), 3u);
                 // Over an empty directory: still one.
                 ASSERT_EQ(::mkdir((d + "/b/z").c_str(), 0755), 0);
                 EXPECT_EQ(links(d + "/b"), 4u);
                 ASSERT_EQ(::rename((d + "/b/y").c_str(), (d + "/b/z").c_str()), 0);
                 EXPECT_EQ(links(d + "/b"), 3u);
                 // A directory with its subtree moves into another.
                 ASSERT_EQ(::rename((d + "/b").c_str(), (d + "/a/b").c_str()), 0);
                 EXPECT_EQ(links(d), 3u);
                 EXPECT_EQ(links(d + "/a"), 3u);
                 EXPECT_EQ(links(d + "/a/b"), 3u);
                 ASSERT_EQ(::rmdir((d + "/a/b/z").c_str()), 0);
                 EXPECT_EQ(links(d + "/a/b"), 2u);
                 ASSERT_EQ(::rmdir((d + "/a/b").c_str()), 0);
                 EXPECT_EQ(links(d + "/a"), 2u);
                 // A failed mkdir or rmdir changes no count.
                 EXPECT_EQ(E(::mkdir((d + "/a").c_str(), 0755)), EEXIST);
                 EXPECT_EQ(E(::rmdir((d + "/f").c_str())), ENOTDIR);
                 EXPECT_EQ(links(d), 3u);
               }});
  c.push_back({"nlink", "a file open after its last name is gone: fstat shows 0 links, its data stays", [](auto& d) {
                 int fd = ::open((d + "/f").c_str(), O_RDWR | O_CREAT | O_EXCL, 0644);
                 ASSERT_GE(fd, 0) << std::strerror(errno);
                 ASSERT_EQ(::write(fd, "before", 6), 6);
                 ASSERT_EQ(::link((d + "/f").c_str(), (d + "/g").c_str()), 0);
                 ASSERT_EQ(::unlink((d + "/f").c_str()), 0);
                 struct stat st {};
                 ASSERT_EQ(::fstat(fd, &st), 0) << std::strerror(errno);
                 EXPECT_EQ(st.st_nlink, 1u);  // one name left
                 ASSERT_EQ(::unlink((d + "/g").c_str()), 0);
                 ASSERT_EQ(::fstat(fd, &st), 0) << std::strerror(errno);
                 EXPECT_EQ(st.st_nlink, 0u);
                 EXPECT_EQ(st.st_size, 6);
                 EXPECT_EQ(E(::access((d + "/f").c_str(), F_OK)), ENOENT);
                 EXPECT_EQ(E(::access((d + "/g").c_str(), F_OK)), ENOENT);
                 // Still readable and writable through the descriptor.
                 ASSERT_EQ(::pwrite(fd, "+after", 6, 6), 6);
                 char buf[16] = {};
                 ASSERT_EQ(::pread(fd, buf, sizeof(buf), 0), 12);
                 EXPECT_EQ(std::string(buf, 12), "before+after");
                 ASSERT_EQ(::fstat(fd, &st), 0);
                 EXPECT_EQ(st.st_nlink, 0u);
                 EXPECT_EQ(st.st_size, 12);
                 // A second descriptor of a file that is only unlinked later.
                 ASSERT_EQ(Create(d + "/h", 0644, "h"), 0);
                 int h1 = ::open((d + "/h").c_str(), O_RDONLY);
                 int h2 = ::open((d + "/h").c_str(), O_RDONLY);
                 ASSERT_GE(h1, 0);
                 ASSERT_GE(h2, 0);
                 ASSERT_EQ(::unlink((d + "/h").c_str()), 0);
                 ::close(h1);
                 ASSERT_EQ(::fstat(h2, &st), 0) << std::strerror(errno);
                 EXPECT_EQ(st.st_nlink, 0u);
                 EXPECT_EQ(::pread(h2, buf, sizeof(buf), 0), 1);
                 ::close(h2);
                 EXPECT_EQ(::close(fd), 0);
                 // The directory is empty again, and no hidden name shows at the root.
                 EXPECT_EQ(::rmdir(d.c_str()), 0) << std::strerror(errno);
                 ASSERT_EQ(::mkdir(d.c_str(), 0777), 0);
                 const std::string root = std::filesystem::path(d).parent_path().string();
                 for (const auto& e : std::filesystem::directory_iterator(root)) {
                   EXPECT_NE(e.path().filename().string(), ".ros2-orphans");
                 }
                 EXPECT_EQ(E(::access((root + "/.ros2-orphans").c_str(), F_OK)), ENOENT);
               }});
}

}  // namespace

void AddNameCases(std::vector<Case>& c) {
  LinkUnlinkCases(c);
  RenameDirectoryCases(c);
  SpecialFileCases(c);
  PathErrorCases(c);
  LinkCountCases(c);
}

}  // namespace ros2::fuse::conformance
