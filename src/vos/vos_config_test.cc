#include "vos/vos_config.h"

#include <gtest/gtest.h>

#include "common/config.h"

namespace ros2::vos {
namespace {

Result<VosOptions> Parse(std::string_view text) {
  auto node = ParseYaml(text, "test.yaml");
  if (!node.ok()) return node.status();
  return ParseVosOptions(*node, "test.yaml: vos");
}

TEST(VosConfigTest, ParsesEveryKey) {
  auto o = Parse(
      "class: nvme\npath: /data/t0\ndata_size: 2GiB\ninline_threshold: 8k\nsync_commit: false\n"
      "extent_sync: dsync\nchecksum: crc64\ncsum_chunk_size: 16KiB\nio_depth: 64\ninline_commit: false\n");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->storage_class, StorageClass::kNvme);
  EXPECT_EQ(o->path, "/data/t0");
  EXPECT_EQ(o->data_size, uint64_t{2} << 30);
  EXPECT_EQ(o->inline_threshold, 8192u);
  EXPECT_FALSE(o->sync_commit);
  EXPECT_EQ(o->extent_sync, ExtentSync::kDsync);
  EXPECT_EQ(o->checksum, ChecksumType::kCrc64);
  EXPECT_EQ(o->csum_chunk_size, 16384u);
  EXPECT_EQ(o->io_depth, 64u);
  EXPECT_FALSE(o->inline_commit);
}

TEST(VosConfigTest, RamNeedsNoPathAndDefaultsAreKept) {
  auto o = Parse("class: ram\n");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->storage_class, StorageClass::kRam);
  EXPECT_TRUE(o->sync_commit);
  EXPECT_EQ(o->extent_sync, ExtentSync::kWal);
  EXPECT_TRUE(o->inline_commit);
  EXPECT_EQ(o->inline_threshold, 4096u);
}

TEST(VosConfigTest, ErrorsNameTheKey) {
  auto bad_class = Parse("class: ssd\npath: /x\n");
  ASSERT_FALSE(bad_class.ok());
  EXPECT_NE(bad_class.status().message().find("vos.class"), std::string::npos) << bad_class.status().ToString();
  auto no_path = Parse("class: nvme\n");
  EXPECT_NE(no_path.status().message().find("vos.path"), std::string::npos);
  auto unknown = Parse("path: /x\nsize: 3\n");
  EXPECT_NE(unknown.status().message().find("vos.size"), std::string::npos);
  EXPECT_FALSE(Parse("path: /x\ndata_size: lots\n").ok());
  EXPECT_FALSE(Parse("path: /x\nio_depth: 0\n").ok());
  EXPECT_FALSE(Parse("path: /x\nchecksum: md5\n").ok());
  auto bad_sync = Parse("path: /x\nextent_sync: fsync\n");
  ASSERT_FALSE(bad_sync.ok());
  EXPECT_NE(bad_sync.status().message().find("vos.extent_sync"), std::string::npos) << bad_sync.status().ToString();
  EXPECT_EQ(ParseStorageClass("ram").value(), StorageClass::kRam);
  EXPECT_EQ(StorageClassName(StorageClass::kNvme), "nvme");
}

}  // namespace
}  // namespace ros2::vos
