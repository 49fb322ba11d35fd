// Target: one engine target — a thread that owns a transport Worker, the VOS
// shards of every container it serves, and an I/O buffer pool, and runs the
// object RPC handlers (object_handlers.cc) in one epoll loop.
//
// Container mapping: each (pool, container) has its own Vos per target, at
// <data_dir>/targets/<index>/<pool uuid>/<container uuid>, opened when the
// container is created (PrepareShard, from the embedded control plane) or else on
// the first request that names it (with a capability the control plane signed for
// it), and destroyed when the control plane destroys the container or the pool.
// Opening a shard (the pool's layout from the control plane, RocksDB, an empty
// data file) takes milliseconds to tens of milliseconds, so it runs on a thread
// of its own: requests for that container wait parked and are handled, in
// order, once it is open, while the target goes on serving every other
// container. A shard opens only on a target of the container's pool (a request
// for another target is refused with PermissionDenied), charging the pool's
// space budget on this engine (pool_space.h).
//
// The loop: Progress() the worker, every Vos and the mailbox until idle, poll
// for `spin` (at most kSpinWithoutYield) without events and without yielding
// the CPU, then PrepareSleep() and sleep in epoll on the
// worker's event fd, every Vos event fd and the mailbox eventfd (at most until
// the worker's next request deadline).
//
// Threading: the constructor, Start(), Stop(), Post(), PrepareShard(),
// DestroyContainer(), DestroyPool(), worker_address() and UsedBytes() may be
// called from any thread; everything else runs on the
// target's own thread. Stop() joins the thread; the destructor calls it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/hlc.h"
#include "common/status.h"
#include "common/uuid.h"
#include "control/capability.h"
#include "engine/buffer_pool.h"
#include "engine/dkey_gate.h"
#include "engine/map_versions.h"
#include "engine/pool_space.h"
#include "engine/request_budget.h"
#include "engine/target_metrics.h"
#include "object/obj_rpc.h"
#include "object/replica_rpc.h"
#include "ros2/rebuild.pb.h"
#include "transport/transport.h"
#include "vos/vos.h"

namespace ros2::engine {

struct LeaderOp;      // replica_forward.h
struct InDoubtOp;     // replica_forward.h
struct ReplicaState;  // replica_forward.h

// What every target of an engine shares; owned by the Engine, which outlives
// its targets.
struct TargetEnvironment {
  Uuid engine_id;
  uint32_t target_count = 0;
  std::string data_dir;
  vos::VosOptions vos_template;  // path set per shard
  transport::Context* transport = nullptr;
  HybridClock* clock = nullptr;
  // Set once the capability key is known (at once for an engine that embeds the
  // control plane, after registration for one that joins another); requests
  // arriving before are refused with Busy.
  std::atomic<control::CapabilityVerifier*> verifier{nullptr};
  // In a cluster (control.store etcd): the steady-clock time (ns) after which
  // writes are refused because the engine's etcd lease has not been renewed
  // for half its TTL (docs/cluster.md, "Fencing"); moved on at every renewal.
  // Never reached for a single engine.
  std::atomic<int64_t> writes_fenced_after_ns{INT64_MAX};
  std::chrono::microseconds spin{50};
  // Time every read's stages (io_stages.h): ROS2_ENGINE_IO_STAGES=1 at start.
  bool io_stages = false;
  std::chrono::milliseconds shutdown_grace{5000};
  // A replica forward (replica_forward.cc) unanswered for this long fails, so
  // a leader never holds a client's update on a copy that a partition cut off
  // (no reset arrives) past failure detection: the control plane's lease TTL.
  // The client resends under the newer map.
  std::chrono::milliseconds forward_timeout{3000};
  EngineLimits limits;  // request limits (EngineConfig::limits)
  // Target i runs on CPU target_cpus[i % size] (EngineConfig::target_cpus); empty: unpinned.
  std::vector<int> target_cpus;
  std::vector<int> process_cpus;  // the engine's CPUs before any pinning (given back to helper threads)
  // Containers destroyed while this engine ran: never reopened.
  std::mutex destroyed_mu;
  std::vector<std::pair<Uuid, Uuid>> destroyed;  // GUARDED_BY(destroyed_mu)
  std::atomic<uint64_t> destroyed_version{0};    // bumped after each addition
  bool IsDestroyed(const Uuid& pool, const Uuid& container);
  // Every (pool, container) a shard was opened for since the engine started (a
  // joined engine reconciles them with its management endpoint).
  std::mutex opened_mu;
  std::set<std::pair<Uuid, Uuid>> opened;  // GUARDED_BY(opened_mu)
  // Pool sizes, target sets and space budgets (pool_space.h).
  PoolSpaceTable pools;
  // The newest pool map version this engine knows: requests made with an
  // older map are refused with StaleMap (map_versions.h).
  MapVersions maps;
  // Asks the control plane for a pool's size and target set (blocking; called
  // on shard-opener threads). Set before the targets are published; unset,
  // shards do not open (Busy).
  std::function<Result<PoolLayout>(const Uuid& pool)> resolve_pool;
};

class Target {
 public:
  Target(uint32_t index, TargetEnvironment* env);
  ~Target();
  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;

