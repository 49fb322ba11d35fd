// Pool sessions and open containers: the map the client places with, its
// refresh, and the routing of a dkey to the target that serves it.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "client/client_internal.h"
#include "client/handle_backends.h"
#include "client/pool_map_watch.h"
#include "common/log.h"

namespace ros2::client {

std::string DescribeIo(const ObjectId& oid, std::string_view dkey, std::string_view akey) {
  auto shorten = [](std::string_view key) {
    std::string out;
    for (char c : key.substr(0, 48)) {
      if (c >= 0x20 && c < 0x7f && c != '\'') {
        out.push_back(c);
      } else {
        out += fmt::format("\\x{:02x}", static_cast<uint8_t>(c));
      }
    }
    if (key.size() > 48) out += "...";
    return out;
  };
  std::string s = "oid=" + oid.ToString();
  if (!dkey.empty()) s += fmt::format(" dkey='{}'", shorten(dkey));
  if (!akey.empty()) s += fmt::format(" akey='{}'", shorten(akey));
  return s;
}

// --- PoolCore ---

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// When to renew a capability valid until `expiry_ms`: with a quarter of its
// remaining lifetime left (0: never, for a capability without expiry).
int64_t RenewAt(uint64_t expiry_ms) {
  if (expiry_ms == 0) return 0;
  const int64_t now = NowMs();
  const int64_t expiry = static_cast<int64_t>(expiry_ms);
  return expiry <= now ? now : now + (expiry - now) * 3 / 4;
}

}  // namespace

transport::SessionCredential MakeCredential(const std::string& session_uuid, const std::string& key) {
  transport::SessionCredential cred;
  if (auto id = Uuid::Parse(session_uuid); id.ok()) cred.id = id->bytes();
  std::memcpy(cred.key.data(), key.data(), std::min(key.size(), cred.key.size()));
  return cred;
}

PoolCore::PoolCore(std::shared_ptr<ClientCore> client, control::PoolConnection conn,
                   std::shared_ptr<const MapSnapshot> snapshot)
    : client_(std::move(client)),
      info_(std::move(conn.pool)),
      rights_(conn.rights),
      session_uuid_(std::move(conn.session_uuid)),
      session_cred_(MakeCredential(session_uuid_, conn.session_key)),
      snapshot_(std::move(snapshot)) {
  auto parsed = Uuid::Parse(info_.uuid());
  if (parsed.ok()) uuid_ = *parsed;
}

PoolCore::~PoolCore() {
  watch_.reset();  // its thread installs maps here
  Status st = client_->session().Disconnect(client_->credentials(), session_uuid());
  if (!st.ok()) ROS2_LOG_DEBUG("libros2: disconnect of pool {} session: {}", label(), st.ToString());
}

std::string PoolCore::session_uuid() {
  std::lock_guard<std::mutex> lock(mu_);
  return session_uuid_;
}

std::pair<std::string, transport::SessionCredential> PoolCore::Session() {
  std::lock_guard<std::mutex> lock(mu_);
  return {session_uuid_, session_cred_};
}

Result<std::shared_ptr<const MapSnapshot>> PoolCore::Map() {
  if (map_stale()) ROS2_RETURN_IF_ERROR(RecoverOnce());
  return CurrentMap();
}

std::shared_ptr<const MapSnapshot> PoolCore::CurrentMap() {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

Result<uint64_t> PoolCore::Refresh() {
  MarkMapStale();
  ROS2_RETURN_IF_ERROR(Recover());
  return CurrentMap()->map.version;
}

bool PoolCore::AdoptMap(std::shared_ptr<const MapSnapshot> snapshot) {
  std::vector<std::string> gone;  // addresses of targets this map takes DOWN
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (snapshot->map.version <= snapshot_->map.version) return false;
    ROS2_LOG_DEBUG("libros2: pool {}: map v{} -> v{} (watch)", label(), snapshot_->map.version,
                   snapshot->map.version);
    const auto& before = snapshot_->map.targets;
    const auto& after = snapshot->map.targets;
    for (size_t i = 0; i < after.size() && i < before.size() && i < snapshot->addresses.size(); ++i) {
      if (IsOut(after[i].state) && !IsOut(before[i].state)) {
        gone.push_back(snapshot->addresses[i]);
      }
    }
    snapshot_ = std::move(snapshot);
  }
  // Outside mu_: a thread closing its endpoints may resend, which reads the map.
  client_->AbandonPeers(gone);
  return true;
}

