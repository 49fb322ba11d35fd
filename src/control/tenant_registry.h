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
// Owned by ControlPlane. Thread-safe: every method may be called concurrently.
#pragma once

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

class TenantRegistry {
 public:
  // REQUIRES: store outlives the registry.
  static Result<std::unique_ptr<TenantRegistry>> Create(StateStore* store, uint32_t pbkdf2_iterations);

  // Creates the admin tenant when it does not exist yet, with a generated secret
  // written to `admin_secret_path` (mode 0600, replaced if present). Returns
  // true when the admin was created by this call.
  Result<bool> Bootstrap(const std::string& admin_secret_path);

  // Unauthenticated (never saying whether the name or the secret was wrong)
  // unless `secret` is the secret of tenant `name`.
  Result<Principal> Authenticate(std::string_view name, std::string_view secret);

  // Creates a tenant; an empty `secret` is replaced by 32 random bytes in hex.
  // Returns the secret. AlreadyExists, InvalidArgument for bad names/secrets.
  Result<std::string> CreateTenant(std::string_view name, std::string_view secret);
  // NotFound for unknown names; the admin tenant cannot be deleted.
  Status DeleteTenant(std::string_view name);
  Result<std::vector<std::string>> ListTenants() const;
  // The tenant's identity (NotFound naming it when unknown).
  Result<Principal> Lookup(std::string_view name) const;

 private:
  TenantRegistry(StateStore* store, uint32_t iterations, HmacSha256 memo_hmac);

  StateStore* store_;
  uint32_t iterations_;
  HmacSha256 memo_hmac_;  // per-process key for the authentication memo
  mutable std::mutex mu_;
  // name -> (HMAC of the accepted secret, principal). GUARDED_BY(mu_).
  std::unordered_map<std::string, std::pair<Sha256Digest, Principal>> memo_;
};

}  // namespace ros2::control
