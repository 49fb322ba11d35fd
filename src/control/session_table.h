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

class SessionTable {
 public:
  // REQUIRES: store and verifier outlive the table; now_ms is the wall clock.
  SessionTable(StateStore* store, CapabilityVerifier* verifier, std::function<uint64_t()> now_ms)
      : store_(store), verifier_(verifier), now_ms_(std::move(now_ms)) {}

  // Loads stored revocations into the verifier, dropping expired ones.
  Status LoadRevocations(uint64_t now_ms);

  // Opens a session; sessions whose capabilities have all expired are
  // forgotten on the way (their clients connect again).
  SessionRecord Open(const Principal& tenant, const Uuid& pool, uint64_t expiry_ms);
  // The session, if it is open, unexpired and belongs to `tenant`: NotFound
  // otherwise (also for another tenant's session: its existence is not revealed).
  Result<SessionRecord> Find(std::string_view session, const Principal& tenant);
  // Extends the recorded expiry (a container capability was issued).
  void Extend(const Uuid& session, uint64_t expiry_ms);
  // Removes the session and revokes its capabilities (durably).
  Status Close(std::string_view session, const Principal& tenant);

  // Stored revocations that are still in force at `now_ms`.
  Result<std::vector<std::pair<Uuid, uint64_t>>> ListRevocations(uint64_t now_ms) const;

  size_t size() const;

 private:
  StateStore* store_;
  CapabilityVerifier* verifier_;
  std::function<uint64_t()> now_ms_;
  mutable std::mutex mu_;
  std::map<Uuid, SessionRecord> sessions_;  // GUARDED_BY(mu_)
};

}  // namespace ros2::control
