// Internal state behind the public libros2 handles (include/ros2/client.h).
//
//   ClientCore    — options, the gRPC channel and Session client, the process's
//                   transport Context, and the per-thread I/O state (ThreadIo).
//   ThreadIo      — one thread's transport Worker and its endpoints, keyed by
//                   the target's worker address blob (made lazily).
//   PoolCore      — one pool session: capability and the current MapSnapshot;
//                   re-established (a fresh session and map) when the engine
//                   restarted or the session expired (Recover).
//   ContainerCore — an open container: its properties and capability, renewed
//                   when the pool's session changed or the capability expires.
// The public handles hold shared_ptrs to these, so a Container keeps its pool
// session alive and a ThreadIo keeps the transport Context alive.
// Thread safety: ClientCore, PoolCore and ContainerCore are thread-safe; a
// ThreadIo is used only by the thread it was made for.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "client/failure_policy.h"
#include "common/log.h"
#include "common/uuid.h"
#include "control/credentials.h"
#include "control/management_client.h"
#include "control/session_client.h"
#include "object/obj_rpc.h"
#include "placement/placement.h"
#include "placement/pool_map.h"
#include "ros2/client.h"
#include "transport/transport.h"

namespace ros2::client {

// One version of a pool's map as the client places with it: the placement
// form plus, per global target index, the worker address and the engine-local
// target index the engine expects in RequestHeader::target.
struct MapSnapshot {
  PoolMap map;
  std::vector<std::string> addresses;
  std::vector<uint32_t> engine_index;
  // Per engine rank: the engine's uuid and its address (host name) in the map.
  std::vector<std::string> engine_uuids;
  std::vector<std::string> engine_addresses;
};

// The credential of a session (its uuid text and the 32-byte key of
// Session.Connect) for Endpoint::AuthenticateSession.
transport::SessionCredential MakeCredential(const std::string& session_uuid, const std::string& key);

// Converts the control plane's map. InvalidArgument when it is empty or a
// target has no worker address.
Result<std::shared_ptr<const MapSnapshot>> MakeMapSnapshot(const rpc::PoolMap& map);

class ThreadIo {
 public:
  ThreadIo(std::shared_ptr<transport::Context> context, std::unique_ptr<transport::Worker> worker,
           std::thread::id owner)
      : context_(std::move(context)), worker_(std::move(worker)), owner_(owner) {}
  ~ThreadIo();

  transport::Worker& worker() { return *worker_; }
  transport::Context& context() { return *context_; }
  std::thread::id owner() const { return owner_; }
  // The endpoint to the worker at `address`, connecting on first use. An
  // endpoint idle for a while is checked first (one progress pass notices a
  // peer that died meanwhile), so a request is not sent to a dead engine
  // whose death this thread had not seen yet.
  Result<std::shared_ptr<transport::Endpoint>> EndpointFor(const std::string& address);
  // Forgets a failed endpoint so the next request reconnects.
  void DropEndpoint(const std::string& address);
  // What this thread's endpoint to `address` runs over; null when it has none.
  const transport::EndpointInfo* ConnectedInfo(const std::string& address) const;
  // Whether this thread connected to every target of `snapshot` that is not
  // out (NoteConnected) and has dropped no endpoint since: then a shard of
  // any object placed by that map has its endpoint here already.
  bool ConnectedToAll(const MapSnapshot* snapshot) const {
    return snapshot != nullptr && snapshot == connected_map_.get() && connected_left_ == 0;
  }
  // Records that this thread holds an endpoint to `target` of `snapshot`
  // (a snapshot other than the one recorded starts the record anew).
  void NoteConnected(const std::shared_ptr<const MapSnapshot>& snapshot, uint32_t target);

  // Resends (ops whose failure the failure policy recovers from) wait here
  // as timers: each runs once it is due, from a wait of this thread
  // (EventQueue::Poll/Wait/WaitAny, the blocking calls' WaitFor), never
  // inside a completion. Scheduling never blocks.
  void Schedule(std::chrono::milliseconds delay, std::function<void()> resend);
  // Whether a timer is due now.
  bool TimerDue() const;
  // How long a wait may sleep before the next timer is due (at most `cap`).
  std::chrono::microseconds UntilNextTimer(std::chrono::microseconds cap) const;
  // Runs the timers that are due (nothing inside a completion).
  void RunDueTimers();
  bool has_timers() const { return !timers_.empty(); }

