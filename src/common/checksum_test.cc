#include "common/checksum.h"

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace ros2 {
namespace {

std::span<const std::byte> Bytes(const char* s) { return {reinterpret_cast<const std::byte*>(s), std::strlen(s)}; }

TEST(ChecksumTest, KnownVectors) {
  // Standard check values for "123456789".
  EXPECT_EQ(ComputeChecksum(ChecksumType::kCrc32c, Bytes("123456789")), 0xE3069283u);
  EXPECT_EQ(ComputeChecksum(ChecksumType::kCrc64, Bytes("123456789")), 0x995DC9BBDF1939FAull);
  EXPECT_EQ(ComputeChecksum(ChecksumType::kNone, Bytes("123456789")), 0u);
}

TEST(ChecksumTest, SeedExtendsOverPieces) {
  uint32_t whole = Crc32c("hello world", 11);
  uint32_t parts = Crc32c(" world", 6, Crc32c("hello", 5));
  EXPECT_EQ(whole, parts);
}

TEST(ChecksumTest, ChunkedVerifyFindsTheBadChunk) {
  std::vector<std::byte> data(10000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte(i * 7);
  auto sums = ComputeChunkChecksums(ChecksumType::kCrc32c, data, 4096);
  ASSERT_EQ(sums.size(), 3u);
  EXPECT_TRUE(VerifyChunkChecksums(ChecksumType::kCrc32c, data, 4096, sums, "t").ok());
  data[5000] ^= std::byte{1};
  Status s = VerifyChunkChecksums(ChecksumType::kCrc32c, data, 4096, sums, "extent x");
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("chunk 1"), std::string::npos);
  EXPECT_TRUE(VerifyChunkChecksums(ChecksumType::kCrc32c, data, 4096, std::span(sums).first(2), "t").IsInvalidArgument());
}

TEST(ChecksumTest, ParseNames) {
  EXPECT_EQ(*ParseChecksumType("CRC64"), ChecksumType::kCrc64);
  EXPECT_FALSE(ParseChecksumType("md5").ok());
}

}  // namespace
}  // namespace ros2
