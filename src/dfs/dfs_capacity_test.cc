// Capacity through DFS against a real engine (ros2ctl cluster up, 2 targets):
// a small pool holds its size of file data in one container, pool query and
// statfs report it, the next byte is ENOSPC with nothing half-written, and
// deleting the file gives the space back.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "ros2/client.h"
#include "ros2/dfs.h"
#include "testing/pattern.h"
#include "testing/client_fixture.h"
#include "testing/test_cluster.h"

namespace ros2::dfs {
namespace {

using ros2::testing::Pattern;
using ros2::testing::TestCluster;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kPoolSize = 64 * kMiB;

class DfsCapacityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    cluster_ = TestCluster::Start("tcp", 2, &error);
    ASSERT_NE(cluster_, nullptr) << error;
    for (const std::vector<std::string>& args : {std::vector<std::string>{"pool", "create", "cap", "--size", "64MiB"},
                                                 std::vector<std::string>{"cont", "create", "cap", "files"}}) {
      auto r = cluster_->Ctl(args);
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    auto connected = ros2::testing::ConnectContainer(ros2::testing::ClientOptionsFor(*cluster_, "tcp"), "cap", "files");
    ASSERT_TRUE(connected.ok()) << connected.status().ToString();
    client_ = std::move(connected->client);
    pool_ = std::move(connected->pool);
    cont_ = std::move(connected->cont);
    auto fs = Filesystem::Mount(*cont_, {});
    ASSERT_TRUE(fs.ok()) << fs.status().ToString();
    fs_ = std::move(*fs);
  }
  void TearDown() override {
    fs_.reset();
    cont_.reset();
    pool_.reset();
    client_.reset();
    cluster_.reset();
  }

  // Writes `block`-sized pieces of the pattern at `*offset` until one fails; returns that failure.
  Status FillWith(const Entry& f, uint64_t block, uint64_t* offset) {
    for (;;) {
      auto data = Pattern(block, static_cast<uint32_t>(*offset / block));
      auto n = fs_->Write(f, *offset, data);
      if (!n.ok()) return n.status();
      *offset += block;
    }
  }

  std::unique_ptr<TestCluster> cluster_;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<client::Pool> pool_;
  std::unique_ptr<client::Container> cont_;
  std::unique_ptr<Filesystem> fs_;
};

TEST_F(DfsCapacityTest, APoolHoldsItsSizeThenEnospcAndDeletingGivesTheSpaceBack) {
  auto empty = fs_->Statfs();
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->blocks * empty->block_size, kPoolSize);
  auto f = fs_->Open(fs_->Root(), "data", O_CREAT | O_RDWR, 0644);
  ASSERT_TRUE(f.ok()) << f.status().ToString();

  // 1 MiB writes (the chunk size: chunks spread over both targets), then
  // 4 KiB, then single bytes, each until ENOSPC: the pool takes exactly its
  // size, less the namespace's own small records (the stated overhead).
  uint64_t offset = 0;
  Status st = FillWith(*f, kMiB, &offset);
  EXPECT_EQ(Errno(st), ENOSPC) << st.ToString();
  EXPECT_GE(offset, kPoolSize - kMiB) << "a 64 MiB pool took only " << offset << " bytes of file data";
  st = FillWith(*f, 4096, &offset);
  EXPECT_EQ(Errno(st), ENOSPC) << st.ToString();
  st = FillWith(*f, 1, &offset);
  EXPECT_EQ(Errno(st), ENOSPC) << st.ToString();
  const uint64_t written = offset;
  EXPECT_GE(written, kPoolSize - 8192) << "overhead above 8 KiB";
  EXPECT_LE(written, kPoolSize);

  // pool query and statfs: full.
  auto info = cluster_->Ctl({"--json", "pool", "query", "cap"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  auto j = info.Json();
  EXPECT_EQ(j["used_bytes"].get<uint64_t>(), kPoolSize) << info.out;
  EXPECT_EQ(j["free_bytes"].get<uint64_t>(), 0u) << info.out;
  auto full = fs_->Statfs();
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->blocks_free, 0u);

  // The next byte, of this file or a new one, is refused; nothing of it lands.
  std::vector<std::byte> one(1, std::byte{0x5a});
  EXPECT_EQ(Errno(fs_->Write(*f, written, one).status()), ENOSPC);
  EXPECT_EQ(fs_->Stat(*f)->size, written);
  auto g = fs_->Open(fs_->Root(), "more", O_CREAT | O_RDWR, 0644);
  if (g.ok()) {
    EXPECT_EQ(Errno(fs_->Write(*g, 0, Pattern(kMiB, 1)).status()), ENOSPC);
  }
  // What was written reads back.
  std::vector<std::byte> head(kMiB);
  ASSERT_EQ(*fs_->Read(*f, 0, head), kMiB);
  EXPECT_EQ(head, Pattern(kMiB, 0));

  // Deleting the file gives the space back (aggregation runs once the
  // shards are quiet, within seconds).
  if (g.ok()) {
    ASSERT_TRUE(fs_->Unlink(fs_->Root(), "more").ok());
  }
  ASSERT_TRUE(fs_->Unlink(fs_->Root(), "data").ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  uint64_t free_bytes = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    auto s = fs_->Statfs();
    ASSERT_TRUE(s.ok());
    free_bytes = s->blocks_free * s->block_size;
    if (free_bytes >= kPoolSize - kMiB) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_GE(free_bytes, kPoolSize - kMiB) << "deleting the file did not give its space back";
  auto again = fs_->Open(fs_->Root(), "again", O_CREAT | O_RDWR, 0644);
  ASSERT_TRUE(again.ok());
  uint64_t again_offset = 0;
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(fs_->Write(*again, again_offset, Pattern(kMiB, 7)).ok()) << "MiB " << i;
    again_offset += kMiB;
  }
}

}  // namespace
}  // namespace ros2::dfs
