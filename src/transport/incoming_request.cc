// The server side of an RPC: dispatch to handlers, Pull (cma read, RMA GET, AM
// rendezvous receive or inline copy), Push (cma write, RMA PUT + flush, AM push
// data or inline), Reply.
#include <poll.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "common/log.h"
#include "transport/ucx_util.h"
#include "transport/worker_impl.h"

namespace ros2::transport {
namespace {

using State = IncomingRequest::State;

// In-flight UCX operations hold a reference so the state outlives them.
void Ref(State* s) {
  ++s->refs;
}
void Unref(State* s) {
  if (--s->refs != 0) return;
  if (s->backend != nullptr) return s->backend->Release(s);
  s->worker->ReleaseState(s);
}

void IssueRma(State* s);

void FinishRma(State* s) {
  State::Rma& r = s->rma;
  r.active = false;
  if (r.rkey != nullptr) {
    ucp_rkey_destroy(r.rkey);
    r.rkey = nullptr;
  }
  Completion done = std::move(r.done);
  r.done = nullptr;
  Status st = std::move(r.failure);
  r.failure = Status::Ok();
  if (st.ok()) {
    if (r.is_put)
      s->worker->mutable_stats().bulk_rma_bytes += r.total;
    else
      s->worker->mutable_stats().bulk_rma_bytes += r.total;
  }
  if (done) done(st);
}

void RmaChunkCallback(void* request, ucs_status_t status, void* user_data) {
  auto* s = static_cast<State*>(user_data);
  State::Rma& r = s->rma;
  --r.in_flight;
  if (status != UCS_OK && r.failure.ok()) {
    r.failure = UcsError(
        fmt::format("transport: bulk {} of request {:#x}", r.is_put ? "put" : "get", s->msg.request_id), status);
  }
  ucp_request_free(request);
  IssueRma(s);
  Unref(s);
}

void FlushCallback(void* request, ucs_status_t status, void* user_data) {
  auto* s = static_cast<State*>(user_data);
  if (status != UCS_OK && s->rma.failure.ok()) s->rma.failure = UcsError("transport: flush after bulk put", status);
  ucp_request_free(request);
  s->rma.flushing = false;
  FinishRma(s);
  Unref(s);
}

// Keeps up to `bulk_chunks_in_flight` chunks going; finishes (after a flush for
// puts, so the data is remotely visible before the reply) when all are done.
void IssueRma(State* s) {
  State::Rma& r = s->rma;
  if (!r.active || r.flushing) return;
  const TransportOptions& o = s->worker->options();
  Connection* conn = s->conn.get();
  while (r.failure.ok() && r.next < r.total && r.in_flight < o.bulk_chunks_in_flight) {
    if (conn->ep == nullptr) {
      r.failure = conn->status.ok() ? Status::Disconnected("transport: connection closed") : conn->status;
      break;
    }
    const uint64_t len = std::min<uint64_t>(o.bulk_chunk_size, r.total - r.next);
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = RmaChunkCallback;
    param.user_data = s;
    ucs_status_ptr_t req = r.is_put
                               ? ucp_put_nbx(conn->ep, r.local + r.next, len, r.remote_addr + r.next, r.rkey, &param)
                               : ucp_get_nbx(conn->ep, r.local + r.next, len, r.remote_addr + r.next, r.rkey, &param);
    r.next += len;
    if (UCS_PTR_IS_PTR(req)) {
      ++r.in_flight;
      Ref(s);
    } else if (UCS_PTR_STATUS(req) != UCS_OK) {
      r.failure =
          UcsError(fmt::format("transport: bulk {} of request {:#x}", r.is_put ? "put" : "get", s->msg.request_id),
                   UCS_PTR_STATUS(req));
    }
  }
  if (r.in_flight > 0) return;
  if (r.failure.ok() && r.next < r.total) return;  // unreachable: the loop issues until done or failed
  if (r.is_put && r.failure.ok() && conn->ep != nullptr) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = FlushCallback;
    param.user_data = s;
    ucs_status_ptr_t req = ucp_ep_flush_nbx(conn->ep, &param);
    if (UCS_PTR_IS_PTR(req)) {
      r.flushing = true;
      Ref(s);
      return;
    }
    if (UCS_PTR_STATUS(req) != UCS_OK) r.failure = UcsError("transport: flush after bulk put", UCS_PTR_STATUS(req));
  }
  FinishRma(s);
}

// The checks before the server touches a same-host client's memory (cma or a
// shared segment): the connection's hello proved the client's pid (else the
// request is malformed: `buffer_kind` names what it asked for), and the
// connection is still up.
Status CheckProvenPeer(State* s, std::string_view buffer_kind) {
  Connection* conn = s->conn.get();
  if (!conn->cma) {
    ++s->worker->mutable_stats().malformed_messages;
    return Status::Protocol(
        fmt::format("transport: request {:#x} from {} names a {}, but the connection did not prove its pid",
                    s->msg.request_id, conn->peer_name, buffer_kind));
  }
  if (conn->ep == nullptr || !conn->status.ok())
    return conn->status.ok() ? Status::Disconnected("transport: connection closed") : conn->status;
  return Status::Ok();
}

// The proven pid still names the client: its pidfd has not fired, so the pid
// cannot have been reused.
Status CheckPeerAlive(const Connection& conn) {
  if (conn.pidfd >= 0) {
    pollfd p{conn.pidfd, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0)
      return Status::Disconnected(fmt::format("transport: {} exited before its bulk moved", conn.peer_name));
  }
  return Status::Ok();
}

// Cross-memory attach, synchronously (a memory copy by the kernel), each time
// checking that the client still lives.
Status CmaTransfer(State* s, const wire::BulkDescriptor& d, std::byte* local, uint64_t len, bool to_client) {
  ROS2_RETURN_IF_ERROR(CheckProvenPeer(s, "cma buffer"));
  Connection* conn = s->conn.get();
  if (!s->worker->options().accept_cma_bulk) {
    // process_vm_readv/writev of memory the client controls can block this
    // thread for good (a page of a stalled FUSE file, userfaultfd): only its
    // shared segments are copied here.
    ++s->worker->mutable_stats().malformed_messages;
    return Status::PermissionDenied(
        fmt::format("transport: request {:#x} from {} names a cma buffer in ordinary memory; this server copies "
                    "same-host bulk only through the client's shared segments (accept_cma_bulk is off)",
                    s->msg.request_id, conn->peer_name));
  }
  ROS2_RETURN_IF_ERROR(CheckPeerAlive(*conn));
  Status st = cma::Copy(conn->info.peer_pid, local, d.remote_addr, len, to_client);
  if (!st.ok()) return st.WithContext(fmt::format("request {:#x}", s->msg.request_id));
  s->worker->mutable_stats().bulk_cma_bytes += len;
  return st;
}

// The client's memory for a kSegment descriptor: its segment mapped once per
// connection (shared_segment.h; the client's liveness matters only when the
// segment is opened through its pid, a mapping outlives it), the range checked
// against the segment's size. The request keeps a reference to the mapping
// until it is released.
Result<std::byte*> SegmentRange(State* s, const wire::BulkDescriptor& d, uint64_t len) {
  ROS2_RETURN_IF_ERROR(CheckProvenPeer(s, "shared segment"));
  Connection* conn = s->conn.get();
  WorkerStats& stats = s->worker->mutable_stats();
  const wire::SegmentRef ref = wire::DecodeSegmentRef(d.rkey);
  std::shared_ptr<segment::PeerMapping> mapping;
  auto& mapped = conn->segments;
  for (size_t i = mapped.size(); i-- > 0;) {
    if (mapped[i]->id() == ref.id) {
      mapping = mapped[i];
      if (i + 1 != mapped.size()) {  // most recently used last
        mapped.erase(mapped.begin() + static_cast<std::ptrdiff_t>(i));
        mapped.push_back(mapping);
      }
      break;
    }
  }
  if (!mapping) {
    ROS2_RETURN_IF_ERROR(CheckPeerAlive(*conn));
    const TransportOptions& o = s->worker->options();
    auto m = segment::PeerMapping::Map(conn->pidfd, conn->info.peer_pid, ref, o.max_segment_size);
    if (!m.ok()) {
      ++stats.segments_refused;
      return m.status().WithContext(
          fmt::format("transport: request {:#x} from {}", s->msg.request_id, conn->peer_name));
    }
    mapping = std::move(*m);
    // At most kMaxPeerSegments mappings and max_segment_bytes_per_connection
    // bytes per connection: the least recently used go first (a request
    // still using one keeps it until it ends).
    uint64_t bytes = mapping->size();
    for (const auto& held : mapped) bytes += held->size();
    while (!mapped.empty() && (mapped.size() >= kMaxPeerSegments || bytes > o.max_segment_bytes_per_connection)) {
      bytes -= mapped.front()->size();
      mapped.erase(mapped.begin());
    }
    mapped.push_back(mapping);
    ++stats.segments_mapped;
  }
  auto range = mapping->Range(d.remote_addr, len);
  if (!range.ok()) {
    ++stats.malformed_messages;
    return range.status().WithContext(fmt::format("transport: request {:#x}", s->msg.request_id));
  }
  s->segment = std::move(mapping);
  return *range;
}

Status SegmentTransfer(State* s, const wire::BulkDescriptor& d, std::byte* local, uint64_t len, bool to_client) {
  auto remote = SegmentRange(s, d, len);
  if (!remote.ok()) return remote.status();
  if (to_client) {
    std::memcpy(*remote, local, len);
  } else {
    std::memcpy(local, *remote, len);
  }
  s->worker->mutable_stats().bulk_segment_bytes += len;
  return Status::Ok();
}

// Same-host bulk, moved synchronously by this thread: cross-memory attach or
// a memcpy through the client's shared segment.
Status HostTransfer(State* s, const wire::BulkDescriptor& d, std::byte* local, uint64_t len, bool to_client) {
  return d.transfer == wire::BulkTransfer::kCma ? CmaTransfer(s, d, local, len, to_client)
                                                : SegmentTransfer(s, d, local, len, to_client);
}

// `done` is taken only when the transfer starts: on an error returned here
// the caller still holds it and completes the Pull or Push with that error
// (taken by value, a refused request lost its completion and never got a
// reply).
Status StartRma(State* s, const wire::BulkDescriptor& d, std::byte* local, uint64_t len, bool is_put,
                Completion&& done) {
  Connection* conn = s->conn.get();
  if (conn->ep == nullptr)
    return conn->status.ok() ? Status::Disconnected("transport: connection closed") : conn->status;
  if (!conn->info.PeerKeysBound() || !s->worker->context().rma_enabled()) {
    // Unpacking maps what the key names (a pid and fd for posix, a SysV id):
    // never a client's key over shared memory (EndpointInfo::PeerKeysBound).
    ++s->worker->mutable_stats().malformed_messages;
    ++s->worker->mutable_stats().rkeys_refused;
    return Status::PermissionDenied(fmt::format(
        "transport: request {:#x} from {} carries a memory key for rma bulk over {}; this server unpacks client keys "
        "only on lanes that bind them to the peer (verbs) or never resolve them here (tcp){}",
        s->msg.request_id, conn->peer_name, conn->info.lanes.empty() ? "no lanes" : conn->info.am_transport,
        s->worker->context().rma_enabled() ? "" : ", and runs no rma at all"));
  }
  ucp_rkey_h rkey = nullptr;
  ucs_status_t st = ucp_ep_rkey_unpack(conn->ep, d.rkey.data(), &rkey);
  if (st != UCS_OK) {
    ++s->worker->mutable_stats().malformed_messages;
    return UcsError(fmt::format("transport: request {:#x}: unpacking the client's rkey", s->msg.request_id), st);
  }
  State::Rma& r = s->rma;
  r = State::Rma{};
  r.active = true;
  r.is_put = is_put;
  r.local = local;
  r.remote_addr = d.remote_addr;
  r.total = len;
  r.rkey = rkey;
  r.done = std::move(done);
  Ref(s);  // held across IssueRma, which may finish synchronously
  IssueRma(s);
  Unref(s);
  return Status::Ok();
}

void AmPullCallback(void* request, ucs_status_t status, size_t /*length*/, void* user_data) {
  auto* s = static_cast<State*>(user_data);
  --s->worker->receives_in_flight_;
  Completion done = std::move(s->pull_done);
  s->pull_done = nullptr;
  if (status == UCS_OK) s->worker->mutable_stats().bulk_am_bytes += s->rndv_length;
  ucp_request_free(request);
  if (done) done(status == UCS_OK ? Status::Ok() : UcsError("transport: receiving bulk over active messages", status));
  Unref(s);
}

// Inline bulk (either direction) within this side's inline limit.
Status CheckInlineLimit(const wire::Message& msg, uint64_t limit) {
  for (uint8_t i = 0; i < msg.bulk_count; ++i) {
    const wire::BulkDescriptor& d = msg.bulk[i];
    if (d.transfer == wire::BulkTransfer::kInline && d.length > limit) {
      return Status::InvalidArgument(
          fmt::format("request {:#x} asks for {} bytes of inline bulk-{}, more than the inline limit of {}",
                      msg.request_id, d.length, d.direction == wire::BulkDirection::kOut ? "out" : "in", limit));
    }
  }
  return Status::Ok();
}

}  // namespace

