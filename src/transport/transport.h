// The ROS2 data plane: RPCs over UCX active messages plus server-driven bulk
// transfer (UCX 1.13). Every byte between clients and engines crosses it.
//
// Objects and ownership:
//   Context  — one per process. Owns the ucp_context,
//              the transport selection (tcp | shm | rdma | auto) and memory
//              registration (no cache: an application buffer is registered
//              for the call that uses it). Thread-safe.
//   Worker   — one per I/O thread (engine target thread, client I/O thread).
//              Owns a ucp_worker, its endpoints, the RPC handler table, the table
//              of outstanding requests and the adaptive progress loop. NOT
//              thread-safe: every call except Signal() must come from the thread
//              that owns it. Every callback runs inside Progress()/Wait()/RunUntil()
//              on that thread. A Worker must be destroyed before its Context.
//   Endpoint — a connection from one Worker to a peer Worker, made from the peer's
//              opaque address blob (Worker::address(), exchanged over gRPC by the
//              session protocol). Shared by the Worker and the caller; owned and
//              used on the Worker's thread only.
//   IncomingRequest — the server-side handle of one received RPC, given to a
//              registered handler; copyable (reference counted), worker thread only.
//   MemoryRegion — a registered buffer (ucp_mem_map) and its packed rkey.
//
// Data path: a request carries a small payload (RPC arguments) and optionally one
// client buffer the server reads ("bulk out", e.g. the data of an update) and one
// client buffer the server fills ("bulk in", e.g. the destination of a fetch).
// Bulk of at most `inline_limit` bytes travels inside the messages. Larger bulk is
// moved by the server: IncomingRequest::Pull copies the client's bulk-out bytes
// into a server buffer, IncomingRequest::Push copies server bytes into the
// client's bulk-in buffer, then the handler replies. The path is chosen per
// endpoint from the transport UCX actually uses (see BulkTransfer): one-sided RMA
// GET/PUT against the client's registered buffer (rc/dc verbs), or UCX
// active-message rendezvous over tcp and shared memory, where UCX 1.13 only
// emulates RMA and rendezvous measured faster.
// The wire format is specified in docs/wire-format.md, the design in
// docs/transport.md.
//
// Failure: a peer that dies or disconnects fails all outstanding requests on its
// endpoint with Status kDisconnected within a bounded time; every request also has
// a deadline (kTimedOut). Malformed or truncated messages are dropped and counted
// (WorkerStats::malformed_messages), never trusted.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "transport/wire.h"

