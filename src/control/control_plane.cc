#include "control/control_plane.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "common/hlc.h"
#include "common/log.h"
#include "control/control_channel.h"
#include "control/credentials.h"
#include "control/etcd_store.h"
#include "control/management_service.h"
#include "control/session_service.h"

namespace ros2::control {
namespace {
constexpr std::string_view kCapabilityKeyKey = "meta/capability-key";
constexpr std::string_view kSchemaKey = "meta/schema";
constexpr std::string_view kMaxLifetimeKey = "meta/max-capability-lifetime-ms";
// 2: owners and ACL entries name tenants by UUID (1: by name).
constexpr std::string_view kSchemaVersion = "2";
}  // namespace

ControlPlane::ControlPlane(ControlPlaneOptions options)
    : options_(std::move(options)), started_(std::chrono::steady_clock::now()) {}

ControlPlane::~ControlPlane() = default;

Result<std::unique_ptr<ControlPlane>> ControlPlane::Open(ControlPlaneOptions options) {
  if (options.data_dir.empty()) return Status::InvalidArgument("control plane: missing data_dir");
  if (options.capability_lifetime.count() <= 0) {
    return Status::InvalidArgument("control plane: capability_lifetime must be positive");
  }
  std::unique_ptr<ControlPlane> cp(new ControlPlane(std::move(options)));
  ROS2_RETURN_IF_ERROR(cp->Init().WithContext(fmt::format("control plane in {}", cp->options_.data_dir)));
  return cp;
}

uint64_t ControlPlane::NowMs() const {
  return options_.now_ms ? options_.now_ms() : HybridClock::WallMillis();
}

uint64_t ControlPlane::uptime_ms() const {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_).count());
}

std::string ControlPlane::admin_secret_path() const {
  return options_.data_dir + "/admin.secret";
}

Status ControlPlane::OpenStore() {
  if (options_.store == "embedded") {
    ROS2_ASSIGN_OR_RETURN(store_, StateStore::Open(options_.data_dir + "/control-db"));
    return Status::Ok();
  }
  ROS2_ASSIGN_OR_RETURN(auto endpoints, ParseEtcdEndpoints(options_.store));
  if (options_.cluster_key_file.empty()) {
    return Status::InvalidArgument(
        "an etcd store needs cluster_key_file: the key that seals the capability key in etcd (docs/cluster.md)");
  }
  ROS2_ASSIGN_OR_RETURN(std::string key_text, ReadSecretFile(options_.cluster_key_file));
  auto key = ParseAes256KeyHex(key_text);
  if (!key.ok()) return key.status().WithContext(fmt::format("cluster key file {}", options_.cluster_key_file));
  cluster_key_ = *key;
  ROS2_ASSIGN_OR_RETURN(auto client,
                        EtcdClient::Connect(std::move(endpoints), {.call_timeout = options_.etcd_timeout}));
  etcd_ = std::shared_ptr<EtcdClient>(std::move(client));
  store_ = std::make_unique<EtcdStore>(etcd_, options_.etcd_namespace);
  return Status::Ok();
}

Status ControlPlane::LoadOrCreateKey() {
  if (store_->shared()) return LoadOrCreateSealedKey();
  auto stored = store_->Get(kCapabilityKeyKey);
  if (stored.ok()) {
    if (stored->size() != key_.size()) {
      return Status::Corruption(
          fmt::format("state store: the capability key is {} bytes, expected {}", stored->size(), key_.size()));
    }
    std::memcpy(key_.data(), stored->data(), key_.size());
    return Status::Ok();
  }
  if (!stored.status().IsNotFound()) return stored.status();
  ROS2_RETURN_IF_ERROR(RandomBytes(key_));
  return store_->Put(std::string(kCapabilityKeyKey),
                     std::string(reinterpret_cast<const char*>(key_.data()), key_.size()));
}

