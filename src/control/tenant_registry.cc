#include "control/tenant_registry.h"

#include <filesystem>
#include <optional>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "common/hlc.h"
#include "ros2/common.pb.h"

namespace ros2::control {
namespace {

constexpr std::string_view kTenantPrefix = "tenant/";
constexpr size_t kSaltSize = 16;
constexpr size_t kMaxSecret = 256;

std::span<const uint8_t> AsBytes(std::string_view s) {
  return std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

Status WriteSecretFile(const std::string& path, const std::string& secret) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, fmt::format("admin bootstrap: create {}", path));
  Status st;
  std::string text = secret + "\n";
  if (::fchmod(fd, 0600) != 0) {
    st = Status::FromErrno(errno, fmt::format("admin bootstrap: chmod 0600 {}", path));
  } else if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    st = Status::FromErrno(errno == 0 ? EIO : errno, fmt::format("admin bootstrap: write {}", path));
  } else if (::fsync(fd) != 0) {
    st = Status::FromErrno(errno, fmt::format("admin bootstrap: fsync {}", path));
  }
  ::close(fd);
  return st;
}

}  // namespace

Status ValidateName(std::string_view name, std::string_view what) {
  if (name.empty()) return Status::InvalidArgument(fmt::format("missing {}", what));
  if (name.size() > 64) {
    return Status::InvalidArgument(
        fmt::format("{} '{}' is {} characters long, at most 64 allowed", what, name, name.size()));
  }
  auto bad = std::find_if(name.begin(), name.end(), [](char c) {
    return !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
             c == '-');
  });
  if (bad != name.end()) {
    return Status::InvalidArgument(fmt::format(
        "{} '{}' has the character '{}': only letters, digits, '.', '_' and '-' are allowed", what, name, *bad));
  }
  return Status::Ok();
}

TenantRegistry::TenantRegistry(StateStore* store, uint32_t iterations, HmacSha256 memo_hmac, AuthLimits limits)
    : store_(store),
      iterations_(iterations),
      memo_hmac_(std::move(memo_hmac)),
      limits_(limits),
      budget_(limits.failure_burst),
      budget_at_(std::chrono::steady_clock::now()) {}

Result<std::unique_ptr<TenantRegistry>> TenantRegistry::Create(StateStore* store, uint32_t pbkdf2_iterations,
                                                               AuthLimits limits) {
  if (pbkdf2_iterations == 0) return Status::InvalidArgument("tenant registry: PBKDF2 iterations must be positive");
  std::array<uint8_t, 32> memo_key{};
  ROS2_RETURN_IF_ERROR(RandomBytes(memo_key));
  ROS2_ASSIGN_OR_RETURN(HmacSha256 hmac, HmacSha256::Create(memo_key));
  std::unique_ptr<TenantRegistry> r(new TenantRegistry(store, pbkdf2_iterations, std::move(hmac), limits));
  ROS2_RETURN_IF_ERROR(RandomBytes(r->dummy_salt_));
  return r;
}

Status TenantRegistry::AdmitAttempt(const std::string& name, const Status& denied) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(limit_mu_);
  auto it = failures_.find(name);
  if (it != failures_.end() && now < it->second.locked_until) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(it->second.locked_until - now);
    return Status::Unauthenticated(fmt::format("{}: {} failed attempts in a row, locked for {} ms more",
                                               denied.message(), it->second.count, left.count() + 1));
  }
  const double elapsed = std::chrono::duration<double>(now - budget_at_).count();
  budget_ = std::min(limits_.failure_burst, budget_ + elapsed * limits_.failures_per_second);
  budget_at_ = now;
  if (budget_ < 1) {
    return Status::Busy(
        fmt::format("authentication of tenant '{}' refused: too many failed authentications on this endpoint, try "
                    "again in a second",
                    name));
  }
  return Status::Ok();
}

void TenantRegistry::RecordFailure(const std::string& name) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(limit_mu_);
  budget_ = std::max(0.0, budget_ - 1);
  auto it = failures_.find(name);
  if (it == failures_.end()) {
    if (failures_.size() >= limits_.max_tracked_names) {
      // Forget names that failed long ago; when every entry is recent the
      // registry-wide budget still bounds the work.
      std::erase_if(failures_, [&](const auto& e) { return now - e.second.last > limits_.max_lockout; });
      if (failures_.size() >= limits_.max_tracked_names) return;
    }
    it = failures_.emplace(name, Failures{}).first;
  }
  Failures& f = it->second;
  f.count++;
  f.last = now;
  if (f.count >= limits_.max_failures) {
    const uint32_t doublings = std::min<uint32_t>(f.count - limits_.max_failures, 20);
    auto lock_for =
        std::min<std::chrono::milliseconds>(limits_.lockout * (int64_t{1} << doublings), limits_.max_lockout);
    f.locked_until = now + lock_for;
  }
}

