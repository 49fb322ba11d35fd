// Internal: the Worker implementation shared by worker.cc (UCX worker, dispatch,
// sends, progress), worker_connections.cc (connections, the hello, failure),
// client_call.cc (outgoing requests) and incoming_request.cc (server side).
// Not a public header.
//
// Invariants:
//  - Everything here runs on the worker's owning thread.
//  - A Connection lives in `connections_` until it is failed or closed; UCX
//    callbacks that carry a Connection* are only armed while it is there (its
//    ucp_ep is force-closed before it is erased).
//  - A client call slot is live iff its `done` is set; request ids carry the
//    slot index and a generation so late replies to reused slots are stale.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <ucp/api/ucp.h>

#include "transport/cma.h"
#include "transport/shared_segment.h"
#include "transport/transport.h"
#include "transport/wire.h"

namespace ros2::transport {

class FaultInjection;
class WorkerImpl;
struct ConnectionAuth;  // connection_auth.h
using Clock = std::chrono::steady_clock;

// A point in Clock's time no earlier than now, for deadlines of milliseconds
// and more: CLOCK_MONOTONIC_COARSE (the time base of steady_clock, read
// without the TSC, several times cheaper than steady_clock::now()) plus its tick, so a
// deadline is late by at most one tick (4 ms) and never early.
Clock::time_point CoarseNow();

// One peer connection, client side (made by Connect) or server side (made on a
// hello). Owned by WorkerImpl::connections_.
struct Connection {
  WorkerImpl* worker = nullptr;
  uint64_t local_id = 0;   // our id; peers put it in connection_id of messages to us
  uint64_t remote_id = 0;  // the peer's id for this connection (0 until the hello ack)
  bool client_side = true;
  ucp_ep_h ep = nullptr;
  // The endpoint the peer's messages arrive on (the reply endpoint UCX gives
  // the receive callback; every message is sent with UCP_AM_SEND_FLAG_REPLY).
  // Set from the hello (server) or the hello ack (client); a message naming
  // this connection that arrives on another endpoint is refused, so knowing
  // a connection's id does not let another peer act on it. May differ from
  // `ep` (UCX keeps the endpoint it made for the peer's wireup when it does
  // not match it with ours); only compared, never used to send.
  ucp_ep_h peer_ep = nullptr;
  Status status;   // OK while usable
  int pidfd = -1;  // FailureDetection::kPidWatch
  EndpointInfo info;
  // info.PeerKeysBound(), kept when the lanes are known: whether bulk riding
  // active messages may use UCX's rendezvous (which unpacks the peer's memory
  // key) or must go eager.
  bool rendezvous = false;
  uint32_t outstanding = 0;  // client calls waiting for a reply
  // Server side: when the hello arrived, and whether a handler has seen a
  // valid capability on it (IncomingRequest::MarkAuthenticated). Until then
  // it may be evicted by new hellos and is closed after
  // TransportOptions::unauthenticated_timeout.
  Clock::time_point opened{};
  bool authenticated = false;
  bool closing = false;     // CloseWithReason deferred its close: no longer counted
  int8_t served_slot = -1;  // server side: its slot in WorkerImpl::served_ (-1: not counted)
  std::string peer_name;    // "pid 123 on this host" / "remote pid 123"
  // Bulk by cross-memory attach (BulkTransfer::kCma): set on the server once the
  // client's hello proof checked out, on the client when the ack says so.
  bool cma = false;
  // Server side: the client's hello proved its pid with a token this
  // process's cma::Authority issued to that pid (the kernel's SO_PEERCRED),
  // so it runs on this host. Over shm it allows cma bulk (`cma`); over tcp
  // it spares the connection integrity tags (IntegrityWanted). Either way the
  // per-peer limit counts it by that pid.
  bool host_proven = false;
  // Client side, until the hello ack: the token the server reads back from us
  // (its address travels in the proof).
  std::unique_ptr<cma::Token> cma_token_copy;
  // Server side: the client's shared segments mapped so far (kSegment bulk),
  // most recently used last; at most kMaxPeerSegments, dropped with the
  // connection (a request in progress keeps its own reference).
  std::vector<std::shared_ptr<segment::PeerMapping>> segments;
  // Batching (docs/transport.md, "Batches"): while the client's endpoint is
  // corked, or while the server dispatches the requests of a received batch,
  // outgoing requests (replies) are appended to `batch` (kHeaderSize bytes
  // left free for the batch header, then the entries) and sent as one message
  // by WorkerImpl::FlushBatch.
  bool corked = false;
  bool reply_batching = false;
  uint32_t batch_count = 0;
  uint64_t batch_pushed = 0;  // bytes pushed by the requests whose replies wait in `batch`
  std::vector<uint8_t> batch;
  // Sessions proven on the connection and its integrity keys
  // (connection_auth.h): made with the hello ack (both sides).
  std::shared_ptr<ConnectionAuth> auth;
};
inline constexpr size_t kMaxPeerSegments = 64;

// Why a worker refuses to connect or wait from inside its own progress (a
// request handler or a completion callback): the call would progress the
// worker again, which UCX forbids (it asserts and aborts the process) and
// which would run other callbacks in the middle of this one. Busy: the
// caller connects or waits from its own loop instead.
inline Status InsideProgress(std::string_view worker, std::string_view what) {
  return Status::Busy(fmt::format(
      "transport: worker '{}' cannot {} inside its own progress (from a handler or a completion callback); do it "
      "from the worker's loop",
      worker, what));
}

// A buffer for one outgoing message, returned to the pool when UCX is done.
// While UCX holds it, it is linked in WorkerImpl's in-flight list (so buffers of
// sends that never complete, e.g. to a dead shm peer, are freed with the worker).
struct SendBuffer {
  WorkerImpl* worker = nullptr;
  SendBuffer* prev_in_flight = nullptr;
  SendBuffer* next_in_flight = nullptr;
  std::vector<uint8_t> bytes;         // the encoded message (without the inline section when iov is used)
  std::vector<uint8_t> tail;          // inline bytes handed over by the sender (SendMessage's inline_owner)
  std::array<ucp_dt_iov_t, 3> iov{};  // bytes + inline section (+ integrity trailer), for an iovec send
  std::array<uint8_t, wire::kIntegrityTrailerSize> trailer{};  // sealed iovec sends
  Completion done;                                             // optional: run when the send completes (push data)
  std::shared_ptr<void> keep_alive;                            // optional: resources the send references
};

// Where a rendezvous receive of pushed data reports back (lives in PendingCall).
struct PushReceive {
  WorkerImpl* worker = nullptr;
  uint32_t slot = 0;
  uint32_t generation = 0;
};

// The state of one client call (a slot in WorkerImpl::calls_).
struct PendingCall {
  uint32_t generation = 0;
  ReplyCallback done;  // set while live
  uint64_t connection_id = 0;
  Clock::time_point deadline;
  std::span<std::byte> bulk_in;
  std::shared_ptr<const MemoryRegion> out_region, in_region;
  // Push data over active messages may land after the reply: the reply is kept
  // until the pushed bytes are in place.
  bool in_via_am = false;  // bulk-in was offered as kActiveMessage (push data may trail the reply)
  bool reply_arrived = false;
  bool push_in_flight = false;
  uint64_t pushed_expected = 0;
  uint64_t pushed_received = 0;
  Status reply_status;
  std::vector<uint8_t> reply_payload;
  PushReceive push_receive;
  // Same-host bulk in ordinary memory goes through a shared segment of ours
  // (the server copies only segments): the bytes out were copied into
  // `bounce_out`; the bytes in arrive in `bounce_in` and are copied into
  // bulk_in when the call completes.
  std::unique_ptr<SharedBuffer> bounce_out, bounce_in;
};

// The server side of a request on another provider (libfabric, ofi/): when
// State::backend is set, Pull, Push, Reply and the release of the last handle
// go to it; `worker` is then null. The accessors read `msg` and `conn` as on
// UCX.
class RequestBackend {
 public:
  virtual ~RequestBackend() = default;
  virtual void Pull(IncomingRequest::State* s, std::span<std::byte> dst, Completion done) = 0;
  virtual void Push(IncomingRequest::State* s, std::span<const std::byte> src, Completion done) = 0;
  virtual void Reply(IncomingRequest::State* s, const Status& status, std::span<const uint8_t> payload) = 0;
  virtual void Release(IncomingRequest::State* s) = 0;
};

// The server-side state behind IncomingRequest handles (pooled).
struct IncomingRequest::State {
  WorkerImpl* worker = nullptr;
  RequestBackend* backend = nullptr;  // another provider's (see RequestBackend)
  uint32_t refs = 0;
  std::shared_ptr<Connection> conn;
  wire::Message msg;          // views into `copy`
  std::vector<uint8_t> copy;  // the received message (capacity kept across reuse)
  void* rndv_desc = nullptr;  // am-mode bulk-out rendezvous descriptor, until pulled
  uint64_t rndv_length = 0;
  // am-mode bulk-out that came eager (over shared memory, where rendezvous
  // is refused): UCX's bytes during the callback, `eager_copy` after it.
  std::span<const uint8_t> eager_bulk;
  std::vector<uint8_t> eager_copy;
  bool pulled = false, pushed = false, replied = false;
  bool in_am_callback = false;  // the handler runs inside UCX's AM callback
  bool rndv_taken = false;      // the rendezvous descriptor went to ucp_am_recv_data_nbx
  uint64_t pushed_bytes = 0;
  std::vector<uint8_t> inline_push;  // pushed bytes that ride inside the reply
  // RMA transfer in progress (Pull or Push).
  struct Rma {
    bool active = false;
    bool is_put = false;
    std::byte* local = nullptr;
    uint64_t remote_addr = 0;
    uint64_t total = 0, next = 0;
    uint32_t in_flight = 0;
    bool flushing = false;
    ucp_rkey_h rkey = nullptr;
    Status failure;
    Completion done;
  } rma;
  Completion pull_done;  // am-mode pull
  // kSegment bulk: the client's segment, held while the request may touch it
  // (DirectBulkIn hands its memory to the handler).
  std::shared_ptr<segment::PeerMapping> segment;
};

class EndpointImpl;

class WorkerImpl final : public Worker {
 public:
  WorkerImpl(Context& context, std::string name);
  ~WorkerImpl() override;
  Status Init();