  // Starts the thread, which creates its worker and registers the handlers.
  // Returns once the worker exists (or failed to be created).
  Status Start();
  // Stops accepting requests, lets in-flight ones finish for the shutdown
  // grace (then fails them with Cancelled), closes every Vos, joins the thread.
  void Stop();

  uint32_t index() const { return index_; }
  // The worker's address blob (valid after Start()).
  const std::vector<uint8_t>& worker_address() const { return address_; }
  // Runs `fn` on the target thread soon. Thread-safe.
  void Post(std::function<void()> fn);
  // Closes and deletes the shards of a container / of every container of a pool
  // (asynchronously, on the target thread). Thread-safe.
  void DestroyContainer(const Uuid& pool, const Uuid& container);
  void DestroyPool(const Uuid& pool);
  // Starts opening (creating) the container's shard in the background unless it
  // is open or being opened already. Thread-safe.
  void PrepareShard(const Uuid& pool, const Uuid& container);
  // What this target counted (written by its thread; read at scrape time by any).
  const TargetMetrics& metrics() const { return metrics_; }
  // The connections the worker serves, by transport (after Start(), before
  // Stop(); any thread).
  transport::ServedConnections served_connections() const {
    return worker_ != nullptr ? worker_->served_connections() : transport::ServedConnections{};
  }
  // Bytes the pool's shards on this target use (refreshed about once a second). Thread-safe.
  uint64_t UsedBytes(const Uuid& pool) const;
  // Opens every shard this target has on disk (in the background, as
  // PrepareShard does) so that each pool's budget counts all the space its
  // shards hold; the future is ready once every open has finished (or failed).
  // Thread-safe; the engine calls it once at start.
  std::future<void> ReopenShards();

  // --- rebuild (target_rebuild.cc; docs/replication.md, "Rebuild") ---
  // Runs `fn` on the target thread with the open shard of (pool, container):
  // nullptr while it is being opened (its opening is started when `open`),
  // the error when it cannot be. `fn` may submit VOS operations whose
  // callbacks run later on this thread. Thread-safe.
  void WithShard(const Uuid& pool, const Uuid& container, bool open, std::function<void(Result<vos::Vos*>)> fn);
  // The rebuild's data plane (target_rebuild_plane.cc): reads the extents
  // of `request` from the source target at worker address `address` (its
  // index inside its engine in request.target) into `dst`, back to back
  // (`dst` holds exactly their bytes and stays valid until `done` runs),
  // over this target's endpoint authenticated as an engine (the replica
  // forward session, PeerEndpoint). `done` runs on this target's thread with
  // each extent's checksums, once the reply's MAC (under the forward key,
  // with a fresh nonce) verified. Thread-safe.
  struct RebuildRead {
    std::string address;
    rpc::RebuildReadRequest request;  // its nonce is filled in here
    std::span<std::byte> dst;
    std::function<void(Result<rpc::RebuildReadBody>)> done;
  };
  void ReadForRebuild(RebuildRead read);
  // The containers of `pool` whose shards are open here, waiting at most
  // `wait` for the target thread (empty when it does not answer). Thread-safe.
  std::vector<Uuid> OpenContainers(const Uuid& pool, std::chrono::milliseconds wait);
  // Gives back the space of copies this target no longer holds for the
  // placement (docs/replication.md, "Exclude, drain, reintegrate"): on the
  // target thread, punches at the shard's highest epoch every object of a
  // replicated class whole (`drop` empty) or each of its dkeys `drop` names,
  // then aggregates the shard (the punched versions and the tombstones go).
  // `done` runs on the target thread. Thread-safe.
  struct SweepResult {
    uint64_t punched = 0;  // objects or dkeys
    uint64_t freed = 0;    // bytes the aggregation freed
  };
  using SweepDrop = std::function<bool(const ObjectId&, const std::string&)>;
  void SweepShard(const Uuid& pool, const Uuid& container, SweepDrop drop,
                  std::function<void(Result<SweepResult>)> done);

