// `ros2ctl fs` end to end against a real single-node cluster: a local tree
// (nested directories, empty files, a multi-chunk file, a symlink, odd modes)
// goes in with `put -r` and comes back with `get -r` byte-exact and
// mode-exact; ls, stat, cat, mv, mkdir -p and rm -r give the expected output
// (text and --json) and their errors exit 1 naming the path and the errno
// text; usage mistakes exit 2.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "testing/test_cluster.h"

namespace ros2::ctl {
namespace {

using ros2::testing::CommandResult;
using ros2::testing::TestCluster;
namespace stdfs = std::filesystem;

#define EXPECT_FAILS_WITH(result, code, text)                                        \
  do {                                                                               \
    const CommandResult& r_ = (result);                                              \
    EXPECT_EQ(r_.exit_code, code) << "stdout: " << r_.out << "\nstderr: " << r_.err; \
    EXPECT_NE(r_.err.find(text), std::string::npos) << "stderr: " << r_.err;         \
  } while (0)

void WriteFile(const std::string& path, const std::string& data, mode_t mode) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;
}

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// Every entry below `root`: relative path -> "type mode content-or-target".
void Describe(const std::string& root, const std::string& rel, std::map<std::string, std::string>& out) {
  DIR* d = ::opendir((root + "/" + rel).c_str());
  ASSERT_NE(d, nullptr) << root << "/" << rel;
  std::vector<std::string> names;
  while (struct dirent* de = ::readdir(d)) {
    std::string n = de->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  for (const auto& n : names) {
    const std::string r = rel.empty() ? n : rel + "/" + n;
    const std::string path = root + "/" + r;
    struct stat st {};
    ASSERT_EQ(::lstat(path.c_str(), &st), 0) << path;
    std::string desc;
    if (S_ISDIR(st.st_mode)) {
      desc = "dir";
      Describe(root, r, out);
    } else if (S_ISLNK(st.st_mode)) {
      desc = "symlink " + stdfs::read_symlink(path).string();
    } else {
      desc = "file " + ros2::testing::ReadWholeFile(path);
    }
    if (!S_ISLNK(st.st_mode)) desc += " mode=" + std::to_string(st.st_mode & 07777);
    out[r] = desc;
  }
}

std::map<std::string, std::string> Describe(const std::string& root) {
  std::map<std::string, std::string> out;
  Describe(root, "", out);
  return out;
}

class FsCommandTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string error;
    cluster_ = TestCluster::Start("auto", 2, &error).release();
    ASSERT_NE(cluster_, nullptr) << error;
    CommandResult pool = cluster_->Ctl({"pool", "create", "p", "--size", "100MiB"});
    ASSERT_EQ(pool.exit_code, 0) << pool.err;
    CommandResult cont = cluster_->Ctl({"cont", "create", "p", "c"});
    ASSERT_EQ(cont.exit_code, 0) << cont.err;
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(cluster_, nullptr); }

  static CommandResult Fs(std::vector<std::string> args, bool json = false) {
    args.insert(args.begin(), "fs");
    if (json) args.insert(args.begin(), "--json");
    return cluster_->Ctl(args);
  }
  static std::string Scratch(const std::string& name) { return cluster_->scratch() + "/" + name; }

  static TestCluster* cluster_;
};
TestCluster* FsCommandTest::cluster_ = nullptr;

