// WorkerImpl: the ucp_worker and its address blob, message dispatch, sends and
// batches, adaptive progress and deferred failures. Connections and the hello
// exchange are in worker_connections.cc.
#include <sched.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "common/log.h"
#include "transport/connection_auth.h"
#include "transport/ofi/fabric.h"
#include "transport/spin_wait.h"
#include "transport/ucx_util.h"
#include "transport/worker_impl.h"

namespace ros2::transport {
namespace {

ucs_status_t AmRecvCallback(void* arg, const void* header, size_t header_length, void* data, size_t length,
                            const ucp_am_recv_param_t* param) {
  return static_cast<WorkerImpl*>(arg)->OnActiveMessage(header, header_length, data, length, param);
}

void SendCallback(void* request, ucs_status_t status, void* user_data) {
  auto* buf = static_cast<SendBuffer*>(user_data);
  if (buf->done) {
    Completion done = std::move(buf->done);
    buf->done = nullptr;
    done(status == UCS_OK ? Status::Ok() : UcsError("transport: send", status));
  }
  buf->worker->UnlinkInFlight(buf);
  buf->worker->ReleaseSendBuffer(buf);
  ucp_request_free(request);
}

}  // namespace

WorkerImpl::WorkerImpl(Context& context, std::string name) : context_(context), name_(std::move(name)) {}

Result<std::unique_ptr<Worker>> Context::CreateWorker(std::string_view name) {
  if (ofi_) return ofi::CreateWorker(*this, name);  // ofi/worker.cc
  auto w = std::make_unique<WorkerImpl>(*this, std::string(name));
  ROS2_RETURN_IF_ERROR(w->Init());
  return std::unique_ptr<Worker>(std::move(w));
}

Status WorkerImpl::Init() {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_NAME;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  params.name = name_.c_str();
  ucs_status_t st = ucp_worker_create(static_cast<ucp_context_h>(context_.ucp_handle()), &params, &worker_);
  if (st != UCS_OK) return UcsError(fmt::format("transport: worker '{}': ucp_worker_create", name_), st);

  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS | UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  st = ucp_worker_query(worker_, &attr);
  if (st != UCS_OK) return UcsError(fmt::format("transport: worker '{}': ucp_worker_query", name_), st);
  max_am_header_ = attr.max_am_header;
  boot_id_ = wire::LocalHostId();
  wire::WorkerAddress wa;
  wa.boot_id = boot_id_;
  wa.pid = static_cast<int32_t>(getpid());
  wa.ucx_address =
      std::span<const uint8_t>(static_cast<const uint8_t*>(static_cast<void*>(attr.address)), attr.address_length);
  address_.resize(wire::EncodedAddressSize(wa));
  auto enc = wire::EncodeAddress(wa, address_);
  ucp_worker_release_address(worker_, attr.address);
  if (!enc.ok()) return enc.status();

  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                  UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  hp.id = kAmId;
  hp.cb = AmRecvCallback;
  hp.arg = this;
  hp.flags = UCP_AM_FLAG_WHOLE_MSG;
  st = ucp_worker_set_am_recv_handler(worker_, &hp);
  if (st != UCS_OK) return UcsError(fmt::format("transport: worker '{}': set AM handler", name_), st);

  st = ucp_worker_get_efd(worker_, &ucx_efd_);
  if (st != UCS_OK) return UcsError(fmt::format("transport: worker '{}': ucp_worker_get_efd", name_), st);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  pid_epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0 || pid_epoll_fd_ < 0) return Status::FromErrno(errno, "transport: epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, ucx_efd_, &ev) != 0)
    return Status::FromErrno(errno, "transport: epoll add efd");
  ev.data.u64 = 1;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, pid_epoll_fd_, &ev) != 0) {
    return Status::FromErrno(errno, "transport: epoll add pid epoll");
  }
  return Status::Ok();
}

WorkerImpl::~WorkerImpl() {
  in_destructor_ = true;
  // Fail every connection (runs outstanding callbacks with Cancelled) and close eps.
  std::vector<uint64_t> ids;
  for (auto& [id, conn] : connections_) ids.push_back(id);
  for (uint64_t id : ids)
    FailConnection(id, Status::Cancelled(fmt::format("transport: worker '{}' shut down", name_)), false);
  if (worker_ != nullptr) {
    for (int i = 0; i < 10000 && !closing_.empty(); ++i) {
      ucp_worker_progress(worker_);
      ReapClosing();
    }
    for (void* req : closing_) ucp_request_free(req);
    closing_.clear();
  }
  for (auto& buf : send_pool_) buf.reset();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (pid_epoll_fd_ >= 0) close(pid_epoll_fd_);
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  // Sends UCX never completed (queued to a dead peer) were purged with the worker.
  while (in_flight_head_ != nullptr) {
    SendBuffer* buf = in_flight_head_;
    UnlinkInFlight(buf);
    std::unique_ptr<SendBuffer> owned(buf);
  }
}

