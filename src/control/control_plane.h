// ControlPlane: the management state of one engine and the gRPC services over it.
//
// Owns the state store (RocksDB under <data_dir>/control-db, or etcd shared
// with the other engines of a cluster: `store`), the tenant registry,
// the system map (registered engines and their targets), the catalog (pools,
// containers, ACLs), the open sessions, the capability key (generated on the
// first start, kept in the store) with its signer and verifier, and the
// Management and Session gRPC services. The engine embeds it:
//
//   auto cp = ControlPlane::Open({.data_dir = dir, .hooks = &my_hooks});
//   grpc::ServerBuilder builder;                      // owned by the engine
//   AddControlListeningPort(&builder, listen);        // control_server.h
//   (*cp)->RegisterServices(&builder);
//   (*cp)->RegisterLocalEngine(registration);         // its targets' UCX addresses
//   ... data path: (*cp)->verifier().Authorize(blob, pool, container, rights)
//
// On the first start the admin tenant is created and its secret written to
// <data_dir>/admin.secret (mode 0600). The ControlPlane must outlive any gRPC
// server its services are registered with. All methods are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/server_builder.h>

#include "common/status.h"
#include "control/capability.h"
#include "control/catalog.h"
#include "control/catalog_watch.h"
#include "control/cluster_member.h"
#include "control/crypto.h"
#include "control/engine_hooks.h"
#include "control/etcd_client.h"
#include "control/peer_liveness.h"
#include "control/session_table.h"
#include "control/state_store.h"
#include "control/system_map.h"
#include "control/system_map_watch.h"
#include "control/tenant_registry.h"

namespace ros2::control {

class ManagementService;
class SessionService;

struct ControlPlaneOptions {
  std::string data_dir;                            // required; created if missing
  std::chrono::seconds capability_lifetime{3600};  // expiry of issued capabilities
  uint32_t pbkdf2_iterations = 10000;              // for newly stored secrets
  EngineHooks* hooks = nullptr;                    // optional; must outlive the plane
  std::function<uint64_t()> now_ms = nullptr;      // wall clock (ms); tests inject one
  SessionLimits session_limits;                    // open sessions per tenant and in all
  AuthLimits auth_limits;                          // lockout and failure budget of logins
  // Where the management state lives: "embedded" (RocksDB under
  // <data_dir>/control-db) or "etcd://host:port,..." (shared by the engines of
  // a cluster; docs/cluster.md).
  std::string store = "embedded";
  // etcd: keys live under this prefix; the file holding the cluster key (64 hex
  // digits, the same on every engine) that seals the capability key in etcd.
  std::string etcd_namespace = "ros2/";
  std::string cluster_key_file;
  std::chrono::milliseconds etcd_timeout{2000};  // one etcd call on one endpoint
};

// The start of issuing a capability to an authenticated tenant
// (ControlPlane::BeginIssue): taken BEFORE the rights are read, so a
// revocation recorded after the rights were read always covers the capability.
struct IssueWindow {
  uint64_t now_ms = 0;
  uint64_t min_expiry_ms = 0;  // above every cut-off recorded for the tenant so far
};

class ControlPlane {
 public:
  static Result<std::unique_ptr<ControlPlane>> Open(ControlPlaneOptions options);
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // Adds the Management and Session services (and, with an etcd store, the
  // engines' ClusterPeer service) to a builder the caller owns.
  void RegisterServices(grpc::ServerBuilder* builder);

  // Registers (or re-registers) an engine's targets without a gRPC round trip;
  // the engine that embeds the plane calls this for itself at every start.
  // Returns the new map version.
  Result<uint64_t> RegisterLocalEngine(const EngineRegistration& registration) {
    return system_map_->RegisterEngine(registration);
  }

  // The data path's capability check (shared by every target thread).
  CapabilityVerifier& verifier() { return *verifier_; }
  const CapabilitySigner& signer() const { return *signer_; }
  const CapabilityKey& capability_key() const { return key_; }

