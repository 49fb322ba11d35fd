// Engine start-up, registration, ready file and shutdown.
#include "engine/engine.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include <grpcpp/server_builder.h>

#include "common/log.h"
#include "control/control_channel.h"
#include "control/control_server.h"
#include "control/credentials.h"
#include "control/management_client.h"
#include "control/session_client.h"
#include "engine/engine_metrics.h"
#include "engine/down_peers.h"
#include "engine/joined_sync.h"
#include "vos/env.h"

namespace ros2::engine {

Result<std::unique_ptr<Engine>> Engine::Start(EngineConfig config) {
  std::unique_ptr<Engine> engine(new Engine(std::move(config)));
  Status st = engine->StartAll();
  if (!st.ok()) {
    engine->Shutdown();
    return st;
  }
  return engine;
}

Engine::~Engine() {
  Shutdown();
}

Status Engine::PrepareDataDir() const {
  // The data directory holds every container's extents and small values in
  // the clear: only the engine's user may enter it, or a local user could read
  // around every capability. Created 0700; an existing one that others may
  // enter is refused, as ssh refuses a private key others can read.
  const std::string& dir = config_.data_dir;
  ROS2_RETURN_IF_ERROR(vos::CreatePrivateDirs(dir).WithContext("engine: data_dir"));
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno(errno, fmt::format("engine: data_dir {}", dir));
  if (st.st_uid != ::geteuid()) {
    return Status::PermissionDenied(fmt::format(
        "engine: data_dir {} belongs to uid {}, not to the engine's user (uid {}); refusing to keep data there{}", dir,
        st.st_uid, ::geteuid(),
        st.st_uid == 0 ? " (started as root, the engine takes a data_dir of root's only when it is mode 0700)" : ""));
  }
  if ((st.st_mode & 0077) != 0) {
    return Status::PermissionDenied(
        fmt::format("engine: data_dir {} is accessible to other users (mode {:o}): they could read every container's "
                    "data around the capabilities; run `chmod 700 {}` and start again",
                    dir, st.st_mode & 0777, dir));
  }
  return vos::CreatePrivateDirs(dir + "/targets").WithContext("engine: data_dir");
}

Status Engine::StartAll() {
  ROS2_RETURN_IF_ERROR(PrepareDataDir());
  std::error_code ec;
  std::filesystem::remove(ready_file(), ec);
  ROS2_RETURN_IF_ERROR(LoadEngineId());
  ROS2_RETURN_IF_ERROR(LoadTombstones());

  // The engine always initiates RMA; no peer may put into or get from it.
  transport::TransportOptions transport_options = config_.transport;
  transport_options.remote_rma_target = false;
  auto transport = transport::Context::Create(transport_options);
  if (!transport.ok()) return transport.status().WithContext("engine: transport");
  transport_ = std::move(*transport);
  ROS2_LOG_INFO("engine {}: {}", env_.engine_id.ToString(), transport_->Describe());

  env_.target_count = config_.targets;
  env_.data_dir = config_.data_dir;
  env_.vos_template = config_.vos;
  env_.transport = transport_.get();
  env_.clock = &clock_;
  env_.spin = config_.transport.spin_budget;
  if (const char* stages = std::getenv("ROS2_ENGINE_IO_STAGES"); stages != nullptr && std::string_view(stages) == "1") {
    env_.io_stages = true;
  }
  env_.target_cpus = config_.target_cpus;
  env_.process_cpus = transport::CurrentThreadCpus();
  env_.shutdown_grace = config_.shutdown_grace;
  env_.forward_timeout = config_.control.lease_ttl;
  env_.limits = config_.limits;

  if (config_.control.join.empty()) ROS2_RETURN_IF_ERROR(StartEmbeddedControl());
  ROS2_RETURN_IF_ERROR(StartTargets());
  if (config_.control.join.empty()) {
    // Every shard on disk is open (its space charged to its pool) before the
    // targets are published.
    ReopenShards();
    ROS2_RETURN_IF_ERROR(RegisterEmbedded());
  } else {
    ROS2_RETURN_IF_ERROR(JoinManagement());
    ReopenShards();
  }
  ROS2_RETURN_IF_ERROR(StartMetrics());
  return WriteReadyFile();
}

Status Engine::LoadEngineId() {
  const std::string path = config_.data_dir + "/engine.id";
  std::ifstream in(path);
  if (in) {
    std::string text;
    std::getline(in, text);
    auto id = Uuid::Parse(text);
    if (!id.ok()) return id.status().WithContext(fmt::format("engine: {}", path));
    env_.engine_id = *id;
    return Status::Ok();
  }
  env_.engine_id = Uuid::Generate();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << env_.engine_id.ToString() << "\n";
    out.flush();
    if (!out) return Status::IOError(fmt::format("engine: cannot write {}", tmp));
  }
  ::chmod(tmp.c_str(), 0600);  // the engine's files are its user's alone, like the data directory
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::IOError(fmt::format("engine: rename {} to {}: {}", tmp, path, ec.message()));
  return Status::Ok();
}

