// ros2-fuse on a real single-node cluster (nvme class), exercised by real
// programs through the kernel: tar, git, dd, cmp, fio (psync, io_uring),
// several processes at once, and the POSIX error cases through system calls.
//
// Each test starts its own cluster and mounts (ctest runs every test in its
// own process): mount "direct" with --data-cache off (every read and write
// reaches the DFS) and mount "cached" with the defaults (page cache kept).
// Teardown always unmounts (fusermount3 -u, then umount -l as a last resort).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "testing/fuse_mount.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

namespace ros2::fuse {
namespace {

using namespace ros2::testing;  // the harness (src/testing)

class FuseMountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // nvme class: extents in files; shards large enough for the 1 GiB file.
    std::string error;
    cluster_ = StartNvmeClusterWithContainer(&error, {"--agent"});
    ASSERT_NE(cluster_, nullptr) << error;
    cluster_up_ = true;
    local_ = cluster_->dir() + "/local";
    std::filesystem::create_directories(local_);
    direct_ = StartTestMount(*cluster_, cluster_->dir() + "/direct", {"--data-cache", "off"}, &error);
    ASSERT_NE(direct_, nullptr) << error;
    cached_ = StartTestMount(*cluster_, cluster_->dir() + "/cached", {"--allow-other"}, &error);
    ASSERT_NE(cached_, nullptr) << error;
  }

  void TearDown() override {
    for (auto* mount : {&direct_, &cached_}) {
      if (!*mount) continue;
      int exit_code = (*mount)->Stop();
      EXPECT_EQ(exit_code, 0) << "ros2-fuse on " << (*mount)->path()
                              << " did not exit cleanly on fusermount3 -u: " << (*mount)->log();
      EXPECT_FALSE(IsMounted((*mount)->path()));
      mount->reset();
    }
    // Also after a test restarted the engine by hand, which TestCluster does not track.
    if (cluster_up_) cluster_->Ctl({"cluster", "down", "--timeout", "30", "--force"});
    cluster_.reset();
  }

  std::string D(const std::string& rel) const { return direct_->path() + "/" + rel; }
  std::string C(const std::string& rel) const { return cached_->path() + "/" + rel; }
  std::string L(const std::string& rel) const { return local_ + "/" + rel; }
  CommandResult Run(const std::string& script) const { return RunShell(script, cluster_->scratch()); }

  std::unique_ptr<TestCluster> cluster_;
  bool cluster_up_ = false;
  std::string local_;
  std::unique_ptr<FuseMount> direct_;
  std::unique_ptr<FuseMount> cached_;
};

TEST_F(FuseMountTest, DaemonModeReturnsOnceLiveAndUnmountsOnRequest) {
  std::string dir = cluster_->dir() + "/daemon";
  std::filesystem::create_directories(dir);
  CommandResult r = Run(std::string(ROS2_FUSE_PATH) + " --data-dir " + cluster_->dir() + " p1 c1 " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(IsMounted(dir));  // live when the command returned
  struct statfs_guard {
    std::string dir, scratch;
    ~statfs_guard() {
      if (IsMounted(dir)) RunShell("fusermount3 -u " + dir + " || umount -l " + dir, scratch);
    }
  } guard{dir, cluster_->scratch()};
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0) << std::strerror(errno);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_ino, 1u);
  // The same namespace as the other mounts.
  ASSERT_EQ(Run("echo hello > " + D("hello.txt")).exit_code, 0);
  EXPECT_EQ(ReadWholeFile(dir + "/hello.txt"), "hello\n");
  ASSERT_EQ(Run("fusermount3 -u " + dir).exit_code, 0);
  EXPECT_FALSE(IsMounted(dir));

  // Errors before the mount is live come back from the command itself.
  CommandResult bad = Run(std::string(ROS2_FUSE_PATH) + " --data-dir " + cluster_->dir() + " nosuchpool c1 " + dir);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("nosuchpool"), std::string::npos) << bad.out;
  EXPECT_FALSE(IsMounted(dir));
  CommandResult usage = Run(std::string(ROS2_FUSE_PATH) + " --data-cache maybe p1 c1 " + dir);
  EXPECT_EQ(usage.exit_code, 2) << usage.out;

  // SIGTERM (and SIGINT) end a mount cleanly: exit 0, nothing left mounted.
  for (int sig : {SIGTERM, SIGINT}) {
    std::string error;
    auto mount = StartTestMount(*cluster_, dir, {}, &error);
    ASSERT_NE(mount, nullptr) << error;
    EXPECT_EQ(ReadWholeFile(dir + "/hello.txt"), "hello\n");
    EXPECT_EQ(mount->SignalAndWait(sig), 0) << "signal " << sig << ": " << mount->log();
    EXPECT_FALSE(IsMounted(dir)) << "signal " << sig;
  }
}

