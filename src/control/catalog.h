// Catalog: pools and containers, their ACLs, and the authorisation rules of the
// management operations on them.
//
// Records live in the StateStore (docs/control-plane.md, "State store schema"):
// "pool/<uuid>" (rpc::PoolRecord), "pool-label/<label>" (uuid text),
// "cont/<pool uuid>/<uuid>" (rpc::ContainerInfo), "cont-label/<pool uuid>/<label>".
// Every mutation is one atomic synced batch. Pools and containers are named by
// label or UUID wherever a request names one.
//
// Rights: the admin tenant holds every right everywhere; an object's owner (its
// creator) holds every right on it; other tenants hold what the object's ACL
// grants them. Pool creation needs the admin tenant.
//
// Owned by ControlPlane. Thread-safe: one mutex serialises all operations.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "control/engine_hooks.h"
#include "control/rights.h"
#include "control/state_store.h"
#include "control/system_map.h"
#include "control/tenant_registry.h"
#include "ros2/common.pb.h"

namespace ros2::control {

inline constexpr uint64_t kMinPoolSize = 1 << 20;  // 1 MiB

class Catalog {
 public:
  // REQUIRES: every pointer but `hooks` is non-null and outlives the catalog.
  Catalog(StateStore* store, TenantRegistry* tenants, SystemMap* system_map, EngineHooks* hooks);

  Result<rpc::PoolInfo> CreatePool(const Principal& who, std::string_view label, uint64_t size_bytes,
                                   uint32_t target_count);
  // The pools on which `who` holds any right (all of them for admin).
  Result<std::vector<rpc::PoolInfo>> ListPools(const Principal& who);
  Result<rpc::PoolInfo> QueryPool(const Principal& who, std::string_view pool);
  // NotEmpty when containers remain and !force.
  Status DestroyPool(const Principal& who, std::string_view pool, bool force);
  // A pool (container nil) or container destroyed through another engine of
  // a shared store (CatalogWatch): the hooks drop it here too, once.
  void ObserveDestroyed(const Uuid& pool, const Uuid& container);

  Result<rpc::ContainerInfo> CreateContainer(const Principal& who, std::string_view pool, std::string_view label,
                                             const std::map<std::string, std::string>& properties);
  Result<std::vector<rpc::ContainerInfo>> ListContainers(const Principal& who, std::string_view pool);
  Result<rpc::ContainerInfo> QueryContainer(const Principal& who, std::string_view pool, std::string_view container);
  Status DestroyContainer(const Principal& who, std::string_view pool, std::string_view container);

  // What SetAcl changed: the tenant and pool concerned, and the rights of the
  // tenant's entry before and after (0: no entry).
  struct AclChange {
    Uuid tenant;
    Uuid pool;
    Rights before = 0;
    Rights after = 0;
  };
  // Sets `tenant`'s rights on the pool (container empty) or the container;
  // rights 0 removes the entry. Needs the admin right on the object. Entries
  // name the tenant by UUID. `change` (may be null) receives what changed.
  Result<std::vector<rpc::AclEntry>> SetAcl(const Principal& who, std::string_view pool, std::string_view container,
                                            std::string_view tenant, uint32_t rights, AclChange* change = nullptr);

  // Session support: the pool (with runtime fields), its map and `who`'s rights
  // on it; PermissionDenied unless those include `required`.
  struct PoolAccess {
    rpc::PoolInfo info;
    rpc::PoolMap map;
    Rights rights = 0;
  };
  Result<PoolAccess> AccessPool(const Principal& who, std::string_view pool, Rights required);
  struct ContainerAccess {
    rpc::ContainerInfo info;
    Rights rights = 0;
  };
  // `pool_uuid` is the pool of an established session.
  Result<ContainerAccess> AccessContainer(const Principal& who, const std::string& pool_uuid,
                                          std::string_view container);
  // The current map of a pool by UUID.
  Result<rpc::PoolMap> PoolMapFor(const std::string& pool_uuid);
  // The pool's stored info (size, label; no runtime fields) and current map, by
  // UUID, with no rights check: for the engine that embeds the catalog, which
  // sizes the pool's space on its targets from it.
  Result<PoolAccess> PoolLayoutFor(const std::string& pool_uuid);

  Result<uint32_t> PoolCount();

 private:
  Result<rpc::PoolRecord> LoadPoolLocked(std::string_view pool);
  Result<rpc::ContainerInfo> LoadContainerLocked(const rpc::PoolRecord& pool, std::string_view container);
  Result<rpc::PoolRecord> LoadPoolWithRightLocked(const Principal& who, std::string_view pool, Rights required,
                                                  std::string_view operation);
  rpc::PoolMap BuildPoolMap(const rpc::PoolRecord& pool) const;
  Result<rpc::PoolInfo> WithRuntimeLocked(const rpc::PoolRecord& pool);

  StateStore* store_;
  TenantRegistry* tenants_;
  SystemMap* system_map_;
  EngineHooks* hooks_;
  EngineHooks no_hooks_;
  std::mutex mu_;
  // Pools ("<pool>") and containers ("<pool>/<container>") whose destruction
  // the hooks were told of: each is told once, whichever engine destroyed it.
  std::set<std::string> destroyed_;  // GUARDED_BY(mu_)
  // Tells the hooks of a destroyed pool (container nil) or container, once.
  // REQUIRES: mu_ held.
  void TellDestroyedLocked(const Uuid& pool, const Uuid& container);
};

// The rights `who` holds on an object with this owner (tenant UUID text) and
// ACL; entries match by tenant UUID.
Rights EffectiveRights(const Principal& who, const std::string& owner_uuid,
                       const google::protobuf::RepeatedPtrField<rpc::AclEntry>& acl);

// Fills owner_uuid and the ACL entries' tenant_uuid of records stored before
// tenants were named by UUID (state store schema 1), from the tenants of
// those names that exist now; entries naming no existing tenant match nobody.
// Part of ControlPlane's schema upgrade.
Status UpgradeCatalogToTenantUuids(StateStore* store, TenantRegistry* tenants, StoreBatch* batch);

}  // namespace ros2::control
