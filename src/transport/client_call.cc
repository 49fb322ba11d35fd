// The client side of an RPC: choosing how its bulk travels (ChooseBulk: segment,
// inline, bounce segment, RMA or AM), building and sending the request,
// matching replies and pushed data to calls, deadlines, and EndpointImpl.
#include <cstring>

#include <fmt/format.h>

#include "common/log.h"
#include "transport/fault_injection.h"
#include "transport/shared_segment.h"
#include "transport/ucx_util.h"
#include "transport/worker_impl.h"

namespace ros2::transport {
namespace {

void PushRecvCallback(void* request, ucs_status_t status, size_t /*length*/, void* user_data) {
  auto* ctx = static_cast<PushReceive*>(user_data);
  --ctx->worker->receives_in_flight_;
  ctx->worker->OnPushReceived(ctx->slot, ctx->generation, status);
  ucp_request_free(request);
}

}  // namespace

Status WorkerImpl::ChooseBulk(const Connection& conn, std::byte* addr,
                              const std::shared_ptr<const MemoryRegion>& caller_region, wire::BulkDescriptor& d,
                              BulkPlan& plan) {
  const TransportOptions& opts = context_.options();
  const uint64_t length = d.length;
  // Segments (the caller's or a bounce one) only on a connection whose server
  // proved able to reach our memory (the cma proof), or under fault injection.
  const bool claimed = faults_ != nullptr && faults_->ClaimCmaProof();
  const bool proven = conn.cma || claimed;
  auto by_reference = [&](const segment::Location& where) {
    wire::EncodeSegmentRef(where.ref, plan.ref);
    d.transfer = wire::BulkTransfer::kSegment;
    d.remote_addr = where.offset;
    d.rkey = plan.ref;
  };

  // 1. Inside one of our shared segments, from segment_min_bulk bytes up even
  // when it would fit inline: the server makes the one copy (inline bytes are
  // copied twice, into the transport's FIFO and out of it).
  if (proven && (length > opts.inline_limit || length >= opts.segment_min_bulk)) {
    if (auto where = segment::Find(addr, length)) {
      if (faults_ != nullptr) faults_->DamageSegmentReference(*where);
      by_reference(*where);
      return Status::Ok();
    }
  }
  // 2. Small: inside the messages.
  if (length <= opts.inline_limit) {
    d.transfer = wire::BulkTransfer::kInline;
    return Status::Ok();
  }
  // 3. Ordinary memory on a proven same-host connection: through a bounce
  // segment of ours (the server copies only segments, accept_cma_bulk).
  if (conn.cma && length <= opts.max_segment_size) {
    ROS2_ASSIGN_OR_RETURN(plan.bounce, AcquireBounce(length));
    auto where = segment::Find(plan.bounce->data(), length);
    if (!where) return Status::Internal("transport: a bounce segment is not in the segment registry");
    by_reference(*where);
    return Status::Ok();
  }
  // 4. Raw cma descriptors: only fault injection sends them now.
  if (claimed) {
    d.transfer = wire::BulkTransfer::kCma;
    d.remote_addr = reinterpret_cast<uint64_t>(addr);
    return Status::Ok();
  }
  // 5. RMA when the lanes are one-sided for this buffer (see FillEndpointInfo).
  if (conn.info.bulk_mode == BulkTransfer::kRma &&
      (conn.info.rma_any_memory || (caller_region && caller_region->Contains(addr, length)))) {
    plan.region = caller_region;
    if (!plan.region || !plan.region->Contains(addr, length)) {
      // The application's own memory: registered for this call alone (the
      // call holds the region and drops it when it completes, which ends the
      // key it sent), never kept by address. UCX's rcache makes a repeated
      // registration of the same pages cheap where registering pins them.
      ROS2_ASSIGN_OR_RETURN(plan.region, context_.RegisterMemory(addr, length));
    }
    d.transfer = wire::BulkTransfer::kRma;
    d.remote_addr = reinterpret_cast<uint64_t>(addr);
    d.rkey = plan.region->packed_rkey();
    return Status::Ok();
  }
  // 6. Otherwise the bytes ride active messages (rendezvous when large).
  d.transfer = wire::BulkTransfer::kActiveMessage;
  return Status::Ok();
}

Status WorkerImpl::StartCall(Connection& conn, uint16_t opcode, std::span<const uint8_t> payload,
                             const CallOptions& options, ReplyCallback done) {
  const TransportOptions& opts = context_.options();
  if (!conn.status.ok()) return conn.status;
  if (conn.remote_id == 0)
    return Status::Disconnected(fmt::format("transport: {} has not accepted the connection", conn.peer_name));
  if (opcode > wire::kMaxUserOpcode && opcode != wire::kAuthenticateOpcode)
    return Status::InvalidArgument(fmt::format("transport: opcode {:#x} is reserved", opcode));
  if (!done) return Status::InvalidArgument("transport: call without a reply callback");
  if (options.capability.size() > wire::kMaxCapability) {
    return Status::InvalidArgument(
        fmt::format("transport: capability of {} bytes (max {})", options.capability.size(), wire::kMaxCapability));
  }
  if (payload.size() > wire::kMaxPayload) {
    return Status::InvalidArgument(
        fmt::format("transport: payload of {} bytes (max {})", payload.size(), wire::kMaxPayload));
  }
  if (live_calls_ >= opts.max_outstanding_requests) {
    return Status::Busy(fmt::format("transport: {} requests outstanding on worker '{}'", live_calls_, name_));
  }

  wire::Message msg;
  msg.kind = wire::Kind::kRequest;
  msg.opcode = opcode;
  msg.connection_id = conn.remote_id;
  msg.capability = options.capability;
  msg.payload = payload;
  std::span<const std::byte> am_bulk;  // bulk-out bytes that ride the request as AM data
  BulkPlan out, in;
  if (!options.bulk_out.empty()) {
    wire::BulkDescriptor& d = msg.bulk[msg.bulk_count++];
    d.direction = wire::BulkDirection::kOut;
    d.length = options.bulk_out.size();
    std::byte* addr = const_cast<std::byte*>(options.bulk_out.data());
    ROS2_RETURN_IF_ERROR(ChooseBulk(conn, addr, options.bulk_out_region, d, out));
    // What the choice asks of the sender (segment, cma and RMA: the server
    // fetches the bytes itself).
    if (d.transfer == wire::BulkTransfer::kInline) {
      msg.inline_data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(addr), d.length);
    } else if (d.transfer == wire::BulkTransfer::kActiveMessage) {
      am_bulk = options.bulk_out;
    } else if (out.bounce) {
      std::memcpy(out.bounce->data(), addr, d.length);
      stats_.bulk_bounce_bytes += d.length;
    }
  }
  if (!options.bulk_in.empty()) {
    // Nothing to send for bulk-in: the server places the bytes (a bounce
    // segment's are copied out by CompleteCall).
    wire::BulkDescriptor& d = msg.bulk[msg.bulk_count++];
    d.direction = wire::BulkDirection::kIn;
    d.length = options.bulk_in.size();
    ROS2_RETURN_IF_ERROR(ChooseBulk(conn, options.bulk_in.data(), options.bulk_in_region, d, in));
  }
  if (!am_bulk.empty() && wire::EncodedSize(msg) > max_am_header_) {
    return Status::InvalidArgument(fmt::format(
        "transport: request of {} bytes with bulk over active messages exceeds the AM header limit {} (payload {})",
        wire::EncodedSize(msg), max_am_header_, payload.size()));
  }