TEST_F(FuseMountTest, TarTreeInAndOutAndGitCommit) {
  // A snapshot of the source tree (other work may change src/ meanwhile),
  // with a symlink and an empty directory added.
  std::string src = std::string(ROS2_SOURCE_DIR) + "/src";
  ASSERT_EQ(
      Run("mkdir -p " + L("orig") + " && tar -C " + src + " -cf - . | tar -C " + L("orig") + " -xf - && ln -s common " +
          L("orig/link-to-common") + " && mkdir " + L("orig/empty") + " && chmod 0750 " + L("orig/empty"))
          .exit_code,
      0);
  CommandResult in =
      Run("mkdir " + C("tree") + " && tar -C " + L("orig") + " -cf - . | tar -C " + C("tree") + " -xf -");
  ASSERT_EQ(in.exit_code, 0) << in.out;
  CommandResult out = Run("mkdir " + L("out") + " && tar -C " + C("tree") + " -cf - . | tar -C " + L("out") + " -xf -");
  ASSERT_EQ(out.exit_code, 0) << out.out;
  CommandResult diff = Run("diff -r " + L("orig") + " " + L("out"));
  EXPECT_EQ(diff.exit_code, 0) << diff.out;
  // The other mount (no page cache) sees the same bytes.
  CommandResult diff_direct = Run("diff -r " + L("orig") + " " + D("tree"));
  EXPECT_EQ(diff_direct.exit_code, 0) << diff_direct.out;
  CommandResult modes = Run("stat -c '%a %F' " + D("tree/empty") + " " + D("tree/link-to-common"));
  EXPECT_EQ(modes.out, "750 directory\n777 symbolic link\n");
  CommandResult mtimes = Run("test \"$(stat -c %Y " + L("orig/CMakeLists.txt") + ")\" = \"$(stat -c %Y " +
                             D("tree/CMakeLists.txt") + ")\"");
  EXPECT_EQ(mtimes.exit_code, 0) << "tar's utimens did not stick";

  // git: lock files (O_EXCL), renames over files, fsync, mmap, chmod probes.
  std::string git = "git -c user.name=ros2 -c user.email=ros2@example.com -c init.defaultBranch=main";
  std::string repo = C("repo");
  CommandResult commit =
      Run("set -e; mkdir " + repo + "; cd " + repo + "; " + git + " init -q .; cp -r " + L("orig/common") + " " +
          L("orig/fuse") + " .; " + git + " add -A; " + git + " commit -q -m first; echo change >> common/status.h; " +
          git + " commit -q -am second; " + git + " log --oneline | wc -l; " + git + " status --porcelain | wc -l; " +
          git + " fsck --full 2>&1; " + git + " diff --stat HEAD~1 | tail -1");
  ASSERT_EQ(commit.exit_code, 0) << commit.out;
  EXPECT_NE(commit.out.find("2\n0\n"), std::string::npos) << commit.out;
  EXPECT_NE(commit.out.find("1 file changed, 1 insertion"), std::string::npos) << commit.out;
  // A clone through the other mount checks out the same tree.
  CommandResult clone = Run("set -e; cd " + direct_->path() + "; " + git + " clone -q " + repo + " clone; diff -r " +
                            L("orig/fuse") + " clone/fuse");
  EXPECT_EQ(clone.exit_code, 0) << clone.out;
}

