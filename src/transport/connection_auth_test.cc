// IntegrityKey: its tags are AES-256-GCM's (OpenSSL's EVP AES-256-GCM with
// the message as additional data and no plaintext), whatever the split of the
// message into its two parts, and the IV is the direction and the sequence
// number.
#include "transport/connection_auth.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <array>
#include <cstring>
#include <vector>

namespace ros2::transport {
namespace {

std::array<uint8_t, 16> EvpGmac(const std::array<uint8_t, 32>& key, uint32_t direction, uint64_t seq,
                                const std::vector<uint8_t>& msg) {
  uint8_t iv[12];
  std::memcpy(iv, &direction, 4);
  for (int i = 0; i < 8; ++i) iv[4 + i] = static_cast<uint8_t>(seq >> (8 * i));
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int len = 0;
  uint8_t none[16];
  std::array<uint8_t, 16> tag{};
  EXPECT_EQ(EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key.data(), iv), 1);
  if (!msg.empty()) {
    EXPECT_EQ(EVP_EncryptUpdate(ctx, nullptr, &len, msg.data(), static_cast<int>(msg.size())), 1);
  }
  EXPECT_EQ(EVP_EncryptFinal_ex(ctx, none, &len), 1);
  EXPECT_EQ(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag.data()), 1);
  EVP_CIPHER_CTX_free(ctx);
  return tag;
}

TEST(IntegrityKey, TagsAreAes256GcmTagsOfTheWholeMessage) {
  std::array<uint8_t, 32> key{};
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i * 7 + 3);
  auto k = IntegrityKey::Create(key, 2);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  for (size_t n : {0u, 1u, 15u, 16u, 17u, 48u, 100u, 4096u + 72u, 16384u + 48u}) {
    std::vector<uint8_t> msg(n);
    for (size_t i = 0; i < n; ++i) msg[i] = static_cast<uint8_t>(i * 13 + n);
    for (uint64_t seq : {uint64_t{1}, uint64_t{2}, uint64_t{0x0123456789abcdef}}) {
      const auto want = EvpGmac(key, 2, seq, msg);
      // Split anywhere between the two parts (the head and the inline tail
      // of a message sent as an iovec): the same tag.
      for (size_t cut : {size_t{0}, n / 3, n}) {
        std::array<uint8_t, 16> got{};
        ASSERT_TRUE((*k)->Tag(seq, std::span<const uint8_t>(msg).first(cut),
                              std::span<const uint8_t>(msg).subspan(cut), got));
        EXPECT_EQ(got, want) << n << " bytes, seq " << seq << ", cut at " << cut;
      }
    }
  }
}

TEST(IntegrityKey, TheSequenceNumberAndTheDirectionChangeTheTag) {
  std::array<uint8_t, 32> key{};
  key[0] = 1;
  auto up = IntegrityKey::Create(key, 1);
  auto down = IntegrityKey::Create(key, 2);
  ASSERT_TRUE(up.ok() && down.ok());
  const std::vector<uint8_t> msg(64, 5);
  std::array<uint8_t, 16> a{}, b{}, c{};
  ASSERT_TRUE((*up)->Tag(7, msg, {}, a));
  ASSERT_TRUE((*up)->Tag(8, msg, {}, b));
  ASSERT_TRUE((*down)->Tag(7, msg, {}, c));
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a, EvpGmac(key, 1, 7, msg));
}

}  // namespace
}  // namespace ros2::transport
