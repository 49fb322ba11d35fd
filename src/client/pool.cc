// Pool sessions and open containers: the map the client places with, its
// refresh, and the routing of a dkey to the target that serves it.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "client/client_internal.h"
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

PoolCore::PoolCore(std::shared_ptr<ClientCore> client, control::PoolConnection conn,
                   std::shared_ptr<const MapSnapshot> snapshot)
    : client_(std::move(client)), conn_(std::move(conn)), snapshot_(std::move(snapshot)) {
  auto parsed = Uuid::Parse(conn_.pool.uuid());
  if (parsed.ok()) uuid_ = *parsed;
}

PoolCore::~PoolCore() {
  Status st = client_->session().Disconnect(client_->credentials(), conn_.session_uuid);
  if (!st.ok()) ROS2_LOG_DEBUG("libros2: disconnect of pool {} session: {}", conn_.pool.label(), st.ToString());
}

Result<std::shared_ptr<const MapSnapshot>> PoolCore::Map() {
  if (map_stale_.load(std::memory_order_relaxed)) {
    auto refreshed = Refresh();
    if (!refreshed.ok()) return refreshed.status();
  }
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

Result<uint64_t> PoolCore::Refresh() {
  auto map = client_->session().GetPoolMap(client_->credentials(), conn_.session_uuid);
  if (!map.ok()) return map.status().WithContext(fmt::format("refresh map of pool {}", conn_.pool.label()));
  auto snap = MakeMapSnapshot(*map);
  if (!snap.ok()) return snap.status();
  std::lock_guard<std::mutex> lock(mu_);
  if ((*snap)->map.version >= snapshot_->map.version) snapshot_ = *snap;
  map_stale_.store(false, std::memory_order_relaxed);
  return snapshot_->map.version;
}

// --- ContainerCore ---

ContainerCore::ContainerCore(std::shared_ptr<PoolCore> pool, control::ContainerHandle handle, ContainerSummary summary,
                             Uuid uuid)
    : pool_(std::move(pool)), handle_(std::move(handle)), summary_(std::move(summary)), uuid_(uuid) {}

Result<Route> ContainerCore::RouteFor(const ObjectId& oid, std::string_view dkey) {
  ROS2_ASSIGN_OR_RETURN(auto snapshot, pool_->Map());
  auto target = TargetForDkey(snapshot->map, oid, dkey);
  if (!target.ok()) {
    return target.status().WithContext(fmt::format("place {} in pool {} (map v{})", DescribeIo(oid, dkey, {}),
                                                   pool_->connection().pool.label(), snapshot->map.version));
  }
  return Route{std::move(snapshot), *target};
}

Result<std::vector<Route>> ContainerCore::ShardRoutes(const ObjectId* oid) {
  ROS2_ASSIGN_OR_RETURN(auto snapshot, pool_->Map());
  std::vector<uint32_t> targets;
  if (oid == nullptr) {
    for (uint32_t t = 0; t < snapshot->map.size(); ++t) targets.push_back(t);
  } else {
    auto layout = ComputeLayout(snapshot->map, *oid);
    if (!layout.ok()) return layout.status().WithContext("place " + DescribeIo(*oid, {}, {}));
    std::set<uint32_t> distinct(layout->shards.begin(), layout->shards.end());
    targets.assign(distinct.begin(), distinct.end());
  }
  std::vector<Route> routes;
  for (uint32_t t : targets) {
    if (snapshot->map.targets[t].state == TargetState::kDown) {
      return Status::NotFound(fmt::format("target {} of pool {} is down (map v{})", t, pool_->connection().pool.label(),
                                          snapshot->map.version));
    }
    routes.push_back(Route{snapshot, t});
  }
  return routes;
}

obj::RequestHeader ContainerCore::Header(const Route& route) const {
  obj::RequestHeader h;
  h.pool = pool_->uuid();
  h.container = uuid_;
  h.target = route.engine_index();
  h.epoch = 0;
  return h;
}

// --- Pool ---

Pool::Pool(std::shared_ptr<PoolCore> core) : core_(std::move(core)) {}
Pool::~Pool() = default;

PoolSummary Pool::summary() const {
  PoolSummary s;
  const auto& info = core_->connection().pool;
  s.uuid = info.uuid();
  s.label = info.label();
  auto map = core_->Map();
  s.target_count = map.ok() ? static_cast<uint32_t>((*map)->map.size()) : info.target_count();
  s.map_version = map.ok() ? (*map)->map.version : info.map_version();
  s.rights = core_->connection().rights;
  return s;
}

Result<uint64_t> Pool::RefreshMap() {
  return core_->Refresh();
}

Result<std::unique_ptr<Container>> Pool::OpenContainer(std::string_view container, uint8_t rights) {
  if (container.empty()) return Status::InvalidArgument("open container: empty label");
  ClientCore& client = core_->client();
  const std::string& label = core_->connection().pool.label();
  auto handle =
      client.session().OpenContainer(client.credentials(), core_->connection().session_uuid, container, rights);
  if (!handle.ok()) return handle.status().WithContext(fmt::format("open container '{}' in pool {}", container, label));
  const auto& info = handle->container;
  ContainerSummary summary;
  summary.uuid = info.uuid();
  summary.label = info.label();
  summary.checksum = info.properties().checksum();
  summary.chunk_size = info.properties().chunk_size();
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
  auto cc = std::make_shared<ContainerCore>(core_, std::move(*handle), std::move(summary), *uuid);
  return std::unique_ptr<Container>(new Container(std::move(cc)));
}

// --- Container ---

Container::Container(std::shared_ptr<ContainerCore> core) : core_(std::move(core)) {}
Container::~Container() = default;

const ContainerSummary& Container::summary() const {
  return core_->summary();
}

Result<Object> Container::OpenObject(const ObjectId& oid) const {
  Status supported = CheckObjectClassSupported(oid.object_class());
  if (!supported.ok()) return supported.WithContext(fmt::format("open object {}", oid.ToString()));
  return Object(core_, oid);
}

}  // namespace ros2::client
