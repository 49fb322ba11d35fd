// Differential test of a ros2-fuse mount against a local directory: the same
// random sequence of system calls (create, write, pwrite, append, truncate,
// rename, unlink, mkdir, rmdir, symlink, link, chmod, stat, readdir, read) is
// applied to both trees, and every result (return value, errno, data read,
// the stat fields a POSIX file system must agree on, directory listings) and
// finally the whole trees are compared. Several seeds, thousands of
// operations each; a mismatch names the seed, the step and the operation, so
// a failure is reproduced by running that seed alone.
//
// Not compared (documented in docs/fuse.md): timestamps (ordered by the
// conformance test instead), st_ino/st_dev/st_blocks, and a directory's
// size.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "testing/fuse_mount.h"

namespace ros2::fuse {
namespace {

using namespace ros2::testing;  // the harness (src/testing)

// What one system call returned, in a form both trees must agree on.
struct Outcome {
  long long ret = 0;
  int err = 0;
  std::string data;  // bytes read, a listing, or the stat fields compared
  bool operator==(const Outcome&) const = default;
};

std::string Show(const Outcome& o) {
  std::string d = o.data.size() > 200 ? o.data.substr(0, 200) + "..." : o.data;
  for (char& c : d) {
    if (c != '\n' && (c < 32 || c > 126)) c = '.';
  }
  return fmt::format("ret={} errno={} ({}) data[{}]='{}'", o.ret, o.err, o.err ? std::strerror(o.err) : "-",
                     o.data.size(), d);
}

Outcome Result(long long ret) {
  Outcome o;
  o.ret = ret < 0 ? -1 : ret;
  o.err = ret < 0 ? errno : 0;
  return o;
}

// The stat fields both trees must agree on.
std::string StatFields(const struct stat& st) {
  std::string s = fmt::format("mode={:o} uid={} gid={}", st.st_mode, st.st_uid, st.st_gid);
  s += fmt::format(" nlink={}", st.st_nlink);  // a directory's: 2 + its subdirectories
  if (!S_ISDIR(st.st_mode)) s += fmt::format(" size={}", st.st_size);
  return s;
}

Outcome DoLstat(const std::string& path) {
  struct stat st {};
  Outcome o = Result(::lstat(path.c_str(), &st));
  if (o.ret == 0) o.data = StatFields(st);
  return o;
}

Outcome DoReadAll(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return Result(-1);
  Outcome o;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      o = Result(-1);
      break;
    }
    if (n == 0) break;
    o.data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  o.ret = static_cast<long long>(o.data.size());
  return o;
}

Outcome DoListing(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return Result(-1);
  std::vector<std::string> names;
  while (dirent* de = ::readdir(d)) names.emplace_back(de->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  Outcome o;
  for (const auto& n : names) o.data += n + "\n";
  o.ret = static_cast<long long>(names.size());
  return o;
}

// open + pwrite/write + close; `flags` picks create/truncate/append.
Outcome DoWrite(const std::string& path, int flags, off_t offset, const std::string& data) {
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) return Result(-1);
  ssize_t n = (flags & O_APPEND) != 0 || offset < 0 ? ::write(fd, data.data(), data.size())
                                                    : ::pwrite(fd, data.data(), data.size(), offset);
  Outcome o = Result(n);
  if (::close(fd) != 0 && o.err == 0) o = Result(-1);
  return o;
}

// A recursive description of a tree: every path, its type, mode, size, link
// count (non-directories), a symlink's target and a file's bytes.
void Describe(const std::string& root, const std::string& rel, std::map<std::string, std::string>& out) {
  std::string path = rel.empty() ? root : root + "/" + rel;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    out[rel] = fmt::format("lstat failed: {}", std::strerror(errno));
    return;
  }
  std::string d = StatFields(st);
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    ssize_t n = ::readlink(path.c_str(), target, sizeof(target));
    d += " -> " + std::string(target, n > 0 ? static_cast<size_t>(n) : 0);
  } else if (S_ISREG(st.st_mode)) {
    Outcome content = DoReadAll(path);
    d += fmt::format(" content-hash={:x}", std::hash<std::string>{}(content.data));
  }
  out[rel] = d;
  if (!S_ISDIR(st.st_mode)) return;
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return;
  std::vector<std::string> names;
  while (dirent* de = ::readdir(dir)) {
    std::string n = de->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(dir);
  for (const auto& n : names) Describe(root, rel.empty() ? n : rel + "/" + n, out);
}