Status Engine::LoadTombstones() {
  auto log = TombstoneLog::Open(config_.data_dir + "/destroyed.log");
  if (!log.ok()) return log.status();
  tombstones_ = std::make_unique<TombstoneLog>(std::move(log->first));
  std::lock_guard lock(env_.destroyed_mu);
  env_.destroyed = std::move(log->second);
  return Status::Ok();
}

Status Engine::StartEmbeddedControl() {
  control::ControlPlaneOptions options;
  options.data_dir = config_.data_dir;
  options.hooks = this;
  // Explicit wall clock: the session table calls now_ms without a fallback.
  options.now_ms = [] { return HybridClock::WallMillis(); };
  options.capability_lifetime = std::chrono::duration_cast<std::chrono::seconds>(config_.control.capability_lifetime);
  options.pbkdf2_iterations = config_.control.pbkdf2_iterations;
  options.session_limits.max_per_tenant = config_.control.max_sessions_per_tenant;
  options.store = config_.control.store;
  options.cluster_key_file = config_.control.cluster_key_file;
  options.etcd_namespace = config_.control.etcd_namespace;
  auto cp = control::ControlPlane::Open(std::move(options));
  if (!cp.ok()) return cp.status().WithContext("engine: control plane");
  control_ = std::move(*cp);
  env_.verifier.store(&control_->verifier(), std::memory_order_release);
  // Every map the control plane knows (its own writes; in a cluster, the etcd
  // watch of the map) reaches the targets' version check.
  control::SystemMap& sysmap = control_->system_map();
  sysmap.AddListener([this](uint64_t version) { env_.maps.Advance(version); });
  env_.maps.Advance(sysmap.known_version());
  env_.maps.StartRefresher([this]() -> Result<uint64_t> { return control_->system_map().Snapshot().version(); });
  env_.resolve_pool = [this](const Uuid& pool) -> Result<PoolLayout> {
    ROS2_ASSIGN_OR_RETURN(auto access, control_->catalog().PoolLayoutFor(pool.ToString()));
    return LayoutFromMap(access.info.size_bytes(), access.map, env_.engine_id);
  };
  return Status::Ok();
}

PoolLayout LayoutFromMap(uint64_t size_bytes, const rpc::PoolMap& map, const Uuid& engine) {
  PoolLayout layout;
  layout.size_bytes = size_bytes;
  layout.map_version = map.version();
  layout.pool_targets = static_cast<uint32_t>(map.targets_size());
  const std::string self = engine.ToString();
  for (const auto& t : map.targets()) {
    if (t.engine_uuid() == self) layout.local_targets.push_back(t.index());
  }
  return layout;
}

