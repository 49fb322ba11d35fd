// Security properties of a VOS store on disk: private files (finding: data
// readable by every local user), the WAL-only extent durability only where it
// holds (O_DIRECT), and the epoch high-water mark that survives a reopen.
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "vos/fault_injection_env.h"
#include "vos/vos_test_util.h"

namespace ros2::vos {
namespace {

using namespace testing;  // the VOS test helpers (vos_test_util.h)

Result<std::unique_ptr<Vos>> OpenWith(const std::string& dir, Env* env, ExtentSync sync) {
  VosOptions o = testing::SmallOptions(dir);
  o.env = env;
  o.extent_sync = sync;
  return Vos::Open(o);
}

TEST(VosSecurity, WalExtentSyncIsUsedOnlyWithODirect) {
  // extent_sync wal skips the data file's fdatasync: the WAL sync's device
  // flush covers extents written with O_DIRECT. Written through the page
  // cache (a file system that refused O_DIRECT), they are not on the device
  // at that flush: the store must fall back to a data fdatasync per group.
  testing::TempDir dir;
  FaultInjectionEnv env;
  {
    auto v = OpenWith(dir.path() + "/direct", &env, ExtentSync::kWal);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    WarmDataFile(v->get(), 1 << 20);  // space written once: no first-write sync
    env.Reset();
    ASSERT_TRUE(PutSingle(v->get(), TestOid(1), "d", "a", 10, Pattern(64 << 10, 1)).ok());
    EXPECT_EQ(env.syncs(), 0u) << "O_DIRECT: the WAL sync covers the extent (no data fdatasync)";
  }
  env.SetRefuseDirect(true);
  const std::string buffered = dir.path() + "/buffered";
  {
    auto v = OpenWith(buffered, &env, ExtentSync::kWal);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    env.Reset();
    const auto value = Pattern(64 << 10, 2);
    ASSERT_TRUE(PutSingle(v->get(), TestOid(2), "d", "a", 10, value).ok());
    EXPECT_EQ(env.syncs(), 1u) << "buffered extent writes: the group must fdatasync the data file before its commit";
    auto r = GetSingle(v->get(), TestOid(2), "d", "a", kEpochMax);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, value);
  }
}

TEST(VosSecurity, StoreFilesArePrivate) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/a/b/store";
  VosOptions o = testing::SmallOptions(dir.path());
  o.path = path;
  {
    auto v = Vos::Open(o);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    ASSERT_TRUE(PutSingle(v->get(), TestOid(3), "d", "small", 10, Pattern(100, 3)).ok());
    ASSERT_TRUE(PutSingle(v->get(), TestOid(3), "d", "large", 11, Pattern(64 << 10, 4)).ok());
  }
  int files = 0;
  for (const std::string& d : {dir.path() + "/a", dir.path() + "/a/b", path}) {
    struct stat st {};
    ASSERT_EQ(::stat(d.c_str(), &st), 0) << d;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << d << fmt::format(" has mode {:o}", st.st_mode & 0777);
  }
  for (const auto& entry : std::filesystem::recursive_directory_iterator(path)) {
    struct stat st {};
    ASSERT_EQ(::lstat(entry.path().c_str(), &st), 0);
    if (S_ISLNK(st.st_mode)) continue;
    const mode_t want = S_ISDIR(st.st_mode) ? 0700 : 0600;
    EXPECT_EQ(st.st_mode & 0077, 0u) << entry.path()
                                     << fmt::format(" has mode {:o}, want {:o}", st.st_mode & 0777, want);
    ++files;
  }
  EXPECT_GT(files, 3) << "the data file and RocksDB's files were checked";
}

TEST(VosSecurity, HighestEpochSurvivesReopen) {
  testing::TempDir dir;
  VosOptions o = testing::SmallOptions(dir.path());
  const Epoch high = MakeEpoch(uint64_t{1} << 44, 7);
  {
    auto v = Vos::Open(o);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ((*v)->HighestEpoch(), 0u);
    ASSERT_TRUE(PutSingle(v->get(), TestOid(4), "d", "a", high, Pattern(100, 5)).ok());
    ASSERT_TRUE(PutSingle(v->get(), TestOid(4), "d", "b", 5, Pattern(100, 6)).ok());
    ASSERT_TRUE((*v)->PunchAkey(TestOid(4), "d", "c", 9).ok());
    EXPECT_EQ((*v)->HighestEpoch(), high);
  }
  auto v = Vos::Open(o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ((*v)->HighestEpoch(), high) << "the high-water mark must survive a reopen";
  ASSERT_TRUE((*v)->PunchAkey(TestOid(4), "d", "a", high + 1).ok());
  v->reset();
  auto again = Vos::Open(o);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->HighestEpoch(), high + 1) << "punches raise it too";
}

}  // namespace
}  // namespace ros2::vos