 private:
  struct Shard {
    Uuid pool;
    Uuid container;
    std::string path;
    std::unique_ptr<vos::Vos> vos;
    // Background aggregation (MaybeAggregate): writes or punches since the
    // last pass, and when the last of each happened.
    bool aggregate_pending = false;
    std::chrono::steady_clock::time_point last_write{};
    std::chrono::steady_clock::time_point last_aggregate{};
  };
  using ShardKey = std::pair<Uuid, Uuid>;
  using Handler = void (Target::*)(transport::IncomingRequest);
  // A shard being opened on its own thread, and the requests waiting for it.
  struct Opening {
    std::thread thread;  // runs vos::Vos::Open, then posts FinishOpen
    std::vector<std::pair<transport::IncomingRequest, Handler>> parked;
  };

  void Run(std::promise<Status>* started);
  void Loop();
  int DrainMailbox();
  // `hold`: Vos::HoldSubmissions for this pass.
  int ProgressShards(bool hold);
  void Sleep();
  // Before sleeping: clears every shard's event fd and runs what completed
  // meanwhile (Vos::PrepareSleep); returns the callbacks run (then do not sleep).
  int PrepareShardsForSleep();
  // epoll_pwait2 on the worker, VOS and mailbox fds for at most `wait`.
  void WaitForEvents(std::chrono::microseconds wait);
  // Sleep for a target whose worker will not arm (see Loop): 0.1-10 ms,
  // growing with `quiet`, the time since the last event.
  void NapWhileBusy(std::chrono::steady_clock::duration quiet);
  // How long the loop spins while the worker refuses to arm before napping.
  static constexpr std::chrono::milliseconds kBusyArmLimit{2};
  // The longest poll without events before the target sleeps (transport.spin
  // when shorter). It does not yield: on a kernel whose scheduler is EEVDF
  // (Linux 6.6 and later) every sched_yield pushes the thread's deadline a
  // slice later, so a target that yielded between passes waited behind every
  // other runnable thread once it had work (docs/engine.md, "The spin").
  static constexpr std::chrono::microseconds kSpinWithoutYield{10};
  void AddToEpoll(int fd);
  void RemoveFromEpoll(int fd);
  void RefreshUsage();
  // Sums the open shards' vos::HealthInfo into metrics_ (about once a second).
  void RefreshHealth();
  void FinishShutdown();
  void RetireShards(const std::function<bool(const Shard&)>& match);
  // Reclaims the space of overwritten and punched versions (Vos::Aggregate) of
  // shards written since their last pass: once a shard has been quiet for
  // kAggregateQuiet, or at most every kAggregateInterval while its
  // pool's space on this engine is kAggregatePressure full. Runs on this
  // thread, between requests.
  void MaybeAggregate(std::chrono::steady_clock::time_point now);
  // One aggregation pass of `shard`; returns the bytes it freed.
  uint64_t AggregateShard(Shard& shard, std::string_view why);
  // The highest epoch aggregation may reach on `shard`: below the lowest
  // epoch of a replicated operation open on it (led here, or in doubt
  // here), which may still be taken back (replica_abort.cc).
  Epoch AggregationBound(const Shard& shard);
  // A pass over every open shard of `pool` on this target (they share the
  // pool's space); returns the bytes freed.
  uint64_t AggregatePoolShards(const Uuid& pool, std::string_view why);
  // Closures run on this thread after the current progress round (work that
  // must not run inside a VOS callback, e.g. aggregation before a retry).
  int RunDeferred();
  static constexpr std::chrono::seconds kAggregateQuiet{2};
  static constexpr std::chrono::seconds kAggregateInterval{5};
  static constexpr double kAggregatePressure = 0.75;