  // Take a call slot.
  uint32_t slot;
  if (!free_calls_.empty()) {
    slot = free_calls_.back();
    free_calls_.pop_back();
  } else {
    slot = static_cast<uint32_t>(calls_.size());
    calls_.emplace_back();
  }
  PendingCall& call = calls_[slot];
  ++call.generation;
  if (call.generation == 0) call.generation = 1;
  msg.request_id = MakeRequestId(slot, call.generation);
  call.connection_id = conn.local_id;
  call.bulk_in = options.bulk_in;
  call.out_region = std::move(out.region);
  call.in_region = std::move(in.region);
  const wire::BulkDescriptor* in_desc = msg.FindBulk(wire::BulkDirection::kIn);
  call.in_via_am = in_desc != nullptr && in_desc->transfer == wire::BulkTransfer::kActiveMessage;
  call.reply_arrived = false;
  call.push_in_flight = false;
  call.pushed_expected = call.pushed_received = 0;
  call.reply_status = Status::Ok();
  call.reply_payload.clear();
  call.bounce_out = std::move(out.bounce);
  call.bounce_in = std::move(in.bounce);

  const uint64_t request_id = msg.request_id;  // the call's own, whatever a test's rewrite sends
  if (faults_ != nullptr) faults_->RewriteRequest(msg);
  Status st = conn.corked && am_bulk.empty() ? SendOrBatch(conn, msg) : SendMessage(conn, msg, am_bulk, nullptr);
  if (!st.ok()) {
    call.out_region.reset();
    call.in_region.reset();
    ReleaseBounce(std::move(call.bounce_out), true);
    ReleaseBounce(std::move(call.bounce_in), true);
    free_calls_.push_back(slot);
    return st;
  }
  // The deadline is taken after the send (replies are only handled from
  // Progress(), so none can arrive before it is set), from the coarse clock.
  const auto timeout = options.timeout.count() > 0 ? options.timeout : opts.default_timeout;
  call.deadline = CoarseNow() + timeout;
  call.done = std::move(done);
  ++live_calls_;
  ++conn.outstanding;
  ++stats_.requests_sent;
  if (!am_bulk.empty()) stats_.bulk_am_bytes += am_bulk.size();
  deadlines_.emplace(call.deadline, request_id);
  if (deadlines_.size() > DeadlineHeapLimit()) CompactDeadlines();
  stats_.deadline_entries = deadlines_.size();
  return Status::Ok();
}

