// One host session inside ros2-agent: the mapped region of a host process
// (rings and arena, ring.h), its submission eventfd and socket, and the thread that
// executes its submissions through dfs::Filesystem (docs/agent.md).
//
// The thread polls the submission ring adaptively (spins for `spin`, then
// announces it sleeps and waits on the submission eventfd and the socket),
// executes entries in ring order, writes results into the arena and posts
// completions in batches, waking the host only when it announced it sleeps.
// Any malformed entry gets an error completion; a ring index out of range
// closes the session. The socket's hang-up (the host process exited or was
// killed) ends the thread within a second; the owner (Agent) then destroys
// the Session, which unmaps and closes everything.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent_config.h"
#include "offload/ring.h"
#include "agent/session_metrics.h"
#include "agent/token_bucket.h"
#include "ros2/client.h"
#include "ros2/dfs.h"
#include "transport/shared_segment.h"

namespace ros2::agent {

// One tenant's libros2 client (one transport context), shared by its sessions.
struct TenantClient {
  std::string name;
  TenantMapping mapping;  // as configured (its key files)
  std::unique_ptr<client::Client> client;
  std::shared_ptr<TenantQos> qos;  // the tenant's limits, shared by its sessions (outlives the client)
};

struct SessionIdentity {
  uint64_t id = 0;
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string tenant;
};

// File descriptors and the mapping a session owns (closed / unmapped by it).
struct SessionResources {
  int socket = -1;
  int memfd = -1;
  int sq_eventfd = -1;  // host -> agent: submissions (the host sleeps on cq_tail itself)
  void* map = nullptr;
  size_t map_len = 0;
  RingGeometry geometry;  // the agent's private copy, validated
  // The mapping listed as a shared segment, so the engine moves bulk straight
  // to and from the arena (null when the host's memfd is not named as one:
  // bulk is then copied through the agent's own segments).
  std::unique_ptr<transport::ForeignSegment> segment;
};

class ArgReader;  // offload/wire.h
struct OpCall;    // agent/op_call.h

class Session {
 public:
  Session(SessionIdentity identity, std::shared_ptr<TenantClient> tenant, SessionResources res,
          std::chrono::microseconds spin);
  ~Session();  // stops and joins the thread, unmounts, unmaps, closes
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void Start();
  // Asks the thread to stop (agent shutdown); the destructor waits for it.
  void RequestStop() { stop_.store(true); }
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  std::string close_reason() const;
  const SessionIdentity& identity() const { return identity_; }
  const std::shared_ptr<TenantClient>& tenant() const { return tenant_; }
  uint64_t completed() const { return completed_.load(std::memory_order_relaxed); }
  // The most reads and writes this session had in flight at once.
  size_t max_in_flight() const { return max_in_flight_.load(std::memory_order_relaxed); }
  // Whether the region is listed as a shared segment (bulk moves between the
  // engine and the arena with no copy in the agent).
  bool shared_segment() const { return res_.segment != nullptr; }
  size_t mounts() const;
  // What this session counted (its thread writes, any thread reads).
  const SessionMetrics& metrics() const { return metrics_; }

 private:
  friend struct OpCall;
  struct Mount;
  // The session thread: takes submissions until the host goes, the agent
  // stops or the host breaks the protocol (fault_).
  void Run();
  // Nothing queued: progresses I/O in flight, or spins for spin_ and sleeps
  // on the submission eventfd.
  void WaitForWork();
  // Executes up to `pending` queued entries.
  void TakeSubmissions(uint32_t pending);
  // Waits until the completion ring has room for one more entry and every
  // one in flight; false when the session must end (fault_, peer_gone_, stop).
  bool WaitForCompletionRoom();
  // The tenant's QoS refuses `sqe` for now: true after waiting a little (the
  // entry stays queued).
  bool Throttled(const SubmitEntry& sqe, bool data);
  // PeerGone, at most once per check interval.
  bool CheckPeer();
  // Executes one (private copy of a) submission: true when `cqe` holds its
  // completion, false when it went in flight (reads and writes; the callback
  // queues the completion in done_).
  bool Execute(const SubmitEntry& sqe, CompleteEntry& cqe);
  void ExecuteNow(const SubmitEntry& sqe, CompleteEntry& cqe);
  // Writes done_ into the completion ring, publishes, wakes a sleeping host.
  void PostCompletions();
  // Progresses the event queue: waits up to `wait` for one completion (0: poll).
  void ProgressIo(std::chrono::microseconds wait);
  // The session-level handlers of the operation table (op_call.h).
  void ExecuteMount(const SubmitEntry& sqe, ArgReader& args, CompleteEntry& cqe);
  void Unmount(const SubmitEntry& sqe);
  void SubmitIo(OpCall& call, bool read);
  void Fail(const SubmitEntry& sqe, CompleteEntry& cqe, int err, const Status& status);
  // Copies `bytes` to the entry's result area; false (and an error completion) when it does not fit.
  bool PutResult(const SubmitEntry& sqe, CompleteEntry& cqe, const std::vector<std::byte>& bytes);
  void Close(std::string reason);
  bool PeerGone();
  void WakeHost();

  RingHeader* header() const { return static_cast<RingHeader*>(res_.map); }
  std::byte* arena() const { return static_cast<std::byte*>(res_.map) + res_.geometry.arena_offset; }

  SessionIdentity identity_;
  std::shared_ptr<TenantClient> tenant_;
  SessionResources res_;
  std::chrono::microseconds spin_;
  std::vector<std::unique_ptr<Mount>> mounts_;  // index = mount index; null = free
  mutable std::mutex mu_;                       // guards reason_ and mounts_'s size for status
  std::string reason_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> finished_{false};
  std::atomic<uint64_t> completed_{0};
  SessionMetrics metrics_;
  std::atomic<size_t> max_in_flight_{0};
  std::unique_ptr<client::EventQueue> eq_;  // the session thread's; reads and writes in flight
  size_t outstanding_ = 0;                  // of them
  uint64_t outstanding_bytes_ = 0;          // their bytes
  bool went_async_ = false;
  std::vector<CompleteEntry> done_;  // completions not yet in the ring
  std::string fault_;                // the host broke the protocol: the session closes with this
  bool peer_gone_ = false;
  std::chrono::steady_clock::time_point last_peer_check_;
  uint32_t sq_head_ = 0;             // private copies of the indices this side owns
  uint32_t cq_tail_ = 0;
  std::thread thread_;
};

}  // namespace ros2::agent