Clock::time_point CoarseNow() {
  static const std::chrono::nanoseconds tick = [] {
    timespec res{};
    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    return std::chrono::seconds(res.tv_sec) + std::chrono::nanoseconds(res.tv_nsec);
  }();
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(ts.tv_sec) +
                                                                       std::chrono::nanoseconds(ts.tv_nsec) + tick));
}

void WorkerImpl::SendByeOn(ucp_ep_h ep, uint64_t connection_id, std::string_view reason) {
  if (ep == nullptr || connection_id == 0) return;
  wire::Message bye;
  bye.kind = wire::Kind::kBye;
  bye.connection_id = connection_id;
  bye.payload = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(reason.data()),
                                         std::min<size_t>(reason.size(), wire::kMaxStatusMessage));
  SendBuffer* buf = AcquireSendBuffer();
  buf->bytes.resize(wire::EncodedSize(bye));
  if (!wire::Encode(bye, buf->bytes).ok()) {
    ReleaseSendBuffer(buf);
    return;
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.cb.send = SendCallback;
  param.user_data = buf;
  param.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;
  ucs_status_ptr_t req = ucp_am_send_nbx(ep, kAmId, nullptr, 0, buf->bytes.data(), buf->bytes.size(), &param);
  if (UCS_PTR_IS_PTR(req)) {
    LinkInFlight(buf);
  } else {
    ReleaseSendBuffer(buf);
  }
}