// A completed call leaves its entry in the deadline heap (a heap cannot remove
// from the middle); ExpireDeadlines drops stale entries only as they come due
// or when no call is live. A client that always has calls in flight (fio at
// iodepth 16, a bandwidth run) would keep one entry per call of the last
// timeout period: millions at a few hundred thousand calls a second, every push
// sifting through them. So the heap is rebuilt from the live calls once it
// holds more than twice as many entries as there are call slots: O(slots) work
// every O(slots) calls, O(1) per call.
void WorkerImpl::CompactDeadlines() {
  // Room for every push until the next compaction: growing a fresh vector
  // from the live calls' size reallocated it four or five times per cycle.
  std::vector<DeadlineEntry> live;
  live.reserve(DeadlineHeapLimit() + 1);
  for (uint32_t slot = 0; slot < calls_.size(); ++slot) {
    const PendingCall& c = calls_[slot];
    if (c.done) live.emplace_back(c.deadline, MakeRequestId(slot, c.generation));
  }
  deadlines_ = decltype(deadlines_)(std::greater<>{}, std::move(live));
  ++stats_.deadline_compactions;
}

void WorkerImpl::CompleteCall(uint32_t slot, const Status& status, std::span<const uint8_t> payload, uint64_t pushed) {
  PendingCall& call = calls_[slot];
  ReplyCallback done = std::move(call.done);
  call.done = nullptr;
  if (Connection* conn = FindConnection(call.connection_id); conn != nullptr && conn->outstanding > 0) {
    --conn->outstanding;
  } else if (conn == nullptr) {
    // The connection was already removed (failure path); its counter no longer matters.
  }
  call.out_region.reset();
  call.in_region.reset();
  if (call.bounce_in && status.ok() && pushed > 0) {
    const uint64_t n = std::min<uint64_t>(pushed, call.bulk_in.size());
    std::memcpy(call.bulk_in.data(), call.bounce_in->data(), n);
    stats_.bulk_bounce_bytes += n;
  }
  // A call that did not complete normally (timeout, disconnect) may still
  // have a server writing into its bounce segment: that one is not reused.
  const Status::Code code = status.code();
  const bool reusable =
      code != Status::Code::kTimedOut && code != Status::Code::kDisconnected && code != Status::Code::kCancelled;
  ReleaseBounce(std::move(call.bounce_out), reusable);
  ReleaseBounce(std::move(call.bounce_in), reusable);
  call.bulk_in = {};
  --live_calls_;
  free_calls_.push_back(slot);
  ReplyView view{status, payload, pushed};
  done(view);
}

Result<std::unique_ptr<SharedBuffer>> WorkerImpl::AcquireBounce(uint64_t length) {
  // The smallest free one that fits; a reused segment stays mapped on the
  // server (one mapping per connection, not one per call).
  size_t best = bounce_free_.size();
  for (size_t i = 0; i < bounce_free_.size(); ++i) {
    if (bounce_free_[i]->size() >= length &&
        (best == bounce_free_.size() || bounce_free_[i]->size() < bounce_free_[best]->size()))
      best = i;
  }
  if (best < bounce_free_.size()) {
    std::unique_ptr<SharedBuffer> b = std::move(bounce_free_[best]);
    bounce_free_[best] = std::move(bounce_free_.back());
    bounce_free_.pop_back();
    bounce_free_bytes_ -= b->size();
    return b;
  }
  uint64_t size = 64 * 1024;
  while (size < length) size *= 2;
  return SharedBuffer::Create(size);
}

void WorkerImpl::ReleaseBounce(std::unique_ptr<SharedBuffer> buffer, bool reusable) {
  if (!buffer || !reusable || in_destructor_) return;
  constexpr size_t kMaxFree = 64;
  constexpr uint64_t kMaxFreeBytes = uint64_t{512} << 20;
  if (bounce_free_.size() >= kMaxFree || bounce_free_bytes_ + buffer->size() > kMaxFreeBytes) return;
  bounce_free_bytes_ += buffer->size();
  bounce_free_.push_back(std::move(buffer));
}

