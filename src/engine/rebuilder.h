// Rebuilder: one engine's part in rebuilding replicated objects
// (docs/replication.md, "Rebuild"), in a cluster on etcd. A thread that,
// every tick (250 ms, and at once when a key under rebuild/ or
// rebuild-progress/ changes: an etcd watch wakes it):
//
//  - on the leader: for each pool whose map has DOWN targets, once the same
//    set has been DOWN for `rebuild.delay`, writes a job (rebuild/<pool>:
//    busy, the map version, the targets, the engines that hold the pool's
//    live targets); once each of those engines reported done for the job,
//    marks the targets DOWNOUT (one map change, version + 1) and the job done;
//    a job some engine failed is marked failed; a job whose DOWN set changed
//    (another failure) is replaced by one for the new set.
//  - the same for DRAIN targets (their future fallbacks are filled, then they
//    are DOWNOUT) and REINT targets (they are filled, then UP), at once;
//  - on every engine: for a busy job it has not finished, pulls what its
//    fallback targets stand in for from the sources (RebuildSource here,
//    RebuildPeers elsewhere), from every source at once: the data batch by
//    batch and, once the copy has run a second, a count (objects, bytes: the
//    ETA) beside it, stopped when the copy ends; the next
//    batch pulled and its data read while one is stored into its shards at
//    the records' epochs (a remote source's answers name the records; their
//    data comes over the data plane, Target::ReadForRebuild), and the answer
//    after asked for as soon as an answer arrives; while client requests reach the puller's or the
//    source's targets, one batch at a time with a pause after each so client
//    I/O keeps `client_share_percent` of the engine's time; reporting
//    progress (rebuild-progress/...); a REINT target of its own is purged
//    first. After a job that made REINT targets UP, the fallback copies it
//    holds are reclaimed.
//
// Owned by the Engine; Stop() (or the destructor) joins the thread. The
// thread is the only caller of the private methods.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/uuid.h"
#include "control/control_plane.h"
#include "control/etcd_client.h"
#include "engine/engine_config.h"
#include "engine/rebuild_service.h"
#include "engine/rebuild_source.h"
#include "engine/target.h"

namespace ros2::engine {

struct RebuilderOptions {
  Uuid engine;
  control::ControlPlane* plane = nullptr;  // outlives the rebuilder
  std::vector<Target*> targets;            // by index; outlive the rebuilder
  RebuildConfig config;
  RebuildSource* source = nullptr;  // this engine's shards, for pulls from itself
  std::unique_ptr<RebuildPeers> peers;
};

// The engines holding a target of the pool that is neither DOWN nor DOWNOUT
// (a job's engines, and the sources of its pulls).
std::vector<std::string> LiveEngines(const rpc::PoolMap& map);

// Aligned buffers for the rebuild's data-plane reads, reused; thread-safe.
class ReadBuffers : public std::enable_shared_from_this<ReadBuffers> {
 public:
  // At least `size` bytes, 4 KiB aligned; back here when the last owner drops it.
  std::shared_ptr<std::byte> Take(size_t size);

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  static constexpr size_t kKept = 16;
  std::mutex mu_;
  std::vector<std::pair<size_t, std::unique_ptr<std::byte, Free>>> spare_;  // GUARDED_BY(mu_)
};

class Rebuilder {
 public:
  static std::unique_ptr<Rebuilder> Start(RebuilderOptions options);
  ~Rebuilder();
  Rebuilder(const Rebuilder&) = delete;
  Rebuilder& operator=(const Rebuilder&) = delete;
  void Stop();

