// The DFS encrypted block format (see file_crypto.h, docs/dfs.md "Encrypted
// files"): AES-256-GCM through OpenSSL EVP, a random nonce per sealed block.
#include "dfs/file_crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>

#include <fmt/format.h>

namespace ros2::dfs {
namespace {

constexpr size_t kNonceSize = 12;
constexpr size_t kTagSize = 16;
constexpr size_t kNonceOffset = 4;
constexpr size_t kTagOffset = kNonceOffset + kNonceSize;
static_assert(kTagOffset + kTagSize == kBlockHeaderSize);
constexpr std::string_view kAadLabel = "ros2.dfs.block.v1";
constexpr size_t kAadSize = kAadLabel.size() + 16 + 8 + 4;

struct CtxDeleter {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CtxPtr = std::unique_ptr<EVP_CIPHER_CTX, CtxDeleter>;

void PutLe(uint8_t* p, uint64_t v, int width) {
  for (int i = 0; i < width; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// The authenticated data of a block: label, object id, block index and the
// first four header bytes (version, reserved, length), so none of them can be
// changed or the block moved without the tag failing.
std::array<uint8_t, kAadSize> BlockAad(const ObjectId& oid, uint64_t block, const uint8_t* header) {
  std::array<uint8_t, kAadSize> aad{};
  uint8_t* p = aad.data();
  std::memcpy(p, kAadLabel.data(), kAadLabel.size());
  p += kAadLabel.size();
  PutLe(p, oid.hi, 8);
  PutLe(p + 8, oid.lo, 8);
  PutLe(p + 16, block, 8);
  std::memcpy(p + 24, header, 4);
  return aad;
}

std::array<uint8_t, 32> Hmac(const MasterKey& key, std::string_view label, std::string_view uuid) {
  std::string msg(label);
  msg += uuid;
  std::array<uint8_t, 32> out{};
  unsigned len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(msg.data()),
       msg.size(), out.data(), &len);
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Result<MasterKey> ParseMasterKey(std::span<const std::byte> bytes, std::string_view what) {
  MasterKey key{};
  if (bytes.size() == kMasterKeySize) {
    std::memcpy(key.data(), bytes.data(), key.size());
    return key;
  }
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  if (text.size() != 2 * kMasterKeySize) {
    return Status::InvalidArgument(
        fmt::format("{}: not a key (expected 64 hex digits or 32 raw bytes, got {} bytes)", what, bytes.size()));
  }
  for (size_t i = 0; i < kMasterKeySize; ++i) {
    const int hi = HexDigit(text[2 * i]), lo = HexDigit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return Status::InvalidArgument(fmt::format("{}: not a key (a non-hex digit)", what));
    key[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return key;
}

std::array<uint8_t, kKeyCheckSize> KeyCheckValue(const MasterKey& master, std::string_view container_uuid) {
  auto mac = Hmac(master, "ros2.dfs.keycheck.v1", container_uuid);
  std::array<uint8_t, kKeyCheckSize> out{};
  std::memcpy(out.data(), mac.data(), out.size());
  return out;
}

FileCipher FileCipher::Create(const MasterKey& master, std::string_view container_uuid) {
  return FileCipher(Hmac(master, "ros2.dfs.datakey.v1", container_uuid));
}

FileCipher::~FileCipher() {
  OPENSSL_cleanse(key_.data(), key_.size());
}

Status FileCipher::Seal(const ObjectId& oid, uint64_t block, std::span<const std::byte> plain,
                        std::span<std::byte> record) const {
  if (plain.empty() || plain.size() > kCryptBlockSize || record.size() != kBlockRecordSize) {
    return Status::InvalidArgument(fmt::format("dfs seal of block {}: {} plaintext bytes into a {}-byte record", block,
                                               plain.size(), record.size()));
  }
  auto* out = reinterpret_cast<uint8_t*>(record.data());
  out[0] = kBlockFormatVersion;
  out[1] = 0;
  PutLe(out + 2, plain.size(), 2);
  if (RAND_bytes(out + kNonceOffset, kNonceSize) != 1) return Status::Internal("dfs seal: no random nonce");
  const auto aad = BlockAad(oid, block, out);
  CtxPtr ctx(EVP_CIPHER_CTX_new());
  int len = 0, fin = 0;
  uint8_t* ct = out + kBlockHeaderSize;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), out + kNonceOffset) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, aad.data(), static_cast<int>(aad.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), ct, &len, reinterpret_cast<const uint8_t*>(plain.data()),
                        static_cast<int>(plain.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), ct + len, &fin) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagSize, out + kTagOffset) != 1) {
    return Status::Internal(fmt::format("dfs seal of block {}: AES-256-GCM failed", block));
  }
  std::memset(ct + plain.size(), 0, kCryptBlockSize - plain.size());
  return Status::Ok();
}

Result<uint32_t> FileCipher::Open(const ObjectId& oid, uint64_t block, std::span<const std::byte> record,
                                  std::span<std::byte> plain, std::string_view file_name) const {
  if (record.size() != kBlockRecordSize || plain.size() != kCryptBlockSize) {
    return Status::InvalidArgument(fmt::format("dfs open of block {}: bad buffer sizes", block));
  }
  const auto* in = reinterpret_cast<const uint8_t*>(record.data());
  auto bad = [&](std::string_view why) {
    return Status::Corruption(fmt::format("dfs: encrypted block {} (bytes {}..{}) of '{}' ({}): {}", block,
                                          block * kCryptBlockSize, (block + 1) * kCryptBlockSize, file_name,
                                          oid.ToString(), why));
  };
  const uint32_t length = uint32_t{in[2]} | uint32_t{in[3]} << 8;
  if (in[0] == 0 && in[1] == 0 && length == 0) {
    // A hole only when every byte is zero; a zeroed header over data is damage.
    if (std::any_of(in, in + kBlockRecordSize, [](uint8_t b) { return b != 0; })) {
      return bad("a record with data but no header");
    }
    std::memset(plain.data(), 0, plain.size());
    return uint32_t{0};
  }
  if (in[0] != kBlockFormatVersion) return bad(fmt::format("unknown format version {}", in[0]));
  if (in[1] != 0 || length == 0 || length > kCryptBlockSize) {
    return bad(fmt::format("malformed header (length {})", length));
  }
  const uint8_t* ct = in + kBlockHeaderSize;
  if (std::any_of(ct + length, in + kBlockRecordSize, [](uint8_t b) { return b != 0; })) {
    return bad("bytes past the block's length are not zero");
  }
  const auto aad = BlockAad(oid, block, in);
  std::array<uint8_t, kTagSize> tag;
  std::memcpy(tag.data(), in + kTagOffset, kTagSize);
  CtxPtr ctx(EVP_CIPHER_CTX_new());
  int len = 0, fin = 0;
  auto* pt = reinterpret_cast<uint8_t*>(plain.data());
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), in + kNonceOffset) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, aad.data(), static_cast<int>(aad.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), pt, &len, ct, static_cast<int>(length)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagSize, tag.data()) != 1) {
    return Status::Internal(fmt::format("dfs open of block {}: AES-256-GCM failed", block));
  }
  if (EVP_DecryptFinal_ex(ctx.get(), pt + len, &fin) != 1) {
    std::memset(plain.data(), 0, plain.size());  // never hand out unauthenticated plaintext
    return bad("authentication failed (tampered, moved, or another key)");
  }
  std::memset(pt + length, 0, kCryptBlockSize - length);
  return length;
}

}  // namespace ros2::dfs