  // --- request handling (object_handlers.cc) ---
  void RegisterHandlers();
  void HandlePing(transport::IncomingRequest req);
  void HandleUpdate(transport::IncomingRequest req);
  void HandleFetch(transport::IncomingRequest req);
  // io_stages of a fetch (common/io_stages.h): its data is ready (the lookup,
  // when the extent store did not count it, ends here), and its reply leaves.
  void FetchDataReady(uint64_t handled, uint64_t* reaped);
  void FetchReplied(uint64_t arrived, uint64_t reaped);
  void HandlePunch(transport::IncomingRequest req);
  // Replies `why` to a list or query and counts it as a failed enumerate;
  // with `header`, as ReplyRefused.
  void FailEnumerate(transport::IncomingRequest& req, const Status& why, const obj::RequestHeader* header = nullptr);
  // Replies an Admit refusal: a StaleMap one carries the StaleMapReply (this
  // engine's map version and the request's).
  void ReplyRefused(transport::IncomingRequest& req, const Status& why, const obj::RequestHeader& header);
  void HandleList(transport::IncomingRequest req);
  void HandleQuery(transport::IncomingRequest req);
  // Shutdown, target, capability, map version and shard checks shared by
  // every handler (StaleMap for a request made with an older map). A
  // nullptr shard means it is being opened: the handler parks the request (Park).
  // `forwarded`: a leader's forward (replica_forward.cc), whose connection
  // HandleForward authenticated as an engine's: the client's capability is
  // checked, not that this connection proved the client's session.
  Result<Shard*> Admit(const transport::IncomingRequest& req, const obj::RequestHeader& header, control::Rights rights,
                       bool forwarded = false);