void PoolCore::StartMapWatch() {
  const ClientOptions& o = client_->options();
  if (!o.watch_pool_maps || watch_ || uuid_.IsNil()) return;
  PoolMapWatchOptions w;
  w.pool = uuid_.ToString();
  w.label = label();
  w.credentials = client_->credentials();
  w.control = o.control;
  w.first = client_->control_channel();
  w.known_version = [this] { return CurrentMap()->map.version; };
  w.apply = [this](std::shared_ptr<const MapSnapshot> snapshot) { (void)AdoptMap(std::move(snapshot)); };
  watch_ = std::make_unique<PoolMapWatch>(std::move(w));
}

namespace {

// A failed recovery attempt is reused for this long: the resends of many
// operations that fire together share one control-plane call.
constexpr std::chrono::milliseconds kRecoverReuse{5};

}  // namespace

Status PoolCore::RecoverOnce() {
  const uint64_t seen = recoveries_.load(std::memory_order_acquire);
  std::lock_guard<std::mutex> one_at_a_time(recover_mu_);
  // Another thread recovered while this one waited: take its result.
  if (recoveries_.load(std::memory_order_acquire) != seen && !map_stale()) return Status::Ok();
  const auto now = std::chrono::steady_clock::now();
  if (!last_failure_.ok() && now - failed_at_ < kRecoverReuse) return last_failure_;
  // Cleared before the request: a failure another thread sees meanwhile
  // marks the map stale again, and its next request recovers once more.
  map_stale_.store(false, std::memory_order_relaxed);
  const std::string session = session_uuid();
  auto map = client_->session().GetPoolMap(client_->credentials(), session);
  Status failed;
  if (map.ok()) {
    auto snap = MakeMapSnapshot(*map);
    if (snap.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      if ((*snap)->map.version >= snapshot_->map.version) snapshot_ = *snap;
    } else {
      failed = snap.status().WithContext(fmt::format("refresh map of pool {}", label()));
    }
  } else if (map.status().code() == Status::Code::kNotFound) {
    // The control plane does not know the session (it restarted, or the
    // session expired): open a new one, with a fresh map.
    auto conn = client_->session().Connect(uuid_.IsNil() ? info_.label() : uuid_.ToString(), client_->credentials());
    auto snap = conn.ok() ? MakeMapSnapshot(conn->map) : Result<std::shared_ptr<const MapSnapshot>>(conn.status());
    if (snap.ok()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        session_uuid_ = conn->session_uuid;
        session_cred_ = MakeCredential(session_uuid_, conn->session_key);
        snapshot_ = *snap;  // the new session's map is authoritative
      }
      generation_.fetch_add(1, std::memory_order_acq_rel);
      ROS2_LOG_INFO("libros2: pool {}: new session {} (the previous one is gone: {}), map v{}", label(),
                    conn->session_uuid, map.status().message(), (*snap)->map.version);
    } else {
      failed = snap.status().WithContext(fmt::format("reconnect pool {}", label()));
    }
  } else {
    failed = map.status().WithContext(fmt::format("reconnect pool {}", label()));
  }
  if (!failed.ok()) {
    MarkMapStale();
    if (last_failure_.ok()) ROS2_LOG_INFO("libros2: pool {} unreachable: {}", label(), failed.ToString());
    last_failure_ = failed;
    failed_at_ = now;
    return failed;
  }
  last_failure_ = Status::Ok();
  recoveries_.fetch_add(1, std::memory_order_release);
  return Status::Ok();
}

Status PoolCore::Recover() {
  FailurePolicy policy(client_->reconnect_timeout());
  for (;;) {
    Status st = RecoverOnce();
    if (st.ok()) return st;
    auto d = policy.Decide(st, CallPhase::kConnecting, Idempotency::kIdempotent, fmt::format("pool {}", label()));
    if (d.recovery == Recovery::kGiveUp) return d.final;
    std::this_thread::sleep_for(std::max(d.pause, kRecoverReuse));
  }
}

// --- ContainerCore ---

ContainerCore::ContainerCore(std::shared_ptr<PoolCore> pool, control::ContainerHandle handle, ContainerSummary summary,
                             Uuid uuid, uint64_t session_generation)
    : pool_(std::move(pool)),
      summary_(std::move(summary)),
      uuid_(uuid),
      capability_(std::make_shared<const Grant>(Grant{std::move(handle.capability), pool_->Session().second})),
      generation_(session_generation),
      renew_at_ms_(RenewAt(handle.expiry_ms)) {}

Result<std::shared_ptr<const Grant>> ContainerCore::Capability() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation_ == pool_->session_generation() && !capability_stale_.load(std::memory_order_relaxed) &&
        (renew_at_ms_ == 0 || NowMs() < renew_at_ms_)) {
      return capability_;
    }
  }
  ROS2_RETURN_IF_ERROR(Reopen());
  std::lock_guard<std::mutex> lock(mu_);
  return capability_;
}