void Engine::ReopenShards() {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<void>> reopened;
  for (auto& t : targets_) reopened.push_back(t->ReopenShards());
  for (auto& f : reopened) {
    if (f.wait_for(std::chrono::minutes(5)) != std::future_status::ready) {
      ROS2_LOG_WARN("engine {}: still reopening shards after 5 minutes; serving anyway", env_.engine_id.ToString());
      return;
    }
  }
  ROS2_LOG_INFO(
      "engine {}: existing shards reopened in {} ms", env_.engine_id.ToString(),
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count());
}

Status Engine::StartTargets() {
  for (uint32_t i = 0; i < config_.targets; ++i) {
    auto target = std::make_unique<Target>(i, &env_);
    ROS2_RETURN_IF_ERROR(target->Start());
    targets_.push_back(std::move(target));
  }
  return Status::Ok();
}

control::EngineRegistration Engine::Registration() const {
  control::EngineRegistration reg;
  reg.engine = env_.engine_id;
  reg.address = config_.control.address;
  if (reg.address.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0) reg.address = host;
  }
  // A target's capacity is what its medium can hold, shared by the targets:
  // the free space of the data directory's file system (nvme), or the
  // machine's memory (ram). Pools are sized against it; their shards take
  // space as they fill (docs/engine.md, "Pool space").
  uint64_t per_target = 0;
  struct statvfs fs {};
  if (config_.vos.storage_class == vos::StorageClass::kNvme && ::statvfs(config_.data_dir.c_str(), &fs) == 0) {
    per_target = uint64_t{fs.f_bavail} * fs.f_frsize / config_.targets;
  } else if (config_.vos.storage_class == vos::StorageClass::kRam) {
    per_target = uint64_t(::sysconf(_SC_PHYS_PAGES)) * uint64_t(::sysconf(_SC_PAGESIZE)) / config_.targets;
  }
  reg.capacity_bytes = per_target * config_.targets;
  for (const auto& t : targets_) {
    const auto& a = t->worker_address();
    reg.targets.push_back({t->index(), std::string(a.begin(), a.end()), per_target});
  }
  return reg;
}

Status Engine::RegisterEmbedded() {
  // In a cluster the engine joins (its lease and membership) once its control
  // endpoint is known, and registers its targets after that, so the leader
  // never sees them without a live member.
  const bool clustered = control_->etcd() != nullptr;
  Result<uint64_t> version = uint64_t{0};
  if (!clustered) version = control_->RegisterLocalEngine(Registration());
  if (!version.ok()) return version.status().WithContext("engine: registering the local targets");

  grpc::ServerBuilder builder;
  control_address_ = ControlSocketAddress(config_);
  ROS2_RETURN_IF_ERROR(control::AddControlListeningPort(&builder, {.address = control_address_}, nullptr));
  int tcp_port = 0;
  if (!config_.control.listen.empty()) {
    if (config_.control.tls_cert.empty()) {
      ROS2_LOG_WARN("engine: control listener {} WITHOUT TLS (control.insecure_tcp): tests only",
                    config_.control.listen);
    }
    ROS2_RETURN_IF_ERROR(control::AddControlListeningPort(
        &builder, {config_.control.listen, config_.control.tls_cert, config_.control.tls_key}, &tcp_port));
  }
  control_->RegisterServices(&builder);
  if (clustered) ROS2_RETURN_IF_ERROR(PrepareRebuild(&builder));
  grpc_ = builder.BuildAndStart();
  if (!grpc_) return Status::IOError(fmt::format("engine: cannot start the control plane on {}", control_address_));
  if (!config_.control.listen.empty()) {
    if (tcp_port == 0) return Status::IOError(fmt::format("engine: cannot listen on {}", config_.control.listen));
    const std::string& l = config_.control.listen;
    tcp_address_ = fmt::format("{}:{}", l.substr(0, l.rfind(':')), tcp_port);
  }
  if (clustered) {
    ROS2_RETURN_IF_ERROR(JoinCluster());
    version = control_->RegisterLocalEngine(Registration());
    if (!version.ok()) return version.status().WithContext("engine: registering the local targets");
    ROS2_RETURN_IF_ERROR(StartRebuilder());
    std::vector<Target*> targets;
    for (auto& t : targets_) targets.push_back(t.get());
    down_peers_ = DownPeerWatch::Start(&control_->system_map(), std::move(targets));
  }
  ROS2_LOG_INFO("engine {}: control plane on {}{}{} (map version {})", env_.engine_id.ToString(), control_address_,
                tcp_address_.empty() ? "" : " and ", tcp_address_, *version);
  return Status::Ok();
}