// Picks paths from a small name space (depth up to 3, six names a level) so
// that operations keep meeting each other's results: existing files,
// directories, symlinks, missing names and non-directory components.
class PathPicker {
 public:
  explicit PathPicker(std::mt19937_64& rng) : rng_(rng) {}
  std::string Pick() {
    static const char* kNames[] = {"a", "b", "c", "d", "e", "f"};
    int depth = 1 + static_cast<int>(rng_() % 100 < 45 ? 0 : (rng_() % 100 < 70 ? 1 : 2));
    std::string p;
    for (int i = 0; i < depth; ++i) {
      if (!p.empty()) p += "/";
      p += kNames[rng_() % 6];
    }
    return p;
  }

 private:
  std::mt19937_64& rng_;
};

class FuseDifferentialTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    cluster_ = StartNvmeClusterWithContainer(&error);
    ASSERT_NE(cluster_, nullptr) << error;
    mount_ = StartTestMount(*cluster_, cluster_->dir() + "/mnt", {}, &error);
    ASSERT_NE(mount_, nullptr) << error;
    direct_ = StartTestMount(*cluster_, cluster_->dir() + "/direct", {"--data-cache", "off"}, &error);
    ASSERT_NE(direct_, nullptr) << error;
  }

  void TearDown() override {
    for (auto* m : {&mount_, &direct_}) {
      if (!*m) continue;
      EXPECT_EQ((*m)->Stop(), 0) << (*m)->log();
      EXPECT_FALSE(IsMounted((*m)->path()));
    }
  }

  // Runs `steps` random operations with `seed` under <mount>/<seed> and
  // local/<seed>; returns the number of mismatches (each reported).
  int RunSeed(const FuseMount& mount, uint64_t seed, int steps);

  std::unique_ptr<TestCluster> cluster_;
  std::unique_ptr<FuseMount> mount_;   // the defaults: page cache on
  std::unique_ptr<FuseMount> direct_;  // --data-cache off: every read and write reaches the DFS
};