Status ContainerCore::Reopen() {
  ClientCore& client = pool_->client();
  for (int attempt = 0;; ++attempt) {
    const uint64_t generation = pool_->session_generation();
    capability_stale_.store(false, std::memory_order_relaxed);
    auto [session, cred] = pool_->Session();
    auto handle = client.session().OpenContainer(client.credentials(), session, uuid_.ToString(), summary_.rights);
    if (handle.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      capability_ = std::make_shared<const Grant>(Grant{std::move(handle->capability), cred});
      generation_ = generation;
      renew_at_ms_ = RenewAt(handle->expiry_ms);
      return Status::Ok();
    }
    capability_stale_.store(true, std::memory_order_relaxed);
    const Status failed =
        handle.status().WithContext(fmt::format("reopen container {} in pool {}", summary_.label, pool_->label()));
    // The control plane does not know the session (an engine restart): one
    // recovery attempt (a new session), then open again in it. Anything else
    // is the failure policy's to decide (phase kConnecting).
    if (attempt > 0 || handle.status().code() != Status::Code::kNotFound) {
      if (handle.status().code() != Status::Code::kNotFound) pool_->MarkMapStale();
      return failed;
    }
    pool_->MarkMapStale();
    ROS2_RETURN_IF_ERROR(pool_->RecoverOnce());
    if (pool_->session_generation() == generation) return failed;
  }
}

Result<Route> ContainerCore::RouteFor(const ObjectId& oid, std::string_view dkey, uint32_t replica,
                                      uint32_t first) {
  ROS2_ASSIGN_OR_RETURN(auto snapshot, pool_->Map());
  auto target = ReadTarget(snapshot->map, oid, dkey, replica, first);
  if (!target.ok()) {
    return target.status().WithContext(
        fmt::format("place {} in pool {} (map v{})", DescribeIo(oid, dkey, {}), pool_->label(), snapshot->map.version));
  }
  return Route{std::move(snapshot), *target};
}

Result<std::vector<Route>> ContainerCore::WriteRoutes(const ObjectId& oid, std::string_view dkey) {
  ROS2_ASSIGN_OR_RETURN(auto snapshot, pool_->Map());
  auto targets = WriteTargets(snapshot->map, oid, dkey);
  if (!targets.ok()) {
    return targets.status().WithContext(
        fmt::format("place {} in pool {} (map v{})", DescribeIo(oid, dkey, {}), pool_->label(), snapshot->map.version));
  }
  std::vector<Route> routes;
  for (uint32_t t : *targets) routes.push_back(Route{snapshot, t});
  return routes;
}

Result<std::vector<Route>> ContainerCore::ShardRoutes(const ObjectId* oid, bool write) {
  ROS2_ASSIGN_OR_RETURN(auto snapshot, pool_->Map());
  std::vector<Route> routes;
  if (oid == nullptr) {
    for (uint32_t t = 0; t < snapshot->map.size(); ++t) {
      if (IsOut(snapshot->map.targets[t].state)) {
        return Status::NotFound(
            fmt::format("target {} of pool {} is down (map v{})", t, pool_->label(), snapshot->map.version));
      }
      routes.push_back(Route{snapshot, t});
    }
    return routes;
  }
  auto layout = ComputeLayout(snapshot->map, *oid);
  if (!layout.ok()) return layout.status().WithContext("place " + DescribeIo(*oid, {}, {}));
  // Per group: every copy not DOWN for a write; for a read the first one that
  // holds data. A group with none is unavailable.
  std::set<uint32_t> distinct;
  for (uint32_t g = 0; g < layout->groups; ++g) {
    bool found = false;
    for (const ReplicaPlace& p : GroupCopies(*layout, g)) {
      if (p.down || (!write && p.fallback)) continue;
      distinct.insert(p.target);
      found = true;
      if (!write) break;
    }
    if (!found) {
      const uint32_t t = layout->places[size_t{g} * layout->replicas].target;
      return Status::NotFound(fmt::format("{}: target {} of pool {} is down and no copy of its shard is live (map v{})",
                                          DescribeIo(*oid, {}, {}), t, pool_->label(), snapshot->map.version));
    }
  }
  for (uint32_t t : distinct) routes.push_back(Route{snapshot, t});
  return routes;
}

obj::RequestHeader ContainerCore::Header(const Route& route) const {
  obj::RequestHeader h;
  h.pool = pool_->uuid();
  h.container = uuid_;
  h.target = route.engine_index();
  h.epoch = 0;
  h.map_version = route.snapshot->map.version;
  return h;
}

Result<std::shared_ptr<transport::Endpoint>> ConnectTarget(ThreadIo& io, ContainerCore& cont, const Route& route) {
  auto ep = io.EndpointFor(route.address());
  if (!ep.ok()) cont.pool().MarkMapStale();
  return ep;
}