Status Engine::JoinCluster() {
  control::ClusterMemberOptions o;
  o.engine = env_.engine_id;
  o.control_endpoint = tcp_address_.empty() ? control_address_ : tcp_address_;
  o.ttl = std::chrono::duration_cast<std::chrono::seconds>(config_.control.lease_ttl);
  o.rejoin = [this] { return control_->RegisterLocalEngine(Registration()).status(); };
  o.fence_deadline_ns = &env_.writes_fenced_after_ns;
  o.peer_tls_ca = config_.control.tls_ca;
  return control_->JoinCluster(std::move(o)).WithContext("engine: joining the cluster");
}

Status Engine::PrepareRebuild(grpc::ServerBuilder* builder) {
  std::vector<Target*> targets;
  for (auto& t : targets_) targets.push_back(t.get());
  rebuild_source_ = std::make_unique<RebuildSource>(env_.engine_id, std::move(targets));
  auto key = RebuildPullKey(control_->cluster_key());
  if (!key.ok()) return key.status().WithContext("engine: rebuild pull key");
  rebuild_service_ = std::make_unique<RebuildPullService>(std::move(*key), rebuild_source_.get());
  builder->RegisterService(rebuild_service_.get());
  return Status::Ok();
}

Status Engine::StartRebuilder() {
  RebuilderOptions o;
  o.engine = env_.engine_id;
  o.plane = control_.get();
  for (auto& t : targets_) o.targets.push_back(t.get());
  o.config = config_.rebuild;
  o.source = rebuild_source_.get();
  auto key = RebuildPullKey(control_->cluster_key());
  if (!key.ok()) return key.status().WithContext("engine: rebuild pull key");
  o.peers = std::make_unique<RebuildPeers>(std::move(*key), config_.control.tls_ca);
  rebuilder_ = Rebuilder::Start(std::move(o));
  return Status::Ok();
}

