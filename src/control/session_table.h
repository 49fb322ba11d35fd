// SessionTable: the open sessions of the Session service.
//
// A session is created by Connect (tenant + pool) and named by a random UUID
// that every capability issued within it carries. Closing a session revokes
// it: the CapabilityVerifier refuses its capabilities from then on and the
// revocation is stored ("revoked/<session uuid>" -> expiry ms, decimal) so it
// survives restarts until the capabilities would have expired anyway. Open
// sessions themselves are kept in memory only: after a restart, clients
// reconnect (their capabilities stay valid until they expire).
//
// Tenant revocations ("revoked-tenant/<tenant uuid>/<pool uuid, nil for all
// pools>" -> cut-off ms) refuse every capability of a tenant issued before
// the revocation (CapabilityVerifier::RevokeTenant); they are recorded when a
// tenant is deleted or loses rights in an ACL.
//
// Sessions are bounded: at most `max_per_tenant` open sessions per tenant and
// `max_total` in all; Open refuses more (Busy) after forgetting expired ones.
// Sessions belong to a tenant by UUID: a tenant re-created under the same
// name does not see the old one's sessions.
//
// Owned by ControlPlane. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/uuid.h"
#include "control/capability.h"
#include "control/state_store.h"
#include "control/tenant_registry.h"

namespace ros2::control {

struct SessionRecord {
  Uuid session;
  Principal tenant;
  Uuid pool;
  uint64_t expiry_ms = 0;  // the latest expiry of capabilities issued in it
};

// One stored revocation: a session (tenant and pool nil) or a tenant cut-off
// (session nil; pool nil: every pool).
struct RevocationRecord {
  Uuid session;
  Uuid tenant;
  Uuid pool;
  uint64_t until_ms = 0;  // session: when it may be forgotten; tenant: the cut-off
};

struct SessionLimits {
  size_t max_per_tenant = 1024;
  size_t max_total = 65536;
};

class SessionTable {
 public:
  // REQUIRES: store and verifier outlive the table; now_ms is the wall clock.
  SessionTable(StateStore* store, CapabilityVerifier* verifier, std::function<uint64_t()> now_ms,
               SessionLimits limits = {})
      : store_(store), verifier_(verifier), now_ms_(std::move(now_ms)), limits_(limits) {}

  // Loads stored revocations into the verifier, dropping expired ones.
  Status LoadRevocations(uint64_t now_ms);

  // Opens a session; sessions whose capabilities have all expired are
  // forgotten on the way (their clients connect again). Busy when the tenant
  // or the table is at its limit.
  Result<SessionRecord> Open(const Principal& tenant, const Uuid& pool, uint64_t expiry_ms);
  // The session, if it is open, unexpired and belongs to `tenant`: NotFound
  // otherwise (also for another tenant's session: its existence is not revealed).
  Result<SessionRecord> Find(std::string_view session, const Principal& tenant);
  // Find() and, atomically with it, raises the recorded expiry to `expiry_ms`
  // (a container capability with that expiry is about to be issued). A session
  // closed before this call is NotFound; one closed after it is revoked until
  // at least `expiry_ms`.
  Result<SessionRecord> Extend(std::string_view session, const Principal& tenant, uint64_t expiry_ms);
  // Removes the session and revokes its capabilities (durably).
  Status Close(std::string_view session, const Principal& tenant);

  // Refuses every capability of `tenant` on `pool` (nil: on every pool) whose
  // expiry is at or before `cutoff_ms` (durably, and in the verifier). With
  // `drop_sessions` the tenant's open sessions are forgotten too. With `into`
  // the stored record is added to that batch (the caller writes it) instead.
  Status RevokeTenant(const Uuid& tenant, const Uuid& pool, uint64_t cutoff_ms, bool drop_sessions,
                      StoreBatch* into = nullptr);

  // Stored revocations that are still in force at `now_ms`.
  Result<std::vector<RevocationRecord>> ListRevocations(uint64_t now_ms) const;

  size_t size() const;

 private:
  StateStore* store_;
  CapabilityVerifier* verifier_;
  std::function<uint64_t()> now_ms_;
  SessionLimits limits_;
  mutable std::mutex mu_;
  std::map<Uuid, SessionRecord> sessions_;  // GUARDED_BY(mu_)
  std::map<Uuid, size_t> per_tenant_;       // tenant uuid -> open sessions. GUARDED_BY(mu_)
};

}  // namespace ros2::control