  // Worker interface.
  std::span<const uint8_t> address() const override { return address_; }
  Result<std::shared_ptr<Endpoint>> Connect(std::span<const uint8_t> peer_address) override;
  Status RegisterHandler(uint16_t opcode, RequestHandler handler) override;
  void SetPeerLostHandler(std::function<void(uint64_t, const Status&)> handler) override {
    peer_lost_handler_ = std::move(handler);
  }
  void SetSessionKeyLookup(SessionKeyLookup lookup) override { session_key_lookup_ = std::move(lookup); }
  int Progress() override;
  // Progress() without reading the clock for housekeeping (Wait's busy polls
  // read it every few passes instead: a clock read per poll was 18% of a
  // pinned client's samples).
  int ProgressNoClock();
  void MaybeHousekeeping(Clock::time_point now);  // Housekeeping() if its 1 ms period is up
  int Wait(std::chrono::microseconds max_wait) override;
  Status RunUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) override;
  int event_fd() const override { return epoll_fd_; }
  bool PrepareSleep() override;
  std::chrono::microseconds NextDeadline(std::chrono::microseconds max_wait) const override;
  void Signal() override;
  void SetReplyBatching(bool on) override { batch_replies_ = on; }
  void FlushBatches() override {
    if (!pending_batches_.empty()) FlushPendingBatches();
  }
  bool batch_replies() const { return batch_replies_; }
  const WorkerStats& stats() const override { return stats_; }
  ServedConnections served_connections() const override;
  const std::string& name() const override { return name_; }
  Context& context() const override { return context_; }