Status Engine::JoinManagement() {
  auto secret = control::ReadSecretFile(config_.control.join_secret_file);
  if (!secret.ok()) return secret.status().WithContext("engine: control.join_secret_file");
  const bool local = config_.control.join.starts_with("unix:");
  if (!local && config_.control.tls_ca.empty() && !config_.control.insecure_tcp) {
    return Status::InvalidArgument(
        fmt::format("engine: refusing a cleartext join of {}: set control.tls_ca", config_.control.join));
  }
  auto channel = control::MakeControlChannel(
      {config_.control.join, local ? std::string() : config_.control.tls_ca, config_.control.join_tls_name});
  if (!channel.ok()) return channel.status().WithContext(fmt::format("engine: join {}", config_.control.join));
  control::ManagementClient client(*channel, {config_.control.join_tenant, *secret});
  auto reply = client.RegisterEngine(Registration());
  if (!reply.ok()) return reply.status().WithContext(fmt::format("engine: registering with {}", config_.control.join));
  // A pool's size and map come from the endpoint: a short admin session.
  env_.resolve_pool = [this, channel = *channel, creds = control::Credentials{config_.control.join_tenant, *secret}](
                          const Uuid& pool) -> Result<PoolLayout> {
    control::SessionClient sessions(channel);
    ROS2_ASSIGN_OR_RETURN(auto conn, sessions.Connect(pool.ToString(), creds));
    (void)sessions.Disconnect(creds, conn.session_uuid);
    return LayoutFromMap(conn.pool.size_bytes(), conn.map, env_.engine_id);
  };
  const std::string& key_bytes = reply->capability_key();
  if (key_bytes.size() != control::kCapabilityKeySize) {
    return Status::Protocol(fmt::format("engine: {} returned a capability key of {} bytes, expected {}",
                                        config_.control.join, key_bytes.size(), control::kCapabilityKeySize));
  }
  control::CapabilityKey key{};
  std::copy(key_bytes.begin(), key_bytes.end(), reinterpret_cast<char*>(key.data()));
  auto verifier = control::CapabilityVerifier::Create(key);
  if (!verifier.ok()) return verifier.status();
  joined_verifier_ = std::move(*verifier);
  // The revocations in force before this engine serves anything, then fail
  // closed whenever they are older than fail_closed_after.
  control::ManagementClient revocation_client(*channel, {config_.control.join_tenant, *secret},
                                              config_.control.fail_closed_after);
  const auto sent = std::chrono::steady_clock::now();
  auto synced = revocation_client.SyncRevocations(joined_verifier_.get());
  if (!synced.ok()) return synced.status().WithContext(fmt::format("engine: revocations of {}", config_.control.join));
  joined_verifier_->RequireFreshness(config_.control.fail_closed_after, config_.control.join);
  joined_verifier_->MarkFresh(sent);
  env_.verifier.store(joined_verifier_.get(), std::memory_order_release);
  control_address_ = config_.control.join;
  ROS2_LOG_INFO("engine {}: joined {} (map version {})", env_.engine_id.ToString(), config_.control.join,
                reply->map_version());
  env_.maps.Advance(reply->map_version());

  JoinedSyncOptions sync;
  sync.data_dir = config_.data_dir;
  sync.interval = config_.control.sync_interval;
  sync.revocation_interval = config_.control.revocation_sync;
  sync.verifier = joined_verifier_.get();
  sync.opened_shards = [this] {
    std::lock_guard lock(env_.opened_mu);
    return std::vector<std::pair<Uuid, Uuid>>(env_.opened.begin(), env_.opened.end());
  };
  // Shards stay in `opened` (and on disk until the targets delete them): report
  // each destruction once.
  sync.on_pool_destroyed = [this](const Uuid& pool) {
    if (!env_.IsDestroyed(pool, Uuid())) (void)OnPoolDestroy(pool);
  };
  sync.on_container_destroyed = [this](const Uuid& pool, const Uuid& c) {
    if (!env_.IsDestroyed(pool, c)) (void)OnContainerDestroy(pool, c);
  };
  sync.on_map_version = [this](uint64_t version) { env_.maps.Advance(version); };
  const control::Credentials creds{config_.control.join_tenant, *secret};
  joined_sync_ = std::make_unique<JoinedSync>(
      std::make_unique<control::ManagementClient>(*channel, creds),
      std::make_unique<control::ManagementClient>(*channel, creds, config_.control.fail_closed_after), std::move(sync));
  joined_sync_->Start();
  return Status::Ok();
}

std::string Engine::ReadyLine() const {
  return fmt::format(
      "ros2-engine ready control={} engine={} targets={} transport={}{}{}", control_address_, env_.engine_id.ToString(),
      config_.targets, transport::TransportKindName(transport_->resolved_kind()),
      tcp_address_.empty() ? "" : " tcp=" + tcp_address_, metrics_ ? " metrics=" + metrics_->address() : "");
}

Status Engine::StartMetrics() {
  if (config_.metrics.listen.empty()) return Status::Ok();
  EngineMetricsSource source{env_.engine_id.ToString(),
                             std::string(transport::TransportKindName(transport_->resolved_kind())), &targets_,
                             &env_.pools, env_.io_stages};
  auto exporter =
      metrics::MetricsExporter::Start(config_.metrics.listen, [source] { return CollectEngineMetrics(source); });
  if (!exporter.ok()) return exporter.status().WithContext("engine");
  metrics_ = std::move(*exporter);
  ROS2_LOG_INFO("engine {}: metrics on http://{}/metrics", env_.engine_id.ToString(), metrics_->address());
  return Status::Ok();
}