  // --- replicated objects (replica_forward.cc, docs/replication.md) ---
  // A client's update or punch to the leader of its group: decided here,
  // forwarded to the other copies, answered once every copy has it durable.
  void HandleLeader(transport::IncomingRequest req);
  // A leader's forward: stored as the leader decided it.
  void HandleForward(transport::IncomingRequest req);
  // A rebuilding engine's read of array extents (obj::Opcode::kRebuildRead,
  // target_rebuild_plane.cc): only on a connection that proved the forward
  // session; the extents are pushed into the caller's buffer.
  void HandleRebuildRead(transport::IncomingRequest req);
  // OK when `req`'s connection proved the forward session (an engine's) and
  // the forward key is ready; else PermissionDenied naming `what` and
  // `who_may` send it (a capability refusal is counted).
  Status RequireEngineSession(const transport::IncomingRequest& req, std::string_view what, std::string_view who_may);
  void LeadUpdate(transport::IncomingRequest& req, obj::LeaderRequest& m);
  void LeadPunch(transport::IncomingRequest& req, obj::LeaderRequest& m);
  // Checks a conditional operation under its dkey's gate, then (from the
  // loop, not a completion) Replicate.
  void Decide(const std::shared_ptr<LeaderOp>& op);
  // Numbers the operation (its position), forwards it to every other copy
  // and stores the leader's own copy beside them (StoreOwnCopy); reads of its
  // dkey are held here until every copy answered (Settle).
  void Replicate(const std::shared_ptr<LeaderOp>& op);
  void SendForward(const std::shared_ptr<LeaderOp>& op, const obj::ReplicaPeer& peer);
  // One copy's answer (`copy`; nullptr: the leader's own store).
  void CopyDone(const std::shared_ptr<LeaderOp>& op, const obj::ReplicaPeer* copy, const Status& st);
  void StoreOwnCopy(const std::shared_ptr<LeaderOp>& op);
  // Answers the client (Answer) and releases the operation's position
  // (ClosePosition).
  void Settle(const std::shared_ptr<LeaderOp>& op, const Status& st);
  void Answer(const std::shared_ptr<LeaderOp>& op, const Status& st);
  // Its position and its dkey's reads here are released; its buffer once no
  // forward of it is in flight.
  void ClosePosition(const std::shared_ptr<LeaderOp>& op);
  // --- failed operations of a leader (replica_abort.cc, docs/replication.md "Failed updates") ---
  // A first attempt that failed on some copy: settled with its failure, or,
  // when another copy stored it (or may have) and the map still has the one
  // that lacks it, answered and taken back on every copy (aborted), kept
  // open meanwhile (ReplicaState::aborts).
  void SettleFailed(const std::shared_ptr<LeaderOp>& op);
  // Drops from `op` the copies the map excludes; whether any (or the
  // leader's own store) still lacks what it is waiting for.
  bool StillLacking(LeaderOp& op);
  // Sends the abort to the copies in `lacking`, and discards the leader's
  // own version when `own_lacking`.
  void SendAborts(const std::shared_ptr<LeaderOp>& op);
  void DiscardOwnCopy(const std::shared_ptr<LeaderOp>& op);
  // From the loop: sends again the aborts whose pause ended.
  void RetryAborts(std::chrono::steady_clock::time_point now);
  // Every copy of an abort answered.
  void AbortAnswered(const std::shared_ptr<LeaderOp>& op);
  // The map changed: the aborts whose lacking copies it now excludes end.
  void ExcludeFromAborts();
  void EndAbort(const std::shared_ptr<LeaderOp>& op);
  // ReplicaState::leading: an operation decided here, until its position is
  // released (Unlead then decides the attempts that waited for it).
  void Lead(const std::shared_ptr<LeaderOp>& op);
  void Unlead(const std::shared_ptr<LeaderOp>& op);
  // True (and `op` queued on it) when an attempt of the same transaction is open.
  bool WaitForOpenAttempt(const std::shared_ptr<LeaderOp>& op);
  // Copy: an abort of a forwarded operation (kForwardAbort): discards its
  // version once a store of it still in flight answered, then stops
  // holding its dkey's reads (DropInDoubt).
  void AbortForwarded(transport::IncomingRequest& req, const obj::ForwardRequest& m);
  // Copy: a forwarded store of `transaction` (TransactionKey) answered.
  void ForwardStored(const std::string& transaction);
  // Copy: forgets the in-doubt operation `leader` numbered `seq`.
  void DropInDoubt(const std::string& leader, uint64_t seq);
  void StoreForwardedUpdate(transport::IncomingRequest& req, obj::UpdateRequest m, uint8_t flags,
                            std::vector<obj::ReplicaPeer> group, uint64_t seq);
  void StoreForwardedPunch(transport::IncomingRequest& req, obj::PunchRequest m, uint8_t flags,
                           std::vector<obj::ReplicaPeer> group, uint64_t seq);
  // Copy: holds the reads of a forward's dkey (`*gate`, counted in
  // ReplicaState::unsettled) from its arrival; once stored, NoteInDoubt
  // takes the count over (or Unsettles it), and a failed store Unsettles
  // it. Nothing for a forward without a position (`seq` 0).
  void HoldFromArrival(const obj::RequestHeader& h, const ObjectId& oid, const std::string& dkey, uint64_t seq,
                       std::string* gate);
  // --- the committed watermark (replica_in_doubt.cc, docs/replication.md "Read rule") ---
  // Leader: every position below it is answered by every copy.
  uint64_t Watermark();
  // Leader: a watermark alone to each copy that has not received the latest.
  void SendWatermarks();
  // Copy: `leader`'s watermark; the in-doubt operations below it are settled.
  void NoteWatermark(const std::string& leader, uint64_t watermark);
  // Both: one operation on the dkey `gate` fewer unsettled (its held reads
  // run once none is left and it is not being resolved).
  void Unsettle(const std::string& gate);
  void Forget(InDoubtOp& e);  // Unsettle, once, for an in-doubt operation
  void ReleaseHeld(const std::string& gate);
  // From the loop: the watermarks due, and the in-doubt operations past
  // their window.
  void ReplicaTick(std::chrono::steady_clock::time_point now);
  // Drops the in-doubt operations resolved or past their window (Forget).
  void PruneInDoubt(std::chrono::steady_clock::time_point now);
  // --- in-doubt operations (replica_in_doubt.cc, docs/replication.md "In-doubt updates") ---
  // Keeps a stored forward (InDoubtOp) from the request that carried it;
  // `gate`: its dkey's key, counted by HoldFromArrival (empty for `seq` 0),
  // whose count the entry takes over, or which is Unsettled when the
  // forward is not in doubt.
  void NoteInDoubt(obj::Opcode op, const obj::UpdateRequest* update, const obj::PunchRequest* punch, uint8_t flags,
                   std::vector<obj::ReplicaPeer> group, std::span<const uint8_t> capability, uint64_t seq,
                   std::string gate);
  // Resolves the in-doubt operations whose leader the map marks DOWN or no
  // longer has (`live`: the map's worker addresses).
  void ResolveInDoubt();
  void ResolveOne(const std::shared_ptr<InDoubtOp>& op, const std::set<std::string>& live);
  void ResolvedOne(const std::shared_ptr<InDoubtOp>& op, const std::string& gate, const Status& st);
  // A read of a dkey being resolved, or with an operation not yet known to
  // be on every copy (ReplicaState::unsettled), is held until it is (true:
  // held).
  bool HoldWhileResolving(transport::IncomingRequest& req, const obj::RequestHeader& h, const ObjectId& oid,
                          const std::string& dkey);
  // A listing or query of a replicated object's dkeys (or its largest dkey)
  // while an operation on any of its dkeys is counted as above: held until
  // none is (true: held). Costs an emptiness check while no replicated
  // operation is open on the target, and a class check for a non-replicated
  // object.
  bool HoldWhileObjectOpen(transport::IncomingRequest& req, const obj::RequestHeader& h, const ObjectId& oid);
  // Queues `req` under `gate` (a dkey's or an object's key) for ReleaseHeld;
  // false when the held queue is full (served as it is).
  bool Hold(std::string gate, transport::IncomingRequest& req);
  // Whether a dkey of `object` (DkeyGate::ObjectKey) has an operation counted
  // in ReplicaState::unsettled or ::resolving: one ordered lookup in each.
  bool ObjectOpen(std::string_view object);
  ReplicaState& replica();