namespace ros2::transport {

// Which UCX transports a Context may use. Configuration value names are the
// lower-case words in the comments.
enum class TransportKind : uint8_t {
  kAuto = 0,  // "auto": rdma when rc/dc devices exist, else shm for same-host peers + tcp
  kTcp = 1,   // "tcp": UCX tcp over `TransportOptions::net_devices`
  kShm = 2,   // "shm": posix + sysv + cma shared memory; same-host peers only
  kRdma = 3,  // "rdma": rc/dc verbs; fails at Context::Create when no such device exists
};
std::string_view TransportKindName(TransportKind kind);           // "auto", "tcp", ...
Result<TransportKind> ParseTransportKind(std::string_view name);  // InvalidArgument names the text

// The fabric library under Context, Worker, Endpoint and MemoryRegion
// (docs/transport.md, "Providers"). Configuration names: "ucx", "ofi".
enum class Provider : uint8_t {
  kUcx = 0,  // UCX 1.13 (context.cc, worker*.cc, client_call.cc, incoming_request.cc)
  kOfi = 1,  // libfabric (ofi/*.cc): FI_EP_RDM messages, tagged bulk
};
std::string_view ProviderName(Provider p);
Result<Provider> ParseProvider(std::string_view name);  // InvalidArgument names the text

// How bulk data moves is one concept, wire::BulkTransfer (transport/wire.h):
// the tag every bulk descriptor carries. A buffer inside a shared segment
// travels as kSegment and one within the inline limit as kInline; any other
// takes its endpoint's EndpointInfo::bulk_mode (kRma, kActiveMessage or kCma).
using wire::BulkTransfer;
std::string_view BulkTransferName(BulkTransfer transfer);  // "inline", "rma", "am", "cma", "segment"

// How the death of a peer is noticed on an endpoint.
enum class FailureDetection : uint8_t {
  kUcxPeer = 0,   // UCP_ERR_HANDLING_MODE_PEER: UCX reports a broken connection or missed keepalives
  kPidWatch = 1,  // same-host peer: error mode PEER plus a pidfd on the peer process (immediate)
};
std::string_view FailureDetectionName(FailureDetection d);  // "ucx-peer", "pid-watch"

// Pins the calling thread to one CPU (sched_setaffinity), as DAOS pins each
// target thread to a core. A worker whose thread is pinned busy-polls for
// TransportOptions::pinned_busy_poll before it starts yielding. InvalidArgument
// for a CPU this process may not use.
Status PinCurrentThreadToCpu(int cpu);
// True when the calling thread may run on exactly one CPU.
bool CurrentThreadPinnedToOneCpu();
// `text` as a CPU number (decimal, 0 to CPU_SETSIZE - 1), or nullopt: how the
// engine's target_cpus and `ros2ctl cluster up --target-cpus` read CPUs.
std::optional<int> ParseCpu(std::string_view text);
// The CPUs the calling thread may run on, ascending (empty if unknown).
std::vector<int> CurrentThreadCpus();
// Lets the calling thread run on `cpus` (a helper thread started by a pinned
// one inherits its single CPU; this gives it back the process's set).
Status SetCurrentThreadCpus(const std::vector<int>& cpus);

// The tcp segment every ROS2 process receives (UCX_TCP_RX_SEG_SIZE) and the
// most it sends (UCX_TCP_TX_SEG_SIZE): Context::Create enforces both.
inline constexpr uint64_t kTcpSegmentSize = 256 * 1024;

struct TransportOptions {
  // Which library carries the data plane. Both ends of a connection must use
  // the same one: Connect refuses a peer address of the other at once.
  Provider provider = Provider::kUcx;
  // libfabric only: the fi_getinfo provider name ("tcp;ofi_rxm", "shm",
  // "verbs;ofi_rxm"). Empty: from `kind` (tcp: "tcp;ofi_rxm", shm: "shm",
  // rdma: "verbs;ofi_rxm", auto: fi_getinfo's preference among those).
  std::string ofi_provider;
  TransportKind kind = TransportKind::kAuto;
  // UCX_NET_DEVICES for the tcp (and verbs) transports. "lo" keeps loopback traffic
  // on one device (UCX would otherwise stripe it over lo and eth0); multi-host
  // deployments name their NIC ("eth0", "mlx5_0:1") or "all".
  std::string net_devices = "lo";
  // UCX_TCP_TX_SEG_SIZE, set in the environment when unset there; 0 keeps
  // UCX's default. At most kTcpSegmentSize, the UCX_TCP_RX_SEG_SIZE of every
  // ROS2 process (docs/transport.md, "TCP segment sizes").
  uint64_t tcp_seg_size = 256 * 1024;
  // Whether peers may put into and get from this process's memory by UCX's
  // software RMA emulation (transports without hardware RMA: tcp, shared
  // memory with error handling). That emulation writes and reads any address
  // a peer names, so a process that is never an RMA target (the engine: it
  // always initiates) sets false, and UCX drops such requests
  // (UCX_RMA_SW_TARGET=n of the patched libucp, docs/security.md).
  bool remote_rma_target = true;
  // Bulk of at most this many bytes travels inside the RPC messages...
  uint64_t inline_limit = 16 * 1024;
  // ...unless it lies in one of the client's shared segments (SharedBuffer) on
  // a connection that may use them and is at least this long: then the server
  // copies it straight from or into the segment (one copy instead of two, and
  // a request or reply of a few dozen bytes). Larger than inline_limit: never.
  uint64_t segment_min_bulk = 1024;
  // RMA bulk is split into chunks of this size with up to this many in flight.
  uint64_t bulk_chunk_size = 1024 * 1024;
  uint32_t bulk_chunks_in_flight = 4;
  // Adaptive progress: Wait() spins this long without events before it arms the
  // worker and sleeps on the event fd.
  std::chrono::microseconds spin_budget{50};
  // The first part of that spin that polls without sched_yield, used only when
  // the thread calling Wait() is pinned to a single CPU (PinCurrentThreadToCpu
  // or taskset): a pinned peer cannot be queued behind us, so yielding only
  // adds a system call to every poll. Unpinned threads yield from the start
  // (two spinners sharing a core starve each other). See docs/transport.md.
  std::chrono::microseconds pinned_busy_poll{20};
  // Deadline of a request whose CallOptions::timeout is zero.
  std::chrono::milliseconds default_timeout{30000};
  // Connect(): how long to wait for the peer's hello acknowledgement.
  std::chrono::milliseconds connect_timeout{10000};
  // libfabric only: how many registrations of transport-allocated memory
  // (Context::AllocateMemory regions passed in CallOptions) a worker keeps
  // after their last use, least recently used dropped. UCX keeps none of its
  // own (an application buffer is registered per call; UCX's own rcache
  // serves repeated registrations where they pin pages).
  uint32_t registration_cache_entries = 64;
  // Move bulk above the inline limit by RMA on every transport, even where UCX
  // only emulates RMA in software (tcp, and shm with error handling). Off by
  // default (rendezvous is faster there, see docs/transport.md); tests use it to
  // exercise the RMA path that verbs endpoints take, and benchmarks to compare.
  // NEVER in a process that serves untrusted peers: it turns on UCX's RMA
  // feature with its software emulation, whose handlers read and write any
  // address of this process a peer names (Context::rma_enabled).
  bool force_rma_bulk = false;
  // UCX keepalive interval for error-mode-PEER endpoints (detects a dead remote
  // peer whose connection did not break); same-host peers are also watched by pidfd.
  std::chrono::milliseconds keepalive_interval{2000};
  // Same-host shm peers move bulk by cross-memory attach (one copy, straight
  // between the client's buffer and the server's, no client progress needed),
  // after the client proved its pid through the server's Unix socket (see
  // docs/transport.md). Off: active-message rendezvous as over tcp. Both sides
  // must allow it; force_rma_bulk wins over it.
  bool same_host_cma = true;
  // Server: honour cma descriptors, i.e. copy with process_vm_readv/writev
  // from or into ordinary memory of a proven same-host client, on the
  // worker's thread. Off (the default): only the client's shared segments are
  // copied (a memcpy between mappings of memfds, which cannot block); a copy
  // of memory the client controls can block the thread indefinitely (pages
  // backed by a stalled FUSE or network file, or by userfaultfd), stalling
  // every client of that thread. Clients bounce ordinary buffers through a
  // segment of their own instead (docs/transport.md, "Same-host bulk").
  bool accept_cma_bulk = false;
  // Largest batch of requests or replies sent as one message (Endpoint::Cork);
  // 0 disables batching. Shared-memory transports carry a message up to their
  // segment size in one copy: Context::Create raises UCX_POSIX_SEG_SIZE and
  // UCX_SYSV_SEG_SIZE (when unset) to hold a whole batch.
  uint64_t batch_limit = 32 * 1024;
  // Batched replies leave as soon as their requests have pushed this many
  // bytes, without waiting for the rest of the batch: the client can check
  // those bytes while the server works on the others. (A reply per 1 MiB
  // fetch cost two busy jobs on 2 vCPUs 10%; every 8 MiB left one job's
  // client idle while the engine copied; docs/transport.md, "Batches".)
  uint64_t batch_flush_bytes = 2 * 1024 * 1024;
  // Upper bound on outstanding client requests per worker (Call returns Busy above it).
  uint32_t max_outstanding_requests = 65536;

