#include "vos/records.h"

#include <gtest/gtest.h>

#include <vector>

namespace ros2::vos {
namespace {

TEST(RecordsTest, InlineRecordRoundTrips) {
  std::vector<std::byte> data(100, std::byte{7});
  ValueRecord rec;
  rec.length = data.size();
  rec.record_size = 4;
  rec.csum = {ChecksumType::kCrc32c, 32, ComputeChunkChecksums(ChecksumType::kCrc32c, data, 32)};
  std::string enc = EncodeValueRecord(rec, data);
  auto back = DecodeValueRecord(enc, "test");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->external);
  EXPECT_EQ(back->length, 100u);
  EXPECT_EQ(back->record_size, 4u);
  EXPECT_EQ(back->csum.values, rec.csum.values);
  EXPECT_EQ(back->inline_data.size(), 100u);
  EXPECT_EQ(std::memcmp(back->inline_data.data(), data.data(), 100), 0);
}

TEST(RecordsTest, ExternalRecordRoundTripsWithCrc64) {
  ValueRecord rec;
  rec.length = 10000;
  rec.csum = {ChecksumType::kCrc64, 4096, {1, 2, 0xffffffffffffULL}};
  rec.external = true;
  rec.offset = 8192;
  rec.alloc_len = 12288;
  auto back = DecodeValueRecord(EncodeValueRecord(rec, {}), "test");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->external);
  EXPECT_EQ(back->offset, 8192u);
  EXPECT_EQ(back->alloc_len, 12288u);
  EXPECT_EQ(back->csum.values, rec.csum.values);
}

TEST(RecordsTest, AnyFlippedMetadataBitIsCorruption) {
  ValueRecord rec;
  rec.length = 5000;
  rec.csum = {ChecksumType::kCrc32c, 4096, {11, 22}};
  rec.external = true;
  rec.offset = 4096;
  rec.alloc_len = 8192;
  std::string enc = EncodeValueRecord(rec, {});
  for (size_t byte = 0; byte < enc.size(); ++byte) {
    std::string bad = enc;
    bad[byte] = static_cast<char>(bad[byte] ^ 0x10);
    auto r = DecodeValueRecord(bad, "test");
    ASSERT_FALSE(r.ok()) << "byte " << byte;
    EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  }
  EXPECT_TRUE(DecodeValueRecord(enc.substr(0, 10), "t").status().IsCorruption());
}

TEST(RecordsTest, ChecksumWindowKeepsOnlyTheCoveringChunks) {
  std::vector<std::byte> data(10000, std::byte{3});
  ValueRecord rec;
  rec.length = data.size();
  rec.csum = {ChecksumType::kCrc32c, 1000, ComputeChunkChecksums(ChecksumType::kCrc32c, data, 1000)};
  std::string enc = EncodeValueRecord(rec, data);
  auto part = DecodeValueRecord(enc, "t", ChecksumWindow{2500, 4001});
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  EXPECT_EQ(part->csum_first, 2u);
  EXPECT_EQ(part->csum.values, std::vector<uint64_t>(rec.csum.values.begin() + 2, rec.csum.values.begin() + 5));
  auto none = DecodeValueRecord(enc, "t", kNoChecksums);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->csum.values.empty());
  auto tail = DecodeValueRecord(enc, "t", ChecksumWindow{9999, ~uint64_t{0}});
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(tail->csum_first, 9u);
  EXPECT_EQ(tail->csum.values.size(), 1u);
}

TEST(RecordsTest, AkeyHeaderRoundTrips) {
  AkeyHeader h{ValueType::kArray, 512, 1 << 20, 0x1001};
  auto back = DecodeAkeyHeader(EncodeAkeyHeader(h), "h");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->type, ValueType::kArray);
  EXPECT_EQ(back->record_size, 512u);
  EXPECT_EQ(back->max_extent_records, uint64_t{1} << 20);
  EXPECT_EQ(back->class_mask, 0x1001u);
  EXPECT_TRUE(DecodeAkeyHeader("xx", "h").status().IsCorruption());
}

TEST(RecordsTest, KeyListRoundTripsAndRejectsTruncation) {
  std::string list;
  AppendKeyToList(&list, "Tfirst");
  AppendKeyToList(&list, std::string(300, 'k'));
  auto back = DecodeKeyList(list, "l");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, (std::vector<std::string>{"Tfirst", std::string(300, 'k')}));
  auto empty = DecodeKeyList("", "l");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  auto cut = DecodeKeyList(std::string_view(list).substr(0, list.size() - 1), "l");
  EXPECT_TRUE(cut.status().IsCorruption());
  EXPECT_NE(cut.status().message().find("malformed key list"), std::string::npos) << cut.status().ToString();
  EXPECT_TRUE(DecodeKeyList(std::string("\0\0\0\0", 4), "l").status().IsCorruption());  // a zero-length key
}

}  // namespace
}  // namespace ros2::vos
