#include "control/catalog.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/config.h"
#include "common/hlc.h"
#include "common/log.h"
#include "common/uuid.h"
#include "control/container_properties.h"

namespace ros2::control {
namespace {

std::string PoolKey(const std::string& uuid) {
  return "pool/" + uuid;
}
std::string PoolLabelKey(std::string_view label) {
  return fmt::format("pool-label/{}", label);
}
std::string ContPrefix(const std::string& pool_uuid) {
  return "cont/" + pool_uuid + "/";
}
std::string ContKey(const std::string& pool_uuid, const std::string& uuid) {
  return ContPrefix(pool_uuid) + uuid;
}
std::string ContLabelKey(const std::string& pool_uuid, std::string_view label) {
  return fmt::format("cont-label/{}/{}", pool_uuid, label);
}

// A label must be a valid name and must not read as a UUID (identifiers are
// resolved as UUID first).
Status ValidateLabel(std::string_view label, std::string_view what) {
  ROS2_RETURN_IF_ERROR(ValidateName(label, what));
  if (Uuid::Parse(label).ok()) return Status::InvalidArgument(fmt::format("{} '{}' must not be a UUID", what, label));
  return Status::Ok();
}

// Parses an identifier: a UUID, or a label. Returns the UUID when it is one.
Result<std::optional<Uuid>> ParseIdentifier(std::string_view ident, std::string_view what) {
  if (ident.empty()) return Status::InvalidArgument(fmt::format("missing {} (a label or a UUID)", what));
  auto uuid = Uuid::Parse(ident);
  if (uuid.ok()) return std::optional<Uuid>(*uuid);
  // 36 characters with dashes where a UUID has them: meant as a UUID, badly formed.
  if (ident.size() == 36 && ident[8] == '-' && ident[13] == '-') {
    return Status::InvalidArgument(fmt::format("{} '{}' is a bad UUID: {}", what, ident, uuid.status().message()));
  }
  if (!ValidateName(ident, what).ok()) {
    return Status::InvalidArgument(fmt::format("{} '{}' is neither a UUID nor a valid label", what, ident));
  }
  return std::optional<Uuid>();
}

}  // namespace

Rights EffectiveRights(const Principal& who, const std::string& owner_uuid,
                       const google::protobuf::RepeatedPtrField<rpc::AclEntry>& acl) {
  if (who.is_admin()) return kAllRights;
  if (who.uuid.IsNil()) return 0;
  const std::string me = who.uuid.ToString();
  if (me == owner_uuid) return kAllRights;
  for (const auto& e : acl) {
    if (e.tenant_uuid() == me) return static_cast<Rights>(e.rights() & kAllRights);
  }
  return 0;
}

namespace {
// Schema 1 records named tenants only: resolve the names that exist now.
void UpgradeOwnerAndAcl(TenantRegistry* tenants, const std::string& owner, std::string* owner_uuid,
                        google::protobuf::RepeatedPtrField<rpc::AclEntry>* acl) {
  if (owner_uuid->empty()) {
    auto p = tenants->Lookup(owner);
    if (p.ok()) *owner_uuid = p->uuid.ToString();
  }
  for (auto& e : *acl) {
    if (!e.tenant_uuid().empty()) continue;
    auto p = tenants->Lookup(e.tenant());
    if (p.ok()) e.set_tenant_uuid(p->uuid.ToString());
  }
}
}  // namespace

Status UpgradeCatalogToTenantUuids(StateStore* store, TenantRegistry* tenants, StoreBatch* batch) {
  ROS2_ASSIGN_OR_RETURN(auto pools, store->Scan("pool/"));
  for (const auto& [key, value] : pools) {
    rpc::PoolRecord rec;
    if (!rec.ParseFromString(value)) return Status::Corruption(fmt::format("state store: {} does not parse", key));
    rpc::PoolInfo* info = rec.mutable_info();
    UpgradeOwnerAndAcl(tenants, info->owner(), info->mutable_owner_uuid(), info->mutable_acl());
    batch->Put(key, rec.SerializeAsString());
  }
  ROS2_ASSIGN_OR_RETURN(auto conts, store->Scan("cont/"));
  for (const auto& [key, value] : conts) {
    rpc::ContainerInfo info;
    if (!info.ParseFromString(value)) return Status::Corruption(fmt::format("state store: {} does not parse", key));
    UpgradeOwnerAndAcl(tenants, info.owner(), info.mutable_owner_uuid(), info.mutable_acl());
    batch->Put(key, info.SerializeAsString());
  }
  return Status::Ok();
}

Catalog::Catalog(StateStore* store, TenantRegistry* tenants, SystemMap* system_map, EngineHooks* hooks)
    : store_(store), tenants_(tenants), system_map_(system_map), hooks_(hooks != nullptr ? hooks : &no_hooks_) {}

Result<rpc::PoolRecord> Catalog::LoadPoolLocked(std::string_view pool) {
  ROS2_ASSIGN_OR_RETURN(std::optional<Uuid> uuid, ParseIdentifier(pool, "pool"));
  std::string uuid_text;
  if (uuid) {
    uuid_text = uuid->ToString();
  } else {
    auto by_label = store_->Get(PoolLabelKey(pool));
    if (!by_label.ok()) {
      return by_label.status().IsNotFound() ? Status::NotFound(fmt::format("unknown pool '{}'", pool))
                                            : by_label.status();
    }
    uuid_text = *by_label;
  }
  auto raw = store_->Get(PoolKey(uuid_text));
  if (!raw.ok()) {
    return raw.status().IsNotFound() ? Status::NotFound(fmt::format("unknown pool '{}'", pool)) : raw.status();
  }
  rpc::PoolRecord rec;
  if (!rec.ParseFromString(*raw))
    return Status::Corruption(fmt::format("state store: pool record {} does not parse", uuid_text));
  return rec;
}

Result<rpc::ContainerInfo> Catalog::LoadContainerLocked(const rpc::PoolRecord& pool, std::string_view container) {
  const std::string& pool_uuid = pool.info().uuid();
  ROS2_ASSIGN_OR_RETURN(std::optional<Uuid> uuid, ParseIdentifier(container, "container"));
  std::string uuid_text;
  auto unknown = [&] {
    return Status::NotFound(fmt::format("unknown container '{}' in pool '{}'", container, pool.info().label()));
  };
  if (uuid) {
    uuid_text = uuid->ToString();
  } else {
    auto by_label = store_->Get(ContLabelKey(pool_uuid, container));
    if (!by_label.ok()) return by_label.status().IsNotFound() ? unknown() : by_label.status();
    uuid_text = *by_label;
  }
  auto raw = store_->Get(ContKey(pool_uuid, uuid_text));
  if (!raw.ok()) return raw.status().IsNotFound() ? unknown() : raw.status();
  rpc::ContainerInfo info;
  if (!info.ParseFromString(*raw)) {
    return Status::Corruption(fmt::format("state store: container record {} does not parse", uuid_text));
  }
  return info;
}

Result<rpc::PoolRecord> Catalog::LoadPoolWithRightLocked(const Principal& who, std::string_view pool, Rights required,
                                                         std::string_view operation) {
  ROS2_ASSIGN_OR_RETURN(rpc::PoolRecord rec, LoadPoolLocked(pool));
  Rights have = EffectiveRights(who, rec.info().owner_uuid(), rec.info().acl());
  if (!HasRights(have, required)) {
    return Status::PermissionDenied(fmt::format("tenant '{}' may not {} pool '{}': it needs '{}' and holds '{}'",
                                                who.name, operation, rec.info().label(), RightsToString(required),
                                                RightsToString(have)));
  }
  return rec;
}

rpc::PoolMap Catalog::BuildPoolMap(const rpc::PoolRecord& pool) const {
  rpc::PoolMap sys = system_map_->Snapshot();
  rpc::PoolMap out;
  out.set_pool_uuid(pool.info().uuid());
  out.set_version(sys.version());
  if (pool.all_targets()) {
    *out.mutable_targets() = sys.targets();
  } else {
    for (const auto& ref : pool.members()) {
      for (const auto& t : sys.targets()) {
        if (t.engine_uuid() == ref.engine_uuid() && t.index() == ref.index()) *out.add_targets() = t;
      }
    }
  }
  for (const auto& e : sys.engines()) {
    bool used = std::any_of(out.targets().begin(), out.targets().end(),
                            [&](const rpc::TargetInfo& t) { return t.engine_uuid() == e.uuid(); });
    if (used) *out.add_engines() = e;
  }
  return out;
}

Result<rpc::PoolInfo> Catalog::WithRuntimeLocked(const rpc::PoolRecord& pool) {
  rpc::PoolInfo info = pool.info();
  rpc::PoolMap map = BuildPoolMap(pool);
  auto uuid = Uuid::Parse(info.uuid());
  uint64_t used = uuid.ok() ? hooks_->PoolUsedBytes(*uuid) : 0;
  info.set_used_bytes(used);
  info.set_free_bytes(info.size_bytes() - std::min(used, info.size_bytes()));
  info.set_map_version(map.version());
  info.set_target_count(static_cast<uint32_t>(map.targets_size()));
  ROS2_ASSIGN_OR_RETURN(auto conts, store_->Scan(ContPrefix(info.uuid())));
  info.set_container_count(static_cast<uint32_t>(conts.size()));
  return info;
}

Result<rpc::PoolInfo> Catalog::CreatePool(const Principal& who, std::string_view label, uint64_t size_bytes,
                                          uint32_t target_count) {
  if (!who.is_admin()) {
    return Status::PermissionDenied(
        fmt::format("tenant '{}' may not create pools: only the admin tenant may", who.name));
  }
  ROS2_RETURN_IF_ERROR(ValidateLabel(label, "pool label"));
  if (size_bytes < kMinPoolSize) {
    return Status::InvalidArgument(
        fmt::format("pool '{}': bad size {} bytes, the minimum is {}", label, size_bytes, FormatSize(kMinPoolSize)));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto existing = store_->Get(PoolLabelKey(label));
  if (existing.ok()) return Status::AlreadyExists(fmt::format("a pool labelled '{}' already exists", label));
  if (!existing.status().IsNotFound()) return existing.status();

  rpc::PoolMap sys = system_map_->Snapshot();
  rpc::PoolRecord rec;
  if (target_count == 0) {
    rec.set_all_targets(true);
  } else {
    if (target_count > static_cast<uint32_t>(sys.targets_size())) {
      return Status::InvalidArgument(fmt::format("pool '{}': {} targets requested, only {} are registered", label,
                                                 target_count, sys.targets_size()));
    }
    for (uint32_t i = 0; i < target_count; ++i) {
      rpc::TargetRef* ref = rec.add_members();
      ref->set_engine_uuid(sys.targets(static_cast<int>(i)).engine_uuid());
      ref->set_index(sys.targets(static_cast<int>(i)).index());
    }
  }
  Uuid uuid = Uuid::Generate();
  rpc::PoolInfo* info = rec.mutable_info();
  info->set_uuid(uuid.ToString());
  info->set_label(std::string(label));
  info->set_size_bytes(size_bytes);
  info->set_owner(who.name);
  info->set_owner_uuid(who.uuid.ToString());
  info->set_created_ms(HybridClock::WallMillis());
  rpc::PoolMap map = BuildPoolMap(rec);
  uint64_t capacity = 0;
  for (const auto& t : map.targets()) capacity += t.capacity_bytes();
  if (capacity != 0 && size_bytes > capacity) {
    return Status::NoSpace(fmt::format("pool '{}': size {} exceeds the {} capacity of its {} targets", label,
                                       FormatSize(size_bytes), FormatSize(capacity), map.targets_size()));
  }
  ROS2_ASSIGN_OR_RETURN(rpc::PoolInfo full, WithRuntimeLocked(rec));
  ROS2_RETURN_IF_ERROR(hooks_->OnPoolCreate(full, map).WithContext(fmt::format("create pool '{}'", label)));
  StoreBatch b;  // the pool record (its members: the pool's map) and its label, one Txn
  b.Require(PoolLabelKey(label), std::nullopt);
  b.Put(PoolKey(info->uuid()), rec.SerializeAsString());
  b.Put(PoolLabelKey(label), info->uuid());
  if (Status st = store_->Write(b); st.code() == Status::Code::kBusy) {
    return Status::AlreadyExists(fmt::format("pool '{}' already exists (created concurrently)", label));
  } else {
    ROS2_RETURN_IF_ERROR(st);
  }
  ROS2_LOG_INFO("control: created pool {} ({}, {})", label, info->uuid(), FormatSize(size_bytes));
  return full;
}

Result<std::vector<rpc::PoolInfo>> Catalog::ListPools(const Principal& who) {
  std::lock_guard<std::mutex> lock(mu_);
  ROS2_ASSIGN_OR_RETURN(auto rows, store_->Scan("pool/"));
  std::vector<rpc::PoolInfo> out;
  for (const auto& [key, value] : rows) {
    rpc::PoolRecord rec;
    if (!rec.ParseFromString(value)) return Status::Corruption(fmt::format("state store: {} does not parse", key));
    if (EffectiveRights(who, rec.info().owner_uuid(), rec.info().acl()) == 0) continue;
    ROS2_ASSIGN_OR_RETURN(rpc::PoolInfo info, WithRuntimeLocked(rec));
    out.push_back(std::move(info));
  }
  return out;
}

Result<rpc::PoolInfo> Catalog::QueryPool(const Principal& who, std::string_view pool) {
  std::lock_guard<std::mutex> lock(mu_);
  ROS2_ASSIGN_OR_RETURN(rpc::PoolRecord rec, LoadPoolWithRightLocked(who, pool, kRightRead, "query"));
  return WithRuntimeLocked(rec);
}

Status Catalog::DestroyPool(const Principal& who, std::string_view pool, bool force) {
  std::lock_guard<std::mutex> lock(mu_);
  ROS2_ASSIGN_OR_RETURN(rpc::PoolRecord rec, LoadPoolWithRightLocked(who, pool, kRightDelete, "destroy"));
  const std::string& uuid = rec.info().uuid();
  ROS2_ASSIGN_OR_RETURN(auto conts, store_->Scan(ContPrefix(uuid)));
  if (!conts.empty() && !force) {
    return Status::NotEmpty(fmt::format("pool '{}' still has {} containers: destroy them first or force",
                                        rec.info().label(), conts.size()));
  }
  StoreBatch b;
  for (const auto& [key, value] : conts) {
    rpc::ContainerInfo c;
    if (c.ParseFromString(value)) b.Delete(ContLabelKey(uuid, c.label()));
    b.Delete(key);
  }
  b.Delete(PoolKey(uuid));
  b.Delete(PoolLabelKey(rec.info().label()));
  ROS2_RETURN_IF_ERROR(store_->Write(b));
  ROS2_LOG_INFO("control: destroyed pool {} ({})", rec.info().label(), uuid);
  if (auto u = Uuid::Parse(uuid); u.ok()) TellDestroyedLocked(*u, Uuid());
  return Status::Ok();
}

void Catalog::TellDestroyedLocked(const Uuid& pool, const Uuid& container) {
  const bool whole = container.IsNil();
  const std::string key = whole ? pool.ToString() : pool.ToString() + "/" + container.ToString();
  if (!destroyed_.insert(key).second) return;
  if (!whole && destroyed_.contains(pool.ToString())) return;  // its pool went first
  Status st = whole ? hooks_->OnPoolDestroy(pool) : hooks_->OnContainerDestroy(pool, container);
  if (!st.ok()) ROS2_LOG_WARN("control: engine hook for destroyed {} {}: {}", whole ? "pool" : "container", key,
                              st.ToString());
}

void Catalog::ObserveDestroyed(const Uuid& pool, const Uuid& container) {
  std::lock_guard<std::mutex> lock(mu_);
  TellDestroyedLocked(pool, container);
}

Result<rpc::ContainerInfo> Catalog::CreateContainer(const Principal& who, std::string_view pool, std::string_view label,
                                                    const std::map<std::string, std::string>& properties) {
  ROS2_RETURN_IF_ERROR(ValidateLabel(label, "container label"));
  ROS2_ASSIGN_OR_RETURN(rpc::ContainerProperties props, ParseContainerProperties(properties));
  std::lock_guard<std::mutex> lock(mu_);
  ROS2_ASSIGN_OR_RETURN(rpc::PoolRecord rec, LoadPoolWithRightLocked(who, pool, kRightCreate, "create containers in"));
  const std::string& pool_uuid = rec.info().uuid();
  auto existing = store_->Get(ContLabelKey(pool_uuid, label));
  if (existing.ok()) {
    return Status::AlreadyExists(
        fmt::format("a container labelled '{}' already exists in pool '{}'", label, rec.info().label()));
  }
  if (!existing.status().IsNotFound()) return existing.status();
  rpc::ContainerInfo info;
  info.set_uuid(Uuid::Generate().ToString());
  info.set_label(std::string(label));
  info.set_pool_uuid(pool_uuid);
  *info.mutable_properties() = props;
  info.set_owner(who.name);
  info.set_owner_uuid(who.uuid.ToString());
  info.set_created_ms(HybridClock::WallMillis());
  ROS2_RETURN_IF_ERROR(hooks_->OnContainerCreate(info).WithContext(fmt::format("create container '{}'", label)));
  StoreBatch b;
  b.Require(ContLabelKey(pool_uuid, label), std::nullopt);
  b.Put(ContKey(pool_uuid, info.uuid()), info.SerializeAsString());
  b.Put(ContLabelKey(pool_uuid, label), info.uuid());
  if (Status st = store_->Write(b); st.code() == Status::Code::kBusy) {
    return Status::AlreadyExists(fmt::format("container '{}' already exists (created concurrently)", label));
  } else {
    ROS2_RETURN_IF_ERROR(st);
  }
  hooks_->OnContainerCreated(info, BuildPoolMap(rec));
  return info;
}

Result<std::vector<rpc::ContainerInfo>> Catalog::ListContainers(const Principal& who, std::string_view pool) {
  std::lock_guard<std::mutex> lock(mu_);
  ROS2_ASSIGN_OR_RETURN(rpc::PoolRecord rec, LoadPoolWithRightLocked(who, pool, kRightRead, "list containers of"));
  ROS2_ASSIGN_OR_RETURN(auto rows, store_->Scan(ContPrefix(rec.info().uuid())));
  std::vector<rpc::ContainerInfo> out;
  for (const auto& [key, value] : rows) {
    rpc::ContainerInfo c;
    if (!c.ParseFromString(value)) return Status::Corruption(fmt::format("state store: {} does not parse", key));
    out.push_back(std::move(c));
  }
  return out;
}

Result<rpc::ContainerInfo> Catalog::QueryContainer(const Principal& who, std::string_view pool,
                                                   std::string_view container) {
  std::lock_guard<std::mutex> lock(mu_);
  ROS2_ASSIGN_OR_RETURN(rpc::PoolRecord rec, LoadPoolLocked(pool));
  ROS2_ASSIGN_OR_RETURN(rpc::ContainerInfo info, LoadContainerLocked(rec, container));
  Rights pool_rights = EffectiveRights(who, rec.info().owner_uuid(), rec.info().acl());
  Rights cont_rights = EffectiveRights(who, info.owner_uuid(), info.acl());
  if (!HasRights(pool_rights, kRightRead) && !HasRights(cont_rights, kRightRead)) {
    return Status::PermissionDenied(
        fmt::format("tenant '{}' may not query container '{}': no read right on it", who.name, info.label()));
  }
  return info;
}

Status Catalog::DestroyContainer(const Principal& who, std::string_view pool, std::string_view container) {
  std::lock_guard<std::mutex> lock(mu_);
  ROS2_ASSIGN_OR_RETURN(rpc::PoolRecord rec, LoadPoolLocked(pool));
  ROS2_ASSIGN_OR_RETURN(rpc::ContainerInfo info, LoadContainerLocked(rec, container));
  Rights have = EffectiveRights(who, info.owner_uuid(), info.acl());
  if (!HasRights(have, kRightDelete)) {
    return Status::PermissionDenied(fmt::format("tenant '{}' may not destroy container '{}': it holds '{}'", who.name,
                                                info.label(), RightsToString(have)));
  }
  StoreBatch b;
  b.Delete(ContKey(rec.info().uuid(), info.uuid()));
  b.Delete(ContLabelKey(rec.info().uuid(), info.label()));
  ROS2_RETURN_IF_ERROR(store_->Write(b));
  auto pu = Uuid::Parse(rec.info().uuid());
  auto cu = Uuid::Parse(info.uuid());
  if (pu.ok() && cu.ok()) TellDestroyedLocked(*pu, *cu);
  return Status::Ok();
}

namespace {
// Sets the entry of `tenant` (matched by UUID); returns its previous rights.
Rights SetEntry(google::protobuf::RepeatedPtrField<rpc::AclEntry>* acl, const Principal& tenant, uint32_t rights) {
  const std::string uuid = tenant.uuid.ToString();
  for (int i = 0; i < acl->size(); ++i) {
    if (acl->Get(i).tenant_uuid() == uuid) {
      Rights before = static_cast<Rights>(acl->Get(i).rights() & kAllRights);
      if (rights == 0) {
        acl->DeleteSubrange(i, 1);
      } else {
        acl->Mutable(i)->set_rights(rights);
        acl->Mutable(i)->set_tenant(tenant.name);
      }
      return before;
    }
  }
  if (rights == 0) return 0;
  rpc::AclEntry* e = acl->Add();
  e->set_tenant(tenant.name);
  e->set_tenant_uuid(uuid);
  e->set_rights(rights);
  return 0;
}
}  // namespace

Result<std::vector<rpc::AclEntry>> Catalog::SetAcl(const Principal& who, std::string_view pool,
                                                   std::string_view container, std::string_view tenant, uint32_t rights,
                                                   AclChange* change) {
  ROS2_RETURN_IF_ERROR(ValidateRights(rights, "set acl"));
  ROS2_RETURN_IF_ERROR(ValidateName(tenant, "tenant name"));
  ROS2_ASSIGN_OR_RETURN(Principal target, tenants_->Lookup(tenant));
  std::lock_guard<std::mutex> lock(mu_);
  ROS2_ASSIGN_OR_RETURN(rpc::PoolRecord rec, LoadPoolLocked(pool));
  google::protobuf::RepeatedPtrField<rpc::AclEntry> result;
  Rights before = 0;
  if (container.empty()) {
    Rights have = EffectiveRights(who, rec.info().owner_uuid(), rec.info().acl());
    if (!HasRights(have, kRightAdmin)) {
      return Status::PermissionDenied(
          fmt::format("tenant '{}' may not change the ACL of pool '{}': no admin right", who.name, rec.info().label()));
    }
    before = SetEntry(rec.mutable_info()->mutable_acl(), target, rights);
    ROS2_RETURN_IF_ERROR(store_->Put(PoolKey(rec.info().uuid()), rec.SerializeAsString()));
    result = rec.info().acl();
  } else {
    ROS2_ASSIGN_OR_RETURN(rpc::ContainerInfo info, LoadContainerLocked(rec, container));
    Rights have = EffectiveRights(who, info.owner_uuid(), info.acl());
    if (!HasRights(have, kRightAdmin)) {
      return Status::PermissionDenied(
          fmt::format("tenant '{}' may not change the ACL of container '{}': no admin right", who.name, info.label()));
    }
    before = SetEntry(info.mutable_acl(), target, rights);
    ROS2_RETURN_IF_ERROR(store_->Put(ContKey(rec.info().uuid(), info.uuid()), info.SerializeAsString()));
    result = info.acl();
  }
  if (change != nullptr) {
    auto pool_uuid = Uuid::Parse(rec.info().uuid());
    *change = AclChange{target.uuid, pool_uuid.ok() ? *pool_uuid : Uuid(), before, static_cast<Rights>(rights)};
  }
  return std::vector<rpc::AclEntry>(result.begin(), result.end());
}

Result<Catalog::PoolAccess> Catalog::AccessPool(const Principal& who, std::string_view pool, Rights required) {
  std::lock_guard<std::mutex> lock(mu_);
  ROS2_ASSIGN_OR_RETURN(rpc::PoolRecord rec, LoadPoolWithRightLocked(who, pool, required, "connect to"));
  PoolAccess access;
  ROS2_ASSIGN_OR_RETURN(access.info, WithRuntimeLocked(rec));
  access.map = BuildPoolMap(rec);
  access.rights = EffectiveRights(who, rec.info().owner_uuid(), rec.info().acl());
  return access;
}

Result<Catalog::ContainerAccess> Catalog::AccessContainer(const Principal& who, const std::string& pool_uuid,
                                                          std::string_view container) {
  std::lock_guard<std::mutex> lock(mu_);
  ROS2_ASSIGN_OR_RETURN(rpc::PoolRecord rec, LoadPoolLocked(pool_uuid));
  ROS2_ASSIGN_OR_RETURN(rpc::ContainerInfo info, LoadContainerLocked(rec, container));
  ContainerAccess access;
  access.rights = EffectiveRights(who, info.owner_uuid(), info.acl());
  if (access.rights == 0) {
    return Status::PermissionDenied(fmt::format("tenant '{}' has no access to container '{}' of pool '{}'", who.name,
                                                info.label(), rec.info().label()));
  }
  access.info = std::move(info);
  return access;
}

Result<rpc::PoolMap> Catalog::PoolMapFor(const std::string& pool_uuid) {
  std::lock_guard<std::mutex> lock(mu_);
  ROS2_ASSIGN_OR_RETURN(rpc::PoolRecord rec, LoadPoolLocked(pool_uuid));
  return BuildPoolMap(rec);
}

Result<Catalog::PoolAccess> Catalog::PoolLayoutFor(const std::string& pool_uuid) {
  std::lock_guard<std::mutex> lock(mu_);
  ROS2_ASSIGN_OR_RETURN(rpc::PoolRecord rec, LoadPoolLocked(pool_uuid));
  return PoolAccess{rec.info(), BuildPoolMap(rec), 0};
}

Result<uint32_t> Catalog::PoolCount() {
  ROS2_ASSIGN_OR_RETURN(auto rows, store_->Scan("pool/"));
  return static_cast<uint32_t>(rows.size());
}

}  // namespace ros2::control