  // Any thread: the pool map marked the targets at `addresses` DOWN. The
  // owner closes its endpoints to them at its next wait (RunDueTimers), so
  // calls in flight there fail at once (kCancelled: the failure policy
  // resends them under the new map) instead of waiting out io_timeout on a
  // peer that a partition keeps from ever answering or closing.
  void AbandonPeers(const std::vector<std::string>& addresses);

  // Completions (the client's, with the caller's callback inside) nest on
  // this thread's worker: while one runs nothing may progress the worker,
  // connect, or run timers (CompletionScope).
  bool in_completion() const { return completion_depth_ > 0; }

 private:
  friend struct CompletionScope;
  bool NothingInFlight() const;
  struct CachedEndpoint {
    std::shared_ptr<transport::Endpoint> ep;
    std::chrono::steady_clock::time_point last_used;
  };
  struct Timer {
    std::chrono::steady_clock::time_point due;
    uint64_t seq = 0;  // FIFO among timers due at the same time
    std::function<void()> run;
  };
  std::shared_ptr<transport::Context> context_;
  std::unique_ptr<transport::Worker> worker_;  // destroyed after the endpoints
  std::unordered_map<std::string, CachedEndpoint> endpoints_;
  // The entry EndpointFor returned last (nodes of endpoints_ do not move):
  // consecutive I/Os to one target compare the address instead of hashing it
  // (an address is a UCX worker address of a few hundred bytes). Null after
  // any erase.
  std::pair<const std::string, CachedEndpoint>* last_endpoint_ = nullptr;
  // Erases an entry of endpoints_ (and what points at or sums up entries).
  void EraseEndpoint(std::unordered_map<std::string, CachedEndpoint>::iterator it);
  void ForgetConnected();  // clears NoteConnected's record
  // NoteConnected's record: the targets of connected_map_ connected on this
  // thread, and how many of those not out are not yet. Cleared whenever an
  // endpoint is dropped.
  std::shared_ptr<const MapSnapshot> connected_map_;
  std::vector<bool> connected_targets_;
  size_t connected_left_ = 0;
  std::vector<Timer> timers_;  // a min-heap on (due, seq)
  uint64_t timer_seq_ = 0;
  int completion_depth_ = 0;
  std::thread::id owner_;
  void CloseAbandoned();
  std::mutex abandon_mu_;
  std::vector<std::string> abandoned_;  // GUARDED_BY(abandon_mu_)
  std::atomic<bool> has_abandoned_{false};
};

// Marks `io`'s thread as inside a completion for the scope's lifetime.
struct CompletionScope {
  explicit CompletionScope(ThreadIo& io) : io_(io) { ++io_.completion_depth_; }
  ~CompletionScope() { --io_.completion_depth_; }
  CompletionScope(const CompletionScope&) = delete;
  CompletionScope& operator=(const CompletionScope&) = delete;

 private:
  ThreadIo& io_;
};

class ClientCore {
 public:
  static Result<std::shared_ptr<ClientCore>> Create(const ClientOptions& options);

  const ClientOptions& options() const { return options_; }
  const control::Credentials& credentials() const { return credentials_; }
  control::SessionClient& session() { return *session_; }
  std::chrono::milliseconds reconnect_timeout() const { return options_.reconnect_timeout; }
  // Management queries a tenant may make (pool space for statfs).
  control::ManagementClient& management() { return *management_; }
  transport::Context& context() { return *context_; }
  // The calling thread's I/O state, created on first use.
  Result<std::shared_ptr<ThreadIo>> ThisThreadIo();
  // Every thread's endpoints to `addresses` close at its next wait
  // (ThreadIo::AbandonPeers); any thread may call it.
  void AbandonPeers(const std::vector<std::string>& addresses);
  // The channel to the first of options().control (the map watches' first endpoint).
  const std::shared_ptr<grpc::Channel>& control_channel() const { return control_channel_; }
  // Client::RegisterBuffer / UnregisterBuffer: registrations the application
  // asked for, owned here until unregistered or the client closes (any thread).
  Status RegisterBuffer(void* addr, uint64_t length);
  Status UnregisterBuffer(void* addr);
  // The application's registration covering [addr, addr + length), or null:
  // the I/O then lets the transport register the buffer for its call alone.
  std::shared_ptr<const transport::MemoryRegion> RegisteredRegion(const void* addr, uint64_t length);