// Finds the live call for `request_id`, or nullptr.
static PendingCall* LookupCall(std::deque<PendingCall>& calls, uint64_t request_id, uint32_t* slot_out) {
  const uint32_t low = static_cast<uint32_t>(request_id);
  const uint32_t gen = static_cast<uint32_t>(request_id >> 32);
  if (low == 0 || low > calls.size()) return nullptr;
  PendingCall& c = calls[low - 1];
  if (!c.done || c.generation != gen) return nullptr;
  *slot_out = low - 1;
  return &c;
}

void WorkerImpl::HandleReply(const wire::Message& msg) {
  uint32_t slot = 0;
  PendingCall* call = LookupCall(calls_, msg.request_id, &slot);
  Connection* conn = FindConnection(msg.connection_id);
  if (call == nullptr || conn == nullptr || call->connection_id != conn->local_id) {
    ++stats_.stale_replies;
    return;
  }
  ++stats_.replies_received;
  Status status =
      msg.status_code == 0 ? Status::Ok() : Status::FromCode(msg.status_code, std::string(msg.status_message));
  // Pushed bytes: inline in the reply, already placed by RMA, or arriving as push data.
  if (msg.pushed_bytes > call->bulk_in.size()) {
    ++stats_.malformed_messages;
    CompleteCall(slot,
                 Status::Protocol(fmt::format("transport: reply pushed {} bytes into a {}-byte buffer",
                                              msg.pushed_bytes, call->bulk_in.size())),
                 {}, 0);
    return;
  }
  if (!msg.inline_data.empty()) {
    std::memcpy(call->bulk_in.data(), msg.inline_data.data(), msg.inline_data.size());
    stats_.bulk_inline_bytes += msg.inline_data.size();
  }
  const bool am_push_pending =
      msg.inline_data.empty() && msg.pushed_bytes > 0 && call->in_via_am && call->pushed_received < msg.pushed_bytes;
  if (am_push_pending) {
    // The pushed bytes have not all landed yet: keep the reply until they do.
    call->reply_arrived = true;
    call->pushed_expected = msg.pushed_bytes;
    call->reply_status = std::move(status);
    call->reply_payload.assign(msg.payload.begin(), msg.payload.end());
    return;
  }
  CompleteCall(slot, status, msg.payload, msg.pushed_bytes);
}

ucs_status_t WorkerImpl::HandlePushData(const wire::Message& msg, void* data, size_t length, bool rndv) {
  uint32_t slot = 0;
  PendingCall* call = LookupCall(calls_, msg.request_id, &slot);
  Connection* conn = FindConnection(msg.connection_id);
  if (call == nullptr || conn == nullptr || call->connection_id != conn->local_id) {
    ++stats_.stale_replies;
    return rndv ? UCS_ERR_CANCELED : UCS_OK;
  }
  if (length > call->bulk_in.size() - call->pushed_received || call->push_in_flight) {
    ++stats_.malformed_messages;
    CompleteCall(slot, Status::Protocol("transport: pushed data overflows the bulk-in buffer"), {}, 0);
    return rndv ? UCS_ERR_INVALID_PARAM : UCS_OK;
  }
  std::byte* dst = call->bulk_in.data() + call->pushed_received;
  if (!rndv) {
    std::memcpy(dst, data, length);
    call->pushed_received += length;
    stats_.bulk_am_bytes += length;
    return UCS_OK;
  }
  PushReceive* ctx = &call->push_receive;  // calls_ is a deque: the address is stable
  *ctx = PushReceive{this, slot, call->generation};
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.recv_am = PushRecvCallback;
  param.user_data = ctx;
  call->push_in_flight = true;
  call->pushed_expected = std::max<uint64_t>(call->pushed_expected, call->pushed_received + length);
  ucs_status_ptr_t req = ucp_am_recv_data_nbx(worker_, data, dst, length, &param);
  if (UCS_PTR_IS_PTR(req)) {
    ++receives_in_flight_;
    return UCS_INPROGRESS;
  }
  OnPushReceived(slot, call->generation, UCS_PTR_STATUS(req));
  // recv_data_nbx took over the descriptor either way.
  return UCS_INPROGRESS;
}

