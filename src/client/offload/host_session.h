// HostSession: the host side of offload mode (docs/agent.md). A host process
// connects to ros2-agent's Unix socket, brings a memfd holding the rings and
// the I/O arena (ring.h) and a submission eventfd, and from then on every namespace
// operation and every I/O is a submission entry; nothing per operation goes
// over a socket, and the process never holds a capability, an engine address
// or a key. The agent runs the DFS client for it (as the tenant the agent maps
// this process's uid/gid to).
//
// The methods mirror dfs::Filesystem (include/ros2/dfs.h) one to one, with a
// mount index first (from Mount), so a Filesystem in offload mode can delegate
// each of its methods here. Results and errors are the same types and codes
// (an error's message is the agent's, naming the entry and the cause).
//
// Buffers: Read/Write on a span inside the arena (Allocate) are zero-copy on
// the host (the agent reads and writes the arena directly); any other span is
// copied through a temporary arena buffer. Batch I/O (Submit/Reap) takes arena
// spans only and keeps up to ring_entries I/Os in flight with one signal per
// batch.
//
// Waiting: a thread spins for `spin` on the completion ring, then announces it
// sleeps and sleeps on the completion tail (a futex, at most 100 ms at a time,
// looking at the socket after each timeout). If the agent dies
// or closes the session, every waiting and later call fails with Disconnected
// naming the agent socket; a call never outlives `timeout` (TimedOut).
//
// Thread-safe: any thread may call any method (one thread at a time polls the
// completion ring and hands completions to the others). No dependency on
// libros2 or UCX: the DFS value types come from ros2/dfs.h (header only) and
// Status from ros2_common.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "offload/ring.h"
#include "ros2/dfs.h"
#include "ros2/types.h"

namespace ros2::agent {

struct HostOptions {
  std::string socket;                        // the agent's socket path
  uint32_t ring_entries = 256;               // submission ring (power of two); the completion ring has twice as many
  uint64_t arena_size = uint64_t{64} << 20;  // bytes of I/O arena
  std::chrono::milliseconds timeout{60000};  // longest any call waits (submission room + completion)
  std::chrono::microseconds spin{50};        // polling before sleeping on the completion tail
};

// A piece of the arena: host memory the agent reads and writes in place.
struct ArenaBuffer {
  std::byte* data = nullptr;
  uint64_t offset = 0;  // from the start of the arena
  uint64_t size = 0;
  std::span<std::byte> span() const { return {data, size}; }
  explicit operator bool() const { return data != nullptr; }
};

struct OffloadMount {
  uint32_t index = 0;  // the mount index every other call names
  dfs::Entry root;
  uint64_t chunk_size = 0;
};

// One batched I/O: `buffer` must lie inside the arena (InvalidArgument
// otherwise) and span at most kMaxChunksPerIo chunks of file.chunk_size (an
// EINVAL completion otherwise; Read/Write split for themselves); user_data is
// returned as is.
struct IoRequest {
  RingOp kind = RingOp::kRead;  // kRead or kWrite (InvalidArgument otherwise)
  uint32_t mount = 0;
  const dfs::Entry* file = nullptr;  // read by Submit (not kept)
  uint64_t offset = 0;
  std::span<std::byte> buffer;
  uint64_t user_data = 0;
};

struct IoCompletion {
  uint64_t user_data = 0;
  Status status;
  uint64_t size = 0;  // bytes read (short at the end of the file) or written
  int error = 0;      // on failure: the errno the agent reported (EFAULT, EBADF, ... for refused entries)
};

class HostSession {
 public:
  static Result<std::unique_ptr<HostSession>> Connect(const HostOptions& options);
  // Closes the socket (the agent reclaims the session), unmaps the region.
  // Calls still waiting in other threads must have returned.
  ~HostSession();
  HostSession(const HostSession&) = delete;
  HostSession& operator=(const HostSession&) = delete;

  uint64_t id() const { return id_; }
  const std::string& tenant() const { return tenant_; }
  const std::string& socket_path() const { return options_.socket; }

  // --- arena ---
  // `size` bytes (rounded up to 64) of the arena; NoSpace when it is full.
  Result<ArenaBuffer> Allocate(uint64_t size);
  void Free(const ArenaBuffer& buffer);
  bool InArena(const void* p, uint64_t n) const;
  uint64_t arena_size() const { return geometry_.arena_size; }