 private:
  ClientOptions options_;
  std::shared_ptr<grpc::Channel> control_channel_;
  control::Credentials credentials_;
  std::unique_ptr<control::SessionClient> session_;
  std::unique_ptr<control::ManagementClient> management_;
  std::shared_ptr<transport::Context> context_;
  std::mutex mu_;
  std::map<std::thread::id, std::shared_ptr<ThreadIo>> threads_;  // GUARDED_BY(mu_)
  std::mutex registered_mu_;
  std::map<uintptr_t, std::shared_ptr<const transport::MemoryRegion>> registered_;  // GUARDED_BY(registered_mu_), by start
  std::atomic<bool> has_registered_{false};  // !registered_.empty(): I/O skips the lock when none
};

// Where one dkey of an object goes under one map version.
struct Route {
  std::shared_ptr<const MapSnapshot> snapshot;
  uint32_t target = 0;  // global target index
  const std::string& address() const { return snapshot->addresses[target]; }
  uint32_t engine_index() const { return snapshot->engine_index[target]; }
};

class PoolMapWatch;  // client/pool_map_watch.h

class PoolCore {
 public:
  PoolCore(std::shared_ptr<ClientCore> client, control::PoolConnection conn,
           std::shared_ptr<const MapSnapshot> snapshot);
  ~PoolCore();  // ends the session (best effort)

  ClientCore& client() { return *client_; }
  // The pool as first connected (uuid, label, ...; what never changes).
  const rpc::PoolInfo& info() const { return info_; }
  const std::string& label() const { return info_.label(); }
  control::Rights rights() const { return rights_; }
  const Uuid& uuid() const { return uuid_; }
  // The current session's uuid.
  std::string session_uuid();
  // The current session's uuid and the credential that proves it on a
  // data-plane connection (its key from Session.Connect).
  std::pair<std::string, transport::SessionCredential> Session();
  // Counts the sessions this pool had: 0 for the first, +1 for every new one
  // Recover opened. Containers reopen themselves when it changed.
  uint64_t session_generation() const { return generation_.load(std::memory_order_acquire); }
  // The current map; when a request saw a disconnected target (the map is
  // stale) one recovery attempt first (RecoverOnce), whose failure is
  // returned.
  Result<std::shared_ptr<const MapSnapshot>> Map();
  // The current map as it is, without recovering.
  std::shared_ptr<const MapSnapshot> CurrentMap();
  // Fetches the current map now (Recover, waiting for the control plane).
  Result<uint64_t> Refresh();
  // Installs `snapshot` when it is newer than the current map (a map the
  // pool's watch received); returns whether it did. Requests in flight keep
  // the snapshot they were placed with.
  bool AdoptMap(std::shared_ptr<const MapSnapshot> snapshot);
  // Starts the watch on this pool's map (pool_map_watch.h; direct mode, when
  // ClientOptions::watch_pool_maps). The pool must be held by a shared_ptr.
  void StartMapWatch();
  // The pool's watch (null when not started).
  const PoolMapWatch* map_watch() const { return watch_.get(); }
  void MarkMapStale() { map_stale_.store(true, std::memory_order_relaxed); }
  bool map_stale() const { return map_stale_.load(std::memory_order_relaxed); }
  // One attempt to bring the session and the map up to date, without
  // sleeping: GetPoolMap on the current session; when the control plane no
  // longer knows the session (it restarted, or the session expired) a new
  // session (Session.Connect, a fresh map) replaces it. Errors are the
  // control plane's, named for the pool (the failure policy decides, phase
  // kConnecting). One thread recovers at a time; a thread that waited takes
  // the result of the attempt made meanwhile, and attempts within a few
  // milliseconds of a failed one return its failure without a call (the
  // resends of many operations share one attempt).
  Status RecoverOnce();
  // RecoverOnce until it succeeds or the failure policy gives up (pauses
  // between attempts, ClientOptions::reconnect_timeout): for blocking calls
  // only (Pool::RefreshMap, OpenContainer).
  Status Recover();

