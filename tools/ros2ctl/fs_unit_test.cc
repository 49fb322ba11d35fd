// The parts of `ros2ctl fs` that need no cluster: remote path normalization
// and splitting, POSIX-style error messages, ls/stat formatting and the
// progress line.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "fs_listing.h"
#include "fs_progress.h"
#include "fs_session.h"

namespace ros2::ctl {
namespace {

TEST(FsPathTest, NormalizesLikeAShell) {
  EXPECT_EQ(*NormalizeRemotePath("/"), "/");
  EXPECT_EQ(*NormalizeRemotePath("a//b/./c/"), "/a/b/c");
  EXPECT_EQ(*NormalizeRemotePath("/a/b/../c"), "/a/c");
  EXPECT_EQ(*NormalizeRemotePath("/../../x"), "/x");
  EXPECT_EQ(*NormalizeRemotePath("."), "/");
  EXPECT_FALSE(NormalizeRemotePath("").ok());
  auto too_long = NormalizeRemotePath("/" + std::string(dfs::kMaxPathLength + 1, 'x'));
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), Status::Code::kNameTooLong);
}

TEST(FsPathTest, SplitsAndJoins) {
  EXPECT_EQ(SplitRemotePath("/a/b/c"), std::make_pair(std::string("/a/b"), std::string("c")));
  EXPECT_EQ(SplitRemotePath("/a"), std::make_pair(std::string("/"), std::string("a")));
  EXPECT_EQ(SplitRemotePath("/"), std::make_pair(std::string("/"), std::string("")));
  EXPECT_EQ(JoinRemotePath("/", "a"), "/a");
  EXPECT_EQ(JoinRemotePath("/a", "b"), "/a/b");
}

TEST(FsErrorTest, NamesTheOperationPathAndErrnoText) {
  Status st = FsError(Status::NotFound("dfs lookup of 'x' in 1.2: no such entry"), "stat", "/d/x");
  EXPECT_EQ(st.code(), Status::Code::kNotFound);
  EXPECT_EQ(st.message(), "stat '/d/x': No such file or directory");
  Status full = FsError(Status::NotEmpty("dfs rmdir"), "rm", "/d");
  EXPECT_EQ(full.message(), "rm '/d': Directory not empty");
  // A code without a POSIX meaning keeps the library's explanation.
  Status timeout = FsError(Status::TimedOut("engine 0 did not answer"), "ls", "/");
  EXPECT_EQ(timeout.code(), Status::Code::kTimedOut);
  EXPECT_NE(timeout.message().find("engine 0 did not answer"), std::string::npos) << timeout.message();
  EXPECT_TRUE(FsError(Status::Ok(), "ls", "/").ok());
  EXPECT_EQ(LocalError(ENOENT, "put", "/tmp/x").message(), "put '/tmp/x': No such file or directory");
}

TEST(FsListingTest, ModesTypesAndTimes) {
  EXPECT_EQ(ModeString(S_IFDIR | 0755), "drwxr-xr-x");
  EXPECT_EQ(ModeString(S_IFREG | 0640), "-rw-r-----");
  EXPECT_EQ(ModeString(S_IFLNK | 0777), "lrwxrwxrwx");
  EXPECT_EQ(ModeString(S_IFDIR | 01777), "drwxrwxrwt");
  EXPECT_EQ(ModeString(S_IFREG | 04644), "-rwSr--r--");
  EXPECT_EQ(TypeName(S_IFREG | 0644), "file");
  EXPECT_EQ(TypeName(S_IFDIR), "dir");
  EXPECT_EQ(TypeName(S_IFLNK), "symlink");
  EXPECT_EQ(IsoTime(timespec{0, 5}), "1970-01-01T00:00:00.000000005Z");
  EXPECT_EQ(IsoTime(timespec{1700000000, 123456789}), "2023-11-14T22:13:20.123456789Z");
}

TEST(FsProgressTest, LineShowsBytesPercentRateAndFiles) {
  TransferProgress p(ProgressMode::kOff, 4u << 20, 2);
  p.AddBytes(1u << 20);
  std::string line = p.Line();
  EXPECT_NE(line.find(" 25% "), std::string::npos) << line;
  EXPECT_NE(line.find("1 MiB / 4 MiB"), std::string::npos) << line;
  EXPECT_NE(line.find("/s"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA "), std::string::npos) << line;
  EXPECT_NE(line.find("0/2 files"), std::string::npos) << line;
  p.AddBytes(3u << 20);
  p.FileDone();
  p.FileDone();
  line = p.Line();
  EXPECT_NE(line.find("100%"), std::string::npos) << line;
  EXPECT_NE(line.find("[########################]"), std::string::npos) << line;
  EXPECT_NE(line.find("2/2 files"), std::string::npos) << line;
}

}  // namespace
}  // namespace ros2::ctl