  // ---- Resource limits of a serving worker (docs/transport.md, "Limits") ----
  // Server-side connections per worker. A hello beyond it evicts the oldest
  // connection that never authenticated (IncomingRequest::MarkAuthenticated),
  // or is refused when every one did.
  uint32_t max_connections = 1024;
  // Server-side connections per proven peer: a same-host process whose cma
  // proof held (counted by the pid the kernel vouched for), otherwise the
  // session the connection first authenticated for. The hello or the
  // authentication beyond it is refused. Connections that proved nothing
  // count only toward max_connections (where the oldest is evicted).
  uint32_t max_connections_per_peer = 64;
  // A server-side connection on which no request was marked authenticated
  // within this time is closed (with a bye naming the reason). 0: never.
  std::chrono::milliseconds unauthenticated_timeout{60000};
  // A client's shared segment (kSegment bulk) larger than this is refused,
  // not mapped; the segments one connection has mapped at once stay within
  // max_segment_bytes_per_connection (least recently used ones are unmapped).
  uint64_t max_segment_size = uint64_t{1} << 30;
  uint64_t max_segment_bytes_per_connection = uint64_t{4} << 30;
  // cma tokens the listener holds for one client process at a time (issued,
  // not yet redeemed); a request beyond it is refused, so one process cannot
  // crowd out the tokens of others.
  uint32_t cma_tokens_per_process = 64;
};

// Sessions on the data plane (docs/security.md): a client proves on each
// connection, for each session whose capabilities it sends there, that it
// holds the session's key (from the control plane); a server accepts a
// capability only on a connection authenticated for its session.
inline constexpr size_t kSessionIdSize = 16;
using SessionId = std::array<uint8_t, kSessionIdSize>;  // the session uuid's bytes
using SessionKey = std::array<uint8_t, 32>;
struct SessionCredential {
  SessionId id{};
  SessionKey key{};
};
// Server: the key of a session a connection authenticates for, or why it may
// not (unknown, revoked, ...). Runs on the worker thread.
using SessionKeyLookup = std::function<Result<SessionKey>(const SessionId& session)>;

namespace ofi {
class Fabric;
}

// A registered memory range (ucp_mem_map without allocation) and its packed
// remote key. Created by Context::RegisterMemory or AllocateMemory;
// unregistered when the last reference is dropped. The memory must stay mapped
// while the region exists. Immutable after creation; thread-safe.
class MemoryRegion {
 public:
  ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  const std::byte* base() const { return base_; }
  uint64_t length() const { return length_; }
  // True when [p, p + n) lies inside this region.
  bool Contains(const void* p, uint64_t n) const;
  // The packed rkey (ucp_rkey_pack), sent to peers inside RPCs.
  std::span<const uint8_t> packed_rkey() const { return packed_rkey_; }
  // True when UCX allocated the memory (Context::AllocateMemory).
  bool ucx_allocated() const { return ucx_allocated_; }
  std::byte* mutable_base() const { return base_; }