ucs_status_t WorkerImpl::OnActiveMessage(const void* header, size_t header_length, void* data, size_t length,
                                         const ucp_am_recv_param_t* param) {
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  // The message is the AM header when bulk rides as AM data, else the AM data.
  std::span<const uint8_t> bytes;
  if (header_length > 0) {
    bytes = std::span<const uint8_t>(static_cast<const uint8_t*>(header), header_length);
  } else if (!rndv) {
    bytes = std::span<const uint8_t>(static_cast<const uint8_t*>(data), length);
  }
  wire::Message msg;
  if (Status decoded = wire::Decode(bytes, msg); !decoded.ok()) {
    ++stats_.malformed_messages;
    if (const uint8_t version = wire::PeekVersion(bytes); version != 0 && version != wire::kVersion) {
      // A peer of another version (its Connect fails on our address blob's
      // version; this is one that ignored it): say so once, loudly.
      if (stats_.wire_version_mismatches++ == 0) {
        ROS2_LOG_WARN("transport: worker '{}' dropped a message of data-plane wire version {} (this side speaks {})",
                      name_, version, wire::kVersion);
      }
    } else {
      ROS2_LOG_DEBUG("transport: worker '{}' dropped a message: {}", name_, decoded.ToString());
      const ucp_ep_h sender = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0 ? param->reply_ep : nullptr;
      AnswerMalformed(bytes, sender, decoded);
    }
    return rndv ? UCS_ERR_INVALID_PARAM : UCS_OK;
  }
  const bool carries_bulk = header_length > 0;
  // The endpoint the message came in on (every message is sent with
  // UCP_AM_SEND_FLAG_REPLY): a message acts only on the connection that
  // endpoint opened, whatever connection_id it names.
  ucp_ep_h from = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0 ? param->reply_ep : nullptr;
  switch (msg.kind) {
    case wire::Kind::kHello:
      if (carries_bulk) break;
      HandleHello(msg, from);
      return UCS_OK;
    case wire::Kind::kHelloAck:
      if (carries_bulk) break;
      HandleHelloAck(msg, from);
      return UCS_OK;
    case wire::Kind::kReply: {
      if (carries_bulk) break;
      Connection* conn = FindConnection(msg.connection_id);
      if (conn != nullptr && conn->peer_ep != from) {
        RefuseMisdirected(msg, from);
        return UCS_OK;
      }
      if (conn != nullptr && RefuseUnsealed(*conn, msg, bytes)) return UCS_OK;
      HandleReply(msg);  // an unknown connection counts as a stale reply there
      return UCS_OK;
    }
    case wire::Kind::kPushData: {
      if (!carries_bulk) break;
      Connection* conn = FindConnection(msg.connection_id);
      if (conn != nullptr && conn->peer_ep != from) {
        RefuseMisdirected(msg, from);
        return rndv ? UCS_ERR_CANCELED : UCS_OK;
      }
      if (conn != nullptr && RefuseUnsealed(*conn, msg, bytes)) return rndv ? UCS_ERR_CANCELED : UCS_OK;
      return HandlePushData(msg, data, length, rndv);
    }
    case wire::Kind::kBatch: {
      if (carries_bulk) break;
      Connection* conn = FindConnection(msg.connection_id);
      if (conn != nullptr && conn->peer_ep == from && RefuseUnsealed(*conn, msg, bytes)) return UCS_OK;
      HandleBatch(msg, from);
      return UCS_OK;
    }
    case wire::Kind::kBye: {
      if (carries_bulk) break;
      // A client still waiting for its hello ack does not know the server's
      // endpoint yet: a refusal of its hello arrives as a bye.
      const Connection* pending = FindConnection(msg.connection_id);
      const bool refused_hello =
          pending != nullptr && pending->client_side && pending->remote_id == 0 && from != nullptr;
      Connection* bound = refused_hello ? nullptr : BoundConnection(msg, from);
      if (bound != nullptr && RefuseUnsealed(*bound, msg, bytes)) return UCS_OK;
      if (refused_hello || bound != nullptr) {
        // The payload, if any, is the peer's reason (text).
        std::string_view reason(reinterpret_cast<const char*>(msg.payload.data()),
                                std::min<size_t>(msg.payload.size(), wire::kMaxStatusMessage));
        DeferFailure(
            msg.connection_id,
            Status::Disconnected(reason.empty() ? std::string("transport: peer closed the connection")
                                                : fmt::format("transport: peer closed the connection: {}", reason)));
      }
      return UCS_OK;
    }
    case wire::Kind::kRequest: {
      Connection* conn = BoundConnection(msg, from);
      if (conn == nullptr || RefuseUnsealed(*conn, msg, bytes)) return rndv ? UCS_ERR_INVALID_PARAM : UCS_OK;
      const wire::BulkDescriptor* out = msg.FindBulk(wire::BulkDirection::kOut);
      const bool am_out = out != nullptr && out->transfer == wire::BulkTransfer::kActiveMessage;
      if (conn->client_side) {
        ++stats_.malformed_messages;
        return rndv ? UCS_ERR_INVALID_PARAM : UCS_OK;
      }
      if (am_out != carries_bulk || (am_out && length != out->length)) {
        ++stats_.malformed_messages;
        ReplyError(*conn, msg.request_id,
                   Status::Protocol(fmt::format(
                       "transport: worker '{}' refused request {:#x}: its bulk-out descriptor ({} bytes by active "
                       "message: {}) does not match the data that came with it ({} bytes)",
                       name_, msg.request_id, out != nullptr ? out->length : 0, am_out ? "yes" : "no",
                       carries_bulk ? length : 0)));
        return rndv ? UCS_ERR_INVALID_PARAM : UCS_OK;
      }
      if (rndv && !conn->rendezvous) {
        // Receiving a rendezvous makes UCX unpack the sender's memory key;
        // over shared memory that key names a process and a file the
        // receiver would map (EndpointInfo::PeerKeysBound). Returning
        // without receiving lets UCX drop the data untouched.
        ++stats_.malformed_messages;
        ++stats_.rendezvous_refused;
        ReplyError(*conn, msg.request_id,
                   Status::PermissionDenied(fmt::format(
                       "transport: worker '{}' refused request {:#x} from {}: its bulk rides a rendezvous over {}, "
                       "whose memory keys name shared memory; send it eager or through a shared segment",
                       name_, msg.request_id, conn->peer_name, conn->info.am_transport)));
        return UCS_OK;
      }
      // The message is copied (into a pooled buffer): keeping UCX's persistent
      // receive buffer instead crashed ucp_am_data_release on sysv/posix in
      // UCX 1.13. A rendezvous descriptor is kept until the handler pulls;
      // eager bulk is copied like inline bytes.
      const auto eager = am_out && !rndv ? std::span<const uint8_t>(static_cast<const uint8_t*>(data), length)
                                         : std::span<const uint8_t>();
      const bool descriptor_taken = HandleRequest(*conn, msg, bytes, rndv ? data : nullptr, rndv ? length : 0, eager);
      return descriptor_taken ? UCS_INPROGRESS : UCS_OK;
    }
  }
  ++stats_.malformed_messages;
  return rndv ? UCS_ERR_INVALID_PARAM : UCS_OK;
}