 private:
  std::shared_ptr<ClientCore> client_;
  rpc::PoolInfo info_;
  control::Rights rights_ = 0;
  Uuid uuid_;
  std::atomic<bool> map_stale_{false};
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> recoveries_{0};  // successful recovery attempts
  std::mutex recover_mu_;                // one RecoverOnce at a time
  std::chrono::steady_clock::time_point failed_at_{};  // GUARDED_BY(recover_mu_): the last failed attempt
  Status last_failure_;                                // GUARDED_BY(recover_mu_)
  std::mutex mu_;
  std::string session_uuid_;                     // GUARDED_BY(mu_)
  transport::SessionCredential session_cred_;    // GUARDED_BY(mu_)
  std::shared_ptr<const MapSnapshot> snapshot_;  // GUARDED_BY(mu_)
  std::unique_ptr<PoolMapWatch> watch_;          // stopped first in the destructor
};

// A container capability and the session it was issued in: a request sends
// the capability on an endpoint authenticated for that session.
struct Grant {
  std::string capability;
  transport::SessionCredential session;
};

class ContainerCore {
 public:
  ContainerCore(std::shared_ptr<PoolCore> pool, control::ContainerHandle handle, ContainerSummary summary, Uuid uuid,
                uint64_t session_generation);

  PoolCore& pool() { return *pool_; }
  const ContainerSummary& summary() const { return summary_; }
  const Uuid& uuid() const { return uuid_; }
  // The container capability to send with a request. Reopens the container
  // first (Session.OpenContainer, the same rights) when the pool has a new
  // session, when an engine refused the capability (MarkCapabilityStale), or
  // when a quarter of its lifetime is left.
  Result<std::shared_ptr<const Grant>> Capability();
  void MarkCapabilityStale() { capability_stale_.store(true, std::memory_order_relaxed); }
  ChecksumType checksum_type() const { return summary_.checksum; }
  // The target that serves reads of `dkey` of `oid` under the current map:
  // the `replica`-th readable copy counted from the `first`-th (placement.h
  // ReadTarget; 0 for an object without replicas). NotFound when there are
  // not that many.
  Result<Route> RouteFor(const ObjectId& oid, std::string_view dkey, uint32_t replica = 0, uint32_t first = 0);
  // Every copy an update of `dkey` of `oid` must reach (WriteTargets).
  Result<std::vector<Route>> WriteRoutes(const ObjectId& oid, std::string_view dkey);
  // Every distinct target holding a shard of `oid` (all targets when oid is
  // nil): per group one readable copy, or with `write` every live copy.
  Result<std::vector<Route>> ShardRoutes(const ObjectId* oid, bool write = false);
  obj::RequestHeader Header(const Route& route) const;

 private:
  Status Reopen();

  std::shared_ptr<PoolCore> pool_;
  ContainerSummary summary_;
  Uuid uuid_;
  std::atomic<bool> capability_stale_{false};
  std::mutex mu_;
  std::shared_ptr<const Grant> capability_;  // GUARDED_BY(mu_)
  uint64_t generation_ = 0;                  // GUARDED_BY(mu_): the pool session it was issued in
  int64_t renew_at_ms_ = 0;                  // GUARDED_BY(mu_): system clock ms; 0 = never
};

// An Object handle's state: its id and its container's.
class Object::Impl {
 public:
  Impl(std::shared_ptr<ContainerCore> cont, const ObjectId& oid) : cont(std::move(cont)), oid(oid) {}
  std::shared_ptr<ContainerCore> cont;
  ObjectId oid;
};

// This thread's endpoint to the route's target. When connecting fails, the
// pool's map is marked stale (the engine may have restarted with a new
// address) and the failure is returned as it is: the failure policy decides
// (phase kConnecting). Never recovers or waits itself.
Result<std::shared_ptr<transport::Endpoint>> ConnectTarget(ThreadIo& io, ContainerCore& cont, const Route& route);

inline std::span<const uint8_t> AsCapability(const std::string& blob) {
  return {reinterpret_cast<const uint8_t*>(blob.data()), blob.size()};
}

// "oid=... dkey='...' akey='...'" for error messages (keys shortened, escaped).
std::string DescribeIo(const ObjectId& oid, std::string_view dkey, std::string_view akey);

}  // namespace ros2::client