  // ---- shared with the other implementation files ----
  ucp_worker_h ucp() const { return worker_; }
  const TransportOptions& options() const { return context_.options(); }
  WorkerStats& mutable_stats() { return stats_; }
  // Counts a server-side connection in served_ once it is accepted
  // (`opened`), and out again when it closes (connection_limits.cc).
  void CountServed(Connection& conn, bool opened);
  uint64_t max_am_header() const { return max_am_header_; }

  // Sends `msg` on `conn` as one active message; `bulk` (may be empty) rides as
  // the UCX data with the rendezvous protocol. `done` (optional) runs when the
  // send completed. Returns an error only when the send could not start.
  // `inline_owner` (optional) is the vector msg.inline_data views: its bytes are
  // taken over (swapped, not copied) and sent as the second element of an iovec
  // after the encoded head, so the inline section is never copied into the
  // send buffer; the vector is left empty.
  Status SendMessage(Connection& conn, const wire::Message& msg, std::span<const std::byte> bulk, Completion done,
                     std::shared_ptr<void> keep_alive = nullptr, std::vector<uint8_t>* inline_owner = nullptr);
  SendBuffer* AcquireSendBuffer();  // from the pool, or a new one
  void ReleaseSendBuffer(SendBuffer* buf);
  // Appends `msg` to conn's batch (flushing it first when `msg` would not fit),
  // or sends it on its own when it cannot ride a batch (bulk over active
  // messages, or larger than TransportOptions::batch_limit by itself). Sends
  // the batch once its replies' pushed bytes reach batch_flush_bytes.
  Status SendOrBatch(Connection& conn, const wire::Message& msg);
  // Sends conn's pending batch: one entry as a plain message, more as a kBatch.
  // A failed send fails the connection at the next progress (the batched calls
  // then complete with its status).
  void FlushBatch(Connection& conn);
  // Flushes every connection's pending batch (Progress, PrepareSleep).
  void FlushPendingBatches();
  // The in-flight list (intrusive, O(1), no allocation).
  void LinkInFlight(SendBuffer* buf);
  void UnlinkInFlight(SendBuffer* buf);