Connection* WorkerImpl::BoundConnection(const wire::Message& msg, ucp_ep_h from) {
  Connection* conn = FindConnection(msg.connection_id);
  if (conn == nullptr) {
    ++stats_.malformed_messages;  // no such connection (any more)
    return nullptr;
  }
  if (conn->peer_ep != from || from == nullptr) {
    RefuseMisdirected(msg, from);
    return nullptr;
  }
  return conn;
}

void WorkerImpl::RefuseMisdirected(const wire::Message& msg, ucp_ep_h from) {
  ++stats_.malformed_messages;
  ++stats_.misdirected_messages;
  // The sender's own connection, if its endpoint opened one here.
  Connection* own = nullptr;
  if (auto it = connection_by_peer_ep_.find(from); from != nullptr && it != connection_by_peer_ep_.end())
    own = FindConnection(it->second);
  const std::string why =
      fmt::format("transport: worker '{}' refused a {} naming connection {:#x}: it arrived on the endpoint of {}",
                  name_, msg.kind == wire::Kind::kRequest ? "request" : "message", msg.connection_id,
                  own != nullptr ? fmt::format("connection {:#x} ({})", own->local_id, own->peer_name)
                                 : std::string("no connection"));
  if (stats_.misdirected_messages == 1 || (stats_.misdirected_messages & (stats_.misdirected_messages - 1)) == 0) {
    ROS2_LOG_WARN("{} ({} such messages so far)", why, stats_.misdirected_messages);
  }
  if (msg.kind != wire::Kind::kRequest || own == nullptr) return;
  // Answer the sender, on its own connection, so its call fails at once
  // (instead of at its deadline) and says why.
  ReplyError(*own, msg.request_id, Status::PermissionDenied(why));
}

void WorkerImpl::ReplyError(Connection& conn, uint64_t request_id, const Status& why) {
  if (conn.client_side || conn.ep == nullptr || conn.remote_id == 0) return;
  wire::Message reply;
  reply.kind = wire::Kind::kReply;
  reply.request_id = request_id;
  reply.connection_id = conn.remote_id;
  reply.status_code = static_cast<uint8_t>(why.code());
  reply.status_message = std::string_view(why.message()).substr(0, wire::kMaxStatusMessage);
  (void)SendMessage(conn, reply, {}, nullptr);
}

void WorkerImpl::AnswerMalformed(std::span<const uint8_t> bytes, ucp_ep_h from, const Status& why) {
  if (from == nullptr) return;
  auto own = [&](uint64_t connection_id) -> Connection* {
    Connection* conn = FindConnection(connection_id);
    return conn != nullptr && conn->peer_ep == from ? conn : nullptr;  // else nothing to answer
  };
  if (const auto header = wire::PeekRequest(bytes)) {
    if (Connection* conn = own(header->connection_id)) {
      ReplyError(*conn, header->request_id,
                 why.WithContext(fmt::format("transport: worker '{}' refused a malformed request", name_)));
    }
    return;
  }
  if (const auto batch = wire::PeekBatchConnection(bytes)) {
    if (Connection* conn = own(*batch)) CloseForMalformedBatch(*conn, why.message());
  }
}

void WorkerImpl::CloseForMalformedBatch(Connection& conn, std::string_view why) {
  const std::string reason = fmt::format("transport: worker '{}' closed connection {:#x} ({}): malformed batch: {}",
                                         name_, conn.local_id, conn.peer_name, why);
  ROS2_LOG_WARN("{}", reason);
  if (conn.client_side) {
    deferred_failures_.emplace_back(conn.local_id, Status::Protocol(reason));  // its calls fail with the reason
    return;
  }
  CloseWithReason(conn, reason, /*in_callback=*/true);
}