 private:
  friend class Context;
  friend class ofi::Fabric;
  MemoryRegion() = default;
  std::shared_ptr<void> provider_handle_;  // libfabric: the registration (fi_close on release)
  void* context_ = nullptr;  // ucp_context_h
  void* memh_ = nullptr;     // ucp_mem_h
  std::byte* base_ = nullptr;
  uint64_t length_ = 0;
  bool ucx_allocated_ = false;
  std::vector<uint8_t> packed_rkey_;
};

class Worker;
namespace cma {
class Authority;
}

// One per process. See the file comment. Thread-safe.
class Context {
 public:
  // Reads the UCX configuration, applies the transport selection explicitly
  // (ucp_config_modify: TLS, NET_DEVICES, KEEPALIVE_INTERVAL) and creates the
  // ucp_context with AM, RMA and WAKEUP features. Transport-level settings UCX
  // 1.13 refuses in ucp_config_modify are set in the environment first, only
  // when unset: UCX_TCP_{TX,RX}_SEG_SIZE and UCX_{POSIX,SYSV}_ERROR_HANDLING=y
  // (shared memory with error mode PEER; see docs/transport.md). Because of
  // setenv, create contexts before starting threads that read the environment.
  // Errors: InvalidArgument for bad options; NotSupported when the selected kind
  // has no usable device (the message names the missing devices and lists those
  // present, e.g. "rdma: no rc/dc verbs device (present: tcp/lo tcp/eth0 ...)").
  static Result<std::unique_ptr<Context>> Create(const TransportOptions& options);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const TransportOptions& options() const { return options_; }
  // The selection after resolving kAuto: kRdma, kShm (shm+tcp for auto without
  // rdma is reported as kShm when shm devices exist), or kTcp.
  TransportKind resolved_kind() const { return resolved_kind_; }
  // The UCX_TLS value the context was created with, e.g. "posix,sysv,cma,self".
  const std::string& ucx_tls() const { return ucx_tls_; }
  // Every "transport/device" UCX found usable, e.g. {"tcp/lo", "posix/memory"}.
  const std::vector<std::string>& devices() const { return devices_; }
  // One line for logs and ros2-bench: "transport=shm tls=posix,sysv,cma,self devices=...".
  std::string Describe() const;

  // Creates a worker for the calling thread (which then owns it). `name` shows
  // up in logs and UCX debug output.
  Result<std::unique_ptr<Worker>> CreateWorker(std::string_view name);

  // Allocates `length` bytes of registered memory from UCX (ucp_mem_map with
  // UCP_MEM_MAP_ALLOCATE; pinned on verbs), for I/O arenas whose buffers are
  // reused as bulk buffers: pass the region in CallOptions and calls reuse its
  // registration. Freed with the last reference.
  Result<std::shared_ptr<const MemoryRegion>> AllocateMemory(uint64_t length);

  // Registers [addr, addr + length) for remote read and write. The caller keeps
  // the region (and the memory) alive as long as peers may access it; the
  // registration (and every key packed from it) ends with the last reference.
  Result<std::shared_ptr<const MemoryRegion>> RegisterMemory(void* addr, uint64_t length);

  // Registrations of application memory (RegisterMemory): how many were made
  // and how many are still held. There is no cache of them: a call registers
  // an application buffer for itself and releases it when it completes, so
  // `live` counts only calls in flight and regions an owner holds.
  struct RegistrationStats {
    uint64_t made = 0, live = 0;
  };
  RegistrationStats registration_stats() const;