TEST_F(FuseMountTest, OneGiBFileByDdComparesByteForByte) {
  ASSERT_EQ(Run("dd if=/dev/urandom of=" + L("big") + " bs=1M count=1024 status=none").exit_code, 0);
  CommandResult dd = Run("dd if=" + L("big") + " of=" + D("big") + " bs=1M status=none conv=fsync");
  ASSERT_EQ(dd.exit_code, 0) << dd.out;
  struct stat st {};
  ASSERT_EQ(::stat(D("big").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 1073741824);
  CommandResult cmp = Run("cmp " + L("big") + " " + D("big"));
  EXPECT_EQ(cmp.exit_code, 0) << cmp.out;
  std::filesystem::remove(L("big"));
}

TEST_F(FuseMountTest, FioPsyncAndIoUringVerifyTheirData) {
  ASSERT_EQ(::mkdir(D("fio").c_str(), 0755), 0);
  std::string common = " --directory=" + D("fio") + " --size=64M --verify=crc32c --do_verify=1 --group_reporting";
  CommandResult psync = Run("fio --name=psync --ioengine=psync --rw=write --bs=1M" + common);
  EXPECT_EQ(psync.exit_code, 0) << psync.out;
  CommandResult uring =
      Run("fio --name=uring --ioengine=io_uring --direct=1 --iodepth=8 --rw=randwrite --bs=64k" + common);
  EXPECT_EQ(uring.exit_code, 0) << uring.out;
  // Through the page cache too.
  ASSERT_EQ(::mkdir(C("fio-cached").c_str(), 0755), 0);
  CommandResult cached =
      Run("fio --name=cached --ioengine=psync --rw=randwrite --bs=16k --size=16M --verify=crc32c "
          "--directory=" +
          C("fio-cached"));
  EXPECT_EQ(cached.exit_code, 0) << cached.out;
  for (const auto* out : {&psync.out, &uring.out, &cached.out}) {
    EXPECT_EQ(out->find("verify: bad"), std::string::npos) << *out;
    EXPECT_NE(out->find("err= 0"), std::string::npos) << *out;
  }
}

TEST_F(FuseMountTest, ConcurrentWritersAndReadersOnDistinctFiles) {
  ASSERT_EQ(::mkdir(D("conc").c_str(), 0755), 0);
  ASSERT_EQ(
      Run("head -c 16M /dev/urandom > " + L("shared") + " && cp " + L("shared") + " " + D("conc/shared")).exit_code, 0);
  // Each a shell script with its output in its own log.
  std::vector<ChildProcess> procs;
  auto shell = [&](const std::string& script, const std::string& log) {
    SpawnOptions so;
    so.argv = {"/bin/sh", "-c", script};
    so.stdout_path = so.stderr_path = log;
    auto child = ChildProcess::Spawn(so);
    ASSERT_TRUE(child.ok()) << child.status().ToString();
    procs.push_back(std::move(*child));
  };
  for (int i = 0; i < 4; ++i) {
    std::string n = std::to_string(i);
    // Each writer: its own random data, written with one block size, read back with another.
    shell("set -e; head -c 24M /dev/urandom > " + L("w" + n) + "; dd if=" + L("w" + n) + " of=" + D("conc/w" + n) +
              " bs=" + std::to_string(64 << i) + "k status=none; cmp " + L("w" + n) + " " + D("conc/w" + n) +
              "; cmp " + L("w" + n) + " " + C("conc/w" + n),
          L("writer" + n + ".log"));
  }
  for (int i = 0; i < 2; ++i) {
    std::string n = std::to_string(i);
    shell("set -e; for k in 1 2 3; do cmp " + L("shared") + " " + D("conc/shared") + "; cmp " + L("shared") + " " +
              C("conc/shared") + "; done",
          L("reader" + n + ".log"));
  }
  for (size_t i = 0; i < procs.size(); ++i) {
    std::string what = i < 4 ? "writer" + std::to_string(i) : "reader" + std::to_string(i - 4);
    auto code = procs[i].Wait(std::chrono::seconds(180));
    EXPECT_TRUE(code.ok() && *code == 0) << what << ": " << ReadWholeFile(L(what + ".log"));
  }
  CommandResult sizes = Run("stat -c %s " + D("conc/w0") + " " + D("conc/w3"));
  EXPECT_EQ(sizes.out, "25165824\n25165824\n");
}

// Writes `data` to `path` (created or truncated).
bool WriteFile(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return false;
  bool ok = ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  return ::close(fd) == 0 && ok;
}

// Directories opened, listed to the end and closed by several threads at
// once, on both mounts, while files come and go beside them. A closedir
// releases the handle on whichever worker thread picks up the kernel's
// releasedir, possibly while the thread that answered the last readdir is
// still returning from it: the handle (and its mutex) must not be touched
// after the reply. The listings stay complete and the daemons exit cleanly
// (TearDown); a ThreadSanitizer build of ros2-fuse reports any such access.
TEST_F(FuseMountTest, DirectoriesListedAndClosedFromManyThreadsAtOnce) {
  constexpr int kNames = 40;
  ASSERT_EQ(::mkdir(D("listed").c_str(), 0755), 0);
  std::vector<std::string> expected;
  for (int i = 0; i < kNames; ++i) {
    expected.push_back(fmt::format("f{:02}", i));
    ASSERT_TRUE(WriteFile(D("listed/" + expected.back()), "x"));
  }
  std::atomic<bool> stop{false};
  std::atomic<int> listings{0};
  std::vector<std::string> failures(4);
  std::vector<std::thread> listers;
  for (int t = 0; t < 4; ++t) {
    listers.emplace_back([&, t] {
      const std::string dir = t % 2 == 0 ? D("listed") : C("listed");
      for (int round = 0; round < 150 && failures[t].empty(); ++round) {
        DIR* d = ::opendir(dir.c_str());
        if (d == nullptr) {
          failures[t] = fmt::format("opendir {}: {}", dir, std::strerror(errno));
          break;
        }
        std::vector<std::string> names;
        while (dirent* e = ::readdir(d)) {
          std::string n = e->d_name;
          if (n.rfind('f', 0) == 0) names.push_back(n);
        }
        ::closedir(d);
        std::sort(names.begin(), names.end());
        if (names != expected) {
          failures[t] = fmt::format("round {}: {} names listed in {}, {} expected", round, names.size(), dir,
                                    expected.size());
        }
        listings.fetch_add(1);
      }
    });
  }
  // Files made and removed meanwhile, in another directory.
  ASSERT_EQ(::mkdir(D("churn").c_str(), 0755), 0);
  std::thread churn([&] {
    for (int i = 0; !stop.load(); ++i) {
      const std::string p = D("churn/c" + std::to_string(i % 8));
      (void)WriteFile(p, std::string(100 + i % 300, 'c'));
      (void)::unlink(p.c_str());
    }
  });
  for (auto& t : listers) t.join();
  stop = true;
  churn.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], "") << "lister " << t;
  EXPECT_EQ(listings.load(), 4 * 150);
}