// ---- State pool and dispatch ------------------------------------------------------
IncomingRequest::State* WorkerImpl::AcquireState() {
  std::unique_ptr<State> s;
  if (!state_pool_.empty()) {
    s = std::move(state_pool_.back());
    state_pool_.pop_back();
  } else {
    s = std::make_unique<State>();
  }
  s->worker = this;
  s->refs = 0;
  return s.release();  // owned by the references; returned by ReleaseState
}

void WorkerImpl::ReleaseState(State* s) {
  if (!s->replied && s->conn) {
    // The handler dropped the request: the client still gets an answer.
    ++s->refs;
    IncomingRequest(s).Reply(Status::Internal("transport: handler dropped the request without replying"));
    --s->refs;
  }
  if (s->rndv_desc != nullptr) {
    ucp_am_data_release(worker_, s->rndv_desc);
    s->rndv_desc = nullptr;
  }
  // s->conn is kept for the next request of the same peer (FailConnection
  // clears it in free states); s->msg is overwritten whole by the next HandleRequest.
  s->segment.reset();
  s->pulled = s->pushed = s->replied = false;
  s->in_am_callback = s->rndv_taken = false;
  s->pushed_bytes = 0;
  s->rndv_length = 0;
  s->eager_bulk = {};
  if (s->eager_copy.capacity() > (64u << 10)) {
    std::vector<uint8_t>().swap(s->eager_copy);  // a pooled state keeps no large buffer
  } else {
    s->eager_copy.clear();
  }
  s->inline_push.clear();
  s->pull_done = nullptr;
  s->rma = State::Rma{};
  std::unique_ptr<State> owned(s);
  if (!in_destructor_ && state_pool_.size() < 1024) {
    state_pool_.push_back(std::move(owned));
  }
}

