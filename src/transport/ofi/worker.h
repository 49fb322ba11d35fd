// Internal: the libfabric Worker and Endpoint (Provider::kOfi). Not a public
// header; everything runs on the worker's owning thread except Signal().
//
// One FI_EP_RDM endpoint per worker, with its own domain, address vector and
// completion queue (FI_WAIT_FD: the queue's fd is in the worker's epoll set,
// so Worker::event_fd / PrepareSleep work as on UCX).
//
// Messages are the wire format of wire.h, one per fi_send into receive
// buffers of kRecvSize bytes the worker keeps posted. A message longer than
// that is announced by a kLargeFrame (16 bytes, not a wire message) and then
// sent tagged; the receiver posts a directed tagged receive of the announced
// length (at most kMaxLarge). Bulk above the inline limit rides tagged
// messages matched by directed receives on the destination buffer:
//   bulk out (client -> server): the client sends its buffer tagged
//     kTagBulkOut | request id after the request; the server's Pull posts the
//     receive into its buffer (or, when the handler replies without pulling,
//     into a scratch buffer, so the client's send completes);
//   bulk in (server -> client): the client posts the receive on its bulk-in
//     buffer before it sends the request; the server's Push sends tagged
//     kTagPush | request id.
// A directed receive matches only messages from the connection's address, so
// one peer cannot place bytes into a buffer offered to another.
//
// Where the provider offers FI_RMA (tcp;ofi_rxm, verbs;ofi_rxm; never shm)
// and the hello-ack says the server takes it, bulk above the inline limit
// moves one-sided instead (ofi/rma.cc): the client registers its buffer on
// its worker's domain (remote read for bulk out, remote write for bulk in;
// cached) and sends the key and address in a kRma descriptor; the server
// fi_reads (Pull) or fi_writes (Push) against the connection's own address
// only, then replies.
#pragma once

#include <rdma/fabric.h>

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
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "transport/connection_auth.h"
#include "transport/ofi/fabric.h"
#include "transport/transport.h"
#include "transport/wire.h"
#include "transport/worker_impl.h"

struct fid_domain;
struct fid_mr;
struct fid_ep;
struct fid_av;
struct fid_cq;

