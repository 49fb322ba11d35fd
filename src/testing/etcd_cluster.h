// EtcdEngineCluster: the cluster of the etcd tests (docs/cluster.md), all
// real processes: etcd members (EtcdTestCluster) on loopback and N ros2-engine
// processes (EngineProcess) with `control.store: etcd://...`, one test cluster
// key and one lease TTL. Start returns once every engine runs, the admin
// secret is read, a leader is elected and every engine is an up member; the
// test then talks to engine i through Mgmt(i) or a libros2 client made from
// ClientOptionsFor(i). Engines are killed with Kill(i) (their handles stay,
// so a test can still name a dead engine's id and endpoint). No GoogleTest:
// `ros2-bench replication` starts its cluster with it too. One thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "control/credentials.h"
#include "control/management_client.h"
#include "ros2/client.h"
#include "testing/engine_process.h"
#include "testing/etcd_process.h"
#include "testing/temp_dir.h"

namespace ros2::testing {

struct EtcdEngineClusterOptions {
  int etcd_members = 1;
  int engines = 3;
  uint32_t targets = 1;               // each engine's
  std::string storage_class = "ram";  // EngineOptions::storage_class
  std::string data_size = "16MiB";    // EngineOptions::data_size
  std::chrono::seconds lease_ttl{3};  // control.lease_ttl
  bool metrics = false;               // each engine's metrics endpoint on 127.0.0.1:0
  std::string rebuild;                // EngineOptions::rebuild (empty: the engine's defaults)
  std::string data_parent;            // engine i's data in <data_parent>/engine<i> (empty: under `dir`)
};

class EtcdEngineCluster {
 public:
  // Starts etcd and the engines (engine i in <dir>/engine<i>) and waits (up to
  // 20 s) for a leader and for every engine up as a member. The error names
  // the step that failed.
  Status Start(const EtcdEngineClusterOptions& options);

  // A management client of engine i, as the admin tenant or as `creds`
  // (nullptr, logged, when no channel can be made).
  std::unique_ptr<control::ManagementClient> Mgmt(size_t i);
  std::unique_ptr<control::ManagementClient> Mgmt(size_t i, const control::Credentials& creds);
  // The index of the engine engine `ask` names as leader, polled up to 5 s
  // (-1 when none is named that long).
  int LeaderIndex(size_t ask);
  // The same, with Disconnected carrying engine `ask`'s last answer when no
  // leader is named.
  Result<size_t> FindLeader(size_t ask);
  // A libros2 client of engine i's control endpoint, as the admin tenant, on tcp.
  client::ClientOptions ClientOptionsFor(size_t i) const;
  // SIGKILL of engine i; its handle stays.
  void Kill(size_t i);
  // Starts killed engine i again on its data directory (its engine id and
  // its stores kept) and waits (up to 20 s) until it is an up member again.
  Status Restart(size_t i);
  // Ok unless an engine exited on its own (not by Kill): then each such
  // engine's exit code and log tail, for a failure message.
  Status CheckEngines();
  bool alive(size_t i) const { return alive_[i]; }
  const std::string& data_dir(size_t i) const { return data_dirs_[i]; }

  TempDir dir;
  std::unique_ptr<EtcdTestCluster> etcd;
  std::vector<std::unique_ptr<EngineProcess>> engines;
  control::Credentials admin;

 private:
  Status WaitForLeaderAndMembers();
  std::vector<bool> alive_;
  std::vector<std::string> data_dirs_;
  std::vector<EngineOptions> options_;
};

// Milliseconds since `t`: what the cluster tests print of failure detection.
inline long long MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t).count();
}

// Whether `status` knows targets of `engine_uuid` and all of them are DOWN.
bool AllTargetsDown(const rpc::EngineStatus& status, const std::string& engine_uuid);

}  // namespace ros2::testing