  // Starts issuing a capability to `who`: Unauthenticated when the tenant was
  // deleted since it authenticated. Then read its rights, then sign with
  // ExpiryFor(window).
  Result<IssueWindow> BeginIssue(const Principal& who);
  uint64_t ExpiryFor(const IssueWindow& window) const;
  // The cut-off of a tenant revocation made now: later than the expiry of
  // every capability issued so far (now + the longest lifetime ever used).
  uint64_t RevocationCutoff() const;

  // Path of the admin secret file written at the first start.
  std::string admin_secret_path() const;
  const ControlPlaneOptions& options() const { return options_; }
  uint64_t NowMs() const;
  uint64_t uptime_ms() const;

  StateStore& store() { return *store_; }
  // With an etcd store: joins the cluster (membership, leadership, liveness;
  // cluster_member.h). The plane owns the member; its on_tick reloads the
  // revocations other engines stored. It also watches the system map in etcd
  // (system_map_watch.h), so other engines' map changes are published here. FailedPrecondition-like InvalidArgument
  // for the embedded store.
  Status JoinCluster(ClusterMemberOptions options);
  ClusterMember* cluster() { return joined_.load(); }
  // A channel to the leader's control endpoint (kept while the leader stays),
  // TLS with the cluster CA for a TCP endpoint: management writes are
  // forwarded there by the engines that do not lead.
  Result<std::shared_ptr<grpc::Channel>> LeaderChannel(const std::string& endpoint);
  // The cluster key (cluster_key_file) of an etcd store: engine-to-engine
  // calls derive their MAC keys from it. All zero for the embedded store.
  const Aes256Key& cluster_key() const { return cluster_key_; }
  // The etcd client of an etcd store (null for the embedded one).
  const std::shared_ptr<EtcdClient>& etcd() const { return etcd_; }
  TenantRegistry& tenants() { return *tenants_; }
  SystemMap& system_map() { return *system_map_; }
  Catalog& catalog() { return *catalog_; }
  SessionTable& sessions() { return *sessions_; }

 private:
  explicit ControlPlane(ControlPlaneOptions options);
  Status Init();
  Status LoadOrCreateKey();
  Status LoadOrCreateSealedKey();
  Status UpgradeSchema(const std::string& from);
  Status LoadMaxLifetime();

  ControlPlaneOptions options_;
  std::chrono::steady_clock::time_point started_;
  Status OpenStore();
  std::shared_ptr<EtcdClient> etcd_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<TenantRegistry> tenants_;
  std::unique_ptr<SystemMap> system_map_;
  std::unique_ptr<Catalog> catalog_;
  CapabilityKey key_{};
  Aes256Key cluster_key_{};       // etcd store: seals the capability key
  uint64_t max_lifetime_ms_ = 0;  // the longest capability lifetime any start of this store used
  std::unique_ptr<CapabilitySigner> signer_;
  std::unique_ptr<CapabilityVerifier> verifier_;
  std::unique_ptr<SessionTable> sessions_;
  std::unique_ptr<ClusterMember> member_;  // etcd store, after JoinCluster
  std::atomic<ClusterMember*> joined_{nullptr};          // member_, for gRPC threads
  std::unique_ptr<PeerLivenessService> peer_service_;   // etcd store
  std::string peer_tls_ca_;                             // set by JoinCluster
  std::mutex leader_mu_;
  std::string leader_endpoint_;                   // GUARDED_BY(leader_mu_)
  std::shared_ptr<grpc::Channel> leader_channel_;  // GUARDED_BY(leader_mu_)
  std::unique_ptr<SystemMapWatch> map_watch_;  // etcd store, after JoinCluster: other engines' map changes
  std::unique_ptr<CatalogWatch> catalog_watch_;  // etcd store, after JoinCluster: pools destroyed elsewhere
  std::unique_ptr<ManagementService> management_;
  std::unique_ptr<SessionService> session_;
};

}  // namespace ros2::control