namespace ros2::transport::ofi {

inline constexpr size_t kRecvSize = 64 * 1024;  // one posted receive buffer
inline constexpr size_t kRecvBuffers = 64;
// The longest message: header, capability, descriptors, status, the largest
// payload and inline section, and a trailer.
inline constexpr size_t kMaxLarge = wire::kHeaderSize + wire::kMaxCapability + 2 * (wire::kBulkDescriptorSize + 64) +
                                    wire::kMaxStatusMessage + wire::kMaxPayload + wire::kMaxInline +
                                    wire::kIntegrityTrailerSize;
inline constexpr uint32_t kFrameMagic = 0x4c49464f;  // "OFIL": a large-message announcement
inline constexpr size_t kFrameSize = 16;             // magic u32, length u32, tag u64
inline constexpr uint64_t kTagKindMask = uint64_t{3} << 62;
inline constexpr uint64_t kTagLarge = uint64_t{1} << 62;
inline constexpr uint64_t kTagBulkOut = uint64_t{2} << 62;
inline constexpr uint64_t kTagPush = uint64_t{3} << 62;
inline uint64_t TagOf(uint64_t kind, uint64_t id) {
  return kind | (id & ~kTagKindMask);
}

// The bytes of an outgoing message: grown without zeroing what it grows by,
// since the encoder writes every byte right after (a batch entry carrying 4
// KiB of bulk cost as much to zero as to copy). Elements are default-, not
// value-initialised; everything else is std::vector's.
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using MessageBytes = std::vector<uint8_t, DefaultInitAllocator<uint8_t>>;
// The rkey section of an ofi kRma descriptor: the u64 key and the u64 virtual
// address the registration starts at, little-endian. The descriptor's address
// is the buffer's own; a provider whose keys name offsets (no
// FI_MR_VIRT_ADDR: tcp;ofi_rxm) is given address - start.
inline constexpr size_t kRmaKeySize = 16;
// The longest one-sided transfer a server takes from one descriptor.
inline constexpr uint64_t kMaxRmaBulk = uint64_t{1} << 30;

// A client buffer registered for remote access on a worker's domain (rma.cc).
// Shared by the worker's cache (only registrations of memory the transport
// allocated, with its region) and the calls that name it; fi_close with the
// last reference.
struct OfiRegistration {
  OfiRegistration() = default;
  OfiRegistration(const OfiRegistration&) = delete;
  OfiRegistration& operator=(const OfiRegistration&) = delete;
  ~OfiRegistration();
  fid_mr* mr = nullptr;
  const std::byte* base = nullptr;
  uint64_t length = 0;
  uint64_t access = 0;  // FI_REMOTE_READ and/or FI_REMOTE_WRITE
  uint64_t key = 0;
  uint64_t last_use = 0;
  // A cached registration: the transport-allocated region it covers, held
  // so that the memory stays mapped while the key can name it.
  std::shared_ptr<const MemoryRegion> region;
};

class OfiWorker;

// A connection: the transport's Connection (what IncomingRequest reads) and
// the peer's address in this worker's address vector.
struct OfiConnection : Connection {
  OfiConnection() = default;
  OfiConnection(const OfiConnection&) = delete;
  OfiConnection& operator=(const OfiConnection&) = delete;
  ~OfiConnection();  // closes the pidfd (worker.cc)
  fi_addr_t addr = FI_ADDR_UNSPEC;
  bool detached = false;  // the worker is gone: the endpoint only reports its status
  // Bulk above the inline limit moves by fi_read / fi_write (the hello-ack's
  // kHelloAckRma on the client; the server's fabric offers RMA).
  bool rma = false;
  // Keepalives: messages received from the peer (any kind), and the count at
  // the last keepalive tick; a connection that heard nothing for a whole
  // interval sends the peer a keepalive frame, whose failed send fails it.
  uint64_t heard = 0;
  uint64_t heard_at_tick = 0;
  // The batch being gathered (Connection::batch's role on this provider, in
  // MessageBytes: kHeaderSize bytes for the header, then the entries).
  MessageBytes batch_bytes;
};
inline constexpr uint32_t kKeepaliveMagic = 0x4b49464f;  // "OFIK": a keepalive frame (kFrameSize bytes)

// One libfabric operation in flight; `ctx` first, so a completion's
// op_context is the Op.
struct Op {
  fi_context ctx{};
  enum class Kind : uint8_t { kRecv, kSend, kLargeRecv, kBulkSend, kBulkRecv } kind = Kind::kSend;
  size_t index = 0;    // kRecv: which posted buffer
  MessageBytes bytes;  // kSend, kLargeRecv: the message; kBulkRecv discard: scratch
  fi_addr_t from = FI_ADDR_UNSPEC;
  // Runs with the result (and bytes received); kBulkSend, kBulkRecv, kSend.
  std::function<void(const Status&, uint64_t)> done;
  bool cancelled = false;
  // Sends: what goes where (`bytes`, or the caller's buffer for tagged
  // bulk), and, while queued behind an EAGAIN, when to give up.
  fi_addr_t to = FI_ADDR_UNSPEC;
  bool tagged = false;
  uint64_t tag = 0;
  const void* data = nullptr;
  size_t len = 0;
  Clock::time_point give_up_at;
  std::chrono::milliseconds patience{0};
  // A failed send fails this connection (0: none); with resend_once, a
  // message the provider failed goes once more first (SendMessage).
  uint64_t fail_connection = 0;
  bool resend_once = false;
};

// A client call (a slot in OfiWorker::calls_).
struct OfiCall {
  uint32_t generation = 0;
  ReplyCallback done;  // set while live
  uint64_t connection_id = 0;
  Clock::time_point deadline;
  std::span<std::byte> bulk_in;
  Op* push_recv = nullptr;  // the tagged receive posted on bulk_in, until it completes
  uint64_t push_received = 0;
  bool push_ok = false;
  bool bulk_out_sending = false;  // the tagged bulk-out send has not completed
  bool reply_arrived = false;
  bool finished = false;  // the result is decided; waiting for the receive / send above
  Status status;
  std::vector<uint8_t> reply_payload;
  uint64_t pushed = 0;
  // RMA bulk: the registrations the request names, held until the call ends.
  std::shared_ptr<OfiRegistration> out_reg, in_reg;
};

class OfiEndpoint;

class OfiWorker final : public Worker, public RequestBackend {
 public:
  OfiWorker(Context& context, std::string name);
  ~OfiWorker() override;
  Status Init();

