// The shared-memory format between a host process and ros2-agent (offload
// mode): one memfd created by the host holds a header, a submission ring, a
// completion ring and an I/O arena. docs/agent.md is the specification; this
// header is its code form, shared by the agent (src/agent/session.cc) and the
// host library (src/client/offload/host_session.cc). Standard library only.
//
// Region layout (offsets from the start of the memfd, all 64-byte aligned):
//   0                 RingHeader (kHeaderSize bytes)
//   sq_offset         sq_entries x SubmitEntry (128 bytes each)
//   cq_offset         cq_entries x CompleteEntry (32 bytes each)
//   arena_offset      arena_size bytes: names, arguments, results and payload
//
// Producer/consumer: the host produces submissions (writes entries, then
// sq_tail with release) and consumes completions (reads cq_tail with acquire,
// then the entries, then stores cq_head with release); the agent the other
// way round. Indices are free-running uint32 counters; slot = index & (n - 1).
// The agent never trusts what the host writes: it copies the geometry once at
// set-up, keeps its own sq_head and cq_tail, copies each submission entry out
// of the ring before validating it, and bounds-checks every arena range.
// Standard library and the futex system call only.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace ros2::agent {

inline constexpr uint64_t kRingMagic = 0x31544e4547413252ULL;  // "R2AGENT1" little-endian
inline constexpr uint32_t kRingVersion = 1;
inline constexpr uint32_t kHeaderSize = 1024;
inline constexpr uint32_t kMinRingEntries = 2;
inline constexpr uint32_t kMaxRingEntries = 1u << 16;
inline constexpr uint64_t kMaxArenaSize = uint64_t{1} << 34;  // 16 GiB
inline constexpr uint32_t kMaxArgsSize = 64 * 1024;           // one entry's argument block
inline constexpr uint64_t kMaxChunksPerIo = 4096;             // file chunks one read or write entry may span

// One index on its own cache line.
struct alignas(64) RingIndex {
  std::atomic<uint32_t> value{0};
};
static_assert(sizeof(RingIndex) == 64);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

struct RingHeader {
  // --- geometry: written by the host before the hello, read once by the agent ---
  uint64_t magic;        // kRingMagic
  uint32_t version;      // kRingVersion
  uint32_t header_size;  // kHeaderSize
  uint32_t sq_entries;   // power of two, kMinRingEntries .. kMaxRingEntries
  uint32_t cq_entries;   // power of two, >= sq_entries
  uint32_t sqe_size;     // sizeof(SubmitEntry)
  uint32_t cqe_size;     // sizeof(CompleteEntry)
  uint64_t sq_offset;    // from the start of the region
  uint64_t cq_offset;
  uint64_t arena_offset;
  uint64_t arena_size;
  uint64_t total_size;  // the region's size: arena_offset + arena_size
  // --- indices and wake-up flags, each on its own cache line ---
  RingIndex sq_tail;         // host writes: submissions published
  RingIndex sq_head;         // agent writes: submissions consumed (informative for the host)
  RingIndex cq_tail;         // agent writes: completions published
  RingIndex cq_head;         // host writes: completions consumed
  RingIndex agent_sleeping;  // agent: 1 while it sleeps (or is about to) on the submission eventfd
  RingIndex host_sleeping;   // host: 1 while a host thread sleeps on cq_tail (FUTEX_WAIT)
  RingIndex closed;          // agent: nonzero once it closed the session (the reason is in its log)
};
static_assert(sizeof(RingHeader) <= kHeaderSize);

// Completion wake-ups are a futex on the shared `cq_tail` word (not private:
// host and agent map the same memfd). A host thread sleeps with one system
// call and wakes with none further, where an eventfd took a poll and a read.
// Sleeps while `index` still reads `seen`, at most `timeout` (relative).
// False when the timeout passed.
inline bool SleepOnIndex(RingIndex& index, uint32_t seen, const timespec& timeout) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  const long r = ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&index.value), FUTEX_WAIT, seen, &timeout,
                           nullptr, 0);
  return r == 0 || errno != ETIMEDOUT;
}

// Takes back a sleeping side's announcement (`agent_sleeping`,
// `host_sleeping`): true for exactly one caller per announced sleep, the one
// that then signals it, so a sleep is woken once however many publishes
// precede it running. A plain load first keeps the awake case free of a
// locked instruction.
inline bool TakeSleeper(RingIndex& flag) {
  return flag.value.load(std::memory_order_relaxed) != 0 && flag.value.exchange(0, std::memory_order_relaxed) != 0;
}

// Wakes every thread sleeping on `index`. Never blocks.
inline void WakeIndexSleepers(RingIndex& index) {
  (void)::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&index.value), FUTEX_WAKE,
                  std::numeric_limits<int>::max(), nullptr, nullptr, 0);
}

// An entry's identity (a dfs::Entry without its name; the name travels in the
// argument block). 56 bytes.
struct WireEntry {
  uint64_t oid_hi;
  uint64_t oid_lo;
  uint64_t parent_hi;
  uint64_t parent_lo;
  uint64_t chunk_size;
  uint32_t mode;
  uint32_t uid;
  uint32_t gid;
  uint32_t reserved;  // 0
};
static_assert(sizeof(WireEntry) == 56);