  // Fails the connection: outstanding calls get `why`, its ep is force-closed,
  // the peer-lost handler runs. Idempotent.
  // `graceful` flushes pending sends before closing (owner's Close); otherwise
  // the ep is force-closed (peer failure).
  void FailConnection(uint64_t connection_id, const Status& why, bool count_as_lost, bool graceful = false);
  // From inside UCX callbacks: FailConnection after ucp_worker_progress returns.
  void DeferFailure(uint64_t connection_id, Status why);
  const std::shared_ptr<Connection>* LookupConnection(uint64_t id);  // nullptr if unknown
  Connection* FindConnection(uint64_t id);
  std::shared_ptr<Connection> FindConnectionShared(uint64_t id);

  // Client calls (client_call.cc).
  // StartCall checks the call, has ChooseBulk pick each bulk buffer's
  // transfer, then takes a call slot and sends (or batches) the request.
  Status StartCall(Connection& conn, uint16_t opcode, std::span<const uint8_t> payload, const CallOptions& options,
                   ReplyCallback done);
  // How one bulk buffer of a call travels, and what the call keeps alive for
  // it until it completes.
  struct BulkPlan {
    std::shared_ptr<const MemoryRegion> region;        // kRma: the registration whose rkey is sent
    std::unique_ptr<SharedBuffer> bounce;              // kSegment through a bounce segment of ours
    std::array<uint8_t, wire::kSegmentRefSize> ref{};  // kSegment: the encoded reference the descriptor views
  };
  // Picks the transfer of `d` (direction and length set) for the caller's
  // buffer at `addr` (`caller_region`: its registration, if the caller gave
  // one) and fills the descriptor: a reference into the caller's shared
  // segment, inline bytes, a bounce segment, RMA or active messages (and raw
  // cma only under fault injection). Sends nothing and copies no bulk bytes.
  Status ChooseBulk(const Connection& conn, std::byte* addr, const std::shared_ptr<const MemoryRegion>& caller_region,
                    wire::BulkDescriptor& d, BulkPlan& plan);
  void HandleReply(const wire::Message& msg);
  ucs_status_t HandlePushData(const wire::Message& msg, void* data, size_t length, bool rndv);  // REQUIRES: bound
  void CompleteCall(uint32_t slot, const Status& status, std::span<const uint8_t> payload, uint64_t pushed);
  void ExpireDeadlines();
  void CompactDeadlines();
  // Entries the deadline heap may hold before StartCall compacts it.
  size_t DeadlineHeapLimit() const { return 2 * calls_.size() + 64; }
  void OnPushReceived(uint32_t slot, uint32_t generation, ucs_status_t status);
  // Bounce segments (PendingCall::bounce_*): one of at least `length` bytes,
  // from the free list or new; and back to it (or freed, when the call did
  // not complete normally: the server may still write into it).
  Result<std::unique_ptr<SharedBuffer>> AcquireBounce(uint64_t length);
  void ReleaseBounce(std::unique_ptr<SharedBuffer> buffer, bool reusable);
  std::vector<std::unique_ptr<SharedBuffer>> bounce_free_;
  uint64_t bounce_free_bytes_ = 0;