int FuseDifferentialTest::RunSeed(const FuseMount& mount, uint64_t seed, int steps) {
  const std::string name = "seed" + std::to_string(seed);
  const std::string roots[2] = {mount.path() + "/" + name, cluster_->dir() + "/local/" + name};
  std::filesystem::create_directories(roots[1]);
  EXPECT_EQ(::mkdir(roots[0].c_str(), 0755), 0) << std::strerror(errno);
  std::mt19937_64 rng(seed);
  PathPicker picker(rng);
  int mismatches = 0;
  std::map<std::string, int> counts;
  for (int step = 0; step < steps && mismatches < 5; ++step) {
    const std::string p = picker.Pick();
    const std::string q = picker.Pick();
    const int op = static_cast<int>(rng() % 100);
    std::string data;
    const size_t len = rng() % 4 == 0 ? rng() % 70000 : rng() % 5000;
    data.resize(len);
    for (auto& c : data) c = static_cast<char>('A' + rng() % 26);
    const off_t offset = static_cast<off_t>(rng() % 200000);
    const off_t size = static_cast<off_t>(rng() % 3 == 0 ? rng() % 1500000 : rng() % 9000);
    const mode_t mode = static_cast<mode_t>(rng() % 01000);
    const bool excl = rng() % 4 == 0;
    const bool flag = rng() % 2 == 0;  // append creates, symlink target one level up, readdir of the root
    std::string what;
    Outcome out[2];
    for (int side = 0; side < 2; ++side) {
      const std::string a = roots[side] + "/" + p;
      const std::string b = roots[side] + "/" + q;
      if (op < 12) {
        what = fmt::format("create{} {} ({} bytes)", excl ? "(O_EXCL)" : "", p, len);
        out[side] = DoWrite(a, O_WRONLY | O_CREAT | O_TRUNC | (excl ? O_EXCL : 0), -1, data);
      } else if (op < 22) {
        what = fmt::format("pwrite {} at {} ({} bytes)", p, offset, len);
        out[side] = DoWrite(a, O_WRONLY, offset, data);
      } else if (op < 28) {
        what = fmt::format("append {} ({} bytes)", p, len);
        out[side] = DoWrite(a, O_WRONLY | O_APPEND | (flag ? O_CREAT : 0), -1, data);
      } else if (op < 34) {
        what = fmt::format("truncate {} to {}", p, size);
        out[side] = Result(::truncate(a.c_str(), size));
      } else if (op < 42) {
        what = fmt::format("rename {} -> {}", p, q);
        out[side] = Result(::rename(a.c_str(), b.c_str()));
      } else if (op < 48) {
        what = fmt::format("unlink {}", p);
        out[side] = Result(::unlink(a.c_str()));
      } else if (op < 56) {
        what = fmt::format("mkdir {}", p);
        out[side] = Result(::mkdir(a.c_str(), 0755));
      } else if (op < 60) {
        what = fmt::format("rmdir {}", p);
        out[side] = Result(::rmdir(a.c_str()));
      } else if (op < 64) {
        // Relative targets: a sibling, one from another level, or nothing there.
        const std::string target = flag ? "../" + q : q.substr(q.rfind('/') + 1);
        what = fmt::format("symlink {} -> {}", p, target);
        out[side] = Result(::symlink(target.c_str(), a.c_str()));
      } else if (op < 70) {
        what = fmt::format("link {} -> {}", q, p);
        out[side] = Result(::link(b.c_str(), a.c_str()));
      } else if (op < 75) {
        what = fmt::format("chmod {} {:o}", p, mode | 0700);
        out[side] = Result(::chmod(a.c_str(), mode | 0700));  // owner keeps access: root tests the bits only
      } else if (op < 85) {
        what = fmt::format("lstat {}", p);
        out[side] = DoLstat(a);
      } else if (op < 90) {
        what = fmt::format("readdir {}", p);
        out[side] = DoListing(flag && excl ? roots[side] : a);
      } else {
        what = fmt::format("read {}", p);
        out[side] = DoReadAll(a);
      }
    }
    ++counts[what.substr(0, what.find(' '))];
    if (!(out[0] == out[1])) {
      ++mismatches;
      ADD_FAILURE() << "seed " << seed << " step " << step << ": " << what << "\n  mount: " << Show(out[0])
                    << "\n  local: " << Show(out[1]);
    }
  }
  std::map<std::string, std::string> trees[2];
  for (int side = 0; side < 2; ++side) Describe(roots[side], "", trees[side]);
  for (const auto& [path, d] : trees[1]) {
    auto it = trees[0].find(path);
    if (it == trees[0].end()) {
      ++mismatches;
      ADD_FAILURE() << "seed " << seed << ": '" << path << "' missing on the mount (local: " << d << ")";
    } else if (path.empty()) {
      continue;  // the seed's root: created differently on each side
    } else if (it->second != d) {
      ++mismatches;
      ADD_FAILURE() << "seed " << seed << ": '" << path << "' differs\n  mount: " << it->second << "\n  local: " << d;
    }
  }
  for (const auto& [path, d] : trees[0]) {
    if (!trees[1].count(path)) {
      ++mismatches;
      ADD_FAILURE() << "seed " << seed << ": '" << path << "' only on the mount: " << d;
    }
  }
  std::string summary;
  for (const auto& [k, v] : counts) summary += fmt::format(" {}={}", k, v);
  std::printf("seed %llu: %d steps, %zu paths at the end,%s\n", static_cast<unsigned long long>(seed), steps,
              trees[1].size(), summary.c_str());
  return mismatches;
}

TEST_F(FuseDifferentialTest, RandomOperationsMatchALocalDirectory) {
  constexpr int kSteps = 2500;
  for (uint64_t seed : {1, 2, 3, 4, 5}) EXPECT_EQ(RunSeed(*mount_, seed, kSteps), 0) << "seed " << seed;
  // And one through the mount without a data cache.
  EXPECT_EQ(RunSeed(*direct_, 6, kSteps), 0) << "seed 6 (--data-cache off)";
}

}  // namespace
}  // namespace ros2::fuse