  // --- mounts ---
  // Mounts a container as this session's tenant. MountOptions::uid/gid are
  // ignored: entries are owned by the caller the kernel names (SO_PEERCRED).
  Result<OffloadMount> Mount(std::string_view pool, std::string_view container, const dfs::MountOptions& options = {});
  Status Unmount(uint32_t mount);

  // --- dfs::Filesystem, one to one ---
  Result<dfs::Entry> Lookup(uint32_t mount, const dfs::Entry& parent, std::string_view name);
  Result<dfs::Entry> LookupPath(uint32_t mount, std::string_view path);
  Result<std::pair<dfs::Entry, dfs::Attr>> LookupWithAttr(uint32_t mount, const dfs::Entry& parent,
                                                          std::string_view name);
  Result<dfs::Entry> Open(uint32_t mount, const dfs::Entry& parent, std::string_view name, int flags,
                          mode_t mode = 0644, bool* created = nullptr);
  Result<dfs::Entry> Mkdir(uint32_t mount, const dfs::Entry& parent, std::string_view name, mode_t mode = 0755);
  Result<dfs::Entry> MkdirAll(uint32_t mount, std::string_view path, mode_t mode = 0755, uint64_t* created = nullptr);
  Result<dfs::Entry> Symlink(uint32_t mount, const dfs::Entry& parent, std::string_view name, std::string_view target);
  Result<dfs::Entry> Mknod(uint32_t mount, const dfs::Entry& parent, std::string_view name, mode_t mode,
                           uint64_t rdev = 0);
  Result<dfs::Entry> Link(uint32_t mount, const dfs::Entry& target, const dfs::Entry& new_parent,
                          std::string_view new_name);
  Result<std::string> Readlink(uint32_t mount, const dfs::Entry& link);
  Status Unlink(uint32_t mount, const dfs::Entry& parent, std::string_view name);
  Status Rmdir(uint32_t mount, const dfs::Entry& parent, std::string_view name);
  Status Rename(uint32_t mount, const dfs::Entry& parent, std::string_view name, const dfs::Entry& new_parent,
                std::string_view new_name, unsigned flags = 0);
  Result<dfs::Attr> Stat(uint32_t mount, const dfs::Entry& entry);
  Result<dfs::Attr> SetAttr(uint32_t mount, const dfs::Entry& entry, const dfs::SetAttrArgs& args);
  Status Truncate(uint32_t mount, const dfs::Entry& file, uint64_t size);
  Result<dfs::StatFs> Statfs(uint32_t mount);
  Result<std::vector<dfs::DirEntry>> Readdir(uint32_t mount, const dfs::Entry& dir, dfs::DirAnchor& anchor, size_t max);
  // Zero-copy when `buffer` lies in the arena; copied through it otherwise.
  Result<uint64_t> Read(uint32_t mount, const dfs::Entry& file, uint64_t offset, std::span<std::byte> buffer);
  Result<uint64_t> Write(uint32_t mount, const dfs::Entry& file, uint64_t offset, std::span<const std::byte> data);
  Status Sync(uint32_t mount, const dfs::Entry& entry);

  // --- batch I/O ---
  // Queues every request (waiting for ring room as needed) and signals the
  // agent once. On an error nothing of the failing request was queued; the
  // ones before it were (their completions come).
  Status Submit(std::span<const IoRequest> requests);
  // Waits until `min_completions` batch completions are available (capped at
  // what is in flight) or `timeout` passes; moves up to out.size() of them.
  Result<size_t> Reap(std::span<IoCompletion> out, size_t min_completions, std::chrono::microseconds timeout);
  // Batch I/Os submitted and not yet reaped.
  size_t batch_in_flight() const;

  // --- raw access, for tests of the agent's validation ---
  // Queues `sqe` as is (its completion comes out of Reap with its user_data).
  Status SubmitRaw(const SubmitEntry& sqe);
  // Stores `tail` as the submission tail and signals the agent (a forged index).
  void ForceSubmissionTail(uint32_t tail);