bool WorkerImpl::HandleRequest(Connection& conn, const wire::Message& msg, std::span<const uint8_t> bytes,
                               void* rndv_desc, uint64_t rndv_length, std::span<const uint8_t> eager_bulk) {
  if (msg.opcode == wire::kAuthenticateOpcode) return HandleAuthenticate(conn, msg), false;  // connection_auth.cc
  ++stats_.requests_received;
  State* s = AcquireState();
  // A pooled state keeps the connection it last served: a peer's next request
  // usually finds it and skips an atomic increment and decrement.
  if (s->conn.get() != &conn) s->conn = FindConnectionShared(conn.local_id);
  // The bytes live only during the callback: copy them, and point the decoded
  // message's views at the copy (no second decode). The inline bulk-out section
  // (always last) is not copied yet: a handler that pulls inside the callback,
  // as the engine's update does, copies it once, straight from UCX's buffer into
  // its own; it is copied here only if the handler keeps the request unpulled.
  const size_t inline_len = msg.inline_data.size();
  const bool inline_last = inline_len == 0 || msg.inline_data.data() + inline_len == bytes.data() + bytes.size();
  const size_t head_len = inline_last ? bytes.size() - inline_len : bytes.size();
  s->copy.reserve(bytes.size());  // appending the inline bytes later must not move the views
  s->copy.assign(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(head_len));
  s->msg = msg;
  const auto moved = [&](std::span<const uint8_t> view) {
    if (view.empty()) return std::span<const uint8_t>();
    return std::span<const uint8_t>(s->copy.data() + (view.data() - bytes.data()), view.size());
  };
  s->msg.capability = moved(msg.capability);
  s->msg.payload = moved(msg.payload);
  s->msg.inline_data = inline_last ? msg.inline_data : moved(msg.inline_data);  // UCX's bytes until the callback ends
  for (uint8_t i = 0; i < s->msg.bulk_count; ++i) s->msg.bulk[i].rkey = moved(msg.bulk[i].rkey);
  s->msg.status_message = {};  // replies only
  s->rndv_desc = rndv_desc;
  s->rndv_length = rndv_length;
  s->eager_bulk = eager_bulk;
  // UCX data may not be released inside its own callback: hold a reference
  // across the handler and decide here what happens to the descriptor.
  ++s->refs;
  s->in_am_callback = true;
  if (Status limit = CheckInlineLimit(msg, options().inline_limit); !limit.ok()) {
    // More inline bytes than this side accepts (the client's encoder never
    // sends them; a reply pushing more than 1 MiB inline could not even be
    // encoded): refused with a clear error, not left to the client's deadline.
    ++stats_.inline_refused;
    ++stats_.malformed_messages;
    IncomingRequest(s).Reply(limit.WithContext(fmt::format("transport: worker '{}'", name_)));
  } else {
    DispatchRequest(s);
  }
  s->in_am_callback = false;
  if (inline_last && inline_len > 0 && s->refs > 1 && !s->pulled) {
    // The handler kept the request without pulling: keep the inline bytes too.
    const size_t at = s->copy.size();
    s->copy.insert(s->copy.end(), msg.inline_data.begin(), msg.inline_data.end());
    s->msg.inline_data = std::span<const uint8_t>(s->copy.data() + at, inline_len);
  }
  if (!eager_bulk.empty() && s->refs > 1 && !s->pulled) {
    s->eager_copy.assign(eager_bulk.begin(), eager_bulk.end());
    s->eager_bulk = s->eager_copy;
  }
  const bool taken = s->rndv_taken || s->rndv_desc != nullptr;
  if (s->refs == 1 && s->rndv_desc != nullptr) {
    s->rndv_desc = nullptr;  // nobody will pull it: returning UCS_OK drops it
    --s->refs;
    ReleaseState(s);
    return false;
  }
  Unref(s);
  return taken;
}