  // Internal: the ucp_context_h (null on libfabric).
  void* ucp_handle() const { return context_; }
  // Internal: the libfabric fabric and domain (null on UCX).
  ofi::Fabric* ofi() const { return ofi_.get(); }
  // Internal: whether same-host peers may negotiate cma bulk with this context
  // (TransportOptions::same_host_cma, shm selected, RMA not forced).
  bool cma_enabled() const;
  // Whether the UCX context has the RMA feature: only for kind rdma (rc/dc
  // verbs alone, where UCX does RMA in hardware against keys bound to their
  // protection domain) or force_rma_bulk. With the feature, UCX also serves
  // software-emulated put and get for peers whose lanes cannot do RMA (tcp,
  // shared memory with error handling): those handlers write and read
  // whatever address of this process the peer names, unchecked, so a context
  // that talks over tcp or shared memory never has it.
  bool rma_enabled() const { return rma_; }
  // Internal: the process's cma token authority (cma.h); Start()ed by the
  // first worker that serves requests.
  cma::Authority& cma_authority() const { return *cma_; }

 private:
  Context() = default;
  Result<std::shared_ptr<const MemoryRegion>> MapMemory(void* addr, uint64_t length, bool allocate);
  // Create() for Provider::kOfi (ofi/fabric.cc).
  Status InitOfi(const TransportOptions& options);

 public:
  struct Counts;  // internal (context.cc)

 private:
  TransportOptions options_;
  TransportKind resolved_kind_ = TransportKind::kTcp;
  std::string ucx_tls_;
  std::vector<std::string> devices_;
  void* context_ = nullptr;  // ucp_context_h
  std::shared_ptr<Counts> counts_;
  std::unique_ptr<cma::Authority> cma_;
  std::unique_ptr<ofi::Fabric> ofi_;
  bool rma_ = false;
};

// What an endpoint really runs over (from ucp_ep_print_info), for logs, tests
// and ros2-bench.
struct EndpointInfo {
  std::string am_transport;        // "tl/device" of the active-message lane, e.g. "posix/memory", "tcp/lo"
  std::string rma_transport;       // first RMA lane, e.g. "cma/memory"; empty when none
  std::vector<std::string> lanes;  // every lane as "tl/device", in lane order
  // kRma on verbs lanes (one-sided); kCma for a same-host shm peer whose hello
  // proved its pid (TransportOptions::same_host_cma); kActiveMessage
  // (rendezvous) otherwise: over tcp, and shm where UCX 1.13 only emulates RMA.
  // TransportOptions::force_rma_bulk overrides it to kRma.
  BulkTransfer bulk_mode = BulkTransfer::kActiveMessage;
  bool rma_any_memory = false;  // RMA also works on ordinary registered memory (verbs)
  FailureDetection failure_detection = FailureDetection::kUcxPeer;
  bool same_host = false;  // the peer's address blob names this host (boot id)
  int32_t peer_pid = 0;
  std::string ucx_report;  // the raw ucp_ep_print_info text
  // True when every lane uses one of the shared-memory transports (posix, sysv, cma, self).
  bool IsSharedMemoryOnly() const;
  // True when some lane uses tcp.
  bool UsesTcp() const;
  // True when no lane resolves a peer's memory key by name: every lane is tcp
  // (UCX emulates RMA by asking the peer, which touches only its own memory),
  // verbs (rc, dc, ud: a key is bound to its protection domain) or self. Over
  // shared memory (posix, sysv, cma, ...) a key names a process id and a file
  // descriptor or a SysV id, and whoever unpacks it maps what it names with
  // its own privileges: on such a connection this side never unpacks a peer's
  // key, neither its own (rma bulk) nor through UCX's rendezvous protocol, so
  // bulk there moves through shared segments or eager active messages.
  bool PeerKeysBound() const;
};

struct CallOptions {
  // Deadline for the reply; zero means TransportOptions::default_timeout.
  std::chrono::milliseconds timeout{0};
  // Opaque capability bytes (at most 1024) carried to the handler unchanged.
  std::span<const uint8_t> capability;
  // Client bytes the server may Pull. Must stay valid until the reply callback.
  std::span<const std::byte> bulk_out;
  // Client buffer the server may Push into. Must stay valid until the reply callback.
  std::span<std::byte> bulk_in;
  // Optional registered regions covering bulk_out / bulk_in (RMA mode), kept
  // by the call until it completes; when null (or not covering the buffer) and
  // the bulk moves by RMA, the call registers the buffer for itself
  // (Context::RegisterMemory) and releases the registration when it completes.
  std::shared_ptr<const MemoryRegion> bulk_out_region;
  std::shared_ptr<const MemoryRegion> bulk_in_region;
};

// The result of a call as seen by the client. `status` is OK, the handler's
// error (code and message travel on the wire), or a local failure: kTimedOut,
// kDisconnected, kProtocol (malformed reply), kCancelled (worker shut down).
// `payload` is valid only during the callback. `bulk_in_bytes` is how many bytes
// the server pushed into CallOptions::bulk_in.
struct ReplyView {
  Status status;
  std::span<const uint8_t> payload;
  uint64_t bulk_in_bytes = 0;
};
using ReplyCallback = std::function<void(const ReplyView& reply)>;

// A copied reply, for the blocking CallSync.
struct ReplyMessage {
  std::vector<uint8_t> payload;
  uint64_t bulk_in_bytes = 0;
};

// A connection to one peer worker. Created by Worker::Connect; used on the
// worker's thread only. Drop endpoints before their Worker (after the worker is
// gone, Call and CallSync return its final status and Close does nothing). Dropping the last reference closes the UCX
// endpoint after failing its outstanding requests with kCancelled.
class Endpoint {
 public:
  virtual ~Endpoint() = default;

