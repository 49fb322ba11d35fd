#include "control/session_table.h"

#include <charconv>

#include <fmt/format.h>

namespace ros2::control {
namespace {
constexpr std::string_view kRevokedPrefix = "revoked/";
constexpr std::string_view kRevokedTenantPrefix = "revoked-tenant/";

// Parses every stored revocation ("revoked/<session>" and
// "revoked-tenant/<tenant>/<pool>"); Corruption names a bad record.
Result<std::vector<std::pair<std::string, RevocationRecord>>> ScanRevocations(StateStore* store) {
  std::vector<std::pair<std::string, RevocationRecord>> out;
  for (std::string_view prefix : {kRevokedPrefix, kRevokedTenantPrefix}) {
    ROS2_ASSIGN_OR_RETURN(auto rows, store->Scan(prefix));
    for (const auto& [key, value] : rows) {
      RevocationRecord rec;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), rec.until_ms);
      bool ok = ec == std::errc() && ptr == value.data() + value.size();
      std::string_view rest = std::string_view(key).substr(prefix.size());
      if (prefix == kRevokedPrefix) {
        auto session = Uuid::Parse(rest);
        ok = ok && session.ok();
        if (ok) rec.session = *session;
      } else {
        auto slash = rest.find('/');
        auto tenant = Uuid::Parse(rest.substr(0, slash));
        auto pool = slash == std::string_view::npos ? Result<Uuid>(Status::InvalidArgument("no pool"))
                                                    : Uuid::Parse(rest.substr(slash + 1));
        ok = ok && tenant.ok() && pool.ok();
        if (ok) {
          rec.tenant = *tenant;
          rec.pool = *pool;
        }
      }
      if (!ok) {
        return Status::Corruption(fmt::format("state store: revocation record '{}' = '{}' does not parse", key, value));
      }
      out.emplace_back(key, rec);
    }
  }
  return out;
}

}  // namespace

Status SessionTable::LoadRevocations(uint64_t now_ms) {
  ROS2_ASSIGN_OR_RETURN(auto rows, ScanRevocations(store_));
  StoreBatch expired;
  for (const auto& [key, rec] : rows) {
    if (rec.until_ms <= now_ms) {
      expired.Delete(key);
      continue;
    }
    if (rec.session.IsNil()) {
      verifier_->RevokeTenant(rec.tenant, rec.pool, rec.until_ms);
    } else {
      verifier_->Revoke(rec.session, rec.until_ms);
    }
  }
  if (!expired.deletes.empty()) ROS2_RETURN_IF_ERROR(store_->Write(expired));
  return Status::Ok();
}

Result<SessionRecord> SessionTable::Open(const Principal& tenant, const Uuid& pool, uint64_t expiry_ms) {
  SessionRecord rec{Uuid::Generate(), tenant, pool, expiry_ms};
  uint64_t now = now_ms_();
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(sessions_, [&](const auto& entry) {
    if (entry.second.expiry_ms > now) return false;
    auto it = per_tenant_.find(entry.second.tenant.uuid);
    if (it != per_tenant_.end() && --it->second == 0) per_tenant_.erase(it);
    return true;
  });
  size_t& mine = per_tenant_[tenant.uuid];
  if (mine >= limits_.max_per_tenant) {
    if (mine == 0) per_tenant_.erase(tenant.uuid);
    return Status::Busy(fmt::format(
        "tenant '{}' has {} open sessions, the limit: disconnect some (or wait until they expire) before connecting "
        "again",
        tenant.name, limits_.max_per_tenant));
  }
  if (sessions_.size() >= limits_.max_total) {
    if (mine == 0) per_tenant_.erase(tenant.uuid);
    return Status::Busy(
        fmt::format("the control plane has {} open sessions, the limit: try again later", limits_.max_total));
  }
  ++mine;
  sessions_[rec.session] = rec;
  return rec;
}

Result<SessionRecord> SessionTable::Find(std::string_view session, const Principal& tenant) {
  return Extend(session, tenant, 0);
}

Result<SessionRecord> SessionTable::Extend(std::string_view session, const Principal& tenant, uint64_t expiry_ms) {
  if (session.empty()) return Status::InvalidArgument("missing session_uuid");
  auto uuid = Uuid::Parse(session);
  if (!uuid.ok()) {
    return Status::InvalidArgument(
        fmt::format("session_uuid '{}' is a bad UUID: {}", session, uuid.status().message()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(*uuid);
  if (it == sessions_.end() || it->second.tenant.uuid != tenant.uuid || it->second.expiry_ms <= now_ms_()) {
    return Status::NotFound(
        fmt::format("unknown session {} (closed, expired, or the service restarted: connect again)", session));
  }
  it->second.expiry_ms = std::max(it->second.expiry_ms, expiry_ms);
  return it->second;
}

Status SessionTable::Close(std::string_view session, const Principal& tenant) {
  SessionRecord rec;
  {
    // Find and remove at once: an Extend after this point finds nothing, one
    // before it raised rec.expiry_ms, so the revocation covers every
    // capability issued in the session.
    ROS2_ASSIGN_OR_RETURN(rec, Find(session, tenant));
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(rec.session);
    if (it == sessions_.end()) {
      return Status::NotFound(fmt::format("unknown session {} (closed concurrently)", session));
    }
    rec = it->second;
    sessions_.erase(it);
    auto t = per_tenant_.find(rec.tenant.uuid);
    if (t != per_tenant_.end() && --t->second == 0) per_tenant_.erase(t);
  }
  // In memory first: the data path refuses the session from here on.
  verifier_->Revoke(rec.session, rec.expiry_ms);
  verifier_->PurgeExpiredRevocations();
  return store_->Put(fmt::format("{}{}", kRevokedPrefix, rec.session.ToString()), std::to_string(rec.expiry_ms));
}

Status SessionTable::RevokeTenant(const Uuid& tenant, const Uuid& pool, uint64_t cutoff_ms, bool drop_sessions,
                                  StoreBatch* into) {
  verifier_->RevokeTenant(tenant, pool, cutoff_ms);
  if (drop_sessions) {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(sessions_, [&](const auto& entry) { return entry.second.tenant.uuid == tenant; });
    per_tenant_.erase(tenant);
  }
  const std::string key = fmt::format("{}{}/{}", kRevokedTenantPrefix, tenant.ToString(), pool.ToString());
  uint64_t cutoff = cutoff_ms;
  if (auto old = store_->Get(key); old.ok()) {
    uint64_t prev = 0;
    auto [ptr, ec] = std::from_chars(old->data(), old->data() + old->size(), prev);
    if (ec == std::errc()) cutoff = std::max(cutoff, prev);
  }
  if (into != nullptr) {
    into->Put(key, std::to_string(cutoff));
    return Status::Ok();
  }
  return store_->Put(key, std::to_string(cutoff));
}

Result<std::vector<RevocationRecord>> SessionTable::ListRevocations(uint64_t now_ms) const {
  ROS2_ASSIGN_OR_RETURN(auto rows, ScanRevocations(store_));
  std::vector<RevocationRecord> out;
  for (const auto& [key, rec] : rows) {
    if (rec.until_ms > now_ms) out.push_back(rec);
  }
  return out;
}

size_t SessionTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

}  // namespace ros2::control