  // Server side (incoming_request.cc).
  // Runs the handler inside the AM callback. Returns true when the rendezvous
  // descriptor was kept or handed to ucp_am_recv_data_nbx (the callback then
  // returns UCS_INPROGRESS); false lets UCX drop it.
  // `msg` was decoded from `bytes` (UCX's buffer, valid during the callback).
  // `eager_bulk` is bulk-out data that came eager with the message (UCX's
  // bytes, valid during the callback; copied if the handler keeps the
  // request without pulling).
  bool HandleRequest(Connection& conn, const wire::Message& msg, std::span<const uint8_t> bytes, void* rndv_desc,
                     uint64_t rndv_length, std::span<const uint8_t> eager_bulk = {});
  IncomingRequest::State* AcquireState();
  void ReleaseState(IncomingRequest::State* s);
  void DispatchRequest(IncomingRequest::State* s);

  // Sessions and integrity (connection_auth.cc).
  // Server, at the hello: the connection's challenge and whether it needs
  // integrity, as the hello ack's payload. Client: the same from the ack.
  Status PrepareServerAuth(Connection& conn, std::array<uint8_t, wire::kHelloAckSize>& ack_payload);
  void AcceptHelloAck(Connection& conn, std::span<const uint8_t> payload);
  // Counts `conn` as `identity` for max_connections_per_peer, or Busy.
  Status ChargeIdentity(Connection& conn, std::string identity);
  void HandleAuthenticate(Connection& conn, const wire::Message& msg);  // answers it
  Status AuthenticateConnection(Connection& conn, const wire::Message& msg);
  Status AuthenticateSession(Connection& conn, const SessionCredential& cred);
  static bool Sealing(const Connection& conn);
  // Sets the integrity flag in `head`, tags head then tail under the next
  // sequence number and writes the trailer.
  Status Seal(Connection& conn, std::span<uint8_t> head, std::span<const uint8_t> tail,
              std::span<uint8_t, wire::kIntegrityTrailerSize> trailer);
  // Seal() of a message encoded in buf.bytes from `skip` on: iov sends keep
  // the trailer in buf.trailer (after `tail`, the inline bytes); others append it.
  Status SealSendBuffer(Connection& conn, SendBuffer& buf, size_t skip, std::span<const uint8_t> tail, bool iov);
  Status CheckIntegrity(Connection& conn, const wire::Message& msg, std::span<const uint8_t> bytes);
  // CheckIntegrity on a received message: true when it was refused (counted,
  // logged; a request is answered with kPermissionDenied naming the cause, a
  // client connection fails).
  bool RefuseUnsealed(Connection& conn, const wire::Message& msg, std::span<const uint8_t> bytes);
  SessionKeyLookup session_key_lookup_;