  // Sends request `opcode` (0 .. 0xEFFF; higher values are reserved) with
  // `payload` (copied before Call returns) and the bulk buffers of `options`
  // (which must stay valid until `done` runs). `done` runs
  // exactly once, on the worker thread, inside a later Progress() — never inside
  // Call. Returns an error (and does not run `done`) for invalid arguments, a
  // payload above max_payload(), a disconnected endpoint (kDisconnected) or too
  // many outstanding requests (kBusy).
  virtual Status Call(uint16_t opcode, std::span<const uint8_t> payload, const CallOptions& options,
                      ReplyCallback done) = 0;

  // Blocking convenience: Call, then Worker::RunUntil the reply arrives. Returns
  // the reply payload, or the reply's non-OK status.
  virtual Result<ReplyMessage> CallSync(uint16_t opcode, std::span<const uint8_t> payload,
                                        const CallOptions& options = {}) = 0;

  // OK while connected; kDisconnected (naming the peer and the cause) after a
  // failure or Close().
  virtual Status status() const = 0;
  // The lanes and policies in use; filled at connect time.
  virtual const EndpointInfo& info() const = 0;
  // Largest request payload accepted by Call (depends on the UCX AM header limit
  // when bulk rides active messages).
  virtual uint64_t max_payload() const = 0;
  // Number of requests sent on this endpoint still waiting for their reply.
  virtual uint32_t outstanding() const = 0;
  // Batching: after Cork(), Calls are gathered and sent together, several
  // requests in one message (at most TransportOptions::batch_limit bytes), when
  // Uncork() is called or the worker next progresses (Progress, Wait,
  // PrepareSleep), whichever comes first; the server answers the requests of a
  // batch that it answers at once in one message too. For a burst of small
  // calls this saves a message and a receive per call in each direction. Calls
  // whose bulk rides active messages are sent at once, as without the cork.
  // A call's contract is unchanged, except that a send that fails after Call
  // returned fails the connection (its calls complete with kDisconnected).
  virtual void Cork() = 0;
  virtual void Uncork() = 0;
  // Proves to the server that this process holds `session`'s key, unless this
  // endpoint already did: sends the proof (an authenticate request) and
  // returns without waiting; calls made afterwards are handled after it. The
  // first proof on a connection that crosses hosts or runs over tcp also turns
  // on the integrity of every later message (docs/security.md). A refused
  // first proof fails the endpoint (its calls complete with kDisconnected
  // naming the refusal); a refused later one makes the calls of that session
  // fail with the server's kPermissionDenied. Errors: the endpoint's status,
  // Busy when it holds kMaxSessionsPerConnection (16) sessions already.
  virtual Status AuthenticateSession(const SessionCredential& session) = 0;
  // Fails outstanding requests with kCancelled, tells the peer goodbye (best
  // effort) and closes the UCX endpoint. Idempotent.
  virtual void Close() = 0;
};

using Completion = std::function<void(const Status& status)>;

// Server-side handle of one received request. Copies share the same request
// (reference counted, no allocation per copy). The payload and capability stay
// valid while any copy exists. If the last copy is dropped without Reply, the
// client gets kInternal ("handler dropped the request"). Worker thread only;
// every copy must be dropped before the Worker is destroyed.
class IncomingRequest {
 public:
  struct State;  // internal, pooled by the worker
  IncomingRequest() = default;
  explicit IncomingRequest(State* s);
  IncomingRequest(const IncomingRequest& other);
  IncomingRequest(IncomingRequest&& other) noexcept;
  IncomingRequest& operator=(IncomingRequest other) noexcept;
  ~IncomingRequest();
  explicit operator bool() const { return state_ != nullptr; }

