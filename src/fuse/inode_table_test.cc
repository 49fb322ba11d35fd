#include "fuse/inode_table.h"

#include <sys/stat.h>

#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ros2::fuse {
namespace {

dfs::Entry MakeEntry(uint64_t lo, const std::string& name, ObjectId parent = ObjectId{0, 1}) {
  dfs::Entry e;
  e.oid = ObjectId{7, lo};
  e.parent = parent;
  e.name = name;
  e.mode = S_IFREG | 0644;
  return e;
}

dfs::Entry Root() {
  dfs::Entry root;
  root.oid = ObjectId{0, 1};
  root.mode = S_IFDIR | 0755;
  return root;
}

TEST(InodeTableTest, RootIsOneAndNeverForgotten) {
  InodeTable table(Root());
  ASSERT_TRUE(table.Get(InodeTable::kRootIno).has_value());
  EXPECT_TRUE(table.Get(InodeTable::kRootIno)->is_dir());
  table.Forget(InodeTable::kRootIno, 1000);
  EXPECT_TRUE(table.Get(InodeTable::kRootIno).has_value());
  EXPECT_EQ(table.size(), 1u);
}

TEST(InodeTableTest, LookupCountsKeepAnInodeUntilForgotten) {
  InodeTable table(Root());
  uint64_t ino = table.Remember(MakeEntry(10, "a"), 1234);
  EXPECT_EQ(ino, 1234u);
  EXPECT_EQ(table.Remember(MakeEntry(10, "a"), 1234), 1234u);
  EXPECT_EQ(table.Remember(MakeEntry(10, "a"), 1234), 1234u);
  EXPECT_EQ(table.total_lookups(), 3u);
  table.Forget(ino, 2);
  ASSERT_TRUE(table.Get(ino).has_value());
  EXPECT_EQ(table.Get(ino)->name, "a");
  table.Forget(ino, 1);
  EXPECT_FALSE(table.Get(ino).has_value());
  EXPECT_EQ(table.size(), 1u);
  // Forgetting more than was counted, or an unknown inode, is harmless.
  table.Forget(ino, 5);
  table.Forget(999999, 1);
  EXPECT_EQ(table.size(), 1u);
}

TEST(InodeTableTest, CollidingNumbersGetTheNextFreeOne) {
  InodeTable table(Root());
  uint64_t first = table.Remember(MakeEntry(10, "a"), 500);
  uint64_t second = table.Remember(MakeEntry(11, "b"), 500);  // another object, same suggested number
  uint64_t third = table.Remember(MakeEntry(12, "c"), 500);
  uint64_t not_root = table.Remember(MakeEntry(13, "d"), InodeTable::kRootIno);
  uint64_t not_zero = table.Remember(MakeEntry(14, "e"), 0);
  uint64_t wraps = table.Remember(MakeEntry(15, "f"), UINT64_MAX);
  uint64_t wraps_again = table.Remember(MakeEntry(16, "g"), UINT64_MAX);
  EXPECT_EQ(first, 500u);
  EXPECT_EQ(second, 501u);
  EXPECT_EQ(third, 502u);
  EXPECT_EQ(not_root, 2u);
  EXPECT_EQ(not_zero, 3u);
  EXPECT_EQ(wraps, UINT64_MAX);
  EXPECT_EQ(wraps_again, 4u);  // past 0 and 1 (root), 2 and 3 taken
  EXPECT_EQ(table.Get(second)->name, "b");
  EXPECT_EQ(table.Get(third)->name, "c");
  EXPECT_EQ(table.Get(InodeTable::kRootIno)->name, "");
  // The same object keeps its number; a freed number is reused.
  EXPECT_EQ(table.Remember(MakeEntry(11, "b"), 500), second);
  table.Forget(first, 1);
  EXPECT_EQ(table.Remember(MakeEntry(17, "h"), 500), 500u);
}

TEST(InodeTableTest, RefreshFollowsRenamesAndNewLookupsReplaceTheEntry) {
  InodeTable table(Root());
  uint64_t ino = table.Remember(MakeEntry(10, "old"), 42);
  dfs::Entry moved = MakeEntry(10, "new", ObjectId{7, 99});
  table.Refresh(moved);
  EXPECT_EQ(table.Get(ino)->name, "new");
  EXPECT_EQ(table.Get(ino)->parent, (ObjectId{7, 99}));
  EXPECT_EQ(table.total_lookups(), 1u);     // a refresh is not a lookup
  table.Refresh(MakeEntry(77, "unknown"));  // no inode: no-op
  dfs::Entry root = Root();
  root.mode = S_IFDIR | 0700;  // a chmod of the root
  table.Refresh(root);
  EXPECT_EQ(table.Get(InodeTable::kRootIno)->mode, static_cast<mode_t>(S_IFDIR | 0700));
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.Remember(MakeEntry(10, "again"), 42), ino);
  EXPECT_EQ(table.Get(ino)->name, "again");
}

TEST(InodeTableTest, ConcurrentRememberAndForgetBalance) {
  InodeTable table(Root());
  constexpr int kThreads = 4, kRounds = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&table, t] {
      for (int i = 0; i < kRounds; ++i) {
        uint64_t lo = static_cast<uint64_t>(i % 50);
        uint64_t ino = table.Remember(MakeEntry(lo, "f" + std::to_string(lo)), 100 + lo);
        EXPECT_TRUE(table.Get(ino).has_value()) << "thread " << t;
        table.Forget(ino, 1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.total_lookups(), 0u);
}

}  // namespace
}  // namespace ros2::fuse