void WorkerImpl::OnPushReceived(uint32_t slot, uint32_t generation, ucs_status_t status) {
  if (slot >= calls_.size()) return;
  PendingCall& call = calls_[slot];
  if (!call.done || call.generation != generation) return;  // timed out or failed meanwhile
  call.push_in_flight = false;
  if (status != UCS_OK) {
    CompleteCall(slot, UcsError("transport: receiving pushed data", status), {}, 0);
    return;
  }
  const uint64_t got = call.pushed_expected - call.pushed_received;
  call.pushed_received = call.pushed_expected;
  stats_.bulk_am_bytes += got;
  if (call.reply_arrived && call.pushed_received >= call.pushed_expected) {
    Status st = std::move(call.reply_status);
    std::vector<uint8_t> payload = std::move(call.reply_payload);
    CompleteCall(slot, st, payload, call.pushed_received);
  }
}

void WorkerImpl::ExpireDeadlines() {
  const Clock::time_point now = Clock::now();
  while (!deadlines_.empty() && deadlines_.top().first <= now) {
    const uint64_t id = deadlines_.top().second;
    deadlines_.pop();
    uint32_t slot = 0;
    PendingCall* call = LookupCall(calls_, id, &slot);
    if (call == nullptr) continue;
    if (call->push_in_flight) {
      // The receive targets the caller's buffer; give it a moment more to finish.
      deadlines_.emplace(now + std::chrono::milliseconds(10), id);
      continue;
    }
    ++stats_.requests_timed_out;
    Connection* conn = FindConnection(call->connection_id);
    CompleteCall(slot,
                 Status::TimedOut(fmt::format("transport: request {:#x} to {} got no reply in time", id,
                                              conn != nullptr ? conn->peer_name : std::string("a closed peer"))),
                 {}, 0);
  }
  if (live_calls_ == 0 && !deadlines_.empty()) deadlines_ = {};
}

// ---- EndpointImpl ----------------------------------------------------------------
Status EndpointImpl::Call(uint16_t opcode, std::span<const uint8_t> payload, const CallOptions& options,
                          ReplyCallback done) {
  if (conn_->worker == nullptr)
    return conn_->status.ok() ? Status::Disconnected("transport: endpoint closed") : conn_->status;
  return worker_->StartCall(*conn_, opcode, payload, options, std::move(done));
}

void EndpointImpl::Cork() {
  conn_->corked = true;
}

void EndpointImpl::Uncork() {
  conn_->corked = false;
  if (conn_->worker != nullptr) worker_->FlushBatch(*conn_);
}

Result<ReplyMessage> EndpointImpl::CallSync(uint16_t opcode, std::span<const uint8_t> payload,
                                            const CallOptions& options) {
  // One reference captured: the callback fits std::function's inline storage
  // (four references did not, and every CallSync paid a malloc and a free).
  struct Outcome {
    bool finished = false;
    Status status;
    ReplyMessage reply;
  } out;
  ROS2_RETURN_IF_ERROR(Call(opcode, payload, options, [&out](const ReplyView& r) {
    out.finished = true;
    out.status = r.status;
    out.reply.payload.assign(r.payload.begin(), r.payload.end());
    out.reply.bulk_in_bytes = r.bulk_in_bytes;
  }));
  // The call's own deadline bounds the wait; the extra second covers its expiry pass.
  const auto timeout =
      (options.timeout.count() > 0 ? options.timeout : worker_->options().default_timeout) + std::chrono::seconds(1);
  ROS2_RETURN_IF_ERROR(worker_->RunUntil([&out] { return out.finished; }, timeout));
  if (!out.status.ok()) return out.status;
  return std::move(out.reply);
}

uint64_t EndpointImpl::max_payload() const {
  if (conn_->worker == nullptr) return 0;  // the worker is gone
  if (!conn_->info.rma_any_memory) {       // bulk may ride active messages: the message must fit the AM header
    const uint64_t fixed = wire::kHeaderSize + 2 * wire::kBulkDescriptorSize + wire::kMaxCapability;
    const uint64_t limit = conn_->worker->max_am_header();
    return limit > fixed ? limit - fixed : 0;
  }
  return wire::kMaxPayload;
}

void EndpointImpl::Close() {
  if (conn_->worker == nullptr) return;
  WorkerImpl* w = conn_->worker;
  if (conn_->ep != nullptr && conn_->status.ok() && conn_->remote_id != 0) {
    wire::Message bye;
    bye.kind = wire::Kind::kBye;
    bye.connection_id = conn_->remote_id;
    (void)w->SendMessage(*conn_, bye, {}, nullptr);
  }
  w->FailConnection(conn_->local_id, Status::Cancelled("transport: endpoint closed by its owner"), false,
                    /*graceful=*/true);
}

}  // namespace ros2::transport