 private:
  explicit Rebuilder(RebuilderOptions options) : o_(std::move(options)) {}
  void Run();
  // Sleeps up to `d`; false once stopping.
  bool Pause(std::chrono::milliseconds d);
  // Sleeps up to `d` or until the watch pokes; false once stopping.
  bool Tick(std::chrono::milliseconds d);
  void Poke();
  std::vector<std::string> PoolUuids();
  void Lead(const std::string& pool);
  void StartJob(const std::string& pool, const rpc::PoolMap& map, const std::vector<uint32_t>& targets,
                const std::vector<int>& states);
  void FinishJob(const std::string& pool, rpc::RebuildJob job, const rpc::PoolMap& map);
  void Work(const std::string& pool);
  Status PullJob(const std::string& pool, const rpc::RebuildJob& job);
  // Before a catch-up (rebuilder_moves.cc): this engine's REINT targets of
  // the job drop their replicated objects (stale: what they held when they
  // went out), so that the pulls that follow make them whole copies.
  Status Purge(const std::string& pool, const rpc::RebuildJob& job, const rpc::PoolMap& map);
  // After a done job that made REINT targets UP, once this engine's map is
  // settled (nothing DOWN, DRAIN or REINT): its live targets drop the dkeys
  // the placement no longer gives them (the fallback copies), and their space
  // goes back. Once per job.
  void Reclaim(const std::string& pool, const rpc::RebuildJob& job);
  // Sweeps every shard of `pool` on target `index` (Target::SweepShard);
  // returns the keys punched and the bytes freed.
  Result<Target::SweepResult> SweepTarget(const Uuid& pool, uint32_t index, const Target::SweepDrop& drop);
  // One pass over every source (rebuilder_pull.cc), each in its own thread:
  // count_only counts, else copies. Once `*stop` (when given) is set, the
  // streams end after their current answer, successfully.
  struct PullPass;
  Status PullAll(const std::string& pool, const rpc::RebuildJob& job, const rpc::PoolMap& map, bool count_only,
                 rpc::RebuildProgress* progress, const std::atomic<bool>* stop);
  Status PullSource(PullPass* pass, const std::string& source, rpc::RebuildPullBody body);
  // Whether clients used this engine's or the source's targets since the last
  // call for that stream (`*seen`: the counts then; the source's is unknown
  // before its first answer).
  struct ClientsSeen {
    uint64_t local = 0;
    std::optional<uint64_t> source;
  };
  bool ClientsActive(uint64_t source_count, ClientsSeen* seen);
  Result<rpc::RebuildPullBodyOut> PullFrom(const std::string& source, const std::string& endpoint,
                                           const rpc::RebuildPullBody& body);
  // A pull's answer made ready to store: its records checked and grouped by
  // (target, container), and the remote ones' data (array extents) read from
  // their source targets over the data plane (worker `addresses` by global
  // target index), every group's reads in flight at once. A stream prepares
  // its next answer while it stores this one (rebuilder_pull.cc). With
  // count_only the answer is only carried.
  struct Fetched;
  struct Prepared {
    std::shared_ptr<const rpc::RebuildPullBodyOut> out;
    struct Group {
      Target* target = nullptr;
      Uuid container;
      std::vector<int> records;  // indexes into out->records()
      std::shared_ptr<Fetched> fetched;
    };
    std::vector<Group> groups;
  };
  Result<std::shared_ptr<Prepared>> Prepare(const Uuid& pool, const ConvertedPoolMap& map,
                                            const std::vector<std::string>& addresses, rpc::RebuildPullBodyOut out,
                                            bool count_only);
  // Stores a prepared answer's records on this engine's fallback targets at
  // their epochs (rebuilder_apply.cc).
  Status Store(const Uuid& pool, const Prepared& prepared);
  // The data of a group's remote records (rebuilder_apply.cc), read into one
  // buffer of `buffers_`: StartReads sends the reads, FinishReads waits for
  // their authenticated replies (Target::ReadForRebuild).
  Result<std::shared_ptr<Fetched>> StartReads(Target* target, const Uuid& pool, const Uuid& container,
                                              const ConvertedPoolMap& map, const std::vector<std::string>& addresses,
                                              const rpc::RebuildPullBodyOut& out, const std::vector<int>& records);
  static Status FinishReads(Target* target, Fetched* fetched);
  // Ok while `job` is still the pool's busy job; Cancelled otherwise.
  Status StillCurrent(const std::string& pool, const rpc::RebuildJob& job);
  void Report(const std::string& pool, const rpc::RebuildProgress& progress, bool force);
  // A copy of `progress` taken under progress_mu_.
  rpc::RebuildProgress Progress(const rpc::RebuildProgress& progress);

  RebuilderOptions o_;
  // Buffers for the data plane's reads, kept between batches (a fresh
  // multi-MiB allocation costs a page fault per page).
  std::shared_ptr<ReadBuffers> buffers_ = std::make_shared<ReadBuffers>();
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;                          // GUARDED_BY(mu_)
  bool poked_ = false;                         // GUARDED_BY(mu_)
  std::unique_ptr<control::EtcdWatch> watch_;  // of rebuild*: pokes the thread
  // The progress the pull threads share.
  std::mutex progress_mu_;
  // Report and StillCurrent (their etcd calls and times) from the pull
  // threads; never held with progress_mu_ waited for inside.
  std::mutex etcd_mu_;
  // Leader: when each pool's DOWN set (pool + targets) was first seen.
  std::map<std::string, std::chrono::steady_clock::time_point> down_since_;
  std::set<std::pair<std::string, uint64_t>> finished_;   // (pool, job version) this engine pulled for
  std::set<std::pair<std::string, uint64_t>> reclaimed_;  // (pool, job version) this engine reclaimed after
  std::chrono::steady_clock::time_point reported_{};
  std::chrono::steady_clock::time_point checked_{};
};

}  // namespace ros2::engine
