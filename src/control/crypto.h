// Small wrappers over OpenSSL 3 for the control plane: random bytes, HMAC-SHA256
// (EVP_MAC), PBKDF2-HMAC-SHA256 secret hashing, constant-time comparison and hex.
//
// HmacSha256 keeps one EVP_MAC_CTX initialised with its key as a template and
// duplicates it for every computation, so the key schedule runs once. It owns
// its OpenSSL handles (RAII). Compute() is const and may be called from several
// threads at once; the object itself is movable, not copyable.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

typedef struct evp_mac_st EVP_MAC;
typedef struct evp_mac_ctx_st EVP_MAC_CTX;

namespace ros2::control {

using Sha256Digest = std::array<uint8_t, 32>;

// Fills `out` from OpenSSL's CSPRNG; Internal when the generator fails.
Status RandomBytes(std::span<uint8_t> out);
// `n` random bytes as lower-case hex (2n characters).
Result<std::string> RandomHex(size_t n);

std::string HexEncode(std::span<const uint8_t> bytes);

// Compares in time that depends only on the sizes, never on the contents.
bool ConstantTimeEqual(std::span<const uint8_t> a, std::span<const uint8_t> b);
inline bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  return ConstantTimeEqual(std::span(reinterpret_cast<const uint8_t*>(a.data()), a.size()),
                           std::span(reinterpret_cast<const uint8_t*>(b.data()), b.size()));
}

// PBKDF2-HMAC-SHA256 of `secret` with `salt` and `iterations` rounds.
Result<Sha256Digest> Pbkdf2Sha256(std::string_view secret, std::span<const uint8_t> salt, uint32_t iterations);

class HmacSha256 {
 public:
  // REQUIRES: key is not empty.
  static Result<HmacSha256> Create(std::span<const uint8_t> key);

  HmacSha256(HmacSha256&&) noexcept;
  HmacSha256& operator=(HmacSha256&&) noexcept;
  ~HmacSha256();

  Result<Sha256Digest> Compute(std::span<const uint8_t> data) const;

 private:
  struct MacDeleter {
    void operator()(EVP_MAC* mac) const;
  };
  struct CtxDeleter {
    void operator()(EVP_MAC_CTX* ctx) const;
  };
  HmacSha256() = default;
  std::unique_ptr<EVP_MAC, MacDeleter> mac_;
  std::unique_ptr<EVP_MAC_CTX, CtxDeleter> keyed_template_;
};

}  // namespace ros2::control

namespace ros2::control {

using Aes256Key = std::array<uint8_t, 32>;

// AES-256-GCM: a random 12-byte nonce, then the ciphertext, then the 16-byte
// tag; `aad` is authenticated, not encrypted. For secrets the control plane
// keeps in a shared store (the capability key in etcd, docs/cluster.md).
Result<std::string> SealAes256Gcm(const Aes256Key& key, std::string_view plaintext, std::string_view aad);
// Corruption when the sealed text is too short, was altered, or was sealed
// with another key or aad.
Result<std::string> OpenAes256Gcm(const Aes256Key& key, std::string_view sealed, std::string_view aad);
// 64 hex digits (a key file's contents, surrounding whitespace ignored).
Result<Aes256Key> ParseAes256KeyHex(std::string_view text);

}  // namespace ros2::control
