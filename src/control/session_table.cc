#include "control/session_table.h"

#include <charconv>

#include <fmt/format.h>

namespace ros2::control {
namespace {
constexpr std::string_view kRevokedPrefix = "revoked/";
}  // namespace

Status SessionTable::LoadRevocations(uint64_t now_ms) {
  ROS2_ASSIGN_OR_RETURN(auto rows, store_->Scan(kRevokedPrefix));
  StoreBatch expired;
  for (const auto& [key, value] : rows) {
    uint64_t until = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), until);
    auto session = Uuid::Parse(std::string_view(key).substr(kRevokedPrefix.size()));
    if (ec != std::errc() || ptr != value.data() + value.size() || !session.ok()) {
      return Status::Corruption(fmt::format("state store: revocation record '{}' = '{}' does not parse", key, value));
    }
    if (until <= now_ms) {
      expired.Delete(key);
      continue;
    }
    verifier_->Revoke(*session, until);
  }
  if (!expired.deletes.empty()) ROS2_RETURN_IF_ERROR(store_->Write(expired));
  return Status::Ok();
}

SessionRecord SessionTable::Open(const Principal& tenant, const Uuid& pool, uint64_t expiry_ms) {
  SessionRecord rec{Uuid::Generate(), tenant, pool, expiry_ms};
  uint64_t now = now_ms_();
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(sessions_, [now](const auto& entry) { return entry.second.expiry_ms <= now; });
  sessions_[rec.session] = rec;
  return rec;
}

Result<SessionRecord> SessionTable::Find(std::string_view session, const Principal& tenant) {
  if (session.empty()) return Status::InvalidArgument("missing session_uuid");
  auto uuid = Uuid::Parse(session);
  if (!uuid.ok()) {
    return Status::InvalidArgument(
        fmt::format("session_uuid '{}' is a bad UUID: {}", session, uuid.status().message()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(*uuid);
  if (it == sessions_.end() || it->second.tenant.name != tenant.name || it->second.expiry_ms <= now_ms_()) {
    return Status::NotFound(
        fmt::format("unknown session {} (closed, expired, or the service restarted: connect again)", session));
  }
  return it->second;
}

void SessionTable::Extend(const Uuid& session, uint64_t expiry_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(session);
  if (it != sessions_.end()) it->second.expiry_ms = std::max(it->second.expiry_ms, expiry_ms);
}

Status SessionTable::Close(std::string_view session, const Principal& tenant) {
  ROS2_ASSIGN_OR_RETURN(SessionRecord rec, Find(session, tenant));
  ROS2_RETURN_IF_ERROR(
      store_->Put(fmt::format("{}{}", kRevokedPrefix, rec.session.ToString()), std::to_string(rec.expiry_ms)));
  verifier_->Revoke(rec.session, rec.expiry_ms);
  verifier_->PurgeExpiredRevocations();
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.erase(rec.session);
  return Status::Ok();
}

Result<std::vector<std::pair<Uuid, uint64_t>>> SessionTable::ListRevocations(uint64_t now_ms) const {
  ROS2_ASSIGN_OR_RETURN(auto rows, store_->Scan(kRevokedPrefix));
  std::vector<std::pair<Uuid, uint64_t>> out;
  for (const auto& [key, value] : rows) {
    uint64_t until = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), until);
    auto session = Uuid::Parse(std::string_view(key).substr(kRevokedPrefix.size()));
    if (ec != std::errc() || ptr != value.data() + value.size() || !session.ok()) {
      return Status::Corruption(fmt::format("state store: revocation record '{}' = '{}' does not parse", key, value));
    }
    if (until > now_ms) out.emplace_back(*session, until);
  }
  return out;
}

size_t SessionTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

}  // namespace ros2::control
