// TenantRegistry: named principals of the control plane and their secrets.
//
// A tenant is a name plus a secret. Only a salted PBKDF2-HMAC-SHA256 hash of the
// secret is stored (TenantRecord under "tenant/<name>"); Authenticate() derives
// the hash again and compares in constant time. Successful authentications are
// remembered in memory as an HMAC of the secret under a per-process random key,
// so repeated gRPC calls do not pay PBKDF2 each time. The tenant named "admin"
// is the system administrator; Bootstrap() creates it on the first start and
// writes its generated secret to a 0600 file.
//
// Guessing is bounded (AuthLimits): after `max_failures` failed attempts in a
// row a tenant name is locked (`lockout`, doubling with every further failure
// up to `max_lockout`) and attempts on it are refused without deriving the
// hash; failures on the whole registry are budgeted by a token bucket
// (`failures_per_second`, `failure_burst`), and when it is empty attempts that
// would need a derivation are refused (Busy). Secrets remembered from an
// earlier success still pass during a lockout. An unknown tenant name costs
// the same derivation as a wrong secret, so timing does not tell whether a
// name exists, and it is locked the same way.
//
// Owned by ControlPlane. Thread-safe: every method may be called concurrently.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "common/uuid.h"
#include "control/crypto.h"
#include "control/state_store.h"

namespace ros2::control {

inline constexpr std::string_view kAdminTenant = "admin";

// An authenticated caller.
struct Principal {
  std::string name;
  Uuid uuid;
  bool is_admin() const { return name == kAdminTenant; }
};

// Tenant names, pool and container labels: 1..64 characters of [A-Za-z0-9._-].
Status ValidateName(std::string_view name, std::string_view what);

struct AuthLimits {
  uint32_t max_failures = 5;                // per name, in a row, before a lockout
  std::chrono::milliseconds lockout{1000};  // first lockout; doubles per further failure
  std::chrono::milliseconds max_lockout{60'000};
  double failures_per_second = 20;  // registry-wide failure budget
  double failure_burst = 100;
  size_t max_tracked_names = 10000;  // names with recent failures kept in memory
};

class TenantRegistry {
 public:
  // REQUIRES: store outlives the registry.
  static Result<std::unique_ptr<TenantRegistry>> Create(StateStore* store, uint32_t pbkdf2_iterations,
                                                        AuthLimits limits = {});

  // Creates the admin tenant when it does not exist yet, with a generated secret
  // written to `admin_secret_path` (mode 0600, replaced if present). Returns
  // true when the admin was created by this call.
  Result<bool> Bootstrap(const std::string& admin_secret_path);

  // Unauthenticated (never saying whether the name or the secret was wrong)
  // unless `secret` is the secret of tenant `name`; also while the name is
  // locked out. Busy when the registry-wide failure budget is spent.
  Result<Principal> Authenticate(std::string_view name, std::string_view secret);
  // Unauthenticated unless the tenant still exists with this UUID (it may
  // have been deleted since the caller authenticated).
  Status CheckCurrent(const Principal& who) const;

  // Creates a tenant; an empty `secret` is replaced by 32 random bytes in hex.
  // Returns the secret. AlreadyExists, InvalidArgument for bad names/secrets.
  Result<std::string> CreateTenant(std::string_view name, std::string_view secret);
  // What a caller adds to the batch that deletes a tenant (its revocation),
  // so the deletion and its consequences are one atomic write.
  using AlsoInBatch = std::function<Status(const Principal& gone, StoreBatch* batch)>;
  // NotFound for unknown names; the admin tenant cannot be deleted. Returns
  // the deleted tenant. A login racing the deletion either finishes before it
  // (and its memo is dropped) or fails.
  Result<Principal> DeleteTenant(std::string_view name, const AlsoInBatch& also = nullptr);
  Result<std::vector<std::string>> ListTenants() const;
  // The tenant's identity (NotFound naming it when unknown).
  Result<Principal> Lookup(std::string_view name) const;

 private:
  TenantRegistry(StateStore* store, uint32_t iterations, HmacSha256 memo_hmac, AuthLimits limits);
  // OK, or the refusal of an attempt on `name` that would need a derivation.
  Status AdmitAttempt(const std::string& name, const Status& denied);
  void RecordFailure(const std::string& name);

  struct Failures {
    uint32_t count = 0;
    std::chrono::steady_clock::time_point locked_until{};
    std::chrono::steady_clock::time_point last{};
  };

  StateStore* store_;
  uint32_t iterations_;
  HmacSha256 memo_hmac_;  // per-process key for the authentication memo
  AuthLimits limits_;
  std::array<uint8_t, 16> dummy_salt_{};  // for unknown names (same cost as a wrong secret)
  mutable std::mutex mu_;
  // name -> (HMAC of the accepted secret, principal). GUARDED_BY(mu_).
  std::unordered_map<std::string, std::pair<Sha256Digest, Principal>> memo_;
  std::mutex limit_mu_;
  std::unordered_map<std::string, Failures> failures_;  // GUARDED_BY(limit_mu_)
  double budget_ = 0;                                   // GUARDED_BY(limit_mu_)
  std::chrono::steady_clock::time_point budget_at_{};   // GUARDED_BY(limit_mu_)
};

}  // namespace ros2::control