TEST_F(FsCommandTest, TreeRoundTripsByteAndModeExact) {
  const std::string src = Scratch("tree");
  stdfs::create_directories(src + "/a/b/c");
  stdfs::create_directories(src + "/empty-dir");
  stdfs::create_directories(src + "/locked");
  WriteFile(src + "/empty", "", 0644);
  WriteFile(src + "/a/b/c/empty-too", "", 0600);
  WriteFile(src + "/a/small.txt", "hello, dfs\n", 0640);
  WriteFile(src + "/a/b/tool.sh", "#!/bin/sh\necho hi\n", 0755);
  // 3 MiB + 12345 bytes: four 1 MiB chunks, the last one partial.
  WriteFile(src + "/a/b/big.bin", RandomBytes((3u << 20) + 12345, 7), 0644);
  WriteFile(src + "/locked/readonly", "ro", 0444);
  ASSERT_EQ(::chmod((src + "/locked").c_str(), 0555), 0);
  ASSERT_EQ(::chmod((src + "/a/b").c_str(), 0750), 0);
  ASSERT_EQ(::symlink("b/big.bin", (src + "/a/link").c_str()), 0);
  ASSERT_EQ(::symlink("/nonexistent/target", (src + "/dangling").c_str()), 0);

  CommandResult put = Fs({"put", "-r", "p", "c", src, "/"}, /*json=*/true);
  ASSERT_EQ(put.exit_code, 0) << put.err;
  auto pj = put.Json();
  ASSERT_FALSE(pj.is_discarded()) << put.out;
  EXPECT_EQ(pj["destination"], "/tree");
  EXPECT_EQ(pj["files"], 6u);
  EXPECT_EQ(pj["directories"], 6u);
  EXPECT_EQ(pj["symlinks"], 2u);
  EXPECT_EQ(pj["bytes"].get<uint64_t>(), (3u << 20) + 12345 + 11 + 18 + 2);

  const std::string out = Scratch("out");
  stdfs::create_directories(out);
  CommandResult get = Fs({"get", "-r", "p", "c", "/tree", out}, /*json=*/true);
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(get.Json()["destination"], out + "/tree");

  auto want = Describe(src);
  auto got = Describe(out + "/tree");
  EXPECT_EQ(want.size(), 13u);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [path, d] : want) {
    ASSERT_TRUE(got.contains(path)) << path;
    EXPECT_TRUE(got[path] == d) << path << ": got " << got[path].substr(0, 80) << " want " << d.substr(0, 80);
  }
  struct stat top {};
  ASSERT_EQ(::stat((out + "/tree/locked").c_str(), &top), 0);
  EXPECT_EQ(top.st_mode & 07777, 0555u);

  // A single file to a new name, and cat of the multi-chunk file.
  CommandResult one = Fs({"put", "p", "c", src + "/a/small.txt", "/renamed.txt"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("put " + src + "/a/small.txt -> /renamed.txt: 1 file"), std::string::npos) << one.out;
  CommandResult cat = Fs({"cat", "p", "c", "/tree/a/b/big.bin"});
  ASSERT_EQ(cat.exit_code, 0) << cat.err;
  EXPECT_TRUE(cat.out == ros2::testing::ReadWholeFile(src + "/a/b/big.bin")) << "cat differs, " << cat.out.size();

  // Directories need -r; the progress line shows when asked for.
  EXPECT_FAILS_WITH(Fs({"put", "p", "c", src, "/again"}), 1, "use -r");
  EXPECT_FAILS_WITH(Fs({"get", "p", "c", "/tree", Scratch("again")}), 1, "Is a directory");
  CommandResult progress = Fs({"put", "--progress", "p", "c", src + "/a/b/big.bin", "/big-again"});
  ASSERT_EQ(progress.exit_code, 0) << progress.err;
  EXPECT_NE(progress.err.find("100%"), std::string::npos) << progress.err;
  EXPECT_NE(progress.err.find("ETA"), std::string::npos) << progress.err;
  CommandResult quiet = Fs({"put", "--quiet", "p", "c", src + "/a/b/big.bin", "/big-again"});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find("ETA"), std::string::npos) << quiet.err;
  EXPECT_FAILS_WITH(Fs({"put", "p", "c", Scratch("no-such-local"), "/x"}), 1, "No such file or directory");
}

