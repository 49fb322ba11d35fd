// libFuzzer target: capability decoding and verification
// (src/control/capability.h). Properties checked on every input:
//   - Decode accepts exactly the blobs whose body re-encodes to the input's
//     first 76 bytes;
//   - Verify accepts a blob only if it carries the right HMAC (the signer
//     produces exactly the input), is unexpired and unrevoked, and gives the
//     same answer when asked again (the cache);
//   - a correctly signed copy of the input's capability verifies, and the same
//     blob with any one bit flipped does not;
//   - a tenant revocation refuses it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "control/capability.h"

using namespace ros2::control;

namespace {

constexpr uint64_t kNowMs = 1'000'000;

CapabilityKey TestKey() {
  CapabilityKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(i * 7 + 3);
  return k;
}

std::span<const uint8_t> Bytes(const std::string& s) {
  return std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const CapabilitySigner signer = std::move(CapabilitySigner::Create(TestKey())).value();
  CapabilityVerifier::Options options;
  options.now_ms = [] { return kNowMs; };
  options.cache_capacity = 4;
  auto verifier = std::move(CapabilityVerifier::Create(TestKey(), options)).value();
  const std::span<const uint8_t> input(data, size);

  auto decoded = Capability::Decode(input);
  auto verified = verifier->Verify(input);
  if (!decoded.ok()) {
    if (verified.ok()) abort();  // a malformed blob verified
    return 0;
  }
  const Capability& cap = *decoded;
  auto body = cap.EncodeBody();
  if (size != Capability::kEncodedSize || std::memcmp(body.data(), data, body.size()) != 0) abort();

  auto signed_blob = signer.Sign(cap);
  if (!signed_blob.ok()) abort();  // everything Decode accepts can be signed
  const bool genuine = std::memcmp(signed_blob->data(), data, size) == 0;
  const bool should_pass = genuine && cap.expiry_ms > kNowMs;
  if (verified.ok() != should_pass) abort();
  if (verified.ok() && !(*verified == cap)) abort();
  if (verifier->Verify(input).ok() != should_pass) abort();  // cached or not, the same answer

  // The genuine blob of this capability, then each single-bit change of it.
  const auto good = Bytes(*signed_blob);
  if (verifier->Verify(good).ok() != (cap.expiry_ms > kNowMs)) abort();
  if (cap.expiry_ms > kNowMs) {
    std::string flipped = *signed_blob;
    const size_t bit = (size_t{data[0]} << 8 | data[size - 1]) % (flipped.size() * 8);
    flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
    if (verifier->Verify(Bytes(flipped)).ok()) abort();
    // Rights never exceed what the blob grants.
    auto authorized = verifier->Authorize(good, cap.pool, cap.container, kAllRights);
    if (authorized.ok() != (cap.rights == kAllRights)) abort();
    // A tenant cut-off at or after its expiry refuses it; the session stays unrevoked.
    verifier->RevokeTenant(cap.tenant, cap.pool, cap.expiry_ms);
    if (verifier->Verify(good).ok()) abort();
    if (verifier->MinExpiryFor(cap.tenant) != cap.expiry_ms + 1) abort();
    if (verifier->IsRevoked(cap.session)) abort();
  }
  return 0;
}