Status ControlPlane::LoadOrCreateSealedKey() {
  // In etcd the capability key is sealed (AES-256-GCM) with the cluster key
  // every engine reads from its own file: etcd and its backups never hold it
  // in the clear. The first engine creates it; a racing one reads the winner's.
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto stored = store_->Get(kCapabilityKeyKey);
    if (stored.ok()) {
      auto opened = OpenAes256Gcm(cluster_key_, *stored, kCapabilityKeyKey);
      if (!opened.ok()) {
        return opened.status().WithContext(
            fmt::format("the capability key in {} (is cluster_key_file {} the cluster's?)", store_->Describe(),
                        options_.cluster_key_file));
      }
      if (opened->size() != key_.size()) return Status::Corruption("the sealed capability key has the wrong size");
      std::memcpy(key_.data(), opened->data(), key_.size());
      return Status::Ok();
    }
    if (!stored.status().IsNotFound()) return stored.status();
    ROS2_RETURN_IF_ERROR(RandomBytes(key_));
    ROS2_ASSIGN_OR_RETURN(
        std::string sealed,
        SealAes256Gcm(cluster_key_, std::string_view(reinterpret_cast<const char*>(key_.data()), key_.size()),
                      kCapabilityKeyKey));
    StoreBatch b;
    b.Require(std::string(kCapabilityKeyKey), std::nullopt);
    b.Put(std::string(kCapabilityKeyKey), std::move(sealed));
    Status st = store_->Write(b);
    if (st.code() != Status::Code::kBusy) return st;
  }
  return Status::Busy("the capability key changed concurrently twice");
}

Status ControlPlane::Init() {
  if (::mkdir(options_.data_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, fmt::format("mkdir {}", options_.data_dir));
  }
  ROS2_RETURN_IF_ERROR(OpenStore());
  auto schema = store_->Get(kSchemaKey);
  std::string upgrade_from;
  if (schema.ok()) {
    if (*schema == "1") {
      upgrade_from = *schema;
    } else if (*schema != kSchemaVersion) {
      return Status::NotSupported(
          fmt::format("state store schema version '{}', this build reads '1' and '{}'", *schema, kSchemaVersion));
    }
  } else if (schema.status().IsNotFound()) {
    StoreBatch b;
    b.Require(std::string(kSchemaKey), std::nullopt);  // Busy: another engine wrote it first
    b.Put(std::string(kSchemaKey), std::string(kSchemaVersion));
    if (Status st = store_->Write(b); st.code() != Status::Code::kBusy) ROS2_RETURN_IF_ERROR(st);
  } else {
    return schema.status();
  }
  ROS2_RETURN_IF_ERROR(LoadOrCreateKey());
  ROS2_RETURN_IF_ERROR(LoadMaxLifetime());
  ROS2_ASSIGN_OR_RETURN(CapabilitySigner signer, CapabilitySigner::Create(key_));
  signer_ = std::make_unique<CapabilitySigner>(std::move(signer));
  CapabilityVerifier::Options vopts;
  vopts.now_ms = options_.now_ms;
  ROS2_ASSIGN_OR_RETURN(verifier_, CapabilityVerifier::Create(key_, vopts));

  ROS2_ASSIGN_OR_RETURN(tenants_,
                        TenantRegistry::Create(store_.get(), options_.pbkdf2_iterations, options_.auth_limits));
  ROS2_ASSIGN_OR_RETURN(bool created, tenants_->Bootstrap(admin_secret_path()));
  if (!upgrade_from.empty()) ROS2_RETURN_IF_ERROR(UpgradeSchema(upgrade_from));
  if (created) ROS2_LOG_INFO("control: created the admin tenant; its secret is in {}", admin_secret_path());
  ROS2_ASSIGN_OR_RETURN(system_map_, SystemMap::Load(store_.get()));
  catalog_ = std::make_unique<Catalog>(store_.get(), tenants_.get(), system_map_.get(), options_.hooks);
  sessions_ = std::make_unique<SessionTable>(
      store_.get(), verifier_.get(), [this] { return NowMs(); }, options_.session_limits);
  ROS2_RETURN_IF_ERROR(sessions_->LoadRevocations(NowMs()));
  management_ = std::make_unique<ManagementService>(this);
  session_ = std::make_unique<SessionService>(this);
  if (etcd_) {
    ROS2_ASSIGN_OR_RETURN(HmacSha256 peer_key, PeerLivenessKey(cluster_key_));
    peer_service_ = std::make_unique<PeerLivenessService>(std::move(peer_key), [this](rpc::PeerLivenessBody* body) {
      ClusterMember* member = joined_.load();
      if (member == nullptr) return false;
      member->DescribeLiveness(body);
      return true;
    });
  }
  return Status::Ok();
}

Status ControlPlane::UpgradeSchema(const std::string& from) {
  StoreBatch b;
  ROS2_RETURN_IF_ERROR(UpgradeCatalogToTenantUuids(store_.get(), tenants_.get(), &b));
  b.Put(std::string(kSchemaKey), std::string(kSchemaVersion));
  ROS2_RETURN_IF_ERROR(store_->Write(b));
  ROS2_LOG_INFO("control: state store upgraded from schema {} to {} (tenants named by UUID)", from, kSchemaVersion);
  return Status::Ok();
}