  uint16_t opcode() const;
  uint64_t request_id() const;
  std::span<const uint8_t> payload() const;
  std::span<const uint8_t> capability() const;
  // Bytes the client offers for Pull (0: none) and accepts from Push (0: none).
  uint64_t bulk_out_size() const;
  uint64_t bulk_in_capacity() const;
  // How the bulk of this request moves: inline, or the endpoint's bulk_mode.
  bool bulk_out_inline() const;
  BulkTransfer bulk_mode() const;
  // An id of the client connection (stable while it lasts), for per-client state.
  uint64_t connection_id() const;
  // Whether the client proved `session` on this request's connection
  // (Endpoint::AuthenticateSession); and the sessions it proved, for errors.
  bool SessionAuthenticated(const SessionId& session) const;
  std::string AuthenticatedSessions() const;
  // The handler checked this request's capability and found it valid: the
  // connection counts as authenticated from now on and is no longer subject
  // to TransportOptions::unauthenticated_timeout or to eviction by new hellos.
  void MarkAuthenticated() const;

  // Copies all bulk_out_size() bytes of the client's bulk-out buffer into `dst`
  // (dst.size() must equal bulk_out_size()); `done` runs on the worker thread once
  // the data is in dst or the transfer failed. At most one Pull per request.
  // Inline bulk completes before Pull returns; RMA pulls are pipelined in chunks.
  void Pull(std::span<std::byte> dst, Completion done);
  // Copies `src` (at most bulk_in_capacity() bytes) into the client's bulk-in
  // buffer. `done` runs when src may be reused; the data is visible to the client
  // no later than the reply. At most one Push per request, before Reply.
  void Push(std::span<const std::byte> src, Completion done);
  // The client's bulk-in buffer itself, mapped in this process, when it lies in
  // a shared segment of the client (kSegment bulk, shared_segment.h); empty
  // otherwise or if the segment cannot be mapped (Push then reports why). A
  // handler may place the reply's data straight into it (a storage read, no
  // copy of its own) and then call PushedDirect(bytes) instead of Push. The
  // memory stays mapped while this request lives; the client must not read the
  // buffer before the reply, exactly as with Push.
  std::span<std::byte> DirectBulkIn();
  void PushedDirect(uint64_t bytes);
  // Sends the reply: `status` (its code and message travel to the client) and a
  // small `payload` (copied). Exactly once; later calls are ignored.
  void Reply(const Status& status, std::span<const uint8_t> payload = {});
  bool replied() const;

 private:
  State* state_ = nullptr;
};

// Handles one opcode. Runs on the worker thread inside progress; it may reply at
// once or keep the request and reply later.
using RequestHandler = std::function<void(IncomingRequest request)>;

struct WorkerStats {
  uint64_t requests_sent = 0;
  uint64_t replies_received = 0;
  uint64_t requests_received = 0;
  uint64_t replies_sent = 0;
  uint64_t requests_timed_out = 0;
  uint64_t requests_failed_disconnect = 0;
  uint64_t malformed_messages = 0;       // rejected by the decoder, dropped
  uint64_t wire_version_mismatches = 0;  // of those: messages of another wire version
  uint64_t misdirected_messages = 0;     // of those: naming a connection of another peer endpoint (refused)
  uint64_t unknown_opcode = 0;           // answered with kNotSupported
  uint64_t stale_replies = 0;            // replies for unknown or expired request ids
  uint64_t bulk_inline_bytes = 0;
  uint64_t bulk_rma_bytes = 0;
  uint64_t bulk_am_bytes = 0;
  uint64_t bulk_cma_bytes = 0;
  uint64_t bulk_segment_bytes = 0;    // copied into / out of clients' shared segments (memcpy or direct)
  uint64_t bulk_bounce_bytes = 0;     // client: ordinary bulk copied through a bounce segment of ours
  uint64_t segments_mapped = 0;       // client segments mapped (kSegment bulk)
  uint64_t segments_refused = 0;      // segment references that did not check out (not mapped)
  uint64_t cma_refused = 0;           // hellos whose cma proof failed (unknown token, wrong pid, unreadable)
  uint64_t hellos_refused = 0;        // hellos refused by the connection limits (max_connections*)
  uint64_t connections_evicted = 0;   // unauthenticated connections closed for a new hello or by their timeout
  uint64_t inline_refused = 0;        // requests whose inline bulk exceeded this side's inline_limit
  uint64_t rendezvous_refused = 0;    // requests whose bulk rode a rendezvous over shared memory (not received)
  uint64_t rkeys_refused = 0;         // rma descriptors on a connection whose lanes name memory in keys
  uint64_t auth_refused = 0;          // session authentications refused (unknown session, bad proof, limits)
  uint64_t integrity_refused = 0;     // messages refused by the integrity check (tag, sequence, missing trailer)
  uint64_t batches_sent = 0;          // kBatch messages sent (Endpoint::Cork, replies to a batch)
  uint64_t batched_messages = 0;      // requests and replies that rode in them
  uint64_t batches_received = 0;      // kBatch messages accepted
  uint64_t sleeps = 0;                // times Wait() armed the worker and slept
  uint64_t peers_lost = 0;            // endpoints failed by the peer's death or disconnect
  uint64_t deadline_compactions = 0;  // rebuilds of the request-deadline heap (see WorkerImpl::CompactDeadlines)
  uint64_t deadline_entries = 0;      // a gauge, not a counter: entries in that heap after the last call started
};

// The server-side connections a worker holds now, by the transport their
// lanes use: rdma (some verbs lane: rc, dc, ud), shm (shared-memory lanes
// only) or tcp (the rest).
struct ServedConnections {
  uint64_t shm = 0;
  uint64_t tcp = 0;
  uint64_t rdma = 0;
};

// One per I/O thread. See the file comment.
class Worker {
 public:
  virtual ~Worker() = default;