// An operation of the submission ring (SubmitEntry::opcode): named RingOp,
// apart from obj::Opcode, the object protocol's RPCs the agent's client
// sends to the engines.
enum class RingOp : uint8_t {
  kNop = 0,
  kMount = 1,
  kUnmount = 2,
  kLookup = 3,
  kLookupPath = 4,
  kLookupWithAttr = 5,
  kOpen = 6,
  kMkdir = 7,
  kMkdirAll = 8,
  kSymlink = 9,
  kMknod = 10,
  kLink = 11,
  kReadlink = 12,
  kUnlink = 13,
  kRmdir = 14,
  kRename = 15,
  kStat = 16,
  kSetAttr = 17,
  kTruncate = 18,
  kStatfs = 19,
  kReaddir = 20,
  kRead = 21,
  kWrite = 22,
  kSync = 23,
};
inline constexpr uint8_t kLastRingOp = 23;

// One submission: 128 bytes. Fields an opcode does not use must be zero
// (docs/agent.md lists each opcode's use).
struct SubmitEntry {
  uint64_t user_data;  // returned in the completion as is
  uint8_t opcode;      // RingOp
  uint8_t flags;       // reserved, 0
  uint16_t mount;      // mount index from kMount
  uint32_t op_flags;   // open(2) flags, rename flags, setattr mask, readdir max
  uint64_t offset;     // file offset (read/write), size (truncate), rdev (mknod)
  uint64_t buf_off;    // arena offset of the data / result area
  uint64_t buf_len;    // its length (read/write: the I/O length)
  uint64_t args_off;   // arena offset of the argument block
  uint32_t args_len;   // bytes of arguments the agent reads
  uint32_t args_cap;   // bytes at args_off the agent may overwrite with an error message (>= args_len)
  uint32_t mode;       // mode of a created entry
  uint32_t reserved;   // 0
  WireEntry entry;     // the entry operated on (or the parent directory)
  uint64_t reserved2;  // 0
};
static_assert(sizeof(SubmitEntry) == 128);

// One completion: 32 bytes.
struct CompleteEntry {
  uint64_t user_data;
  int64_t result;    // >= 0: bytes or the op's value (mount: the mount index); < 0: -errno
  uint32_t code;     // ros2::Status::Code (0 OK)
  uint32_t msg_len;  // error: bytes of the message written at args_off (truncated to args_cap)
  uint64_t aux;      // op-specific (result bytes written at buf_off)
};
static_assert(sizeof(CompleteEntry) == 32);

inline constexpr bool IsPowerOfTwo(uint32_t n) {
  return n != 0 && (n & (n - 1)) == 0;
}
inline constexpr uint64_t AlignUp(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

// The geometry both sides compute from (entries, arena size).
struct RingGeometry {
  uint32_t sq_entries = 0;
  uint32_t cq_entries = 0;
  uint64_t sq_offset = 0;
  uint64_t cq_offset = 0;
  uint64_t arena_offset = 0;
  uint64_t arena_size = 0;
  uint64_t total_size = 0;
};

inline RingGeometry ComputeGeometry(uint32_t sq_entries, uint32_t cq_entries, uint64_t arena_size) {
  RingGeometry g;
  g.sq_entries = sq_entries;
  g.cq_entries = cq_entries;
  g.sq_offset = kHeaderSize;
  g.cq_offset = AlignUp(g.sq_offset + uint64_t{sq_entries} * sizeof(SubmitEntry), 64);
  g.arena_offset = AlignUp(g.cq_offset + uint64_t{cq_entries} * sizeof(CompleteEntry), 4096);
  g.arena_size = arena_size;
  g.total_size = g.arena_offset + arena_size;
  return g;
}

// True when [off, off + len) lies inside an arena of `size` bytes (no overflow).
inline constexpr bool ArenaRangeOk(uint64_t off, uint64_t len, uint64_t size) {
  return off <= size && len <= size - off;
}

// --- session protocol on the Unix socket (SOCK_SEQPACKET) ---
inline constexpr uint32_t kHelloMagic = 0x4f4c4832;  // "2HLO"
inline constexpr uint16_t kProtocolVersion = 2;
enum class MessageType : uint16_t {
  kHello = 1,   // + SCM_RIGHTS [memfd, submission eventfd]
  kStatus = 2,  // agent status as JSON (root or the agent's uid only)
  kQos = 3,     // + JSON {"tenant", "bandwidth", "iops"}: sets a tenant's QoS limits, replies the status
                //   (root or the agent's uid only; no tenant: just the status)
};
inline constexpr size_t kMaxControlPayload = 4096;  // bytes after the HelloMessage of a kQos

struct HelloMessage {
  uint32_t magic;    // kHelloMagic
  uint16_t version;  // kProtocolVersion
  uint16_t type;     // MessageType
  uint64_t reserved;
};
static_assert(sizeof(HelloMessage) == 16);

// The reply; `message_len` bytes of text follow (the error, or the tenant
// name on success; the JSON for kStatus).
struct HelloReply {
  uint32_t magic;  // kHelloMagic
  uint16_t version;
  uint16_t code;  // ros2::Status::Code, 0 OK
  uint64_t session_id;
  uint32_t message_len;
  uint32_t reserved;
};
static_assert(sizeof(HelloReply) == 24);
inline constexpr size_t kMaxReplySize = 64 * 1024;

}  // namespace ros2::agent