 public:
  // The worker addresses of the targets the pool map marks DOWN or DOWNOUT
  // (replica_forward.cc): the endpoints to them are closed, failing the
  // forwards in flight there at once (Disconnected, so the client resends
  // under the new map), and no new one is opened while the map says so.
  // Target thread (Post it).
  void SetMapPeers(std::vector<std::string> down, std::vector<std::pair<uint32_t, std::string>> members);

 private:
  // The container's open shard; nullptr while it is not open yet (then, with
  // `open`, its opening has been started). Destroyed containers are NotFound.
  Result<Shard*> ShardFor(const Uuid& pool, const Uuid& container, bool open);
  // The shard of a request already admitted: NotFound if it is not open (any more).
  Result<Shard*> OpenShard(const Uuid& pool, const Uuid& container);
  std::string PoolDir(const Uuid& pool) const;
  std::string ShardPath(const ShardKey& key) const;
  // Removes the pool's (empty) directory on this target once the pool is destroyed.
  void RemovePoolDirIfDestroyed(const Uuid& pool);
  void StartOpen(const ShardKey& key);
  // On the opening thread: the shard's VOS options — the pool's layout asked
  // of the control plane (PermissionDenied when this target is not in the
  // pool), its budget, and an address space to match.
  Result<vos::VosOptions> ShardOptions(const ShardKey& key);
  // How long a resolved pool layout refuses requests for targets outside it
  // without asking the control plane again.
  static constexpr std::chrono::seconds kLayoutReuse{2};
  // On the target thread once the opening thread is done: installs the shard
  // (or retires it, if the container was destroyed meanwhile) and handles the
  // parked requests, or fails them with the open's error.
  void FinishOpen(const ShardKey& key, Result<std::unique_ptr<vos::Vos>> vos);
  // Keeps `req` until the shard its header names is open (Admit returned nullptr).
  void Park(transport::IncomingRequest req, const obj::RequestHeader& header);
  size_t ParkedCount() const;
  // Vos::SubmitUpdate on the container's shard; a NoSpace answer gets one more
  // try after an aggregation pass of the shard freed space (deferred: never
  // inside a VOS callback). A Busy answer (the same key at the same epoch in
  // flight: a resend, or an in-doubt resolution, racing the first copy) is
  // tried again at each pass of the loop until `busy_until` (one forward
  // timeout from the first Busy), then stored as a replay. `op` must live
  // until `done` runs.
  void SubmitUpdateWithRetry(const Uuid& pool, const Uuid& container, vos::UpdateOp* op,
                             std::function<void(Status)> done, bool retried = false,
                             std::chrono::steady_clock::time_point busy_until = {});
  // Tracks a request whose reply comes later, counting it and the `bytes` the
  // target allocates for it against the in-flight budget (Busy, not tracked,
  // when over a limit); Finish() replies, releases them and forgets it.
  Result<uint64_t> Track(const transport::IncomingRequest& req, uint64_t bytes = 0);
  void Finish(uint64_t ticket, const Status& status, std::span<const uint8_t> payload = {});
  // The payload bytes a tracked request moved, counted when it finishes OK
  // (Track sets an update's length; a fetch sets what it read).
  void SetMovedBytes(uint64_t ticket, uint64_t bytes);
  // InvalidArgument unless a client's epoch is within limits.max_epoch_drift of
  // wall time; `op` names the request in the error.
  Status CheckClientEpoch(Epoch epoch, std::string_view op);