 private:
  struct Waiter;
  HostSession() = default;
  Result<CompleteEntry> Call(SubmitEntry sqe, const std::vector<std::byte>& args, uint64_t result_size,
                             std::vector<std::byte>* result);
  // Queues entries (waiting for room until `deadline`; the kTimeoutFromNow
  // deadline is options_.timeout from when the wait starts); *pushed
  // (optional) counts those queued.
  Status Push(std::unique_lock<std::mutex>& lock, const SubmitEntry* entries, size_t n,
              std::chrono::steady_clock::time_point deadline, size_t* pushed = nullptr);
  // Waits (lock held) until pred() or the deadline, polling as the leader when no other thread does.
  template <typename Pred>
  Status WaitFor(std::unique_lock<std::mutex>& lock, Pred pred, std::chrono::steady_clock::time_point deadline);
  void PollOnce(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point deadline);
  size_t DrainLocked();
  Status DisconnectedStatus() const;
  // True when the agent's end of the socket hung up (it exited or was killed).
  bool PeerHungUp() const;
  Status CompletionStatus(const CompleteEntry& cqe, std::string_view message) const;
  Result<dfs::Entry> EntryCall(RingOp op, uint32_t mount, const dfs::Entry& entry, const std::vector<std::byte>& args,
                               uint32_t op_flags = 0, uint32_t mode = 0, uint64_t offset = 0, int64_t* value = nullptr);
  Status SimpleCall(RingOp op, uint32_t mount, const dfs::Entry& entry, const std::vector<std::byte>& args,
                    uint32_t op_flags = 0, uint64_t offset = 0);
  Result<uint64_t> DataCall(RingOp op, uint32_t mount, const dfs::Entry& file, uint64_t offset, const ArenaBuffer& buf);
  // Read or Write: in pieces an entry can carry, bounced through the arena
  // when `data` lies outside it.
  Result<uint64_t> Transfer(RingOp op, uint32_t mount, const dfs::Entry& file, uint64_t offset, std::byte* data,
                            uint64_t size);

  RingHeader* header() const { return static_cast<RingHeader*>(map_); }
  std::byte* arena() const { return static_cast<std::byte*>(map_) + geometry_.arena_offset; }

  HostOptions options_;
  uint64_t id_ = 0;
  std::string tenant_;
  int socket_ = -1;
  int sq_eventfd_ = -1;
  void* map_ = nullptr;
  RingGeometry geometry_;

  std::mutex alloc_mu_;
  std::map<uint64_t, uint64_t> free_;  // offset -> size, coalesced
  // Freed blocks of exactly kSmallBlock bytes (a batched I/O's arguments),
  // kept for reuse so an I/O does not reshape free_ twice.
  std::vector<ArenaBuffer> small_free_;
  void FreeLocked(uint64_t offset, uint64_t size);  // alloc_mu_ held: back into free_, coalesced

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool polling_ = false;  // a thread is the poller
  bool disconnected_ = false;
  std::string disconnect_reason_;
  uint32_t sq_tail_ = 0;
  uint32_t cq_head_ = 0;
  size_t in_flight_ = 0;  // submitted, completion not yet drained
  uint64_t next_token_ = 1;
  std::map<uint64_t, std::shared_ptr<Waiter>> waiters_;
  struct BatchSlot {
    uint64_t user_data = 0;
    ArenaBuffer args;         // entry name + room for the error message: `block`, or a larger one of its own
    ArenaBuffer block;        // the slot's kSmallBlock argument block, kept while the session lives
    uint32_t generation = 0;  // bumped when the slot is released: a stale token misses
    bool live = false;
  };
  // Batch I/Os in flight, by slot: a batch token is kBatchToken | generation
  // << 32 | slot index, so finding one costs an index, not a tree walk, and
  // tracking one allocates nothing once the table has grown (each slot keeps
  // its argument block, so at most ring_entries small blocks of the arena).
  std::vector<BatchSlot> batch_slots_;
  std::vector<uint32_t> free_batch_slots_;
  // mu_ held. Returns the token of a slot whose `args` has room for
  // `args_size` bytes (none when 0); NoSpace when the arena has not.
  Result<uint64_t> TakeBatchSlot(uint64_t user_data, uint64_t args_size);
  BatchSlot* FindBatchSlot(uint64_t token);  // mu_ held; nullptr if not live
  void ReleaseBatchSlot(BatchSlot* slot);    // mu_ held
  std::deque<IoCompletion> ready_;
  size_t batch_in_flight_ = 0;
};

// The agent's status document (JSON) over `socket`: root or the agent's own
// user only.
Result<std::string> QueryAgentStatus(const std::string& socket, std::chrono::milliseconds timeout);
// Sets a tenant's QoS limits: `request` is JSON {"tenant": NAME, "bandwidth":
// bytes/s, "iops": N} (0 = unlimited; an absent key keeps its value; no
// tenant: changes nothing). Returns the status document (its "qos" array).
// Root or the agent's own user only.
Result<std::string> AgentQos(const std::string& socket, const std::string& request, std::chrono::milliseconds timeout);

}  // namespace ros2::agent