TEST_F(FuseMountTest, PosixErrorsAndMetadataThroughTheMount) {
  // mkdir of an existing name, rmdir of a non-empty directory, type mismatches.
  ASSERT_EQ(::mkdir(D("d").c_str(), 0755), 0);
  EXPECT_EQ(::mkdir(D("d").c_str(), 0755), -1);
  EXPECT_EQ(errno, EEXIST);
  ASSERT_TRUE(WriteFile(D("d/f"), "x"));
  EXPECT_EQ(::rmdir(D("d").c_str()), -1);
  EXPECT_EQ(errno, ENOTEMPTY);
  EXPECT_EQ(::rmdir(D("d/f").c_str()), -1);
  EXPECT_EQ(errno, ENOTDIR);
  EXPECT_EQ(::unlink(D("d").c_str()), -1);
  EXPECT_EQ(errno, EISDIR);
  EXPECT_EQ(::open(D("d/f").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644), -1);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_EQ(::open(D("d/missing").c_str(), O_RDONLY), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(::open(D(std::string(256, 'n')).c_str(), O_CREAT | O_WRONLY, 0644), -1);
  EXPECT_EQ(errno, ENAMETOOLONG);
  // FIFOs and hard links are entries of the DFS (the conformance test covers them).
  EXPECT_EQ(::mkfifo(D("fifo").c_str(), 0644), 0) << std::strerror(errno);
  EXPECT_EQ(::link(D("d/f").c_str(), D("hardlink").c_str()), 0) << std::strerror(errno);
  EXPECT_EQ(ReadWholeFile(C("hardlink")), "x");
  EXPECT_EQ(::link(D("d").c_str(), D("dirlink").c_str()), -1);
  EXPECT_EQ(errno, EPERM);
  ASSERT_EQ(::unlink(D("d/f").c_str()), 0);
  EXPECT_EQ(::rmdir(D("d").c_str()), 0);

  // rename over an existing file, across directories, and its flags.
  ASSERT_EQ(::mkdir(D("r").c_str(), 0755), 0);
  ASSERT_TRUE(WriteFile(D("r/a"), "one"));
  ASSERT_TRUE(WriteFile(D("r/b"), "two"));
  ASSERT_EQ(::rename(D("r/a").c_str(), D("r/b").c_str()), 0) << std::strerror(errno);
  EXPECT_EQ(ReadWholeFile(D("r/b")), "one");
  EXPECT_FALSE(std::filesystem::exists(D("r/a")));
  ASSERT_TRUE(WriteFile(D("r/c"), "three"));
  EXPECT_EQ(::renameat2(AT_FDCWD, D("r/c").c_str(), AT_FDCWD, D("r/b").c_str(), RENAME_NOREPLACE), -1);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_EQ(::renameat2(AT_FDCWD, D("r/c").c_str(), AT_FDCWD, D("r/b").c_str(), RENAME_EXCHANGE), -1);
  EXPECT_EQ(errno, EINVAL);
  ASSERT_EQ(::mkdir(D("r2").c_str(), 0755), 0);
  ASSERT_EQ(::rename(D("r/c").c_str(), D("r2/moved").c_str()), 0);
  EXPECT_EQ(ReadWholeFile(D("r2/moved")), "three");
  EXPECT_EQ(ReadWholeFile(C("r2/moved")), "three");
  ASSERT_EQ(::rename(D("r2").c_str(), D("r/sub").c_str()), 0);  // a directory moves too
  EXPECT_EQ(ReadWholeFile(D("r/sub/moved")), "three");

  // 1,000 entries: readdir sees each once, ls counts them.
  ASSERT_EQ(::mkdir(D("many").c_str(), 0755), 0);
  for (int i = 0; i < 1000; ++i) {
    int fd = ::open(D("many/f" + std::to_string(i)).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    ASSERT_GE(fd, 0) << i << ": " << std::strerror(errno);
    ::close(fd);
  }
  DIR* dir = ::opendir(D("many").c_str());
  ASSERT_NE(dir, nullptr);
  std::vector<bool> seen(1000, false);
  int entries = 0, dots = 0;
  while (dirent* de = ::readdir(dir)) {
    std::string name = de->d_name;
    if (name == "." || name == "..") {
      ++dots;
      continue;
    }
    ASSERT_EQ(name[0], 'f') << name;
    int i = std::stoi(name.substr(1));
    EXPECT_FALSE(seen[static_cast<size_t>(i)]) << name << " listed twice";
    seen[static_cast<size_t>(i)] = true;
    ++entries;
  }
  ::closedir(dir);
  EXPECT_EQ(entries, 1000);
  EXPECT_EQ(dots, 2);
  EXPECT_EQ(Run("ls " + C("many") + " | wc -l").out, "1000\n");
  EXPECT_EQ(Run("ls -l " + D("many") + " | grep -c '^-rw-r--r--'").out, "1000\n");

  // symlink + readlink.
  ASSERT_EQ(::symlink("some/where/else", D("lnk").c_str()), 0);
  char target[64] = {};
  ASSERT_EQ(::readlink(D("lnk").c_str(), target, sizeof(target)), 15);
  EXPECT_STREQ(target, "some/where/else");
  struct stat st {};
  ASSERT_EQ(::lstat(D("lnk").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(st.st_size, 15);
}

TEST_F(FuseMountTest, AttributesSpaceAndOwnersThroughTheMount) {
  struct stat st {};
  // chmod, utimens, truncate shrink and grow (the grown part reads as zeros), stat size.
  std::string data(10000, 'a');
  ASSERT_TRUE(WriteFile(D("t"), data));
  ASSERT_EQ(::stat(D("t").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 10000);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  ASSERT_EQ(::chmod(D("t").c_str(), 0600), 0);
  ASSERT_EQ(::stat(D("t").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  struct timespec times[2] = {{1000000000, 5}, {1200000000, 7}};
  ASSERT_EQ(::utimensat(AT_FDCWD, D("t").c_str(), times, 0), 0);
  ASSERT_EQ(::stat(D("t").c_str(), &st), 0);
  EXPECT_EQ(st.st_mtim.tv_sec, 1200000000);
  EXPECT_EQ(st.st_mtim.tv_nsec, 7);
  ASSERT_EQ(Run("truncate -s 4000 " + D("t")).exit_code, 0);
  ASSERT_EQ(::stat(D("t").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 4000);
  ASSERT_EQ(Run("truncate -s 20000 " + D("t")).exit_code, 0);
  ASSERT_EQ(::stat(D("t").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 20000);
  std::string back = ReadWholeFile(D("t"));
  ASSERT_EQ(back.size(), 20000u);
  EXPECT_EQ(back.substr(0, 4000), std::string(4000, 'a'));
  EXPECT_EQ(back.substr(4000), std::string(16000, '\0'));

  // fallocate: mode 0 grows the size (what fio does before writing a new
  // file), KEEP_SIZE leaves it, a hole punch is not supported, more than the
  // pool holds is ENOSPC; the file keeps its data.
  {
    const int fd = ::open(D("t").c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fallocate(fd, 0, 16384, 65536), 0) << strerror(errno);
    ASSERT_EQ(::fstat(fd, &st), 0);
    EXPECT_EQ(st.st_size, 16384 + 65536);
    ASSERT_EQ(::fallocate(fd, 0, 0, 4096), 0) << strerror(errno);  // inside: no change
    ASSERT_EQ(::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 1 << 20), 0) << strerror(errno);
    ASSERT_EQ(::fstat(fd, &st), 0);
    EXPECT_EQ(st.st_size, 16384 + 65536);
    EXPECT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), -1);
    EXPECT_EQ(errno, EOPNOTSUPP);
    EXPECT_EQ(::fallocate(fd, 0, 0, off_t{1} << 50), -1);
    EXPECT_EQ(errno, ENOSPC);
    ::close(fd);
    std::string grown = ReadWholeFile(D("t"));
    ASSERT_EQ(grown.size(), 16384u + 65536u);
    EXPECT_EQ(grown.substr(0, 4000), std::string(4000, 'a'));
    EXPECT_EQ(grown.substr(4000), std::string(grown.size() - 4000, '\0'));
  }

  // Another user (through the --allow-other mount): the kernel checks mode
  // bits (default_permissions), and what that user creates is theirs.
  ASSERT_EQ(::chmod(cluster_->dir().c_str(), 0711), 0);  // let that user reach the mount point
  ASSERT_EQ(::mkdir(D("open").c_str(), 0777), 0);
  ASSERT_EQ(::chmod(D("open").c_str(), 0777), 0);  // past the umask
  std::string as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  CommandResult nobody =
      Run(as_nobody + "sh -c 'echo mine > " + C("open/nobody.txt") + " && mkdir " + C("open/nobody-dir") + "'");
  ASSERT_EQ(nobody.exit_code, 0) << nobody.out;
  EXPECT_EQ(Run("stat -c '%u:%g' " + D("open/nobody.txt") + " " + D("open/nobody-dir")).out,
            "65534:65534\n65534:65534\n");
  CommandResult denied = Run(as_nobody + "sh -c 'echo theirs >> " + C("t") + "'");
  EXPECT_NE(denied.exit_code, 0);
  EXPECT_NE(denied.out.find("Permission denied"), std::string::npos) << denied.out;

  // open(O_TRUNC) of an existing, longer file: the kernel leaves the
  // truncation to the open (atomic O_TRUNC), so the old tail must not survive.
  // Both mounts, O_CREAT and without, write-only and read-write, the shell's
  // `>`, and a file whose old pages sit in the page cache.
  for (const std::string& path : {D("trunc"), C("trunc")}) {
    ASSERT_TRUE(WriteFile(path, std::string(4097, 'x')));
    EXPECT_EQ(ReadWholeFile(path), std::string(4097, 'x'));  // cached mount: pages in the cache
    ASSERT_TRUE(WriteFile(path, std::string(10, 'y')));
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_size, 10) << path;
    EXPECT_EQ(ReadWholeFile(path), std::string(10, 'y')) << path;
    int fd = ::open(path.c_str(), O_RDWR | O_TRUNC);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    ASSERT_EQ(::fstat(fd, &st), 0);
    EXPECT_EQ(st.st_size, 0) << path;
    ASSERT_EQ(::write(fd, "zz", 2), 2);
    ::close(fd);
    EXPECT_EQ(ReadWholeFile(path), "zz") << path;
    ASSERT_EQ(Run("printf 'a long first line\\n' > " + path + " && echo hi > " + path).exit_code, 0);
    EXPECT_EQ(ReadWholeFile(path), "hi\n") << path;
  }
  EXPECT_EQ(ReadWholeFile(C("trunc")), "hi\n");  // the other mount agrees

  // statfs reports the pool's space.
  struct statvfs vfs {};
  ASSERT_EQ(::statvfs(direct_->path().c_str(), &vfs), 0);
  EXPECT_GT(vfs.f_blocks, 0u);
  EXPECT_LE(vfs.f_bfree, vfs.f_blocks);
  EXPECT_EQ(vfs.f_namemax, 255u);
}

// The same mount in offload mode (ROS2_AGENT_SOCKET): ros2-fuse runs the DFS
// through the cluster's ros2-agent; what ordinary programs do on it is what
// the direct mounts of the same container see.
TEST_F(FuseMountTest, OffloadMountRunsThroughTheAgent) {
  std::string error;
  auto offload = StartTestMount(*cluster_, cluster_->dir() + "/offload", {"--data-cache", "off"}, &error,
                                  {{"ROS2_AGENT_SOCKET", cluster_->dir() + "/agent.sock"}});
  ASSERT_NE(offload, nullptr) << error;
  const std::string O = offload->path();
  CommandResult work = Run("set -e; mkdir -p " + O + "/a/b; head -c 3000000 /dev/urandom > " + L("big") + "; cp " +
                           L("big") + " " + O + "/a/b/big; printf 'hello\n' > " + O + "/a/h.txt; mv " + O +
                           "/a/h.txt " + O + "/a/b/h2.txt; ln -s h2.txt " + O + "/a/b/l; cmp " + L("big") + " " + O +
                           "/a/b/big; ls " + O + "/a/b | sort | tr '\n' ' '");
  ASSERT_EQ(work.exit_code, 0) << work.out << offload->log();
  EXPECT_EQ(work.out, "big h2.txt l ");
  // The direct mount and a direct-mode client see what the agent wrote.
  EXPECT_EQ(ReadWholeFile(D("a/b/big")), ReadWholeFile(L("big")));
  EXPECT_EQ(ReadWholeFile(D("a/b/l")), "hello\n");
  ASSERT_TRUE(WriteFile(D("a/from-direct"), "direct"));
  EXPECT_EQ(ReadWholeFile(O + "/a/from-direct"), "direct");
  EXPECT_EQ(Run("rm -r " + O + "/a && ls " + D("")).out.find("a\n"), std::string::npos);
  // It went through the agent: the agent mounted the container for it.
  EXPECT_NE(ReadWholeFile(cluster_->dir() + "/agent.log").find("mounted p1/c1"), std::string::npos);
  EXPECT_EQ(offload->Stop(), 0) << offload->log();
}

// An engine killed with SIGKILL and started again (`ros2ctl cluster up` on the
// same directory) under busy mounts: the mounts carry on by themselves, with
// no remount; the roots keep answering (never ENOENT, the old symptom of a
// stale session); and every write(2) that returned is there afterwards, read
// through the mount and by `ros2ctl fs cat`. Writes in flight at the kill may
// fail (their outcome is unknown: ENOTCONN); calls made meanwhile wait for the
// engine.
// The restart runs ros2ctl forked from this process, whose exec closes copies
// of the writers' descriptors: those flushes must not wait for the engine.
TEST_F(FuseMountTest, MountsSurviveEngineKillAndRestartUnderLoad) {
  constexpr int kWriters = 3;
  constexpr size_t kRecord = 65536;
  auto record = [](int w, uint64_t k) {
    std::string s;
    while (s.size() < kRecord) s += "writer " + std::to_string(w) + " record " + std::to_string(k) + ";";
    s.resize(kRecord);
    return s;
  };
  std::mutex mu;
  std::vector<std::vector<uint64_t>> acked(kWriters);
  std::vector<int> errors;  // errno of every failed call, from all threads
  std::atomic<uint64_t> total_acked{0};
  std::atomic<bool> stop{false};
  std::vector<int> fds;
  for (int w = 0; w < kWriters; ++w) {
    // O_CLOEXEC: the engine restarted below (through ros2ctl, forked from
    // this process) must not inherit them and keep the mount busy.
    int fd = ::open(D("busy-" + std::to_string(w)).c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    fds.push_back(fd);
  }
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (uint64_t k = 0; !stop.load(); ++k) {
        const std::string data = record(w, k);
        ssize_t n = ::pwrite(fds[w], data.data(), data.size(), static_cast<off_t>(k * kRecord));
        const int err = errno;
        std::lock_guard<std::mutex> lock(mu);
        if (n == static_cast<ssize_t>(kRecord)) {
          acked[w].push_back(k);
          ++total_acked;
        } else {
          errors.push_back(n < 0 ? err : EIO);
        }
      }
    });
  }
  // Metadata on both mounts meanwhile: the roots and a listing.
  threads.emplace_back([&] {
    while (!stop.load()) {
      for (const std::string& root : {direct_->path(), cached_->path()}) {
        struct stat st {};
        int rc = ::stat(root.c_str(), &st);
        const int err = errno;
        if (rc != 0) {
          std::lock_guard<std::mutex> lock(mu);
          errors.push_back(err);
        }
        DIR* d = ::opendir(root.c_str());
        if (d == nullptr) {
          std::lock_guard<std::mutex> lock(mu);
          errors.push_back(errno);
          continue;
        }
        while (::readdir(d) != nullptr) {
        }
        ::closedir(d);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  struct StopAndJoin {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    std::vector<int>& fds;
    ~StopAndJoin() {
      stop.store(true);
      for (auto& t : threads)
        if (t.joinable()) t.join();
      for (int fd : fds) ::close(fd);
    }
  } stop_and_join{stop, threads, fds};
  auto wait_for = [&](uint64_t n, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (total_acked.load() < n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return total_acked.load() >= n;
  };
  ASSERT_TRUE(wait_for(60, std::chrono::seconds(60)));

  ASSERT_TRUE(cluster_->KillEngine());
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the mounts see the engine gone
  CommandResult up = cluster_->Ctl({"--json", "cluster", "up", "--targets", "2", "--class", "nvme", "--transport",
                                    "auto", "--shard-size", "2GiB", "--engine", ROS2_ENGINE_PATH, "--timeout", "60"});
  ASSERT_EQ(up.exit_code, 0) << up.err << up.out;
  const uint64_t at_restart = total_acked.load();
  EXPECT_TRUE(wait_for(at_restart + 60, std::chrono::seconds(120)))
      << total_acked.load() << " writes acknowledged, " << at_restart << " at the restart; log: " << direct_->log();
  stop.store(true);
  for (auto& t : threads) t.join();
  threads.clear();

  // The roots answer on both mounts, without a remount.
  for (FuseMount* mount : {direct_.get(), cached_.get()}) {
    struct stat st {};
    ASSERT_EQ(::stat(mount->path().c_str(), &st), 0)
        << mount->path() << ": " << std::strerror(errno) << "; log: " << mount->log();
    EXPECT_TRUE(S_ISDIR(st.st_mode));
  }
  EXPECT_EQ(Run("ls " + cached_->path() + " | grep -c '^busy-'").out, std::to_string(kWriters) + "\n");
  // Failures are few and never ENOENT.
  for (int e : errors) EXPECT_NE(e, ENOENT) << std::strerror(e);
  EXPECT_LE(errors.size(), 20u);

  // Every acknowledged write is there: read through the mount (no data
  // cache) and by a separate client, `ros2ctl fs cat`.
  for (int w = 0; w < kWriters; ++w) {
    ASSERT_GT(acked[w].size(), 10u) << "writer " << w;
    const std::string name = "busy-" + std::to_string(w);
    CommandResult cat = cluster_->Ctl({"fs", "cat", "p1", "c1", "/" + name});
    ASSERT_EQ(cat.exit_code, 0) << cat.err;
    for (const std::string& content : {ReadWholeFile(D(name)), cat.out}) {
      for (uint64_t k : acked[w]) {
        ASSERT_GE(content.size(), (k + 1) * kRecord) << "writer " << w << " record " << k;
        ASSERT_EQ(content.substr(k * kRecord, kRecord), record(w, k)) << "writer " << w << " record " << k;
      }
    }
  }
}

}  // namespace
}  // namespace ros2::fuse