void WorkerImpl::DispatchRequest(State* s) {
  IncomingRequest req(s);
  const uint16_t op = s->msg.opcode;
  if (op >= handlers_.size() || !handlers_[op]) {
    ++stats_.unknown_opcode;
    req.Reply(Status::NotSupported(fmt::format("transport: worker '{}' has no handler for opcode {}", name_, op)));
    return;
  }
  handlers_[op](std::move(req));
}

// ---- IncomingRequest ------------------------------------------------------------
IncomingRequest::IncomingRequest(State* s) : state_(s) {
  if (state_ != nullptr) ++state_->refs;
}
IncomingRequest::IncomingRequest(const IncomingRequest& other) : state_(other.state_) {
  if (state_ != nullptr) ++state_->refs;
}
IncomingRequest::IncomingRequest(IncomingRequest&& other) noexcept : state_(other.state_) {
  other.state_ = nullptr;
}
IncomingRequest& IncomingRequest::operator=(IncomingRequest other) noexcept {
  std::swap(state_, other.state_);
  return *this;
}
IncomingRequest::~IncomingRequest() {
  if (state_ != nullptr) Unref(state_);
}

uint16_t IncomingRequest::opcode() const {
  return state_ ? state_->msg.opcode : 0;
}
uint64_t IncomingRequest::request_id() const {
  return state_ ? state_->msg.request_id : 0;
}
std::span<const uint8_t> IncomingRequest::payload() const {
  return state_ ? state_->msg.payload : std::span<const uint8_t>();
}
std::span<const uint8_t> IncomingRequest::capability() const {
  return state_ ? state_->msg.capability : std::span<const uint8_t>();
}
uint64_t IncomingRequest::bulk_out_size() const {
  const wire::BulkDescriptor* d = state_ ? state_->msg.FindBulk(wire::BulkDirection::kOut) : nullptr;
  return d ? d->length : 0;
}
uint64_t IncomingRequest::bulk_in_capacity() const {
  const wire::BulkDescriptor* d = state_ ? state_->msg.FindBulk(wire::BulkDirection::kIn) : nullptr;
  return d ? d->length : 0;
}
bool IncomingRequest::bulk_out_inline() const {
  const wire::BulkDescriptor* d = state_ ? state_->msg.FindBulk(wire::BulkDirection::kOut) : nullptr;
  return d != nullptr && d->transfer == wire::BulkTransfer::kInline;
}
BulkTransfer IncomingRequest::bulk_mode() const {
  return state_ && state_->conn ? state_->conn->info.bulk_mode : BulkTransfer::kActiveMessage;
}
uint64_t IncomingRequest::connection_id() const {
  return state_ && state_->conn ? state_->conn->local_id : 0;
}
void IncomingRequest::MarkAuthenticated() const {
  if (state_ && state_->conn) state_->conn->authenticated = true;
}
bool IncomingRequest::replied() const {
  return state_ && state_->replied;
}