  // Worker.
  std::span<const uint8_t> address() const override { return address_; }
  Result<std::shared_ptr<Endpoint>> Connect(std::span<const uint8_t> peer_address) override;
  Status RegisterHandler(uint16_t opcode, RequestHandler handler) override;
  void SetPeerLostHandler(std::function<void(uint64_t, const Status&)> handler) override {
    peer_lost_handler_ = std::move(handler);
  }
  void SetSessionKeyLookup(SessionKeyLookup lookup) override { session_key_lookup_ = std::move(lookup); }
  int Progress() override;
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
  const WorkerStats& stats() const override { return stats_; }
  ServedConnections served_connections() const override;
  const std::string& name() const override { return name_; }
  Context& context() const override { return context_; }

  // RequestBackend (server.cc).
  void Pull(IncomingRequest::State* s, std::span<std::byte> dst, Completion done) override;
  void Push(IncomingRequest::State* s, std::span<const std::byte> src, Completion done) override;
  void Reply(IncomingRequest::State* s, const Status& status, std::span<const uint8_t> payload) override;
  void Release(IncomingRequest::State* s) override;

  // ---- shared by the ofi implementation files ----
  const TransportOptions& options() const { return context_.options(); }
  OfiConnection* FindConnection(uint64_t id);
  // Encodes `msg`, seals it on a keyed connection, sends it (framed as a
  // large message when longer than kRecvSize). `done` (optional) runs when
  // the send completed. With `resend_once`, a send the provider fails is
  // made once more before the connection fails (the reply to a request whose
  // RMA the peer's provider refused, closing the connection under it).
  Status SendMessage(OfiConnection& conn, const wire::Message& msg,
                     std::function<void(const Status&, uint64_t)> done = nullptr, bool resend_once = false);
  Status SendBytes(fi_addr_t to, MessageBytes bytes, std::function<void(const Status&, uint64_t)> done);
  // Sends op->bytes (an op from NewOp, whose completion the worker handles).
  Status SendOp(fi_addr_t to, Op* op);
  // Ops come from a pool (no allocation per message once warm; their byte
  // buffers keep their capacity) and return to it when they complete.
  Op* NewOp(Op::Kind kind);
  void FreeOp(Op* op);
  // Tagged send of `data` / directed tagged receive into `dst`.
  Status SendTagged(fi_addr_t to, uint64_t tag, std::span<const std::byte> data,
                    std::function<void(const Status&, uint64_t)> done);
  Result<Op*> RecvTagged(fi_addr_t from, uint64_t tag, std::span<std::byte> dst,
                         std::function<void(const Status&, uint64_t)> done);
  void FailConnection(uint64_t id, const Status& why, bool count_as_lost, bool send_bye);
  // fi_av_insert of a peer's libfabric name, from a copy this worker keeps
  // until it closes (libfabric 1.17's shm provider keeps a pointer to the
  // name it was given as the key of its name map).
  bool InsertAddress(std::span<const uint8_t> name, fi_addr_t* out);
  // The shm door (door.cc): a server's socket for hellos, opened in Init on
  // shm; a client's hello to the peer named `peer_name`; Housekeeping's read.
  Status OpenDoor(std::span<const uint8_t> own_name);
  static Status KnockOnDoor(std::span<const uint8_t> peer_name, std::span<const uint8_t> hello);
  void ReadDoor();