TEST_F(FsCommandTest, ListStatCatMoveMkdirRemove) {
  ASSERT_EQ(Fs({"mkdir", "-p", "p", "c", "/d1/d2/d3"}).exit_code, 0);
  CommandResult again = Fs({"mkdir", "-p", "p", "c", "/d1/d2"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_FAILS_WITH(Fs({"mkdir", "p", "c", "/d1"}), 1, "mkdir '/d1': File exists");
  EXPECT_FAILS_WITH(Fs({"mkdir", "p", "c", "/nope/sub"}), 1, "No such file or directory");
  const std::string local = Scratch("hello.txt");
  WriteFile(local, "hello world\n", 0600);
  ASSERT_EQ(Fs({"put", "p", "c", local, "/d1/hello.txt"}).exit_code, 0);
  EXPECT_FAILS_WITH(Fs({"mkdir", "-p", "p", "c", "/d1/hello.txt/x"}), 1, "Not a directory");

  // ls: names, long format, JSON.
  CommandResult ls = Fs({"ls", "p", "c", "/d1"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_EQ(ls.out, "d2\nhello.txt\n");
  CommandResult ll = Fs({"ls", "-l", "p", "c", "/d1"});
  ASSERT_EQ(ll.exit_code, 0) << ll.err;
  EXPECT_NE(ll.out.find("drwxr-xr-x"), std::string::npos) << ll.out;
  EXPECT_NE(ll.out.find("-rw------- "), std::string::npos) << ll.out;
  EXPECT_NE(ll.out.find(" 12 "), std::string::npos) << ll.out;
  CommandResult lj = Fs({"ls", "-l", "p", "c", "/d1"}, /*json=*/true);
  ASSERT_EQ(lj.exit_code, 0) << lj.err;
  auto entries = lj.Json()["entries"];
  ASSERT_EQ(entries.size(), 2u) << lj.out;
  EXPECT_EQ(entries[0]["name"], "d2");
  EXPECT_EQ(entries[0]["type"], "dir");
  EXPECT_EQ(entries[1]["name"], "hello.txt");
  EXPECT_EQ(entries[1]["type"], "file");
  EXPECT_EQ(entries[1]["mode"], "0600");
  EXPECT_EQ(entries[1]["size"], 12u);
  CommandResult root = Fs({"ls", "p", "c"}, /*json=*/true);
  ASSERT_EQ(root.exit_code, 0) << root.err;
  EXPECT_EQ(root.Json()["path"], "/");
  EXPECT_FAILS_WITH(Fs({"ls", "p", "c", "/missing"}), 1, "ls '/missing': No such file or directory");

  // stat and cat.
  CommandResult st = Fs({"stat", "p", "c", "/d1/hello.txt"}, /*json=*/true);
  ASSERT_EQ(st.exit_code, 0) << st.err;
  auto sj = st.Json();
  EXPECT_EQ(sj["type"], "file");
  EXPECT_EQ(sj["size"], 12u);
  EXPECT_EQ(sj["mode"], "0600");
  EXPECT_EQ(sj["uid"], ::getuid());
  EXPECT_GT(sj["ino"].get<uint64_t>(), 1u);
  CommandResult st_text = Fs({"stat", "p", "c", "/d1"});
  ASSERT_EQ(st_text.exit_code, 0) << st_text.err;
  EXPECT_NE(st_text.out.find("Type: directory"), std::string::npos) << st_text.out;
  EXPECT_NE(st_text.out.find("(0755/drwxr-xr-x)"), std::string::npos) << st_text.out;
  CommandResult cat = Fs({"cat", "p", "c", "/d1/hello.txt"});
  ASSERT_EQ(cat.exit_code, 0) << cat.err;
  EXPECT_EQ(cat.out, "hello world\n");
  EXPECT_FAILS_WITH(Fs({"cat", "p", "c", "/d1"}), 1, "cat '/d1': Is a directory");
  EXPECT_FAILS_WITH(Fs({"stat", "p", "c", "/d1/nothing"}), 1, "stat '/d1/nothing': No such file or directory");
  CommandResult err_json = Fs({"stat", "p", "c", "/d1/nothing"}, /*json=*/true);
  EXPECT_EQ(err_json.Json()["error"]["code"], "NotFound") << err_json.out;

  // mv: rename, then into an existing directory.
  ASSERT_EQ(Fs({"mv", "p", "c", "/d1/hello.txt", "/d1/hi.txt"}).exit_code, 0);
  CommandResult into = Fs({"mv", "p", "c", "/d1/hi.txt", "/d1/d2"}, /*json=*/true);
  ASSERT_EQ(into.exit_code, 0) << into.err;
  EXPECT_EQ(into.Json()["destination"], "/d1/d2/hi.txt");
  EXPECT_EQ(Fs({"cat", "p", "c", "/d1/d2/hi.txt"}).out, "hello world\n");
  EXPECT_FAILS_WITH(Fs({"stat", "p", "c", "/d1/hello.txt"}), 1, "No such file or directory");
  EXPECT_FAILS_WITH(Fs({"mv", "p", "c", "/d1/gone", "/d1/x"}), 1, "mv '/d1/gone': No such file or directory");

  // rm: a non-empty directory needs -r; -f ignores a missing path.
  EXPECT_FAILS_WITH(Fs({"rm", "p", "c", "/d1"}), 1, "Directory not empty");
  CommandResult still = Fs({"ls", "p", "c", "/d1/d2"});
  EXPECT_EQ(still.out, "d3\nhi.txt\n");
  ASSERT_EQ(Fs({"rm", "p", "c", "/d1/d2/d3"}).exit_code, 0);  // empty directory
  CommandResult rmr = Fs({"rm", "-r", "p", "c", "/d1"}, /*json=*/true);
  ASSERT_EQ(rmr.exit_code, 0) << rmr.err;
  EXPECT_EQ(rmr.Json()["removed"], 3u);
  EXPECT_FAILS_WITH(Fs({"stat", "p", "c", "/d1"}), 1, "stat '/d1': No such file or directory");
  EXPECT_FAILS_WITH(Fs({"rm", "p", "c", "/d1"}), 1, "rm '/d1': No such file or directory");
  EXPECT_EQ(Fs({"rm", "-f", "p", "c", "/d1"}).exit_code, 0);
  EXPECT_FAILS_WITH(Fs({"rm", "-r", "p", "c", "/"}), 1, "root");
}

TEST_F(FsCommandTest, UsageAndTargetErrors) {
  EXPECT_FAILS_WITH(Fs({"lss", "p", "c", "/"}), 2, "lss");
  EXPECT_FAILS_WITH(Fs({"ls", "-z", "p", "c"}), 2, "-z");
  EXPECT_FAILS_WITH(Fs({"put", "p", "c", "onlyone"}), 2, "remote");
  EXPECT_FAILS_WITH(Fs({"ls", "nosuchpool", "c"}), 1, "nosuchpool");
  EXPECT_FAILS_WITH(Fs({"ls", "p", "nosuchcont"}), 1, "nosuchcont");
  EXPECT_FAILS_WITH(Fs({"mkdir", "-m", "9z", "p", "c", "/m"}), 1, "bad --mode '9z'");
}

// An encrypted container through the CLI: `key create`, `cont create -p
// encryption=aes-256-gcm`, then fs commands with --key-file; without the key
// the mount is refused naming the key id.
TEST_F(FsCommandTest, EncryptedContainerWithKeyFile) {
  const std::string key = Scratch("team.key");
  CommandResult made = cluster_->Ctl({"key", "create", "--out", key});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  struct stat st {};
  ASSERT_EQ(::stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FAILS_WITH(cluster_->Ctl({"key", "create", "--out", key}), 1, "exists");
  CommandResult cont =
      cluster_->Ctl({"cont", "create", "p", "enc", "-p", "encryption=aes-256-gcm", "-p", "encryption_key_id=team"});
  ASSERT_EQ(cont.exit_code, 0) << cont.err;
  CommandResult query = cluster_->Ctl({"--json", "cont", "query", "p", "enc"});
  ASSERT_EQ(query.exit_code, 0) << query.err;
  EXPECT_EQ(query.Json()["properties"]["encryption"], "aes-256-gcm");
  EXPECT_EQ(query.Json()["properties"]["encryption_key_id"], "team");
  const std::string local = Scratch("enc-src");
  const std::string data = RandomBytes(70000, 7);
  WriteFile(local, data, 0644);
  CommandResult put = Fs({"--key-file", key, "put", "p", "enc", local, "/f", "-q"});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  CommandResult cat = Fs({"--key-file", key, "cat", "p", "enc", "/f"});
  ASSERT_EQ(cat.exit_code, 0) << cat.err;
  EXPECT_EQ(cat.out, data);
  EXPECT_FAILS_WITH(Fs({"cat", "p", "enc", "/f"}), 1, "key id 'team'");
}

}  // namespace
}  // namespace ros2::ctl