// --- Pool ---

Pool::Pool(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Pool::~Pool() = default;

PoolSummary Pool::summary() const {
  return impl_->summary();
}
Result<uint64_t> Pool::RefreshMap() {
  return impl_->RefreshMap();
}
Result<std::unique_ptr<Container>> Pool::OpenContainer(std::string_view container, Rights rights) {
  if (container.empty()) return Status::InvalidArgument("open container: empty label");
  return impl_->OpenContainer(container, rights);
}

// --- DirectPool ---

PoolSummary DirectPool::summary() const {
  PoolSummary s;
  const auto& info = core_->info();
  s.uuid = info.uuid();
  s.label = info.label();
  auto map = core_->Map();
  s.target_count = map.ok() ? static_cast<uint32_t>((*map)->map.size()) : info.target_count();
  s.map_version = map.ok() ? (*map)->map.version : info.map_version();
  s.rights = core_->rights();
  return s;
}

Result<uint64_t> DirectPool::RefreshMap() {
  return core_->Refresh();
}

Result<std::unique_ptr<Container>> DirectPool::OpenContainer(std::string_view container, uint8_t rights) {
  ClientCore& client = core_->client();
  const std::string& label = core_->label();
  uint64_t generation = core_->session_generation();
  auto handle = client.session().OpenContainer(client.credentials(), core_->session_uuid(), container, rights);
  const Status::Code code = handle.ok() ? Status::Code::kOk : handle.status().code();
  if (code == Status::Code::kNotFound ||
      Classify(code, CallPhase::kConnecting, Idempotency::kIdempotent) == Recovery::kReconnect) {
    // Perhaps only the session is gone (an engine restart): recover (waiting
    // as the failure policy allows) and, in a new session, ask once more.
    core_->MarkMapStale();
    if (core_->Recover().ok() && core_->session_generation() != generation) {
      generation = core_->session_generation();
      handle = client.session().OpenContainer(client.credentials(), core_->session_uuid(), container, rights);
    }
  }
  if (!handle.ok()) return handle.status().WithContext(fmt::format("open container '{}' in pool {}", container, label));
  const auto& info = handle->container;
  ContainerSummary summary;
  summary.uuid = info.uuid();
  summary.label = info.label();
  summary.checksum = info.properties().checksum() ? ChecksumType::kCrc32c : ChecksumType::kNone;
  summary.chunk_size = info.properties().chunk_size();
  summary.encryption = info.properties().encryption();
  summary.encryption_key_id = info.properties().encryption_key_id();
  summary.rd_fac = info.properties().rd_fac();
  summary.rights = handle->rights;
  if (!info.properties().object_class().empty()) {
    auto oc = ParseObjectClass(info.properties().object_class());
    if (oc.ok()) summary.default_object_class = *oc;
  }
  auto uuid = Uuid::Parse(info.uuid());
  if (!uuid.ok())
    return uuid.status().WithContext(fmt::format("open container '{}': bad uuid from the server", container));
  if (core_->uuid().IsNil()) {
    return Status::Protocol(fmt::format("open container '{}': pool {} has no valid uuid", container, label));
  }
  auto cc = std::make_shared<ContainerCore>(core_, std::move(*handle), std::move(summary), *uuid, generation);
  return MakeContainer(std::make_shared<DirectContainer>(std::move(cc)));
}

// --- Container ---

Container::Container(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Container::~Container() = default;

const ContainerSummary& Container::summary() const {
  return impl_->summary();
}
Result<Object> Container::OpenObject(const ObjectId& oid) const {
  Status redundant = CheckRedundancy(oid.object_class(), impl_->summary().rd_fac);
  if (!redundant.ok()) {
    return redundant.WithContext(fmt::format("open object {} in container '{}'", oid.ToString(), summary().label));
  }
  return impl_->OpenObject(oid);
}
Result<std::vector<ObjectId>> Container::ListObjects() const {
  return impl_->ListObjects();
}
Result<std::unique_ptr<EventQueue>> Container::CreateEventQueue() const {
  return impl_->CreateEventQueue();
}
Result<PoolSpace> Container::QueryPoolSpace() const {
  return impl_->QueryPoolSpace();
}
bool Container::offload() const {
  return impl_->offload_link() != nullptr;
}

// --- DirectContainer ---

const ContainerSummary& DirectContainer::summary() const {
  return core_->summary();
}

Result<Object> DirectContainer::OpenObject(const ObjectId& oid) const {
  Status supported = CheckObjectClassSupported(oid.object_class());
  if (!supported.ok()) return supported.WithContext(fmt::format("open object {}", oid.ToString()));
  return Object(std::make_shared<const Object::Impl>(core_, oid));
}

}  // namespace ros2::client
