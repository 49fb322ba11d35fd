// Engine: the storage server of one node — N target threads (target.h) behind
// one transport Context, plus the control plane: either embedded (management
// and session gRPC services over a state store in the data directory, on a Unix
// socket and optionally TCP) or joined (the engine registers its targets with
// another engine's management endpoint and verifies capabilities with the key
// that endpoint returns).
//
// Start order: data directory and engine id, transport, control plane (embedded
// mode: the capability key), targets (worker addresses), registration of the
// targets, gRPC listener, ready file. Shutdown reverses it: the ready file goes,
// gRPC stops accepting, targets drain or fail in-flight requests and close
// their VOS shards, the control plane closes.
//
// The Engine is the EngineHooks of its embedded control plane: container and
// pool destruction delete the shards on every target, after a durable
// tombstone (tombstones.h) so no restart or stale capability recreates them. A
// joined engine learns of destructions and closed sessions from its
// management endpoint through JoinedSync (joined_sync.h). Start() and Shutdown()
// are called from one thread (main); the hooks from gRPC threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/server.h>

#include "common/hlc.h"
#include "common/status.h"
#include "common/uuid.h"
#include "control/control_plane.h"
#include "control/engine_hooks.h"
#include "engine/down_peers.h"
#include "engine/engine_config.h"
#include "engine/joined_sync.h"
#include "engine/rebuild_service.h"
#include "engine/rebuild_source.h"
#include "engine/rebuilder.h"
#include "engine/target.h"
#include "engine/tombstones.h"
#include "metrics/exporter.h"
#include "transport/transport.h"

namespace ros2::engine {

// The layout of a pool of `size_bytes` with `map`, seen from engine `engine`.
PoolLayout LayoutFromMap(uint64_t size_bytes, const rpc::PoolMap& map, const Uuid& engine);

class Engine : public control::EngineHooks {
 public:
  // Starts everything; on error, whatever started is stopped again.
  static Result<std::unique_ptr<Engine>> Start(EngineConfig config);
  ~Engine() override;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Clean shutdown (see the class comment). Idempotent.
  void Shutdown();

  // "ros2-engine ready control=unix:/... engine=<uuid> targets=N transport=shm"
  std::string ReadyLine() const;
  // Path of the ready file (its content is ReadyLine() and key=value lines).
  std::string ready_file() const { return config_.data_dir + "/engine.ready"; }
  const std::string& control_address() const { return control_address_; }
  const Uuid& engine_id() const { return env_.engine_id; }

  // --- EngineHooks ---
  Status OnPoolDestroy(const Uuid& pool) override;
  Status OnContainerDestroy(const Uuid& pool, const Uuid& container) override;
  // Starts creating the container's shards on this engine's targets in the pool.
  void OnContainerCreated(const rpc::ContainerInfo& container, const rpc::PoolMap& map) override;
  uint64_t PoolUsedBytes(const Uuid& pool) override;

 private:
  explicit Engine(EngineConfig config) : config_(std::move(config)) {}
  Status StartAll();
  // Creates data_dir (0700) and its targets/ directory; refuses a data_dir that
  // other users may enter or that another user owns.
  Status PrepareDataDir() const;
  Status LoadEngineId();
  Status LoadTombstones();
  // Tombstones (durably) and retires a destroyed pool (container nil) or container.
  Status RecordDestroyed(const Uuid& pool, const Uuid& container);
  Status StartEmbeddedControl();
  Status StartTargets();
  // Opens every shard on disk (Target::ReopenShards) and waits for them, so
  // each pool's space budget counts what its shards hold before I/O starts.
  void ReopenShards();
  control::EngineRegistration Registration() const;
  Status RegisterEmbedded();
  Status JoinManagement();
  Status JoinCluster();
  // Cluster on etcd: the ClusterRebuild service on `builder`, before it starts.
  Status PrepareRebuild(grpc::ServerBuilder* builder);
  // Cluster on etcd, once joined: the rebuild thread.
  Status StartRebuilder();
  Status WriteReadyFile() const;
  // Serves the Prometheus endpoint when metrics.listen is set (engine_metrics.h).
  Status StartMetrics();

  EngineConfig config_;
  HybridClock clock_;
  std::unique_ptr<transport::Context> transport_;
  TargetEnvironment env_;
  std::unique_ptr<control::ControlPlane> control_;
  std::unique_ptr<control::CapabilityVerifier> joined_verifier_;
  std::unique_ptr<JoinedSync> joined_sync_;   // joined mode: revocations and destructions
  std::unique_ptr<TombstoneLog> tombstones_;  // <data_dir>/destroyed.log
  std::vector<std::unique_ptr<Target>> targets_;
  // In a cluster on etcd: rebuild of replicated objects (rebuilder.h).
  std::unique_ptr<RebuildSource> rebuild_source_;
  std::unique_ptr<RebuildPullService> rebuild_service_;
  std::unique_ptr<Rebuilder> rebuilder_;
  std::unique_ptr<DownPeerWatch> down_peers_;  // closes forwards to DOWN targets (down_peers.h)
  std::unique_ptr<grpc::Server> grpc_;
  std::unique_ptr<metrics::MetricsExporter> metrics_;  // with metrics.listen
  std::string control_address_;                        // embedded: the Unix socket; joined: the joined endpoint
  std::string tcp_address_;                            // embedded with control.listen: "host:port"
  bool shut_down_ = false;
};

}  // namespace ros2::engine