Result<bool> TenantRegistry::Bootstrap(const std::string& admin_secret_path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto existing = store_->Get(fmt::format("{}{}", kTenantPrefix, kAdminTenant));
  if (existing.ok()) return false;
  if (!existing.status().IsNotFound()) return existing.status();
  ROS2_ASSIGN_OR_RETURN(std::string secret, RandomHex(32));
  // The file first: a crash before the record is stored just repeats bootstrap.
  ROS2_RETURN_IF_ERROR(WriteSecretFile(admin_secret_path, secret));
  std::array<uint8_t, kSaltSize> salt{};
  ROS2_RETURN_IF_ERROR(RandomBytes(salt));
  ROS2_ASSIGN_OR_RETURN(Sha256Digest hash, Pbkdf2Sha256(secret, salt, iterations_));
  rpc::TenantRecord rec;
  rec.set_name(std::string(kAdminTenant));
  Uuid uuid = Uuid::Generate();
  rec.set_uuid(uuid.bytes().data(), uuid.bytes().size());
  rec.set_salt(salt.data(), salt.size());
  rec.set_secret_hash(hash.data(), hash.size());
  rec.set_iterations(iterations_);
  rec.set_created_ms(HybridClock::WallMillis());
  StoreBatch b;
  // Another engine of a shared store may bootstrap at the same moment: the
  // first record stays, and the loser's secret file is removed.
  b.Require(fmt::format("{}{}", kTenantPrefix, kAdminTenant), std::nullopt);
  b.Put(fmt::format("{}{}", kTenantPrefix, kAdminTenant), rec.SerializeAsString());
  Status st = store_->Write(b);
  if (st.code() == Status::Code::kBusy) {
    std::error_code ec;
    std::filesystem::remove(admin_secret_path, ec);
    return false;
  }
  ROS2_RETURN_IF_ERROR(st);
  return true;
}

Result<Principal> TenantRegistry::Authenticate(std::string_view name, std::string_view secret) {
  Status denied = Status::Unauthenticated(fmt::format("authentication failed for tenant '{}'", name));
  if (name.empty()) return Status::Unauthenticated("missing credentials: no tenant name (metadata 'ros2-tenant')");
  if (secret.empty() || secret.size() > kMaxSecret) return denied;
  ROS2_ASSIGN_OR_RETURN(Sha256Digest memo, memo_hmac_.Compute(AsBytes(secret)));
  const std::string key_name(name);
  std::optional<Principal> memoized;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = memo_.find(key_name);
    if (it != memo_.end() && ConstantTimeEqual(it->second.first, memo)) memoized = it->second.second;
  }
  if (memoized) {
    // A shared store's tenant may have been deleted (or re-created) by
    // another engine: the memo holds only while the record is the same one.
    if (!store_->shared()) return *memoized;
    Status current = CheckCurrent(*memoized);
    if (current.ok()) return *memoized;
    if (current.code() != Status::Code::kUnauthenticated) return current;
    std::lock_guard<std::mutex> lock(mu_);
    memo_.erase(key_name);
  }
  ROS2_RETURN_IF_ERROR(AdmitAttempt(key_name, denied));
  const std::string key = fmt::format("{}{}", kTenantPrefix, name);
  auto raw = store_->Get(key);
  if (!raw.ok() && !raw.status().IsNotFound()) return raw.status();
  rpc::TenantRecord rec;
  if (raw.ok() && (!rec.ParseFromString(*raw) || rec.uuid().size() != 16)) {
    return Status::Corruption(fmt::format("state store: tenant record '{}' does not parse", name));
  }
  if (!raw.ok()) {
    // Unknown name: the same derivation as a wrong secret, so the time taken
    // does not reveal which names exist.
    (void)Pbkdf2Sha256(secret, dummy_salt_, iterations_);
    RecordFailure(key_name);
    return denied;
  }
  ROS2_ASSIGN_OR_RETURN(Sha256Digest hash, Pbkdf2Sha256(secret, AsBytes(rec.salt()), rec.iterations()));
  if (!ConstantTimeEqual(hash, AsBytes(rec.secret_hash()))) {
    RecordFailure(key_name);
    return denied;
  }
  {
    std::lock_guard<std::mutex> lock(limit_mu_);
    failures_.erase(key_name);
  }
  std::array<uint8_t, 16> ub{};
  std::copy(rec.uuid().begin(), rec.uuid().end(), ub.begin());
  Principal p{rec.name(), Uuid::FromBytes(ub)};
  std::lock_guard<std::mutex> lock(mu_);
  // The tenant may have been deleted (or deleted and re-created) during the
  // derivation: remember the secret only if the record read is still current.
  // DeleteTenant removes the record and the memo under mu_.
  auto again = store_->Get(key);
  if (!again.ok() || *again != *raw) return again.ok() || again.status().IsNotFound() ? denied : again.status();
  memo_[p.name] = {memo, p};
  return p;
}