  // The opaque address blob peers pass to Connect: a ROS2 envelope (format
  // version, the wire version this worker speaks, host boot id, pid) around the
  // UCX worker address. See docs/wire-format.md.
  virtual std::span<const uint8_t> address() const = 0;

  // Connects to the worker whose address blob is `peer_address` and performs the
  // hello exchange (protocol version check, back-connection). Blocks (progressing
  // this worker) up to TransportOptions::connect_timeout. Errors: InvalidArgument
  // for a malformed blob, NotSupported when the peer speaks another wire version
  // (both named) or the selected transports cannot reach it, TimedOut /
  // Disconnected when it does not answer.
  virtual Result<std::shared_ptr<Endpoint>> Connect(std::span<const uint8_t> peer_address) = 0;

  // Installs the handler of `opcode` (0 .. 0xEFFF), replacing any previous one.
  // Requests for opcodes without a handler are answered with kNotSupported.
  virtual Status RegisterHandler(uint16_t opcode, RequestHandler handler) = 0;

  // Called when a peer connection (client- or server-side) fails or closes,
  // after its outstanding requests were failed. Optional.
  virtual void SetPeerLostHandler(std::function<void(uint64_t connection_id, const Status& why)> handler) = 0;

  // Server: how session keys are found for authenticate requests. Without
  // one, every authenticate request is refused (kNotSupported).
  virtual void SetSessionKeyLookup(SessionKeyLookup lookup) = 0;

  // One non-blocking pass: UCX progress, incoming messages, completions, expired
  // deadlines and dead peers. Returns the number of events handled (0: idle).
  virtual int Progress() = 0;

  // Adaptive progress: Progress() until an event happens, spinning at most
  // `spin_budget` (busy-polling for `pinned_busy_poll` first when the calling
  // thread is pinned to one CPU, yielding between polls otherwise); then arms the worker (ucp_worker_arm) and sleeps in
  // epoll on the event fd until an event, the nearest request deadline or `max_wait`. Returns the number of events
  // handled.
  virtual int Wait(std::chrono::microseconds max_wait) = 0;

  // Calls Wait() until `done()` returns true (checked after every pass) or
  // `timeout` expires (then TimedOut).
  virtual Status RunUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) = 0;

  // For callers that run their own epoll loop (engine target threads with
  // io_uring): an epoll file descriptor that becomes readable when Progress()
  // has work. Protocol: call Progress() until it returns 0, then PrepareSleep();
  // if it returns true, sleep on event_fd() (poll/epoll, at most
  // NextDeadline()); otherwise progress again.
  virtual int event_fd() const = 0;
  virtual bool PrepareSleep() = 0;
  // Time until the nearest request deadline (max_wait if none is sooner).
  virtual std::chrono::microseconds NextDeadline(std::chrono::microseconds max_wait) const = 0;

  // Thread-safe: wakes the worker's thread if it sleeps (ucp_worker_signal).
  virtual void Signal() = 0;

  // Server side: with `on`, replies given outside their own request's receive
  // callback (after storage I/O, say) are gathered per connection and leave
  // together, as one batch, at FlushBatches(), at the end of the current
  // progress pass or at the next Progress()/PrepareSleep(): a loop that reaps
  // several I/O completions and then flushes answers them in one message per
  // client instead of one each. Off by default.
  virtual void SetReplyBatching(bool on) = 0;
  // Sends every batch gathered so far (replies, and corked endpoints' calls)
  // now, without waiting for the next progress pass.
  virtual void FlushBatches() = 0;

  virtual const WorkerStats& stats() const = 0;
  // Thread-safe (relaxed reads of counts only the worker's thread writes).
  virtual ServedConnections served_connections() const = 0;
  virtual const std::string& name() const = 0;
  virtual Context& context() const = 0;
};

}  // namespace ros2::transport