  // Batches (batch.cc): appends `msg` to conn's batch (flushing it first when
  // `msg` would not fit), or sends it alone when it cannot ride a batch
  // (tagged bulk, or longer than batch_limit); FlushBatch sends conn's batch
  // (one entry as the plain message, more as a kBatch).
  Status SendOrBatch(OfiConnection& conn, const wire::Message& msg);
  void FlushBatch(OfiConnection& conn);
  void FlushPendingBatches();

  // Client (client.cc).
  Status StartCall(OfiConnection& conn, uint16_t opcode, std::span<const uint8_t> payload, const CallOptions& options,
                   ReplyCallback done);
  Status AuthenticateSession(OfiConnection& conn, const SessionCredential& cred);
  uint64_t max_payload() const;

  // RMA bulk (rma.cc). Client: a registration for a call's bulk buffer
  // [p, p + n) with `access`: the cached registration of the whole of
  // `region` when the transport allocated it (Context::AllocateMemory) and it
  // covers the buffer; otherwise a registration of the buffer alone, for this
  // call only (fi_mr_reg with a random key; closed when the call lets it go).
  // DescribeRma: the descriptor's address and key for a buffer in it.
  Result<std::shared_ptr<OfiRegistration>> RegisterBulk(const void* p, uint64_t n,
                                                        const std::shared_ptr<const MemoryRegion>& region,
                                                        uint64_t access);
  void DescribeRma(const OfiRegistration& reg, const void* p, wire::BulkDescriptor& d, uint8_t* key_out) const;
  // fi_mr_reg calls made (cached and per call), for tests.
  uint64_t registrations_made() const { return registrations_made_; }

 private:
  friend class OfiEndpoint;
  void PostRecv(size_t index);
  // After an EAGAIN: progress, and whether to try again (within send_patience_ of `start`).
  bool Retry(Clock::time_point start);
  std::chrono::milliseconds send_patience_{500};
  // Sends (worker.cc): posted at once when the provider takes them; a send
  // it answers EAGAIN, and every later one to the same peer, waits in that
  // peer's queue (in order) until Progress posts it, or fails once it waited
  // send_patience_. A send never waits inside its caller, so no completion
  // (no reply callback) runs inside Endpoint::Call or a handler's Reply.
  Status Submit(Op* op, fi_addr_t to, const void* data, size_t len);
  ssize_t PostSend(Op* op);
  void FlushSendQueues();
  std::unordered_map<fi_addr_t, std::deque<Op*>> send_queues_;
  uint64_t queued_sends_ = 0;
  static constexpr size_t kOpPoolSize = 256;
  std::vector<Op*> op_pool_;
  int DrainCompletions();
  // Progress without reading the clock (no housekeeping): the spin's poll.
  int ProgressNoClock();
  void MaybeHousekeeping(Clock::time_point now);
  void OnCompletion(Op* op, const Status& st, uint64_t len, fi_addr_t from);
  void OnMessage(std::span<const uint8_t> bytes, fi_addr_t from);
  void OnWireMessage(std::span<const uint8_t> bytes, fi_addr_t from);
  void Housekeeping(Clock::time_point now);
  // Dead-peer detection (worker.cc): same-host peers through a pidfd on the
  // pid of their address, the others through keepalive frames sent on idle
  // connections every keepalive_interval.
  void WatchPeer(OfiConnection& conn);
  void Keepalive(Clock::time_point now);

  // Server (server.cc).
  void HandleHello(const wire::Message& msg, fi_addr_t from);
  void HandleBatch(OfiConnection& conn, const wire::Message& msg);
  // A batch that breaks a rule of DecodeBatch (or comes the wrong way): a
  // server closes the connection with a bye naming the rule, a client fails it.
  void CloseForMalformedBatch(OfiConnection& conn, std::string_view why);
  // A message that does not decode: a request, or a batch, naming the
  // sender's own server-side connection is refused by name (an error reply
  // to the request; the batch's connection closed as above); anything else
  // is only counted.
  void RefuseMalformed(std::span<const uint8_t> bytes, fi_addr_t from, const Status& why);
  Status AdmitHello();
  void HandleRequest(OfiConnection& conn, const wire::Message& msg, std::span<const uint8_t> bytes);
  void HandleAuthenticate(OfiConnection& conn, const wire::Message& msg);
  Status AuthenticateConnection(OfiConnection& conn, const wire::Message& msg);
  void ReplyError(OfiConnection& conn, uint64_t request_id, const Status& why);
  void ExpireUnauthenticated(Clock::time_point now);
  IncomingRequest::State* AcquireState();

