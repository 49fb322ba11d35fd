// StateStore: batches are atomic and durable across reopen, scans see exactly
// their prefix, missing keys are NotFound naming the key.
#include "control/state_store.h"

#include <gtest/gtest.h>

#include "testing/temp_dir.h"

namespace ros2::control {
namespace {

TEST(StateStoreTest, BatchScanAndReopen) {
  ros2::testing::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::string db = dir.path() + "/db";
  {
    auto store = StateStore::Open(db);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    StoreBatch b;
    b.Put("pool/a", "1");
    b.Put("pool/b", "2");
    b.Put("pool-label/x", "a");
    b.Put("tenant/t", "3");
    ASSERT_TRUE((*store)->Write(b).ok());
    StoreBatch d;
    d.Delete("pool/b");
    d.Put("pool/c", "4");
    ASSERT_TRUE((*store)->Write(d).ok());
    auto missing = (*store)->Get("pool/b");
    ASSERT_FALSE(missing.ok());
    EXPECT_TRUE(missing.status().IsNotFound());
    EXPECT_NE(missing.status().message().find("pool/b"), std::string::npos);
  }
  auto store = StateStore::Open(db);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto rows = (*store)->Scan("pool/");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0], (std::pair<std::string, std::string>("pool/a", "1")));
  EXPECT_EQ((*rows)[1], (std::pair<std::string, std::string>("pool/c", "4")));
  auto t = (*store)->Get("tenant/t");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "3");
}

TEST(StateStoreTest, OpenFailsClearlyOnAFile) {
  ros2::testing::TempDir dir;
  std::string file = dir.path() + "/not-a-dir";
  FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  auto store = StateStore::Open(file);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(file), std::string::npos) << store.status().ToString();
}

}  // namespace
}  // namespace ros2::control
