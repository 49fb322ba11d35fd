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
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "common/status.h"
#include "common/uuid.h"
#include "control/crypto.h"
#include "control/rights.h"

namespace ros2::control {

inline constexpr size_t kCapabilityKeySize = 32;
using CapabilityKey = std::array<uint8_t, kCapabilityKeySize>;
// A session's key (docs/security.md, "Sessions on the data plane"):
// HMAC-SHA256(capability key, "ros2 session key" || the session's 16 uuid
// bytes). The control plane hands it to the session's client with the session
// (over TLS or the unix socket); every engine holding the capability key
// derives it itself, so it is never stored. The client proves it holds it when
// it authenticates a data-plane connection for the session.
using SessionKey = std::array<uint8_t, 32>;
inline constexpr std::string_view kSessionKeyLabel = "ros2 session key";

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
  // The key of `session` (see SessionKey).
  Result<SessionKey> DeriveSessionKey(const Uuid& session) const;

 private:
  explicit CapabilitySigner(HmacSha256 hmac) : hmac_(std::move(hmac)) {}
  HmacSha256 hmac_;
};

// Verifies capability blobs on the data path: structure, HMAC (constant-time
// compare), expiry and the revocation list, then the rights an operation needs.
// Blobs whose signature verified are cached (keyed by the whole blob, bounded),
// so a repeated capability costs a hash lookup instead of an HMAC; expiry and
// revocation are still checked on every call.
//
// Two kinds of revocation: a session (Disconnect: every capability of the
// session) and a tenant cut-off (an ACL change or a deleted tenant: every
// capability of the tenant, on one pool or on all, whose expiry is at or
// before the cut-off, i.e. every one issued before the revocation).
//
// A verifier fed from a remote management endpoint (a joined engine) can be
// made to fail closed: after RequireFreshness(grace), Verify refuses every
// capability (Busy) unless MarkFresh() was called less than `grace` ago, so
// an engine that lost its management endpoint stops trusting its revocation
// list within `grace`.
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
  //   Unauthenticated  — forged (HMAC mismatch), expired, or revoked (session
  //                      closed, tenant deleted, ACL narrowed)
  //   Busy             — fail closed: no fresh revocation list (RequireFreshness)
  Result<Capability> Verify(std::span<const uint8_t> blob);

  // Verify() plus the authorisation of one operation: the capability must be
  // for `pool`, for `container` (unless `container` is nil: a pool-level
  // operation, which any capability of the pool may do), and hold every bit of
  // `required`. PermissionDenied names the mismatch or the missing rights.
  Result<Capability> Authorize(std::span<const uint8_t> blob, const Uuid& pool, const Uuid& container, Rights required);

  // The key of `session` (see SessionKey), for a data-plane connection that
  // authenticates for it: Unauthenticated when the session is revoked, Busy
  // when failing closed (as Verify).
  Result<SessionKey> SessionKeyFor(const Uuid& session);

  // Refuses every capability of `session` from now on. `until_ms` is when the
  // entry may be forgotten (the latest expiry of its capabilities).
  void Revoke(const Uuid& session, uint64_t until_ms);
  bool IsRevoked(const Uuid& session) const;
  // Refuses every capability of `tenant` for `pool` (nil: for every pool)
  // whose expiry is at or before `cutoff_ms`. The entry may be forgotten at
  // `cutoff_ms`: every capability it refuses has expired by then.
  void RevokeTenant(const Uuid& tenant, const Uuid& pool, uint64_t cutoff_ms);
  // The lowest expiry a capability of `tenant` issued now must have so that no
  // recorded cut-off of the tenant refuses it (0 when there is none).
  uint64_t MinExpiryFor(const Uuid& tenant) const;
  // Forgets revocations whose capabilities have all expired.
  void PurgeExpiredRevocations();

  // Fail closed (see the class comment): from now on Verify refuses every
  // capability unless MarkFresh() was called less than `grace` ago. `source`
  // names the management endpoint in the error. The first MarkFresh() counts
  // from this call.
  void RequireFreshness(std::chrono::milliseconds grace, std::string source);
  // The revocation list is complete as of `as_of` (the steady-clock time the
  // sync request was sent, not when its answer arrived).
  void MarkFresh(std::chrono::steady_clock::time_point as_of);

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
  Status CheckFresh() const;  // the fail-closed rule (RequireFreshness)

  HmacSha256 hmac_;
  Options options_;
  mutable std::mutex mu_;
  std::unordered_map<Blob, Capability, BlobHash> verified_;  // GUARDED_BY(mu_)
  std::unordered_map<Uuid, uint64_t, UuidHash> revoked_;     // GUARDED_BY(mu_)
  // (tenant, pool or nil) -> cut-off expiry. GUARDED_BY(mu_)
  std::map<std::pair<Uuid, Uuid>, uint64_t> revoked_tenants_;
  // Fail closed: 0 = off; else the grace (ns) and the steady-clock time (ns
  // since its epoch) of the latest MarkFresh.
  std::atomic<int64_t> fresh_grace_ns_{0};
  std::atomic<int64_t> fresh_as_of_ns_{0};
  std::string fresh_source_;  // set before fresh_grace_ns_ (release), read after it (acquire)
  std::atomic<uint64_t> cache_hits_{0};
  std::atomic<uint64_t> cache_misses_{0};
};

}  // namespace ros2::control