void IncomingRequest::Pull(std::span<std::byte> dst, Completion done) {
  State* s = state_;
  if (s == nullptr) return;
  if (s->backend != nullptr) return s->backend->Pull(s, dst, std::move(done));
  const wire::BulkDescriptor* d = s->msg.FindBulk(wire::BulkDirection::kOut);
  // Completes the Pull/Push now, with success or the failure (the paths that
  // finish later hand `done` on instead).
  auto finish_now = [&](const Status& st) {
    if (done) done(st);
  };
  if (d == nullptr) return finish_now(Status::InvalidArgument("transport: Pull on a request without bulk-out data"));
  if (s->pulled) return finish_now(Status::InvalidArgument("transport: second Pull on one request"));
  if (dst.size() != d->length) {
    return finish_now(Status::InvalidArgument(
        fmt::format("transport: Pull into {} bytes, the client offers {}", dst.size(), d->length)));
  }
  s->pulled = true;
  switch (d->transfer) {
    case wire::BulkTransfer::kInline:
      std::memcpy(dst.data(), s->msg.inline_data.data(), dst.size());
      s->worker->mutable_stats().bulk_inline_bytes += dst.size();
      return finish_now(Status::Ok());
    case wire::BulkTransfer::kRma: {
      Status st = StartRma(s, *d, dst.data(), dst.size(), /*is_put=*/false, std::move(done));
      if (!st.ok()) return finish_now(st);
      return;
    }
    case wire::BulkTransfer::kCma:
    case wire::BulkTransfer::kSegment:
      return finish_now(HostTransfer(s, *d, dst.data(), dst.size(), /*to_client=*/false));
    case wire::BulkTransfer::kActiveMessage: {
      if (s->rndv_desc == nullptr && s->eager_bulk.size() == dst.size() && !dst.empty()) {
        std::memcpy(dst.data(), s->eager_bulk.data(), dst.size());
        s->worker->mutable_stats().bulk_am_bytes += dst.size();
        return finish_now(Status::Ok());
      }
      if (s->rndv_desc == nullptr) return finish_now(Status::Protocol("transport: bulk data missing from the message"));
      void* desc = s->rndv_desc;
      s->rndv_desc = nullptr;  // handed to ucp_am_recv_data_nbx
      if (s->in_am_callback) s->rndv_taken = true;
      s->pull_done = std::move(done);
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      param.cb.recv_am = AmPullCallback;
      param.user_data = s;
      ucs_status_ptr_t req = ucp_am_recv_data_nbx(s->worker->ucp(), desc, dst.data(), dst.size(), &param);
      if (UCS_PTR_IS_PTR(req)) {
        ++s->worker->receives_in_flight_;
        Ref(s);
        return;
      }
      Completion cb = std::move(s->pull_done);
      s->pull_done = nullptr;
      if (UCS_PTR_STATUS(req) == UCS_OK) s->worker->mutable_stats().bulk_am_bytes += dst.size();
      if (cb)
        cb(UCS_PTR_STATUS(req) == UCS_OK ? Status::Ok() : UcsError("transport: bulk receive", UCS_PTR_STATUS(req)));
      return;
    }
  }
}