Status ControlPlane::LoadMaxLifetime() {
  const uint64_t lifetime = static_cast<uint64_t>(options_.capability_lifetime.count()) * 1000;
  auto stored = store_->Get(kMaxLifetimeKey);
  uint64_t max = lifetime;
  if (stored.ok()) {
    max = std::max<uint64_t>(max, std::strtoull(stored->c_str(), nullptr, 10));
  } else if (!stored.status().IsNotFound()) {
    return stored.status();
  }
  if (!stored.ok() || max != std::strtoull(stored->c_str(), nullptr, 10)) {
    ROS2_RETURN_IF_ERROR(store_->Put(std::string(kMaxLifetimeKey), std::to_string(max)));
  }
  max_lifetime_ms_ = max;
  return Status::Ok();
}

Result<IssueWindow> ControlPlane::BeginIssue(const Principal& who) {
  // Order matters (docs/control-plane.md, "Revocation"): the time and the
  // tenant's cut-offs first, then the check that the tenant still exists; the
  // caller reads the rights after this.
  IssueWindow w;
  w.now_ms = NowMs();
  w.min_expiry_ms = verifier_->MinExpiryFor(who.uuid);
  ROS2_RETURN_IF_ERROR(tenants_->CheckCurrent(who));
  return w;
}

uint64_t ControlPlane::ExpiryFor(const IssueWindow& window) const {
  return std::max(window.now_ms + static_cast<uint64_t>(options_.capability_lifetime.count()) * 1000,
                  window.min_expiry_ms);
}

uint64_t ControlPlane::RevocationCutoff() const {
  return NowMs() + max_lifetime_ms_;
}

Status ControlPlane::JoinCluster(ClusterMemberOptions options) {
  auto* etcd = dynamic_cast<EtcdStore*>(store_.get());
  if (etcd == nullptr) return Status::InvalidArgument("join cluster: the state store is not etcd (control.store)");
  if (member_) return Status::AlreadyExists("join cluster: already joined");
  auto tick = std::move(options.on_tick);
  options.on_tick = [this, tick = std::move(tick)] {
    // Sessions closed and tenants revoked on other engines.
    if (Status st = sessions_->LoadRevocations(NowMs()); !st.ok()) {
      ROS2_LOG_DEBUG("control: reloading revocations: {}", st.ToString());
    }
    if (tick) tick();
  };
  peer_tls_ca_ = options.peer_tls_ca;
  if (!options.peers) {
    ROS2_ASSIGN_OR_RETURN(HmacSha256 peer_key, PeerLivenessKey(cluster_key_));
    options.peers = std::make_shared<PeerProber>(std::move(peer_key), options.peer_tls_ca);
  }
  ROS2_ASSIGN_OR_RETURN(map_watch_, SystemMapWatch::Start(etcd, system_map_.get()));
  ROS2_ASSIGN_OR_RETURN(catalog_watch_, CatalogWatch::Start(etcd, catalog_.get()));
  ROS2_ASSIGN_OR_RETURN(member_, ClusterMember::Start(etcd, system_map_.get(), std::move(options)));
  joined_.store(member_.get());
  return Status::Ok();
}

Result<std::shared_ptr<grpc::Channel>> ControlPlane::LeaderChannel(const std::string& endpoint) {
  std::lock_guard lock(leader_mu_);
  if (leader_channel_ && leader_endpoint_ == endpoint) return leader_channel_;
  const bool local = endpoint.starts_with("unix:") || endpoint.starts_with("/");
  if (!local && peer_tls_ca_.empty()) {
    // The caller's secret travels with the forwarded call: never in clear.
    return Status::PermissionDenied(fmt::format(
        "the leader's control endpoint {} is TCP and control.tls_ca is not set: writes are not forwarded in clear",
        endpoint));
  }
  ROS2_ASSIGN_OR_RETURN(leader_channel_,
                        MakeControlChannel({.address = endpoint, .tls_root_cert_path = local ? "" : peer_tls_ca_}));
  leader_endpoint_ = endpoint;
  return leader_channel_;
}

void ControlPlane::RegisterServices(grpc::ServerBuilder* builder) {
  builder->RegisterService(management_.get());
  builder->RegisterService(session_.get());
  if (peer_service_) builder->RegisterService(peer_service_.get());
}

}  // namespace ros2::control