  // Integrity (server.cc): as connection_auth.cc does for UCX connections.
  Status Seal(OfiConnection& conn, MessageBytes& bytes);
  Status CheckIntegrity(OfiConnection& conn, const wire::Message& msg, std::span<const uint8_t> bytes);

  // RMA bulk (rma.cc). Server: whether a kRma descriptor may be served on
  // `conn` (the connection takes RMA, the key is kRmaKeySize bytes, the
  // length at most kMaxRmaBulk, the range does not wrap); then the transfer:
  // fi_read (Pull) or fi_write (Push) of `local` against conn's address only,
  // in bulk_chunk_size pieces with at most bulk_chunks_in_flight at once;
  // `done` runs once all completed (or with the first failure, naming the
  // key). A Reply given while a write is in flight leaves when it completes.
  Status CheckRmaDescriptor(const OfiConnection& conn, uint64_t request_id, const wire::BulkDescriptor& d) const;
  Status StartRma(IncomingRequest::State* s, const wire::BulkDescriptor& d, std::byte* local, uint64_t len, bool write,
                  Completion done);
  struct RmaTransfer;
  void IssueRma(const std::shared_ptr<RmaTransfer>& t);
  void SendReply(IncomingRequest::State* s, const Status& status, std::span<const uint8_t> payload);

  // Client (client.cc).
  void HandleHelloAck(const wire::Message& msg, fi_addr_t from);
  void HandleReply(OfiConnection& conn, const wire::Message& msg);
  void FinishCall(uint32_t slot);
  void CompleteCall(uint32_t slot, const Status& status, std::span<const uint8_t> payload, uint64_t pushed);
  void ExpireDeadlines(Clock::time_point now);
  void CompactDeadlines();
  void OnPushDone(uint32_t slot, uint32_t generation, const Status& st, uint64_t len);
  void OnBulkOutSent(uint32_t slot, uint32_t generation, const Status& st);