  // The test seam (fault_injection.h): null except in tests, which attach one
  // with SetFaultInjection to make this worker's client side send what a
  // well-behaved client never sends. Not owned.
  FaultInjection* faults_ = nullptr;

  // The UCX AM receive callback (worker.cc).
  ucs_status_t OnActiveMessage(const void* header, size_t header_length, void* data, size_t length,
                               const ucp_am_recv_param_t* param);

  static constexpr uint16_t kAmId = 0x52;
  // The longest sleep while a send or rendezvous receive is in flight (see NextDeadline).
  static constexpr std::chrono::microseconds kTransferNap{50};
  uint64_t sends_in_flight_ = 0;     // UCX send requests not yet completed
  uint64_t receives_in_flight_ = 0;  // rendezvous receives (pull, pushed data) not yet completed
  SendBuffer* in_flight_head_ = nullptr;

 private:
  friend class EndpointImpl;
  void HandleHello(const wire::Message& msg, ucp_ep_h from);
  void HandleHelloAck(const wire::Message& msg, ucp_ep_h from);
  // A message naming connection `msg.connection_id` arrived on endpoint
  // `from`, which is not that connection's: counted, and a request is
  // answered with kPermissionDenied on the sender's own connection (if it
  // has one).
  void RefuseMisdirected(const wire::Message& msg, ucp_ep_h from);
  // Answers request `request_id` on the server-side connection `conn` with
  // the error `why` (a reply, so the caller fails at once and learns why).
  void ReplyError(Connection& conn, uint64_t request_id, const Status& why);
  // A message the decoder refused: if it is a request that names the
  // server-side connection of the endpoint it came in on, that connection
  // gets the decoder's error as the reply.
  void AnswerMalformed(std::span<const uint8_t> bytes, ucp_ep_h from, const Status& why);
  // Closes `conn`, whose own peer sent a malformed batch, naming `why` (a bye
  // to a client; a server's calls fail with it).
  void CloseForMalformedBatch(Connection& conn, std::string_view why);
  // The worker-wide limit for a hello (max_connections; what the hello
  // claims charges nobody): OK to admit it (after evicting the oldest
  // unauthenticated connection if the worker is full), or why not
  // (connection_limits.cc).
  Status AdmitHello();
  // Sends a bye carrying `reason` on `ep` (to the peer's connection
  // `connection_id`), best effort, without a Connection (a refused hello).
  void SendByeOn(ucp_ep_h ep, uint64_t connection_id, std::string_view reason);
  // Tells the peer why (a bye carrying the reason) and closes the connection
  // (after the current ucp_worker_progress returns when `in_callback`).
  void CloseWithReason(Connection& conn, const std::string& reason, bool in_callback);
  // Closes server-side connections that stayed unauthenticated too long.
  void ExpireUnauthenticated(Clock::time_point now);
  // The live connection `id` if `from` is the endpoint its peer sends on;
  // otherwise nullptr (a misdirected message is refused).
  Connection* BoundConnection(const wire::Message& msg, ucp_ep_h from);
  bool CheckCmaProof(const Connection& conn, std::span<const uint8_t> proof);
  Result<std::shared_ptr<Connection>> CreateConnection(std::span<const uint8_t> peer_address, bool client_side);
  void FillEndpointInfo(Connection& conn);
  // EndpointInfo::bulk_mode from the lanes, the options and conn.cma.
  void UpdateBulkMode(Connection& conn);
  void CheckPeers();
  void Housekeeping();
  void ReapClosing();
  uint64_t NewConnectionId();

