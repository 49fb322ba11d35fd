#include "control/capability.h"

#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "common/hlc.h"

namespace ros2::control {
namespace {

// Body layout (little-endian integers), see docs/control-plane.md.
constexpr size_t kOffMagic = 0;       // 2 bytes 'R' 'C'
constexpr size_t kOffVersion = 2;     // 1 byte
constexpr size_t kOffRights = 3;      // 1 byte
constexpr size_t kOffTenant = 4;      // 16 bytes
constexpr size_t kOffPool = 20;       // 16 bytes
constexpr size_t kOffContainer = 36;  // 16 bytes
constexpr size_t kOffSession = 52;    // 16 bytes
constexpr size_t kOffExpiry = 68;     // 8 bytes
static_assert(kOffExpiry + 8 == Capability::kBodySize);

void PutUuid(uint8_t* dst, const Uuid& u) {
  std::memcpy(dst, u.bytes().data(), 16);
}
Uuid GetUuid(const uint8_t* src) {
  std::array<uint8_t, 16> b{};
  std::memcpy(b.data(), src, 16);
  return Uuid::FromBytes(b);
}

}  // namespace

std::array<uint8_t, Capability::kBodySize> Capability::EncodeBody() const {
  std::array<uint8_t, kBodySize> out{};
  out[kOffMagic] = kMagic0;
  out[kOffMagic + 1] = kMagic1;
  out[kOffVersion] = kVersion;
  out[kOffRights] = rights;
  PutUuid(&out[kOffTenant], tenant);
  PutUuid(&out[kOffPool], pool);
  PutUuid(&out[kOffContainer], container);
  PutUuid(&out[kOffSession], session);
  for (int i = 0; i < 8; ++i) out[kOffExpiry + static_cast<size_t>(i)] = static_cast<uint8_t>(expiry_ms >> (8 * i));
  return out;
}

Result<Capability> Capability::Decode(std::span<const uint8_t> blob) {
  if (blob.size() != kEncodedSize) {
    return Status::InvalidArgument(
        fmt::format("malformed capability: {} bytes, expected {}", blob.size(), kEncodedSize));
  }
  if (blob[kOffMagic] != kMagic0 || blob[kOffMagic + 1] != kMagic1) {
    return Status::InvalidArgument(
        fmt::format("malformed capability: bad magic 0x{:02x}{:02x}", blob[kOffMagic], blob[kOffMagic + 1]));
  }
  if (blob[kOffVersion] != kVersion) {
    return Status::InvalidArgument(
        fmt::format("malformed capability: unsupported version {} (this build reads {})", blob[kOffVersion], kVersion));
  }
  ROS2_RETURN_IF_ERROR(ValidateRights(blob[kOffRights], "malformed capability"));
  Capability cap;
  cap.rights = blob[kOffRights];
  cap.tenant = GetUuid(&blob[kOffTenant]);
  cap.pool = GetUuid(&blob[kOffPool]);
  cap.container = GetUuid(&blob[kOffContainer]);
  cap.session = GetUuid(&blob[kOffSession]);
  for (int i = 0; i < 8; ++i) cap.expiry_ms |= uint64_t{blob[kOffExpiry + static_cast<size_t>(i)]} << (8 * i);
  if (cap.tenant.IsNil() || cap.pool.IsNil() || cap.session.IsNil()) {
    return Status::InvalidArgument("malformed capability: nil tenant, pool or session");
  }
  return cap;
}

std::string Capability::ToString() const {
  return fmt::format("capability(tenant={} pool={} container={} session={} rights={} expiry_ms={})", tenant.ToString(),
                     pool.ToString(), container.IsNil() ? "-" : container.ToString(), session.ToString(),
                     RightsToString(rights), expiry_ms);
}

Result<CapabilitySigner> CapabilitySigner::Create(const CapabilityKey& key) {
  ROS2_ASSIGN_OR_RETURN(HmacSha256 hmac, HmacSha256::Create(key));
  return CapabilitySigner(std::move(hmac));
}

Result<std::string> CapabilitySigner::Sign(const Capability& cap) const {
  if (cap.tenant.IsNil() || cap.pool.IsNil() || cap.session.IsNil()) {
    return Status::InvalidArgument("sign capability: tenant, pool and session must not be nil");
  }
  ROS2_RETURN_IF_ERROR(ValidateRights(cap.rights, "sign capability"));
  auto body = cap.EncodeBody();
  ROS2_ASSIGN_OR_RETURN(Sha256Digest mac, hmac_.Compute(body));
  std::string blob(Capability::kEncodedSize, '\0');
  std::memcpy(blob.data(), body.data(), body.size());
  std::memcpy(blob.data() + body.size(), mac.data(), mac.size());
  return blob;
}

namespace {
Result<SessionKey> DeriveSessionKeyWith(const HmacSha256& hmac, const Uuid& session) {
  if (session.IsNil()) return Status::InvalidArgument("session key: nil session");
  std::array<uint8_t, kSessionKeyLabel.size() + 16> input{};
  std::memcpy(input.data(), kSessionKeyLabel.data(), kSessionKeyLabel.size());
  std::memcpy(input.data() + kSessionKeyLabel.size(), session.bytes().data(), 16);
  ROS2_ASSIGN_OR_RETURN(Sha256Digest digest, hmac.Compute(input));
  SessionKey key;
  std::memcpy(key.data(), digest.data(), key.size());
  return key;
}
}  // namespace

Result<SessionKey> CapabilitySigner::DeriveSessionKey(const Uuid& session) const {
  return DeriveSessionKeyWith(hmac_, session);
}

size_t CapabilityVerifier::UuidHash::operator()(const Uuid& u) const {
  uint64_t a = 0;
  uint64_t b = 0;
  std::memcpy(&a, u.bytes().data(), 8);
  std::memcpy(&b, u.bytes().data() + 8, 8);
  return static_cast<size_t>(a ^ (b * 0x9e3779b97f4a7c15ULL));
}

size_t CapabilityVerifier::BlobHash::operator()(const Blob& b) const {
  uint64_t h = 0;
  std::memcpy(&h, b.data() + Capability::kBodySize, sizeof(h));
  return static_cast<size_t>(h);
}

CapabilityVerifier::CapabilityVerifier(HmacSha256 hmac, Options options)
    : hmac_(std::move(hmac)), options_(std::move(options)) {
  if (options_.cache_capacity == 0) options_.cache_capacity = 1;
}

Result<std::unique_ptr<CapabilityVerifier>> CapabilityVerifier::Create(const CapabilityKey& key, Options options) {
  ROS2_ASSIGN_OR_RETURN(HmacSha256 hmac, HmacSha256::Create(key));
  return std::unique_ptr<CapabilityVerifier>(new CapabilityVerifier(std::move(hmac), std::move(options)));
}

uint64_t CapabilityVerifier::NowMs() const {
  return options_.now_ms ? options_.now_ms() : HybridClock::WallMillis();
}

Status CapabilityVerifier::CheckFresh() const {
  if (int64_t grace = fresh_grace_ns_.load(std::memory_order_acquire); grace != 0) {
    const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    const int64_t as_of = fresh_as_of_ns_.load(std::memory_order_acquire);
    if (now - as_of > grace) {
      return Status::Busy(fmt::format(
          "engine refuses every capability (fail closed): its revocation list from {} is {} ms old, the limit is {} "
          "ms; the management endpoint is unreachable",
          fresh_source_, (now - as_of) / 1'000'000, grace / 1'000'000));
    }
  }
  return Status::Ok();
}

Result<SessionKey> CapabilityVerifier::SessionKeyFor(const Uuid& session) {
  ROS2_RETURN_IF_ERROR(CheckFresh());
  if (IsRevoked(session)) {
    return Status::Unauthenticated(fmt::format("session {} was closed or revoked", session.ToString()));
  }
  return DeriveSessionKeyWith(hmac_, session);
}

Result<Capability> CapabilityVerifier::Verify(std::span<const uint8_t> blob) {
  ROS2_RETURN_IF_ERROR(CheckFresh());
  // Malformed sizes never reach the cache; Decode names the problem.
  if (blob.size() != Capability::kEncodedSize) return Capability::Decode(blob).status();
  Blob cache_key;
  std::memcpy(cache_key.data(), blob.data(), cache_key.size());
  std::optional<Capability> cached;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = verified_.find(cache_key);
    if (it != verified_.end()) cached = it->second;
  }
  Capability cap;
  if (cached) {
    cache_hits_.fetch_add(1, std::memory_order_relaxed);
    cap = *cached;
  } else {
    cache_misses_.fetch_add(1, std::memory_order_relaxed);
    ROS2_ASSIGN_OR_RETURN(cap, Capability::Decode(blob));
    ROS2_ASSIGN_OR_RETURN(Sha256Digest mac, hmac_.Compute(blob.first(Capability::kBodySize)));
    if (!ConstantTimeEqual(mac, blob.subspan(Capability::kBodySize))) {
      return Status::Unauthenticated(
          fmt::format("forged capability for session {}: signature does not match", cap.session.ToString()));
    }
  }
  uint64_t now = NowMs();
  if (cap.expiry_ms <= now) {
    return Status::Unauthenticated(fmt::format("expired capability for session {}: expired at {} ms, now {} ms",
                                               cap.session.ToString(), cap.expiry_ms, now));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (revoked_.count(cap.session) != 0) {
    return Status::Unauthenticated(
        fmt::format("revoked capability: session {} was closed or revoked", cap.session.ToString()));
  }
  for (const Uuid& pool : {Uuid(), cap.pool}) {
    auto it = revoked_tenants_.find({cap.tenant, pool});
    if (it != revoked_tenants_.end() && cap.expiry_ms <= it->second) {
      return Status::Unauthenticated(fmt::format(
          "revoked capability: tenant {} was deleted or its rights on {} changed after session {} got it",
          cap.tenant.ToString(), pool.IsNil() ? "every pool" : "pool " + pool.ToString(), cap.session.ToString()));
    }
  }
  if (!cached) {
    if (verified_.size() >= options_.cache_capacity) verified_.clear();
    verified_.emplace(cache_key, cap);
  }
  return cap;
}

Result<Capability> CapabilityVerifier::Authorize(std::span<const uint8_t> blob, const Uuid& pool, const Uuid& container,
                                                 Rights required) {
  ROS2_ASSIGN_OR_RETURN(Capability cap, Verify(blob));
  if (cap.pool != pool) {
    return Status::PermissionDenied(
        fmt::format("capability is for pool {}, not pool {}", cap.pool.ToString(), pool.ToString()));
  }
  if (!container.IsNil() && cap.container != container) {
    return Status::PermissionDenied(fmt::format("capability is for container {}, not container {}",
                                                cap.container.IsNil() ? "(none)" : cap.container.ToString(),
                                                container.ToString()));
  }
  if (!HasRights(cap.rights, required)) {
    return Status::PermissionDenied(fmt::format("capability of session {} grants '{}', the operation needs '{}'",
                                                cap.session.ToString(), RightsToString(cap.rights),
                                                RightsToString(required)));
  }
  return cap;
}

void CapabilityVerifier::Revoke(const Uuid& session, uint64_t until_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t& until = revoked_[session];
  until = std::max(until, until_ms);
}

bool CapabilityVerifier::IsRevoked(const Uuid& session) const {
  std::lock_guard<std::mutex> lock(mu_);
  return revoked_.count(session) != 0;
}

void CapabilityVerifier::RevokeTenant(const Uuid& tenant, const Uuid& pool, uint64_t cutoff_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t& cutoff = revoked_tenants_[{tenant, pool}];
  cutoff = std::max(cutoff, cutoff_ms);
}

uint64_t CapabilityVerifier::MinExpiryFor(const Uuid& tenant) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t min = 0;
  for (auto it = revoked_tenants_.lower_bound({tenant, Uuid()});
       it != revoked_tenants_.end() && it->first.first == tenant; ++it) {
    min = std::max(min, it->second + 1);
  }
  return min;
}

void CapabilityVerifier::PurgeExpiredRevocations() {
  uint64_t now = NowMs();
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(revoked_, [now](const auto& entry) { return entry.second <= now; });
  std::erase_if(revoked_tenants_, [now](const auto& entry) { return entry.second <= now; });
}

void CapabilityVerifier::RequireFreshness(std::chrono::milliseconds grace, std::string source) {
  fresh_source_ = std::move(source);
  fresh_as_of_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_release);
  fresh_grace_ns_.store(std::max<int64_t>(1, std::chrono::nanoseconds(grace).count()), std::memory_order_release);
}

void CapabilityVerifier::MarkFresh(std::chrono::steady_clock::time_point as_of) {
  const int64_t t = as_of.time_since_epoch().count();
  int64_t prev = fresh_as_of_ns_.load(std::memory_order_relaxed);
  while (prev < t && !fresh_as_of_ns_.compare_exchange_weak(prev, t, std::memory_order_release)) {
  }
}

}  // namespace ros2::control
