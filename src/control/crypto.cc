#include "control/crypto.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <cctype>
#include <cstring>

#include <fmt/format.h>

namespace ros2::control {
namespace {

std::string OpenSslError(std::string_view what) {
  unsigned long err = ERR_get_error();
  char buf[256] = {0};
  if (err != 0) ERR_error_string_n(err, buf, sizeof(buf));
  return fmt::format("{}: {}", what, err != 0 ? buf : "unknown OpenSSL error");
}

}  // namespace

Status RandomBytes(std::span<uint8_t> out) {
  if (out.empty()) return Status::Ok();
  if (RAND_bytes(out.data(), static_cast<int>(out.size())) != 1) {
    return Status::Internal(OpenSslError("RAND_bytes"));
  }
  return Status::Ok();
}

Result<std::string> RandomHex(size_t n) {
  std::string raw(n, '\0');
  ROS2_RETURN_IF_ERROR(RandomBytes(std::span(reinterpret_cast<uint8_t*>(raw.data()), raw.size())));
  return HexEncode(std::span(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()));
}

std::string HexEncode(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

bool ConstantTimeEqual(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Result<Sha256Digest> Pbkdf2Sha256(std::string_view secret, std::span<const uint8_t> salt, uint32_t iterations) {
  if (iterations == 0) return Status::InvalidArgument("pbkdf2: iteration count must be positive");
  Sha256Digest out{};
  if (PKCS5_PBKDF2_HMAC(secret.data(), static_cast<int>(secret.size()), salt.data(), static_cast<int>(salt.size()),
                        static_cast<int>(iterations), EVP_sha256(), static_cast<int>(out.size()), out.data()) != 1) {
    return Status::Internal(OpenSslError("PKCS5_PBKDF2_HMAC"));
  }
  return out;
}

void HmacSha256::MacDeleter::operator()(EVP_MAC* mac) const {
  EVP_MAC_free(mac);
}
void HmacSha256::CtxDeleter::operator()(EVP_MAC_CTX* ctx) const {
  EVP_MAC_CTX_free(ctx);
}

HmacSha256::HmacSha256(HmacSha256&&) noexcept = default;
HmacSha256& HmacSha256::operator=(HmacSha256&&) noexcept = default;
HmacSha256::~HmacSha256() = default;

Result<HmacSha256> HmacSha256::Create(std::span<const uint8_t> key) {
  if (key.empty()) return Status::InvalidArgument("hmac: the key is empty");
  HmacSha256 h;
  h.mac_.reset(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  if (!h.mac_) return Status::Internal(OpenSslError("EVP_MAC_fetch(HMAC)"));
  h.keyed_template_.reset(EVP_MAC_CTX_new(h.mac_.get()));
  if (!h.keyed_template_) return Status::Internal(OpenSslError("EVP_MAC_CTX_new"));
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(h.keyed_template_.get(), key.data(), key.size(), params) != 1) {
    return Status::Internal(OpenSslError("EVP_MAC_init(HMAC-SHA256)"));
  }
  return h;
}

Result<Sha256Digest> HmacSha256::Compute(std::span<const uint8_t> data) const {
  std::unique_ptr<EVP_MAC_CTX, CtxDeleter> ctx(EVP_MAC_CTX_dup(keyed_template_.get()));
  if (!ctx) return Status::Internal(OpenSslError("EVP_MAC_CTX_dup"));
  if (EVP_MAC_update(ctx.get(), data.data(), data.size()) != 1) {
    return Status::Internal(OpenSslError("EVP_MAC_update"));
  }
  Sha256Digest out{};
  size_t len = 0;
  if (EVP_MAC_final(ctx.get(), out.data(), &len, out.size()) != 1 || len != out.size()) {
    return Status::Internal(OpenSslError("EVP_MAC_final"));
  }
  return out;
}

}  // namespace ros2::control

namespace ros2::control {
namespace {
constexpr size_t kGcmNonce = 12;
constexpr size_t kGcmTag = 16;
struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;
const unsigned char* U(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}
}  // namespace

Result<std::string> SealAes256Gcm(const Aes256Key& key, std::string_view plaintext, std::string_view aad) {
  std::string out(kGcmNonce + plaintext.size() + kGcmTag, '\0');
  auto* bytes = reinterpret_cast<unsigned char*>(out.data());
  ROS2_RETURN_IF_ERROR(RandomBytes(std::span(bytes, kGcmNonce)));
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), bytes) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, U(aad), static_cast<int>(aad.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), bytes + kGcmNonce, &len, U(plaintext), static_cast<int>(plaintext.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), bytes + kGcmNonce + len, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kGcmTag, bytes + kGcmNonce + plaintext.size()) != 1) {
    return Status::Internal("AES-256-GCM seal failed");
  }
  return out;
}

Result<std::string> OpenAes256Gcm(const Aes256Key& key, std::string_view sealed, std::string_view aad) {
  if (sealed.size() < kGcmNonce + kGcmTag) return Status::Corruption("sealed secret: too short");
  const size_t n = sealed.size() - kGcmNonce - kGcmTag;
  std::string out(n, '\0');
  auto* plain = reinterpret_cast<unsigned char*>(out.data());
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  std::array<unsigned char, kGcmTag> tag{};
  std::memcpy(tag.data(), sealed.data() + kGcmNonce + n, kGcmTag);
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), U(sealed)) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, U(aad), static_cast<int>(aad.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), plain, &len, U(sealed) + kGcmNonce, static_cast<int>(n)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kGcmTag, tag.data()) != 1 ||
      EVP_DecryptFinal_ex(ctx.get(), plain + len, &len) != 1) {
    return Status::Corruption("sealed secret: authentication failed (altered, or sealed with another key)");
  }
  return out;
}

Result<Aes256Key> ParseAes256KeyHex(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  Aes256Key key{};
  if (text.size() != key.size() * 2) {
    return Status::InvalidArgument(fmt::format("expected 64 hex digits, found {} characters", text.size()));
  }
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < key.size(); ++i) {
    int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return Status::InvalidArgument(fmt::format("'{}' is not a hex digit", text.substr(2 * i, 2)));
    key[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return key;
}

}  // namespace ros2::control