std::span<std::byte> IncomingRequest::DirectBulkIn() {
  State* s = state_;
  if (s == nullptr || s->backend != nullptr || s->pushed || s->replied) return {};
  const wire::BulkDescriptor* d = s->msg.FindBulk(wire::BulkDirection::kIn);
  if (d == nullptr || d->transfer != wire::BulkTransfer::kSegment) return {};
  auto range = SegmentRange(s, *d, d->length);
  if (!range.ok()) return {};  // Push reports the same failure
  return {*range, d->length};
}

void IncomingRequest::PushedDirect(uint64_t bytes) {
  State* s = state_;
  if (s == nullptr || s->pushed || s->replied || s->segment == nullptr) return;
  s->pushed = true;
  s->pushed_bytes = std::min<uint64_t>(bytes, bulk_in_capacity());
  s->worker->mutable_stats().bulk_segment_bytes += s->pushed_bytes;
}

void IncomingRequest::Push(std::span<const std::byte> src, Completion done) {
  State* s = state_;
  if (s == nullptr) return;
  if (s->backend != nullptr) return s->backend->Push(s, src, std::move(done));
  const wire::BulkDescriptor* d = s->msg.FindBulk(wire::BulkDirection::kIn);
  // Completes the Pull/Push now, with success or the failure (the paths that
  // finish later hand `done` on instead).
  auto finish_now = [&](const Status& st) {
    if (done) done(st);
  };
  if (d == nullptr) return finish_now(Status::InvalidArgument("transport: Push on a request without a bulk-in buffer"));
  if (s->pushed || s->replied) return finish_now(Status::InvalidArgument("transport: Push after Push or Reply"));
  if (src.size() > d->length) {
    return finish_now(Status::InvalidArgument(
        fmt::format("transport: Push of {} bytes into a {}-byte client buffer", src.size(), d->length)));
  }
  s->pushed = true;
  s->pushed_bytes = src.size();
  if (src.empty()) return finish_now(Status::Ok());
  // A short push into a buffer reached by cma rides the reply (cheaper than a
  // system call); into a segment it is a memcpy whatever its size.
  const bool inline_push =
      d->transfer == wire::BulkTransfer::kInline ||
      (d->transfer != wire::BulkTransfer::kSegment && src.size() <= s->worker->options().inline_limit);
  if (inline_push) {
    const auto* b = reinterpret_cast<const uint8_t*>(src.data());
    s->inline_push.assign(b, b + src.size());
    s->worker->mutable_stats().bulk_inline_bytes += src.size();
    return finish_now(Status::Ok());
  }
  Connection* conn = s->conn.get();
  if (d->transfer == wire::BulkTransfer::kCma || d->transfer == wire::BulkTransfer::kSegment) {
    Status st = HostTransfer(s, *d, const_cast<std::byte*>(src.data()), src.size(), /*to_client=*/true);
    if (!st.ok()) s->pushed_bytes = 0;
    return finish_now(st);
  }
  if (d->transfer == wire::BulkTransfer::kRma) {
    Status st = StartRma(s, *d, const_cast<std::byte*>(src.data()), src.size(), /*is_put=*/true, std::move(done));
    if (!st.ok()) return finish_now(st);
    return;
  }
  // Active messages: a push-data message whose AM data lands in the client's buffer.
  wire::Message m;
  m.kind = wire::Kind::kPushData;
  m.request_id = s->msg.request_id;
  m.connection_id = conn->remote_id;
  Ref(s);
  Completion wrapped = [s, done = std::move(done)](const Status& st) {
    if (st.ok()) s->worker->mutable_stats().bulk_am_bytes += s->pushed_bytes;
    if (done) done(st);
    Unref(s);
  };
  Status st = s->worker->SendMessage(*conn, m, src, std::move(wrapped));
  if (!st.ok()) {
    Unref(s);
    s->pushed_bytes = 0;
    return finish_now(st);
  }
}