  Context& context_;
  std::string name_;
  ucp_worker_h worker_ = nullptr;
  std::vector<uint8_t> address_;
  std::array<uint8_t, 16> boot_id_{};
  uint64_t max_am_header_ = 0;
  int ucx_efd_ = -1;
  int epoll_fd_ = -1;      // ucx efd + pid_epoll_fd_
  int pid_epoll_fd_ = -1;  // pidfds of same-host peers
  WorkerStats stats_;
  // Served connections by transport (shm, tcp, rdma): written by this
  // worker's thread only, read by any (served_connections()).
  std::array<std::atomic<uint64_t>, 3> served_{};
  std::unordered_map<uint64_t, std::shared_ptr<Connection>> connections_;
  // Server side: the connection each peer endpoint opened (its hello's reply
  // endpoint). One connection per peer endpoint.
  std::unordered_map<ucp_ep_h, uint64_t> connection_by_peer_ep_;
  uint64_t last_connection_id_ = 0;                               // LookupConnection's last hit (0: none)
  const std::shared_ptr<Connection>* last_connection_ = nullptr;  // its map entry
  std::vector<RequestHandler> handlers_;                          // by opcode (grown on demand)
  std::function<void(uint64_t, const Status&)> peer_lost_handler_;

  // Client calls: slab + free list + deadline heap of (deadline, request id).
 public:
  std::deque<PendingCall> calls_;  // deque: stable addresses for in-flight receives
  std::vector<uint32_t> free_calls_;
  uint32_t live_calls_ = 0;
  using DeadlineEntry = std::pair<Clock::time_point, uint64_t>;
  std::priority_queue<DeadlineEntry, std::vector<DeadlineEntry>, std::greater<>> deadlines_;
  static uint64_t MakeRequestId(uint32_t slot, uint32_t generation) {
    return (static_cast<uint64_t>(generation) << 32) | (slot + 1);
  }

 private:
  std::vector<std::unique_ptr<SendBuffer>> send_pool_;
  std::vector<std::unique_ptr<IncomingRequest::State>> state_pool_;  // free states
  Clock::time_point next_housekeeping_{};
  Clock::time_point next_auth_check_{};
  // Wait calls: every 4096th re-reads the thread's affinity; every 64th runs
  // housekeeping even when it finds events before reading the clock (a Wait
  // that finds none reads the clock and runs it anyway).
  uint32_t waits_ = 0;
  bool thread_pinned_ = false;
  bool in_destructor_ = false;
  // Depth of ucp_worker_progress on this thread's worker: handlers and
  // completion callbacks run inside it, where UCX must not be progressed
  // again (it asserts), so Connect, and RunUntil on a condition not yet
  // met, refuse there (Busy).
  int progress_depth_ = 0;
  std::vector<std::pair<uint64_t, Status>> deferred_failures_;
  std::vector<std::pair<uint64_t, Status>> deferred_closes_;  // graceful, not counted as lost
  std::vector<uint64_t> pending_batches_;                     // local ids of connections with a batch not yet sent
  // DecodeBatch's output for received batches (reused; a nested batch, from a
  // handler that progresses the worker, decodes into its own).
  wire::BatchScratch batch_scratch_;  // received batches' entries (HandleBatch)
  bool batch_replies_ = false;        // SetReplyBatching
  void HandleBatch(const wire::Message& msg, ucp_ep_h from);
  std::vector<void*> closing_;  // ucp_ep_close_nbx requests still in progress
};

// Client-facing handle of a client-side Connection.
class EndpointImpl final : public Endpoint {
 public:
  EndpointImpl(WorkerImpl* worker, std::shared_ptr<Connection> conn) : worker_(worker), conn_(std::move(conn)) {}
  ~EndpointImpl() override { Close(); }
  Status Call(uint16_t opcode, std::span<const uint8_t> payload, const CallOptions& options,
              ReplyCallback done) override;
  Result<ReplyMessage> CallSync(uint16_t opcode, std::span<const uint8_t> payload, const CallOptions& options) override;
  Status status() const override { return conn_->status; }
  const EndpointInfo& info() const override { return conn_->info; }
  uint64_t max_payload() const override;
  uint32_t outstanding() const override { return conn_->outstanding; }
  void Cork() override;
  void Uncork() override;
  Status AuthenticateSession(const SessionCredential& session) override;
  void Close() override;

 private:
  WorkerImpl* worker_;
  std::shared_ptr<Connection> conn_;
};

}  // namespace ros2::transport