Status Engine::WriteReadyFile() const {
  const std::string tmp = ready_file() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << ReadyLine() << "\n";
    out << "control=" << control_address_ << "\n";
    if (!tcp_address_.empty()) out << "tcp=" << tcp_address_ << "\n";
    if (metrics_) out << "metrics=" << metrics_->address() << "\n";
    out << "engine=" << env_.engine_id.ToString() << "\n";
    out << "pid=" << ::getpid() << "\n";
    if (control_) out << "admin_secret_file=" << control_->admin_secret_path() << "\n";
    out.flush();
    if (!out) return Status::IOError(fmt::format("engine: cannot write {}", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, ready_file(), ec);
  if (ec) return Status::IOError(fmt::format("engine: publish {}: {}", ready_file(), ec.message()));
  return Status::Ok();
}

void Engine::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  std::error_code ec;
  std::filesystem::remove(ready_file(), ec);
  metrics_.reset();  // before the targets it reads
  if (joined_sync_) joined_sync_->Stop();
  if (rebuilder_) rebuilder_->Stop();  // its pulls use the targets and the control plane
  if (down_peers_) down_peers_->Stop();  // it posts to the targets
  // Pool map watch streams end now rather than at the shutdown deadline.
  if (control_) control_->system_map().StopWaiters();
  if (grpc_) grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  // Targets drain in parallel: each waits at most the shutdown grace.
  std::vector<std::thread> stoppers;
  for (auto& t : targets_) stoppers.emplace_back([&t] { t->Stop(); });
  for (auto& s : stoppers) s.join();
  targets_.clear();
  grpc_.reset();
  rebuilder_.reset();
  down_peers_.reset();
  rebuild_service_.reset();
  rebuild_source_.reset();
  env_.verifier.store(nullptr, std::memory_order_release);
  env_.maps.Stop();  // its refresher reads the control plane
  control_.reset();
  joined_sync_.reset();
  joined_verifier_.reset();
  transport_.reset();
  ROS2_LOG_INFO("engine {}: stopped", env_.engine_id.ToString());
}

Status Engine::RecordDestroyed(const Uuid& pool, const Uuid& container) {
  // Durable first: a restart must not reopen (recreate) the destroyed shards.
  Status st = tombstones_ ? tombstones_->Append(pool, container) : Status::Ok();
  if (!st.ok()) ROS2_LOG_ERROR("engine {}: {}", env_.engine_id.ToString(), st.ToString());
  {
    std::lock_guard lock(env_.destroyed_mu);
    env_.destroyed.emplace_back(pool, container);
  }
  env_.destroyed_version.fetch_add(1, std::memory_order_release);
  return st;
}

Status Engine::OnPoolDestroy(const Uuid& pool) {
  Status st = RecordDestroyed(pool, Uuid());
  for (auto& t : targets_) t->DestroyPool(pool);
  return st;
}

Status Engine::OnContainerDestroy(const Uuid& pool, const Uuid& container) {
  Status st = RecordDestroyed(pool, container);
  for (auto& t : targets_) t->DestroyContainer(pool, container);
  return st;
}

void Engine::OnContainerCreated(const rpc::ContainerInfo& container, const rpc::PoolMap& map) {
  auto pool = Uuid::Parse(container.pool_uuid());
  auto cont = Uuid::Parse(container.uuid());
  if (!pool.ok() || !cont.ok()) return;
  const std::string self = env_.engine_id.ToString();
  for (const auto& t : map.targets()) {
    if (t.engine_uuid() == self && t.index() < targets_.size()) targets_[t.index()]->PrepareShard(*pool, *cont);
  }
}

uint64_t Engine::PoolUsedBytes(const Uuid& pool) {
  return env_.pools.Used(pool);
}

}  // namespace ros2::engine