  Context& context_;
  std::string name_;
  fid_domain* domain_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  int cq_fd_ = -1;
  // The provider has no wait fd for the queue (shm in libfabric 1.17): the
  // worker polls, napping between polls for `nap_` (doubling while idle from
  // kMinNap to kMaxNap); an epoll loop on event_fd() is woken only by
  // Signal(), so NextDeadline() is at most the nap.
  bool poll_only_ = false;
  static constexpr std::chrono::microseconds kMinNap{20};
  static constexpr std::chrono::microseconds kMaxNap{1000};
  std::chrono::microseconds nap_{kMinNap};
  int epoll_fd_ = -1;
  int signal_fd_ = -1;  // eventfd for Signal()
  std::vector<uint8_t> address_;
  std::array<uint8_t, 16> boot_id_{};
  std::vector<std::vector<uint8_t>> recv_buffers_;
  std::vector<Op> recv_ops_;
  uint64_t ops_in_flight_ = 0;
  // Of those, tagged sends and receives and RMA chunks (bulk, large
  // messages): while any is in flight a poll-only worker naps the least.
  uint64_t transfers_in_flight_ = 0;
  uint64_t next_large_tag_ = 0;
  uint64_t last_connection_id_ = 0;
  std::vector<uint8_t> scratch_;               // discarded bulk-out bytes land here
  std::deque<std::vector<uint8_t>> av_names_;  // InsertAddress's copies, NUL-terminated
  int door_fd_ = -1;                           // shm: the door (door.cc)
  std::vector<uint8_t> door_buffer_;
  // RMA bulk (rma.cc): the client's cached registrations (at most
  // registration_cache_entries, least recently used dropped), and the
  // server's requests whose Push (fi_write) is in flight, with the reply
  // given meanwhile.
  std::vector<std::shared_ptr<OfiRegistration>> registrations_;
  uint64_t registration_clock_ = 0;
  uint64_t registrations_made_ = 0;
  std::array<uint64_t, 128> random_keys_{};  // unused keys from one getrandom
  size_t random_keys_left_ = 0;
  Result<std::shared_ptr<OfiRegistration>> NewRegistration(const void* p, uint64_t n, uint64_t access);
  // Drops the cached registrations whose region only the cache still holds
  // (from RegisterBulk and Housekeeping).
  void SweepRegistrations();
  struct HeldReply {
    bool given = false;
    Status status;
    std::vector<uint8_t> payload;
  };
  std::unordered_map<IncomingRequest::State*, HeldReply> writes_in_flight_;
  // Requests whose transfer failed while their handler replies: the reply
  // leaves alone (not batched), with SendMessage's resend_once.
  std::unordered_set<IncomingRequest::State*> rma_failed_;
  // Their replies, when the provider failed the send: tried again from
  // Housekeeping (SendAgain, rma.cc) every few ms, a few times, before the
  // connection fails.
  struct Resend {
    uint64_t connection = 0;
    MessageBytes bytes;
    int attempts = 0;
    Clock::time_point not_before;
  };
  std::vector<Resend> resends_;
  void SendAgain(Clock::time_point now);
  WorkerStats stats_;
  std::array<std::atomic<uint64_t>, 3> served_{};
  std::unordered_map<uint64_t, std::shared_ptr<OfiConnection>> connections_;
  std::vector<RequestHandler> handlers_;
  std::function<void(uint64_t, const Status&)> peer_lost_handler_;
  SessionKeyLookup session_key_lookup_;
  std::vector<std::unique_ptr<IncomingRequest::State>> state_pool_;
  std::deque<OfiCall> calls_;
  std::vector<uint32_t> free_calls_;
  uint32_t live_calls_ = 0;
  using DeadlineEntry = std::pair<Clock::time_point, uint64_t>;
  std::priority_queue<DeadlineEntry, std::vector<DeadlineEntry>, std::greater<>> deadlines_;
  std::vector<std::pair<uint64_t, Status>> deferred_failures_;
  Clock::time_point next_housekeeping_{};
  uint32_t waits_ = 0;          // Wait calls (the pinned check runs every 4096th)
  bool thread_pinned_ = false;  // the waiting thread is pinned to one CPU: busy-poll first
  Clock::time_point next_keepalive_{};
  // Connections with a batch not yet sent (corked client endpoints; replies
  // under SetReplyBatching): flushed by Progress, PrepareSleep, FlushBatches.
  std::vector<uint64_t> pending_batches_;
  bool batch_replies_ = false;
  // DecodeBatch's output for received batches (reused; a batch received while
  // one is dispatched uses its own).
  wire::BatchScratch batch_scratch_;  // received batches' entries (HandleBatch)
  bool in_destructor_ = false;
  int progress_depth_ = 0;  // as WorkerImpl's: Connect and RunUntil refuse inside a completion
};

// Client-facing handle of a client-side OfiConnection.
class OfiEndpoint final : public Endpoint {
 public:
  OfiEndpoint(OfiWorker* worker, std::shared_ptr<OfiConnection> conn) : worker_(worker), conn_(std::move(conn)) {}
  ~OfiEndpoint() override { Close(); }
  Status Call(uint16_t opcode, std::span<const uint8_t> payload, const CallOptions& options,
              ReplyCallback done) override;
  Result<ReplyMessage> CallSync(uint16_t opcode, std::span<const uint8_t> payload, const CallOptions& options) override;
  Status status() const override { return conn_->status; }
  const EndpointInfo& info() const override { return conn_->info; }
  uint64_t max_payload() const override { return worker_->max_payload(); }
  uint32_t outstanding() const override { return conn_->outstanding; }
  void Cork() override { conn_->corked = true; }
  void Uncork() override;
  Status AuthenticateSession(const SessionCredential& session) override;
  void Close() override;

 private:
  OfiWorker* worker_;
  std::shared_ptr<OfiConnection> conn_;
};

}  // namespace ros2::transport::ofi
