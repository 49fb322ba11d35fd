// ClusterMember: one engine's part in a cluster whose state store is etcd
// (docs/cluster.md): membership, leadership, liveness and fencing.
//
//   members/<engine uuid>   rpc::EngineInfo (address: the control endpoint),
//                           attached to the engine's lease (TTL `ttl`)
//   leader                  "<engine uuid> <control endpoint>", attached to the
//                           leader's lease: created only when absent (a Txn
//                           comparing its create_revision with 0)
//   engine-state/<uuid>     "up <wall ms>" or "down <wall ms>": since when
//
// A thread renews the lease every ttl/3, campaigns for the leader key while
// there is none, and reloads what other engines changed (the caller's
// `on_tick`: revocations). The leader also watches members/: an engine whose
// lease expired (its key deleted by etcd) has every target set DOWN in the
// system map, so every pool map holding them gets a higher version, in one
// Txn that compares on the leader key (a deposed leader's write is refused).
// An engine whose lease was not renewed for ttl/2 is fenced(): it must stop
// acknowledging writes (it may be on the losing side of a partition); it says
// so in its log and status, and when etcd is reachable again it rejoins with a
// new lease and re-registers its targets UP (`rejoin`). Unless it is held:
// while its renewals fail it asks the other engines (PeerProber) whether they
// reach etcd, and while every engine the map has UP answers that it cannot,
// and those answering with it are a majority of the map's engines, nobody can
// change the map, so it goes on acknowledging writes for ttl/4 past each such
// answer (docs/cluster.md, "etcd wholly down").
//
// Thread-safe. Stop() (or the destructor) revokes the lease, so a stopped
// engine is DOWN at once rather than after the TTL.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/uuid.h"
#include "control/etcd_store.h"
#include "control/peer_liveness.h"
#include "control/system_map.h"

namespace ros2::control {

struct ClusterMemberOptions {
  Uuid engine;
  std::string control_endpoint;    // where clients reach this engine's control plane
  std::chrono::seconds ttl{3};     // the lease's TTL
  std::function<void()> on_tick;   // every tick: reload what other engines changed
  std::function<Status()> rejoin;  // after a lost lease: register the targets again
  // Set at every renewal to the steady-clock ns after which this engine is
  // fenced (renewal + ttl/2), for a data path that checks it on each write.
  std::atomic<int64_t>* fence_deadline_ns = nullptr;
  // Asks the other engines while etcd cannot be reached (null: no hold, an
  // engine that cannot renew is fenced after ttl/2 whatever the others see).
  std::shared_ptr<PeerProber> peers;
  std::string peer_tls_ca;  // for the ControlPlane to make `peers`: PEM roots of TCP peers
};

// One engine as `cluster status` shows it.
struct MemberState {
  std::string engine_uuid;
  std::string endpoint;  // its control endpoint (empty when down)
  bool up = false;
  bool leader = false;
  uint64_t since_ms = 0;          // wall clock of the last change between up and down
  int64_t lease_ttl_s = 0;        // granted TTL (up engines)
  int64_t lease_remaining_s = 0;  // what is left of it: lease age = ttl - remaining
};

class ClusterMember {
 public:
  // Joins: grants the lease, writes the membership and "up" records, and
  // starts the thread. REQUIRES: store and map outlive the member.
  static Result<std::unique_ptr<ClusterMember>> Start(EtcdStore* store, SystemMap* map, ClusterMemberOptions options);
  ~ClusterMember();
  ClusterMember(const ClusterMember&) = delete;
  ClusterMember& operator=(const ClusterMember&) = delete;
  void Stop();

  bool is_leader() const { return leader_.load(); }
  // A compare that the leader key still holds this engine: a batch carrying
  // it is refused once this engine no longer leads.
  StoreBatch LeaderGuard() const;
  // True while the lease has not been renewed for more than ttl/2 and no hold
  // (the other engines confirming that none reaches etcd) is in force.
  bool fenced() const;
  // True while writes go on under a hold rather than a fresh lease.
  bool held() const;
  // What this engine answers a peer's liveness question.
  void DescribeLiveness(rpc::PeerLivenessBody* body) const;
  uint64_t lease_age_ms() const;  // since the last successful renewal
  // This engine's control endpoint.
  const std::string& endpoint() const { return options_.control_endpoint; }
  // The leader's control endpoint as last read (empty: none known).
  std::string leader_endpoint() const;
  // Every engine of the system map and every member: up/down, since, lease.
  Result<std::vector<MemberState>> Members();

 private:
  ClusterMember(EtcdStore* store, SystemMap* map, ClusterMemberOptions options);
  Status Join();
  void Run();
  void Renew();
  void MarkRenewed();
  void Campaign();
  void MarkExpiredDown();
  void RefreshPeers();
  void HoldOrFence();
  // Asks every engine the map has UP; Ok when all of them answer that they
  // cannot reach etcd and, with this engine, they are a majority of the
  // map's engines; otherwise the reason writes must stop.
  Status PeersConfirmEtcdDown();
  void NoteEtcd(bool ok);
  // The thread's period: min(250 ms, ttl/6).
  std::chrono::milliseconds Tick() const;
  int64_t WritesUntilNs() const;
  std::string MemberKey(const std::string& engine) const { return "members/" + engine; }

  EtcdStore* store_;
  SystemMap* map_;
  ClusterMemberOptions options_;
  std::string leader_value_;  // "<uuid> <endpoint>"
  const int64_t started_ns_;  // steady clock when this member was made
  std::atomic<int64_t> lease_{0};
  std::atomic<int64_t> renewed_ns_{0};  // steady clock of the last renewal
  std::atomic<bool> leader_{false};
  std::atomic<bool> etcd_ok_{true};           // the last etcd call of the thread succeeded
  std::atomic<int64_t> etcd_attempt_ns_{0};   // steady clock when that call ended
  std::atomic<int64_t> hold_until_ns_{0};     // writes go on until then under a hold
  std::atomic<bool> held_logged_{false};
  std::atomic<bool> fenced_logged_{false};
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool members_changed_ = false;  // GUARDED_BY(mu_)
  std::string leader_endpoint_;   // GUARDED_BY(mu_)
  std::map<std::string, std::string> peer_endpoints_;  // GUARDED_BY(mu_): engine uuid -> control endpoint
  std::set<std::string> seen_members_;                 // GUARDED_BY(mu_): engines seen as members since the start
  std::string fence_reason_;                           // GUARDED_BY(mu_): why the last hold was refused
  std::unique_ptr<EtcdWatch> watch_;
  std::thread thread_;
};

}  // namespace ros2::control