// A received batch: every entry is checked before any is acted on, so
// nothing of a malformed batch runs; on the sender's own connection, that
// connection closes naming the rule broken (an honest peer never sends such
// a batch, and its calls in it fail now with the reason instead of at their
// deadlines). Requests are dispatched with reply batching on (replies given
// during the dispatch leave as one batch); replies complete their calls.
void WorkerImpl::HandleBatch(const wire::Message& msg, ucp_ep_h from) {
  std::shared_ptr<Connection> conn = FindConnectionShared(msg.connection_id);
  const wire::DecodedBatch batch(batch_scratch_, msg);
  const auto& count = batch.count;
  const bool requests = batch.requests();
  if (conn == nullptr) {
    ++stats_.malformed_messages;  // no such connection (any more)
    return;
  }
  if ((!count.ok() || requests == conn->client_side) && conn->peer_ep == from && from != nullptr) {
    ++stats_.malformed_messages;
    CloseForMalformedBatch(*conn,
                           !count.ok() ? count.status().message() : std::string("a batch of the wrong direction"));
    return;
  }
  if (!count.ok() || requests == conn->client_side) {
    ++stats_.malformed_messages;  // another peer's connection: dropped, nothing of it runs
    return;
  }
  if (conn->peer_ep != from || from == nullptr) {
    // Another peer's connection: nothing of it runs; each request is refused
    // on the sender's own connection (every entry names the batch's).
    for (size_t i = 0; i < *count; ++i) RefuseMisdirected(batch.msg(i), from);
    return;
  }
  ++stats_.batches_received;
  if (requests) {
    conn->reply_batching = true;
    for (size_t i = 0; i < *count && conn->ep != nullptr; ++i) {
      HandleRequest(*conn, batch.msg(i), batch.bytes(i), nullptr, 0);
    }
    conn->reply_batching = false;
    if (conn->ep != nullptr) FlushBatch(*conn);
  } else {
    for (size_t i = 0; i < *count; ++i) HandleReply(batch.msg(i));
  }
}

Status WorkerImpl::SendOrBatch(Connection& conn, const wire::Message& msg) {
  const uint64_t limit = context_.options().batch_limit;
  const size_t entry = wire::BatchEntrySize(msg);
  if (wire::kHeaderSize + entry > limit || !wire::Batchable(msg)) {
    FlushBatch(conn);  // keep the order: what was batched goes first
    return SendMessage(conn, msg, {}, nullptr);
  }
  if (conn.batch_count > 0 && (conn.batch.size() + entry > limit || conn.batch_count == wire::kMaxBatchMessages))
    FlushBatch(conn);
  if (conn.batch_count == 0) {
    // The storage is a pooled send buffer's (FlushBatch swaps them): sized for
    // a whole batch once, it is never reallocated while entries are appended.
    if (conn.batch.capacity() < limit) conn.batch.reserve(limit);
    conn.batch.resize(wire::kHeaderSize);
    if (!conn.reply_batching) pending_batches_.push_back(conn.local_id);
  }
  const size_t at = conn.batch.size();
  conn.batch.resize(at + entry);
  auto n = wire::EncodeBatchEntry(msg, std::span<uint8_t>(conn.batch).subspan(at));
  if (!n.ok()) {
    conn.batch.resize(at);
    return n.status();
  }
  ++conn.batch_count;
  // Replies of large transfers are not all held back for the rest of their
  // batch: once the gathered replies' requests have pushed batch_flush_bytes,
  // they leave, and the client checks those bytes while this thread serves
  // the others (they are still in a cache then).
  conn.batch_pushed += msg.pushed_bytes;
  if (conn.batch_pushed >= context_.options().batch_flush_bytes) FlushBatch(conn);
  return Status::Ok();
}