Result<std::string> TenantRegistry::CreateTenant(std::string_view name, std::string_view secret) {
  ROS2_RETURN_IF_ERROR(ValidateName(name, "tenant name"));
  if (secret.size() > kMaxSecret) {
    return Status::InvalidArgument(fmt::format("tenant '{}': secret longer than {} bytes", name, kMaxSecret));
  }
  std::string chosen(secret);
  if (chosen.empty()) {
    ROS2_ASSIGN_OR_RETURN(chosen, RandomHex(32));
  }
  std::array<uint8_t, kSaltSize> salt{};
  ROS2_RETURN_IF_ERROR(RandomBytes(salt));
  ROS2_ASSIGN_OR_RETURN(Sha256Digest hash, Pbkdf2Sha256(chosen, salt, iterations_));
  std::lock_guard<std::mutex> lock(mu_);
  std::string key = fmt::format("{}{}", kTenantPrefix, name);
  auto existing = store_->Get(key);
  if (existing.ok()) return Status::AlreadyExists(fmt::format("tenant '{}' already exists", name));
  if (!existing.status().IsNotFound()) return existing.status();
  rpc::TenantRecord rec;
  rec.set_name(std::string(name));
  Uuid uuid = Uuid::Generate();
  rec.set_uuid(uuid.bytes().data(), uuid.bytes().size());
  rec.set_salt(salt.data(), salt.size());
  rec.set_secret_hash(hash.data(), hash.size());
  rec.set_iterations(iterations_);
  rec.set_created_ms(HybridClock::WallMillis());
  StoreBatch b;
  b.Require(key, std::nullopt);  // another engine of a shared store may create it meanwhile
  b.Put(key, rec.SerializeAsString());
  Status st = store_->Write(b);
  if (st.code() == Status::Code::kBusy) return Status::AlreadyExists(fmt::format("tenant '{}' already exists", name));
  ROS2_RETURN_IF_ERROR(st);
  return chosen;
}

Result<Principal> TenantRegistry::DeleteTenant(std::string_view name, const AlsoInBatch& also) {
  if (name == kAdminTenant) return Status::InvalidArgument("the admin tenant cannot be deleted");
  ROS2_RETURN_IF_ERROR(ValidateName(name, "tenant name"));
  std::lock_guard<std::mutex> lock(mu_);
  std::string key = fmt::format("{}{}", kTenantPrefix, name);
  auto existing = store_->Get(key);
  if (!existing.ok()) {
    return existing.status().IsNotFound() ? Status::NotFound(fmt::format("unknown tenant '{}'", name))
                                          : existing.status();
  }
  rpc::TenantRecord rec;
  if (!rec.ParseFromString(*existing) || rec.uuid().size() != 16) {
    return Status::Corruption(fmt::format("state store: tenant record '{}' does not parse", name));
  }
  std::array<uint8_t, 16> ub{};
  std::copy(rec.uuid().begin(), rec.uuid().end(), ub.begin());
  Principal gone{rec.name(), Uuid::FromBytes(ub)};
  StoreBatch b;
  b.Require(key, *existing);
  b.Delete(key);
  if (also) ROS2_RETURN_IF_ERROR(also(gone, &b));
  Status st = store_->Write(b);
  if (st.code() == Status::Code::kBusy)
    return Status::NotFound(fmt::format("unknown tenant '{}' (changed concurrently)", name));
  ROS2_RETURN_IF_ERROR(st);
  memo_.erase(std::string(name));
  return gone;
}

Status TenantRegistry::CheckCurrent(const Principal& who) const {
  auto current = Lookup(who.name);
  if (current.ok() && current->uuid == who.uuid) return Status::Ok();
  if (!current.ok() && !current.status().IsNotFound()) return current.status();
  return Status::Unauthenticated(fmt::format("tenant '{}' was deleted", who.name));
}

Result<std::vector<std::string>> TenantRegistry::ListTenants() const {
  ROS2_ASSIGN_OR_RETURN(auto rows, store_->Scan(kTenantPrefix));
  std::vector<std::string> names;
  names.reserve(rows.size());
  for (auto& [key, value] : rows) names.push_back(key.substr(kTenantPrefix.size()));
  return names;
}

Result<Principal> TenantRegistry::Lookup(std::string_view name) const {
  auto raw = store_->Get(fmt::format("{}{}", kTenantPrefix, name));
  if (!raw.ok()) {
    return raw.status().IsNotFound() ? Status::NotFound(fmt::format("unknown tenant '{}'", name)) : raw.status();
  }
  rpc::TenantRecord rec;
  if (!rec.ParseFromString(*raw) || rec.uuid().size() != 16) {
    return Status::Corruption(fmt::format("state store: tenant record '{}' does not parse", name));
  }
  std::array<uint8_t, 16> ub{};
  std::copy(rec.uuid().begin(), rec.uuid().end(), ub.begin());
  return Principal{rec.name(), Uuid::FromBytes(ub)};
}

}  // namespace ros2::control