void IncomingRequest::Reply(const Status& status, std::span<const uint8_t> payload) {
  State* s = state_;
  if (s == nullptr || s->replied) return;
  if (s->backend != nullptr) return s->backend->Reply(s, status, payload);
  s->replied = true;
  Connection* conn = s->conn.get();
  if (conn == nullptr || conn->ep == nullptr) return;  // the client is gone; nothing to answer
  WorkerImpl* w = s->worker;
  wire::Message m;
  m.kind = wire::Kind::kReply;
  m.request_id = s->msg.request_id;
  m.connection_id = conn->remote_id;
  m.status_code = static_cast<uint8_t>(status.code());
  std::string_view text = status.ok() ? std::string_view() : std::string_view(status.message());
  if (text.size() > wire::kMaxStatusMessage) text = text.substr(0, wire::kMaxStatusMessage);
  m.status_message = text;
  std::span<const uint8_t> body = payload;
  std::string overflow;
  if (body.size() > wire::kMaxPayload) {
    m.status_code = static_cast<uint8_t>(Status::Code::kInternal);
    overflow = fmt::format("transport: reply payload of {} bytes exceeds {}", body.size(), wire::kMaxPayload);
    m.status_message = overflow;
    body = {};
  }
  m.payload = body;
  m.pushed_bytes = s->pushed_bytes;
  if (!s->inline_push.empty()) m.inline_data = s->inline_push;
  // The pushed bytes go out as the second iovec element (no copy into the send buffer).
  Status st = conn->reply_batching || (w->batch_replies() && !s->in_am_callback)
                  ? w->SendOrBatch(*conn, m)
                  : w->SendMessage(*conn, m, {}, nullptr, nullptr, &s->inline_push);
  if (!st.ok() && conn->ep != nullptr && st.code() == Status::Code::kInvalidArgument) {
    // The reply could not be encoded (a rule of the wire format it broke):
    // the client gets that error now instead of waiting for its deadline.
    const std::string why =
        fmt::format("transport: the reply to request {:#x} could not be sent: {}", m.request_id, st.ToString());
    wire::Message e;
    e.kind = wire::Kind::kReply;
    e.request_id = m.request_id;
    e.connection_id = m.connection_id;
    e.status_code = static_cast<uint8_t>(Status::Code::kInternal);
    e.status_message = std::string_view(why).substr(0, wire::kMaxStatusMessage);
    st = w->SendMessage(*conn, e, {}, nullptr);
  }
  if (!st.ok()) {
    ROS2_LOG_DEBUG("transport: reply to request {:#x} failed: {}", m.request_id, st.ToString());
    return;
  }
  ++w->mutable_stats().replies_sent;
}

}  // namespace ros2::transport