void WorkerImpl::FlushBatch(Connection& conn) {
  if (conn.batch_count == 0) return;
  const uint32_t count = conn.batch_count;
  conn.batch_count = 0;
  conn.batch_pushed = 0;
  if (conn.ep == nullptr) {
    conn.batch.clear();
    return;
  }
  SendBuffer* buf = AcquireSendBuffer();
  buf->bytes.swap(conn.batch);  // the batch's storage goes out as is; the pooled buffer's becomes the next batch
  conn.batch.clear();
  // One entry goes as the plain message it holds; more under a batch header.
  size_t skip = 0;
  if (count == 1) {
    skip = wire::kHeaderSize + wire::kBatchEntryPrefix;
  } else {
    Status st = wire::EncodeBatchHeader(conn.remote_id, buf->bytes.size() - wire::kHeaderSize, buf->bytes);
    if (!st.ok()) {  // cannot happen for batches SendOrBatch built; fail loudly rather than drop calls silently
      ReleaseSendBuffer(buf);
      DeferFailure(conn.local_id, st.WithContext("transport: batch"));
      return;
    }
  }
  if (Sealing(conn)) {
    if (Status st = SealSendBuffer(conn, *buf, skip, {}, false); !st.ok()) {
      ReleaseSendBuffer(buf);
      return DeferFailure(conn.local_id, st);
    }
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.cb.send = SendCallback;
  param.user_data = buf;
  param.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;
  if (count > 1) {
    ++stats_.batches_sent;
    stats_.batched_messages += count;
  }
  ucs_status_ptr_t req =
      ucp_am_send_nbx(conn.ep, kAmId, nullptr, 0, buf->bytes.data() + skip, buf->bytes.size() - skip, &param);
  if (UCS_PTR_IS_PTR(req)) {
    LinkInFlight(buf);
    return;
  }
  ReleaseSendBuffer(buf);
  if (UCS_PTR_STATUS(req) != UCS_OK) {
    DeferFailure(conn.local_id, UcsError(fmt::format("transport: send of a batch of {} to {}", count, conn.peer_name),
                                         UCS_PTR_STATUS(req)));
  }
}

void WorkerImpl::FlushPendingBatches() {
  std::vector<uint64_t> pending;
  pending.swap(pending_batches_);
  for (uint64_t id : pending) {
    if (Connection* conn = FindConnection(id)) FlushBatch(*conn);  // a failed one dropped its batch
  }
  pending.clear();
  if (pending_batches_.empty()) pending_batches_.swap(pending);  // keep the capacity
}

Status WorkerImpl::SendMessage(Connection& conn, const wire::Message& msg, std::span<const std::byte> bulk,
                               Completion done, std::shared_ptr<void> keep_alive, std::vector<uint8_t>* inline_owner) {
  if (conn.ep == nullptr) return conn.status.ok() ? Status::Disconnected("transport: endpoint closed") : conn.status;
  SendBuffer* buf = AcquireSendBuffer();  // owned by UCX's callback or returned to the pool below
  // An eager message whose inline bytes the sender hands over goes as an iovec
  // (encoded head + those bytes): one copy less (UCX copies both parts straight
  // into the transport).
  const bool iov = bulk.empty() && inline_owner != nullptr && !msg.inline_data.empty() &&
                   msg.inline_data.data() == inline_owner->data() && msg.inline_data.size() == inline_owner->size();
  buf->bytes.resize(iov ? wire::EncodedHeadSize(msg) : wire::EncodedSize(msg));
  auto enc = iov ? wire::EncodeHead(msg, buf->bytes) : wire::Encode(msg, buf->bytes);
  const std::span<const uint8_t> tail = iov ? msg.inline_data : std::span<const uint8_t>();
  const Status sealed = enc.ok() && Sealing(conn) ? SealSendBuffer(conn, *buf, 0, tail, iov) : enc.status();
  if (!sealed.ok()) {
    ReleaseSendBuffer(buf);
    return sealed;
  }
  buf->done = std::move(done);
  buf->keep_alive = std::move(keep_alive);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.cb.send = SendCallback;
  param.user_data = buf;
  ucs_status_ptr_t req;
  if (iov) {
    buf->tail.swap(*inline_owner);  // the data pointer moves with the storage
    buf->iov[0] = ucp_dt_iov_t{buf->bytes.data(), buf->bytes.size()};
    buf->iov[1] = ucp_dt_iov_t{buf->tail.data(), buf->tail.size()};
    buf->iov[2] = ucp_dt_iov_t{buf->trailer.data(), buf->trailer.size()};
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
    param.datatype = ucp_dt_make_iov();
    param.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;
    req = ucp_am_send_nbx(conn.ep, kAmId, nullptr, 0, buf->iov.data(), Sealing(conn) ? 3 : 2, &param);
  } else if (bulk.empty()) {
    param.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;
    req = ucp_am_send_nbx(conn.ep, kAmId, nullptr, 0, buf->bytes.data(), buf->bytes.size(), &param);
  } else {
    if (buf->bytes.size() > max_am_header_) {
      ReleaseSendBuffer(buf);
      return Status::InvalidArgument(fmt::format("transport: message of {} bytes exceeds the AM header limit {}",
                                                 buf->bytes.size(), max_am_header_));
    }
    // Rendezvous makes the receiver unpack our memory key (and, for a push,
    // makes us unpack the one in the peer's answer): only where keys are
    // bound to the peer (Connection::rendezvous); over shared memory the
    // bytes go eager, in fragments through UCX's FIFO.
    param.flags = (conn.rendezvous ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER) | UCP_AM_SEND_FLAG_REPLY;
    req = ucp_am_send_nbx(conn.ep, kAmId, buf->bytes.data(), buf->bytes.size(), bulk.data(), bulk.size(), &param);
  }
  if (UCS_PTR_IS_PTR(req)) {
    LinkInFlight(buf);
    return Status::Ok();  // SendCallback finishes
  }
  const ucs_status_t st = UCS_PTR_STATUS(req);
  Completion finished = std::move(buf->done);
  ReleaseSendBuffer(buf);
  if (st != UCS_OK) return UcsError(fmt::format("transport: send to {}", conn.peer_name), st);
  if (finished) finished(Status::Ok());
  return Status::Ok();
}

SendBuffer* WorkerImpl::AcquireSendBuffer() {
  if (send_pool_.empty()) {
    auto fresh = std::make_unique<SendBuffer>();
    fresh->worker = this;
    return fresh.release();
  }
  SendBuffer* buf = send_pool_.back().release();
  send_pool_.pop_back();
  return buf;
}

void WorkerImpl::LinkInFlight(SendBuffer* buf) {
  buf->prev_in_flight = nullptr;
  buf->next_in_flight = in_flight_head_;
  if (in_flight_head_ != nullptr) in_flight_head_->prev_in_flight = buf;
  in_flight_head_ = buf;
  ++sends_in_flight_;
}

void WorkerImpl::UnlinkInFlight(SendBuffer* buf) {
  if (buf->prev_in_flight != nullptr)
    buf->prev_in_flight->next_in_flight = buf->next_in_flight;
  else if (in_flight_head_ == buf)
    in_flight_head_ = buf->next_in_flight;
  if (buf->next_in_flight != nullptr) buf->next_in_flight->prev_in_flight = buf->prev_in_flight;
  buf->prev_in_flight = buf->next_in_flight = nullptr;
  --sends_in_flight_;
}

void WorkerImpl::ReleaseSendBuffer(SendBuffer* buf) {
  buf->done = nullptr;
  buf->tail.clear();  // capacity kept: it goes back to a request's inline_push on the next swap
  buf->keep_alive.reset();
  std::unique_ptr<SendBuffer> owned(buf);
  if (!in_destructor_ && send_pool_.size() < 256) send_pool_.push_back(std::move(owned));
}

void WorkerImpl::DeferFailure(uint64_t connection_id, Status why) {
  deferred_failures_.emplace_back(connection_id, std::move(why));
}

void WorkerImpl::ReapClosing() {
  for (size_t i = 0; i < closing_.size();) {
    if (ucp_request_check_status(closing_[i]) != UCS_INPROGRESS) {
      ucp_request_free(closing_[i]);
      closing_[i] = closing_.back();
      closing_.pop_back();
    } else {
      ++i;
    }
  }
}

void WorkerImpl::Housekeeping() {
  ReapClosing();
  CheckPeers();
  ExpireDeadlines();
  ExpireUnauthenticated(Clock::now());
}

int WorkerImpl::ProgressNoClock() {
  if (!pending_batches_.empty()) FlushPendingBatches();
  ++progress_depth_;
  int events = static_cast<int>(ucp_worker_progress(worker_));
  --progress_depth_;
  // Replies the handlers gave inside this pass leave now, together, not a
  // loop iteration later (SetReplyBatching).
  if (!pending_batches_.empty()) FlushPendingBatches();
  while (!deferred_failures_.empty()) {
    auto [id, why] = std::move(deferred_failures_.back());
    deferred_failures_.pop_back();
    FailConnection(id, why, /*count_as_lost=*/true);
    ++events;
  }
  while (!deferred_closes_.empty()) {
    auto [id, why] = std::move(deferred_closes_.back());
    deferred_closes_.pop_back();
    FailConnection(id, why, /*count_as_lost=*/false, /*graceful=*/true);
    ++events;
  }
  return events;
}

int WorkerImpl::Progress() {
  const int events = ProgressNoClock();
  // The coarse clock (a read of the kernel's tick, no timer read): polling
  // loops pass here every few microseconds, and housekeeping only needs the
  // millisecond.
  MaybeHousekeeping(CoarseNow());
  return events;
}

void WorkerImpl::MaybeHousekeeping(Clock::time_point now) {
  if (now >= next_housekeeping_) {
    next_housekeeping_ = now + std::chrono::milliseconds(1);
    Housekeeping();
  }
}

bool WorkerImpl::PrepareSleep() {
  if (!pending_batches_.empty()) {
    FlushPendingBatches();
    return false;  // the sends may complete at once: progress again before sleeping
  }
  ucs_status_t st = ucp_worker_arm(worker_);
  return st == UCS_OK;  // UCS_ERR_BUSY: events pending, progress again
}

std::chrono::microseconds WorkerImpl::NextDeadline(std::chrono::microseconds max_wait) const {
  if (sends_in_flight_ > 0 || receives_in_flight_ > 0) {
    // A transfer UCX has not finished may only move with our progress, and
    // nothing wakes us for it: over shared memory a message or rendezvous
    // fragment that found the peer's FIFO full waits in UCX's pending queue
    // until we progress after the peer drained the FIFO, and the fragments of
    // a rendezvous we receive do not signal our event fd. A full sleep then
    // stalled 1 MiB transfers for up to 100 ms (ros2-bench obj, ram over shm:
    // 75-140 MiB/s at 1 job, 10-70 ms p50); never sleeping instead (spinning
    // until the transfer ends) starved the peer we wait for on 2 vCPUs. So
    // sleep, but only for a short nap.
    max_wait = std::min<std::chrono::microseconds>(max_wait, kTransferNap);
  }
  if (deadlines_.empty() || live_calls_ == 0) return max_wait;
  auto until = std::chrono::duration_cast<std::chrono::microseconds>(deadlines_.top().first - Clock::now());
  if (until < std::chrono::microseconds(0)) until = std::chrono::microseconds(0);
  return std::min(until + std::chrono::microseconds(100), max_wait);
}

int WorkerImpl::Wait(std::chrono::microseconds max_wait) {
  const SpinResult spun =
      PollThenSpin([this] { return ProgressNoClock(); }, [this](Clock::time_point now) { MaybeHousekeeping(now); },
                   waits_, thread_pinned_, max_wait, options());
  if (spun.events >= 0) return spun.events;
  const Clock::time_point start = spun.start;
  if (!PrepareSleep()) return Progress();
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(start + max_wait - Clock::now());
  const auto sleep_us = NextDeadline(std::max(left, std::chrono::microseconds(0)));
  ++stats_.sleeps;
  epoll_event ev[4];
  const timespec sleep_ts{static_cast<time_t>(sleep_us.count() / 1000000),
                          static_cast<long>(sleep_us.count() % 1000000) * 1000};
  epoll_pwait2(epoll_fd_, ev, 4, &sleep_ts, nullptr);  // microsecond timeouts (transfer naps)
  next_housekeeping_ = Clock::time_point{};            // a pid event or a deadline may be due
  return Progress();
}

Status WorkerImpl::RunUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  if (progress_depth_ > 0 && !done()) return InsideProgress(name_, "wait");
  const Clock::time_point end = CoarseNow() + timeout;
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(timeout);
  for (uint32_t round = 1; !done(); ++round) {
    // A wait that handled events returns before its window, so only an empty
    // one (or every 64th) needs the clock to bound the whole.
    if (Wait(left) > 0 && round % 64 != 0) continue;
    const Clock::time_point now = Clock::now();
    if (now >= end) {
      if (done()) break;
      return Status::TimedOut(fmt::format("transport: worker '{}': wait of {} ms expired", name_, timeout.count()));
    }
    left = std::chrono::duration_cast<std::chrono::microseconds>(end - now);
  }
  return Status::Ok();
}

void WorkerImpl::Signal() {
  ucp_worker_signal(worker_);
}

Status WorkerImpl::RegisterHandler(uint16_t opcode, RequestHandler handler) {
  if (opcode > wire::kMaxUserOpcode) {
    return Status::InvalidArgument(fmt::format("transport: opcode {:#x} is reserved", opcode));
  }
  // A serving worker: let same-host clients prove their pid, for cma bulk or
  // untagged tcp (one attempt per process; a failure is logged by Start and
  // leaves them on active messages, or tagged).
  if (HostProofEnabled(context_)) (void)context_.cma_authority().Start();
  if (handlers_.size() <= opcode) handlers_.resize(opcode + 1);
  handlers_[opcode] = std::move(handler);
  return Status::Ok();
}

void SetFaultInjection(Worker& worker, FaultInjection* faults) {
  static_cast<WorkerImpl&>(worker).faults_ = faults;
}

}  // namespace ros2::transport
