// The encrypted block codec alone: round trips, fresh nonces, the binding of
// a block to its file, index and container, tamper detection, holes, keys.
#include "dfs/file_crypto.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace ros2::dfs {
namespace {

MasterKey TestKey(uint8_t seed) {
  MasterKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(seed + 7 * i);
  return k;
}

std::vector<std::byte> Plain(size_t n, uint8_t seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(seed + i * 13);
  return v;
}

class FileCryptoTest : public ::testing::Test {
 protected:
  const ObjectId oid_ = ObjectId::Make(ObjectType::kArray, ObjectClass::kSX, 42, 7);
  const FileCipher cipher_ = FileCipher::Create(TestKey(1), "uuid-a");
  std::vector<std::byte> record_ = std::vector<std::byte>(kBlockRecordSize);
  std::vector<std::byte> out_ = std::vector<std::byte>(kCryptBlockSize);
};

TEST_F(FileCryptoTest, RoundTripsEveryLengthAndHidesThePlaintext) {
  for (size_t n : {size_t{1}, size_t{17}, size_t{4095}, size_t{kCryptBlockSize}}) {
    auto plain = Plain(n, 3);
    ASSERT_TRUE(cipher_.Seal(oid_, 9, plain, record_).ok());
    // The ciphertext is not the plaintext, and the tail past the length is zero.
    EXPECT_NE(std::memcmp(record_.data() + kBlockHeaderSize, plain.data(), n), 0);
    for (size_t i = kBlockHeaderSize + n; i < kBlockRecordSize; ++i) ASSERT_EQ(record_[i], std::byte{0});
    auto len = cipher_.Open(oid_, 9, record_, out_, "f");
    ASSERT_TRUE(len.ok()) << len.status().ToString();
    EXPECT_EQ(*len, n);
    EXPECT_EQ(std::memcmp(out_.data(), plain.data(), n), 0);
    for (size_t i = n; i < kCryptBlockSize; ++i) ASSERT_EQ(out_[i], std::byte{0});
  }
}

TEST_F(FileCryptoTest, EverySealDrawsAFreshNonce) {
  auto plain = Plain(100, 5);
  std::vector<std::byte> other(kBlockRecordSize);
  ASSERT_TRUE(cipher_.Seal(oid_, 0, plain, record_).ok());
  ASSERT_TRUE(cipher_.Seal(oid_, 0, plain, other).ok());
  EXPECT_NE(std::memcmp(record_.data() + 4, other.data() + 4, 12), 0);              // nonce
  EXPECT_NE(std::memcmp(record_.data() + 32, other.data() + 32, plain.size()), 0);  // ciphertext
}

TEST_F(FileCryptoTest, ABlockMovedToAnotherIndexFileOrContainerFails) {
  auto plain = Plain(kCryptBlockSize, 1);
  ASSERT_TRUE(cipher_.Seal(oid_, 5, plain, record_).ok());
  auto moved = cipher_.Open(oid_, 6, record_, out_, "f");
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.status().code(), Status::Code::kCorruption);
  EXPECT_NE(moved.status().message().find("block 6"), std::string::npos) << moved.status().ToString();
  EXPECT_NE(moved.status().message().find("'f'"), std::string::npos);
  for (std::byte b : out_) ASSERT_EQ(b, std::byte{0});  // nothing unauthenticated handed out
  const ObjectId other = ObjectId::Make(ObjectType::kArray, ObjectClass::kSX, 42, 8);
  EXPECT_FALSE(cipher_.Open(other, 5, record_, out_, "f").ok());
  EXPECT_FALSE(FileCipher::Create(TestKey(1), "uuid-b").Open(oid_, 5, record_, out_, "f").ok());
  EXPECT_FALSE(FileCipher::Create(TestKey(2), "uuid-a").Open(oid_, 5, record_, out_, "f").ok());
  EXPECT_TRUE(cipher_.Open(oid_, 5, record_, out_, "f").ok());
}

TEST_F(FileCryptoTest, TamperedBytesAnywhereAreCorruption) {
  auto plain = Plain(1000, 2);
  ASSERT_TRUE(cipher_.Seal(oid_, 1, plain, record_).ok());
  // Header (version, length, nonce, tag), ciphertext, and the zero padding.
  for (size_t pos : {size_t{0}, size_t{2}, size_t{3}, size_t{4}, size_t{20}, size_t{40}, size_t{1031}, size_t{1032},
                     size_t{kBlockRecordSize - 1}}) {
    auto copy = record_;
    copy[pos] ^= std::byte{0x01};
    auto r = cipher_.Open(oid_, 1, copy, out_, "f");
    ASSERT_FALSE(r.ok()) << "flip at " << pos;
    EXPECT_EQ(r.status().code(), Status::Code::kCorruption) << pos;
  }
  // A zeroed header over data is damage, not a hole.
  auto copy = record_;
  std::memset(copy.data(), 0, kBlockHeaderSize);
  EXPECT_EQ(cipher_.Open(oid_, 1, copy, out_, "f").status().code(), Status::Code::kCorruption);
}

TEST_F(FileCryptoTest, AnAllZeroRecordIsAHole) {
  std::vector<std::byte> zero(kBlockRecordSize);
  std::memset(out_.data(), 0x55, out_.size());
  auto r = cipher_.Open(oid_, 3, zero, out_, "f");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 0u);
  for (std::byte b : out_) ASSERT_EQ(b, std::byte{0});
}

TEST_F(FileCryptoTest, SealRefusesBadSizes) {
  EXPECT_FALSE(cipher_.Seal(oid_, 0, {}, record_).ok());
  auto big = Plain(kCryptBlockSize + 1, 0);
  EXPECT_FALSE(cipher_.Seal(oid_, 0, big, record_).ok());
  std::vector<std::byte> small(100);
  EXPECT_FALSE(cipher_.Seal(oid_, 0, Plain(10, 0), small).ok());
}

TEST(MasterKeyTest, ParsesHexAndRawBytesAndRefusesTheRest) {
  std::string hex = "  00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF\n";
  auto k = ParseMasterKey(std::as_bytes(std::span(hex)), "key file k");
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ((*k)[0], 0x00);
  EXPECT_EQ((*k)[1], 0x11);
  EXPECT_EQ((*k)[31], 0xff);
  std::vector<std::byte> raw(32, std::byte{9});
  auto r = ParseMasterKey(raw, "raw");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[5], 9);
  std::string short_hex = "0011";
  auto s = ParseMasterKey(std::as_bytes(std::span(short_hex)), "key file k");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("key file k"), std::string::npos);
  std::string not_hex(64, 'g');
  EXPECT_FALSE(ParseMasterKey(std::as_bytes(std::span(not_hex)), "x").ok());
}

TEST(MasterKeyTest, KeyCheckValuesDifferByKeyAndContainer) {
  EXPECT_EQ(KeyCheckValue(TestKey(1), "a"), KeyCheckValue(TestKey(1), "a"));
  EXPECT_NE(KeyCheckValue(TestKey(1), "a"), KeyCheckValue(TestKey(2), "a"));
  EXPECT_NE(KeyCheckValue(TestKey(1), "a"), KeyCheckValue(TestKey(1), "b"));
}

}  // namespace
}  // namespace ros2::dfs
