// The etcd cluster of the cluster and replication tests and of `ros2-bench
// replication`: etcd, engines on its store, the admin's management clients.
#include "testing/etcd_cluster.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "common/log.h"
#include "control/control_channel.h"

namespace ros2::testing {

Status EtcdEngineCluster::Start(const EtcdEngineClusterOptions& options) {
  if (options.engines < 1) return Status::InvalidArgument("etcd engine cluster: at least one engine");
  if (dir.path().empty()) return Status::IOError("etcd engine cluster: no temporary directory");
  ROS2_ASSIGN_OR_RETURN(etcd, EtcdTestCluster::Start(options.etcd_members));
  ROS2_ASSIGN_OR_RETURN(const std::string key_file, WriteTestClusterKey(dir.path()));
  for (int i = 0; i < options.engines; ++i) {
    EngineOptions o;
    o.data_dir = (options.data_parent.empty() ? dir.path() : options.data_parent) + "/engine" + std::to_string(i);
    o.targets = options.targets;
    o.storage_class = options.storage_class;
    o.data_size = options.data_size;
    o.rebuild = options.rebuild;
    if (options.metrics) o.metrics_listen = "127.0.0.1:0";
    o.control_extra = {"store: " + etcd->StoreUrl(), "cluster_key_file: " + key_file,
                       fmt::format("lease_ttl: {}s", options.lease_ttl.count())};
    auto engine = EngineProcess::Start(o);
    if (!engine.ok()) return Status::IOError(fmt::format("engine {}: {}", i, engine.status().ToString()));
    engines.push_back(std::move(*engine));
    options_.push_back(o);
    alive_.push_back(true);
    data_dirs_.push_back(o.data_dir);
  }
  // The first engine created the admin tenant and holds its secret.
  ROS2_ASSIGN_OR_RETURN(std::string secret, control::ReadSecretFile(engines[0]->admin_secret_file()));
  admin = {"admin", std::move(secret)};
  return WaitForLeaderAndMembers();
}

Status EtcdEngineCluster::WaitForLeaderAndMembers() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string last = "no answer";
  size_t ask = 0;
  while (ask + 1 < engines.size() && !alive_[ask]) ++ask;
  const auto alive = static_cast<int>(std::count(alive_.begin(), alive_.end(), true));
  auto mgmt = Mgmt(ask);
  while (std::chrono::steady_clock::now() < deadline) {
    auto st = mgmt->GetEngineStatus();
    if (!st.ok()) {
      last = st.status().ToString();
    } else {
      int up = 0;
      for (const auto& m : st->members()) up += m.up() ? 1 : 0;
      if (!st->leader().empty() && up == alive) return Status::Ok();
      last = fmt::format("leader '{}', {} of {} engines up", st->leader(), up, alive);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status::TimedOut("etcd engine cluster: no leader or not every engine up after 20 s: " + last);
}

std::unique_ptr<control::ManagementClient> EtcdEngineCluster::Mgmt(size_t i, const control::Credentials& creds) {
  auto channel = control::MakeControlChannel({.address = engines[i]->control()});
  if (!channel.ok()) {
    ROS2_LOG_ERROR("etcd engine cluster: engine {}: {}", i, channel.status().ToString());
    return nullptr;
  }
  return std::make_unique<control::ManagementClient>(*channel, creds, std::chrono::seconds(5));
}

std::unique_ptr<control::ManagementClient> EtcdEngineCluster::Mgmt(size_t i) {
  return Mgmt(i, admin);
}

Result<size_t> EtcdEngineCluster::FindLeader(size_t ask) {
  std::string last = "no answer";
  for (int attempt = 0; attempt < 50; ++attempt) {
    auto st = Mgmt(ask)->GetEngineStatus();
    if (st.ok()) {
      for (size_t i = 0; i < engines.size(); ++i) {
        if (st->leader() == engines[i]->control()) return i;
      }
      last = fmt::format("leader '{}'{}", st->leader(), st->fenced() ? ", the engine asked is fenced" : "");
    } else {
      last = st.status().ToString();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status::Disconnected(
      fmt::format("engine {} names no engine of the cluster as leader for 5 s; its last answer: {}", ask, last));
}

int EtcdEngineCluster::LeaderIndex(size_t ask) {
  auto leader = FindLeader(ask);
  return leader.ok() ? static_cast<int>(*leader) : -1;
}

client::ClientOptions EtcdEngineCluster::ClientOptionsFor(size_t i) const {
  client::ClientOptions o;
  o.control = engines[i]->control();
  o.tenant = admin.tenant;
  o.secret = admin.secret;
  o.transport = "tcp";
  return o;
}

Status EtcdEngineCluster::CheckEngines() {
  std::string died;
  for (size_t i = 0; i < engines.size(); ++i) {
    if (Status st = engines[i]->CheckNotDied(); !st.ok()) died += fmt::format("\nengine {}: {}", i, st.message());
  }
  if (died.empty()) return Status::Ok();
  return Status::IOError("etcd engine cluster: an engine died" + died);
}

void EtcdEngineCluster::Kill(size_t i) {
  engines[i]->Kill();
  alive_[i] = false;
}

Status EtcdEngineCluster::Restart(size_t i) {
  if (i >= engines.size() || alive_[i]) return Status::InvalidArgument(fmt::format("engine {} is not a killed one", i));
  auto engine = EngineProcess::Start(options_[i]);
  if (!engine.ok()) return Status::IOError(fmt::format("engine {} restart: {}", i, engine.status().ToString()));
  engines[i] = std::move(*engine);
  alive_[i] = true;
  return WaitForLeaderAndMembers();
}

bool AllTargetsDown(const rpc::EngineStatus& status, const std::string& engine_uuid) {
  bool any = false;
  for (const auto& t : status.targets()) {
    if (t.engine_uuid() != engine_uuid) continue;
    any = true;
    if (t.state() != rpc::TARGET_DOWN) return false;
  }
  return any;
}

}  // namespace ros2::testing