  const uint32_t index_;
  TargetEnvironment* const env_;
  std::thread thread_;
  std::vector<uint8_t> address_;
  std::unique_ptr<transport::Worker> worker_;
  BufferPool buffers_;
  std::map<ShardKey, std::unique_ptr<Shard>> shards_;
  std::vector<std::unique_ptr<Shard>> retiring_;  // closing once their ops drain
  std::map<ShardKey, Opening> opening_;
  // ReopenShards: the shards whose opens it still waits for.
  std::set<ShardKey> reopening_;
  std::promise<void> reopened_;
  Handler dispatching_ = nullptr;  // the handler the worker is running (RegisterHandlers' wrapper)
  uint64_t next_ticket_ = 1;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point stop_deadline_;
  uint64_t destroyed_seen_ = 0;  // env_->destroyed_version already applied to shards_
  bool usage_dirty_ = false;
  std::chrono::steady_clock::time_point next_aggregate_check_{};
  std::vector<std::function<void()>> deferred_;
  DkeyGate conditional_gate_;  // conditional operations, serialised per dkey (dkey_gate.h)
  // Replicated objects (replica_forward.h): the forward key, the endpoints to
  // other engines' targets, the decided conditional operations. Made on
  // first use; dropped before the worker.
  std::shared_ptr<ReplicaState> replica_;
  InFlightBudget budget_;  // tracked requests and their buffers, per connection and in total
  struct Reservation {
    uint64_t connection = 0;
    uint64_t bytes = 0;
    OpKind kind = OpKind::kUpdate;
    uint64_t moved = 0;  // payload bytes counted when it finishes OK
    std::chrono::steady_clock::time_point start;
  };
  // A tracked request (Track to Finish) and what it reserved: one entry, so a
  // request costs one node, one hash insert and one erase.
  struct Tracked {
    transport::IncomingRequest req;
    Reservation res;
  };
  std::unordered_map<uint64_t, Tracked> pending_;  // by ticket
  std::chrono::steady_clock::time_point usage_refreshed_;
  TargetMetrics metrics_;
  std::chrono::steady_clock::time_point health_refreshed_;

  int epoll_fd_ = -1;
  int mailbox_fd_ = -1;
  std::atomic<bool> stop_requested_{false};
  std::mutex mailbox_mu_;
  std::deque<std::function<void()>> mailbox_;  // GUARDED_BY(mailbox_mu_)
  // Set after a Post's push: the loop looks at the mailbox only then, without
  // a system call per pass (the eventfd only wakes a sleeping loop).
  std::atomic<bool> mailbox_posted_{false};
  mutable std::mutex usage_mu_;
  std::map<Uuid, uint64_t> usage_;  // GUARDED_BY(usage_mu_)
};

}  // namespace ros2::engine
