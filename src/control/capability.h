// Capabilities: the signed tickets every data-plane RPC carries.
//
// A Capability says "tenant T may use pool P (and container C, or the whole pool
// when C is nil) with these rights until this time, within session S". The
// control plane's Session service signs one with HMAC-SHA256 under the engine's
// capability key; engines verify it on every data-plane request. The encoded
// form is a fixed 108-byte blob (docs/control-plane.md, "Capability format"):
// a 76-byte body followed by the 32-byte HMAC of the body.
//
// This header and its library (ros2_capability) depend only on ros2_common and
// OpenSSL, so the engine's data path can link them without gRPC.
//
// Capability is a value type. CapabilitySigner and CapabilityVerifier own their
// OpenSSL key state; both are thread-safe (every method may be called from any
// thread), so one verifier may be shared by all target threads of an engine.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>

#include "common/status.h"
#include "common/uuid.h"
#include "control/crypto.h"
#include "control/rights.h"

namespace ros2::control {

inline constexpr size_t kCapabilityKeySize = 32;
using CapabilityKey = std::array<uint8_t, kCapabilityKeySize>;

struct Capability {
  static constexpr uint8_t kMagic0 = 'R';
  static constexpr uint8_t kMagic1 = 'C';
  static constexpr uint8_t kVersion = 1;
  static constexpr size_t kBodySize = 76;
  static constexpr size_t kMacSize = 32;
  static constexpr size_t kEncodedSize = kBodySize + kMacSize;  // 108 bytes

  Uuid tenant;
  Uuid pool;
  Uuid container;  // nil: a pool capability (connect), no container access
  Uuid session;
  Rights rights = 0;
  uint64_t expiry_ms = 0;  // wall-clock milliseconds since the Unix epoch

  bool IsPoolCapability() const { return container.IsNil(); }

  // The 76 signed bytes.
  std::array<uint8_t, kBodySize> EncodeBody() const;

  // Parses the structure of a blob: size, magic, version, reserved bits and
  // rights. Does NOT check the signature, expiry or revocation (the verifier
  // does). InvalidArgument names what was malformed.
  static Result<Capability> Decode(std::span<const uint8_t> blob);

  std::string ToString() const;
  friend bool operator==(const Capability&, const Capability&) = default;
};

// Signs capabilities with the capability key (control plane side).
class CapabilitySigner {
 public:
  static Result<CapabilitySigner> Create(const CapabilityKey& key);
  // The 108-byte blob: body + HMAC-SHA256(key, body).
  Result<std::string> Sign(const Capability& cap) const;

 private:
  explicit CapabilitySigner(HmacSha256 hmac) : hmac_(std::move(hmac)) {}
  HmacSha256 hmac_;
};

// Verifies capability blobs on the data path: structure, HMAC (constant-time
// compare), expiry and the revocation list, then the rights an operation needs.
// Blobs whose signature verified are cached (keyed by the whole blob, bounded),
// so a repeated capability costs a hash lookup instead of an HMAC; expiry and
// revocation are still checked on every call.
class CapabilityVerifier {
 public:
  struct Options {
    size_t cache_capacity = 4096;                // entries; the cache is cleared when full
    std::function<uint64_t()> now_ms = nullptr;  // wall clock; tests inject one
  };

  static Result<std::unique_ptr<CapabilityVerifier>> Create(const CapabilityKey& key, Options options);
  static Result<std::unique_ptr<CapabilityVerifier>> Create(const CapabilityKey& key) { return Create(key, Options()); }

  // Decodes and authenticates a blob. Errors, each with its own message:
  //   InvalidArgument  — malformed (size, magic, version, reserved bits, rights)
  //   Unauthenticated  — forged (HMAC mismatch), expired, or session revoked
  Result<Capability> Verify(std::span<const uint8_t> blob);

  // Verify() plus the authorisation of one operation: the capability must be
  // for `pool`, for `container` (unless `container` is nil: a pool-level
  // operation, which any capability of the pool may do), and hold every bit of
  // `required`. PermissionDenied names the mismatch or the missing rights.
  Result<Capability> Authorize(std::span<const uint8_t> blob, const Uuid& pool, const Uuid& container, Rights required);

  // Refuses every capability of `session` from now on. `until_ms` is when the
  // entry may be forgotten (the latest expiry of its capabilities).
  void Revoke(const Uuid& session, uint64_t until_ms);
  bool IsRevoked(const Uuid& session) const;
  // Forgets revocations whose capabilities have all expired.
  void PurgeExpiredRevocations();

  uint64_t cache_hits() const { return cache_hits_.load(std::memory_order_relaxed); }
  uint64_t cache_misses() const { return cache_misses_.load(std::memory_order_relaxed); }

 private:
  struct UuidHash {
    size_t operator()(const Uuid& u) const;
  };
  using Blob = std::array<uint8_t, Capability::kEncodedSize>;
  // The MAC bytes are pseudo-random: eight of them make a good hash.
  struct BlobHash {
    size_t operator()(const Blob& b) const;
  };
  CapabilityVerifier(HmacSha256 hmac, Options options);
  uint64_t NowMs() const;

  HmacSha256 hmac_;
  Options options_;
  mutable std::mutex mu_;
  std::unordered_map<Blob, Capability, BlobHash> verified_;  // GUARDED_BY(mu_)
  std::unordered_map<Uuid, uint64_t, UuidHash> revoked_;     // GUARDED_BY(mu_)
  std::atomic<uint64_t> cache_hits_{0};
  std::atomic<uint64_t> cache_misses_{0};
};

}  // namespace ros2::control
