#include "control/crypto.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

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
