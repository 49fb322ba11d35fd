// The client side of the libfabric worker: Connect and the hello, calls,
// replies, pushed bulk and deadlines; the Endpoint handle.
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <cstring>

#include <fmt/format.h>

#include "common/log.h"
#include "transport/ofi/worker.h"

namespace ros2::transport::ofi {
namespace {

uint64_t MakeRequestId(uint32_t slot, uint32_t generation) {
  return (static_cast<uint64_t>(generation) << 32) | (slot + 1);
}

}  // namespace

Result<std::shared_ptr<Endpoint>> OfiWorker::Connect(std::span<const uint8_t> peer_address) {
  if (progress_depth_ > 0) return InsideProgress(name_, "connect");
  ROS2_ASSIGN_OR_RETURN(wire::WorkerAddress peer, wire::DecodeAddress(peer_address));
  const std::string who = fmt::format("peer pid {}", peer.pid);
  ROS2_RETURN_IF_ERROR(wire::CheckPeerWireVersion(peer.wire_version, who));
  ROS2_RETURN_IF_ERROR(CheckPeerProvider(peer.ucx_address, Provider::kOfi, who));
  if (peer.ucx_address.size() <= sizeof(kAddressTag)) {
    return Status::InvalidArgument(fmt::format("transport ofi: {}: empty libfabric address", who));
  }
  const auto inner = peer.ucx_address.subspan(sizeof(kAddressTag));
  auto conn = std::make_shared<OfiConnection>();
  if (!InsertAddress(inner, &conn->addr)) {
    return Status::InvalidArgument(fmt::format("transport ofi: {}: fi_av_insert refused its address", who));
  }
  conn->client_side = true;
  conn->local_id = ++last_connection_id_;
  const bool same_host = peer.boot_id == boot_id_;
  conn->peer_name = fmt::format("{}pid {}", same_host ? "" : "remote ", peer.pid);
  conn->info.same_host = same_host;
  conn->info.peer_pid = peer.pid;
  conn->info.am_transport = context_.ofi()->provider();
  conn->info.lanes = {context_.ofi()->provider()};
  conn->info.bulk_mode = BulkTransfer::kActiveMessage;
  WatchPeer(*conn);
  connections_[conn->local_id] = conn;
  wire::Message hello;
  hello.kind = wire::Kind::kHello;
  hello.request_id = conn->local_id;
  hello.payload = address_;
  // Over shm the hello goes by the server's door, so that the server's
  // provider, not this one, makes the introduction (door.cc).
  Status sent;
  if (door_fd_ >= 0) {
    std::vector<uint8_t> bytes(wire::EncodedSize(hello));
    sent = wire::Encode(hello, bytes).status();
    if (sent.ok()) sent = KnockOnDoor(inner, bytes);
  } else {
    sent = SendMessage(*conn, hello);
  }
  if (!sent.ok()) {
    FailConnection(conn->local_id, sent, false, false);
    return sent;
  }
  Status waited = RunUntil([&] { return conn->remote_id != 0 || !conn->status.ok(); }, options().connect_timeout);
  if (!conn->status.ok()) return conn->status;
  if (!waited.ok()) {
    const Status why = Status::TimedOut(fmt::format("transport ofi: {} did not acknowledge the hello within {} ms",
                                                    conn->peer_name, options().connect_timeout.count()));
    FailConnection(conn->local_id, why, false, false);
    return why;
  }
  return std::shared_ptr<Endpoint>(std::make_shared<OfiEndpoint>(this, conn));
}

void OfiWorker::HandleHelloAck(const wire::Message& msg, fi_addr_t from) {
  OfiConnection* conn = FindConnection(msg.connection_id);
  if (conn == nullptr || !conn->client_side || conn->remote_id != 0 || conn->addr != from ||
      msg.payload.size() != wire::kHelloAckSize || msg.request_id == 0) {
    ++stats_.malformed_messages;
    if (conn != nullptr && conn->addr != from) ++stats_.misdirected_messages;
    return;
  }
  conn->remote_id = msg.request_id;
  conn->auth = std::make_shared<ConnectionAuth>();
  conn->auth->integrity_asked = (msg.payload[0] & wire::kHelloAckIntegrity) != 0;
  // The server takes memory keys, and this side can register memory for it.
  conn->rma = (msg.payload[0] & wire::kHelloAckRma) != 0 && context_.ofi()->rma_target();
  if (conn->rma) conn->info.bulk_mode = BulkTransfer::kRma;
  std::memcpy(conn->auth->challenge.data(), msg.payload.data() + 1, wire::kNonceSize);
}

uint64_t OfiWorker::max_payload() const {
  return wire::kMaxPayload;
}

Status OfiWorker::StartCall(OfiConnection& conn, uint16_t opcode, std::span<const uint8_t> payload,
                            const CallOptions& options, ReplyCallback done) {
  if (!conn.status.ok()) return conn.status;
  if (conn.remote_id == 0) return Status::Disconnected("transport ofi: connection not established");
  if (opcode > wire::kMaxUserOpcode && opcode != wire::kAuthenticateOpcode) {
    return Status::InvalidArgument(fmt::format("transport: opcode {:#x} is reserved", opcode));
  }
  if (payload.size() > max_payload()) {
    return Status::InvalidArgument(
        fmt::format("transport: payload of {} bytes exceeds the maximum of {}", payload.size(), max_payload()));
  }
  if (options.capability.size() > wire::kMaxCapability) {
    return Status::InvalidArgument(fmt::format("transport: capability of {} bytes", options.capability.size()));
  }
  if (live_calls_ >= this->options().max_outstanding_requests) {
    return Status::Busy(fmt::format("transport: worker '{}' has {} outstanding requests", name_, live_calls_));
  }
  const uint64_t inline_limit = this->options().inline_limit;
  // One-sided bulk: the buffers above the inline limit (up to the server's
  // kMaxRmaBulk; longer ones ride tagged messages) are registered (or found
  // in the cache) before the call takes a slot.
  std::shared_ptr<OfiRegistration> out_reg, in_reg;
  const auto by_key = [&](uint64_t n) { return conn.rma && n > inline_limit && n <= kMaxRmaBulk; };
  if (by_key(options.bulk_out.size())) {
    ROS2_ASSIGN_OR_RETURN(out_reg, RegisterBulk(options.bulk_out.data(), options.bulk_out.size(),
                                                options.bulk_out_region, FI_REMOTE_READ));
  }
  if (by_key(options.bulk_in.size())) {
    ROS2_ASSIGN_OR_RETURN(
        in_reg, RegisterBulk(options.bulk_in.data(), options.bulk_in.size(), options.bulk_in_region, FI_REMOTE_WRITE));
  }
  std::array<uint8_t, kRmaKeySize> out_key{}, in_key{};
  uint32_t slot;
  if (!free_calls_.empty()) {
    slot = free_calls_.back();
    free_calls_.pop_back();
  } else {
    slot = static_cast<uint32_t>(calls_.size());
    calls_.emplace_back();
  }
  OfiCall& c = calls_[slot];
  const uint32_t generation = c.generation;
  const uint64_t rid = MakeRequestId(slot, generation);
  wire::Message m;
  m.kind = wire::Kind::kRequest;
  m.opcode = opcode;
  m.request_id = rid;
  m.connection_id = conn.remote_id;
  m.capability = options.capability;
  m.payload = payload;
  const bool out_am = options.bulk_out.size() > inline_limit && out_reg == nullptr;
  if (!options.bulk_out.empty()) {
    wire::BulkDescriptor& d = m.bulk[m.bulk_count++];
    d.direction = wire::BulkDirection::kOut;
    d.length = options.bulk_out.size();
    d.transfer = out_am ? wire::BulkTransfer::kActiveMessage : wire::BulkTransfer::kInline;
    if (out_reg != nullptr) {
      DescribeRma(*out_reg, options.bulk_out.data(), d, out_key.data());
    } else if (!out_am) {
      m.inline_data =
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(options.bulk_out.data()), options.bulk_out.size());
    }
  }
  const bool in_am = options.bulk_in.size() > inline_limit && in_reg == nullptr;
  if (!options.bulk_in.empty()) {
    wire::BulkDescriptor& d = m.bulk[m.bulk_count++];
    d.direction = wire::BulkDirection::kIn;
    d.length = options.bulk_in.size();
    d.transfer = in_am ? wire::BulkTransfer::kActiveMessage : wire::BulkTransfer::kInline;
    if (in_reg != nullptr) DescribeRma(*in_reg, options.bulk_in.data(), d, in_key.data());
  }
  c = OfiCall{};
  c.generation = generation;
  c.connection_id = conn.local_id;
  c.bulk_in = options.bulk_in;
  c.out_reg = std::move(out_reg);
  c.in_reg = std::move(in_reg);
  if (in_am) {
    // Posted before the request leaves: the pushed bytes land in place.
    auto op =
        RecvTagged(conn.addr, TagOf(kTagPush, rid), options.bulk_in,
                   [this, slot, generation](const Status& st, uint64_t len) { OnPushDone(slot, generation, st, len); });
    if (!op.ok()) {
      free_calls_.push_back(slot);
      return op.status();
    }
    c.push_recv = *op;
  }
  const Status sent = conn.corked ? SendOrBatch(conn, m) : SendMessage(conn, m);
  if (Status st = sent; !st.ok()) {
    if (c.push_recv != nullptr) {
      // The receive completes (cancelled) later: the slot stays taken until then.
      c.finished = true;
      c.status = st;
      c.done = [](const ReplyView&) {};
      ++live_calls_;
      fi_cancel(&ep_->fid, &c.push_recv->ctx);
      return st;
    }
    free_calls_.push_back(slot);
    return st;
  }
  if (out_am) {
    ROS2_RETURN_IF_ERROR(SendTagged(conn.addr, TagOf(kTagBulkOut, rid), options.bulk_out, nullptr));
    stats_.bulk_am_bytes += options.bulk_out.size();
  } else if (c.out_reg != nullptr) {
    stats_.bulk_rma_bytes += options.bulk_out.size();
  } else {
    stats_.bulk_inline_bytes += options.bulk_out.size();
  }
  c.done = std::move(done);
  // From the coarse clock, as on UCX: a deadline needs no better than a few
  // ms, and a clock read per call is a cost of the 4 KiB bulk rate.
  const auto timeout = options.timeout.count() > 0 ? options.timeout : this->options().default_timeout;
  c.deadline = CoarseNow() + timeout;
  deadlines_.emplace(c.deadline, rid);
  if (deadlines_.size() > 2 * calls_.size() + 64) CompactDeadlines();
  ++live_calls_;
  ++conn.outstanding;
  ++stats_.requests_sent;
  return Status::Ok();
}

void OfiWorker::HandleReply(OfiConnection& conn, const wire::Message& msg) {
  const uint64_t low = msg.request_id & 0xffffffffu;
  const uint32_t slot = static_cast<uint32_t>(low - 1);
  const uint32_t generation = static_cast<uint32_t>(msg.request_id >> 32);
  if (low == 0 || slot >= calls_.size() || calls_[slot].generation != generation || !calls_[slot].done ||
      calls_[slot].finished || calls_[slot].connection_id != conn.local_id) {
    ++stats_.stale_replies;
    return;
  }
  ++stats_.replies_received;
  OfiCall& c = calls_[slot];
  uint64_t pushed = msg.pushed_bytes;
  Status status =
      msg.status_code == 0 ? Status::Ok() : Status::FromCode(msg.status_code, std::string(msg.status_message));
  if (!msg.inline_data.empty()) {
    if (msg.inline_data.size() > c.bulk_in.size() || msg.inline_data.size() != pushed) {
      status = Status::Protocol("transport: reply pushes more bytes than the bulk-in buffer holds");
      pushed = 0;
    } else {
      std::memcpy(c.bulk_in.data(), msg.inline_data.data(), msg.inline_data.size());
    }
  } else if (pushed > c.bulk_in.size()) {
    status = Status::Protocol("transport: reply claims more pushed bytes than the bulk-in buffer holds");
    pushed = 0;
  }
  const bool rma_push = msg.inline_data.empty() && pushed > 0 && c.in_reg != nullptr;
  if (rma_push && status.ok()) stats_.bulk_rma_bytes += pushed;  // written before the reply left
  const bool tagged_push = msg.inline_data.empty() && pushed > 0 && !rma_push;
  if (tagged_push && c.push_recv == nullptr && status.ok() && (!c.push_ok || c.push_received != pushed)) {
    // The pushed bytes arrived (or failed) before the reply.
    status =
        c.push_ok
            ? Status::Protocol(fmt::format("transport: {} bytes pushed, the reply says {}", c.push_received, pushed))
            : Status::IOError("transport: the pushed bulk did not arrive");
  }
  CompleteCall(slot, status, msg.payload, pushed);
}

void OfiWorker::CompleteCall(uint32_t slot, const Status& status, std::span<const uint8_t> payload, uint64_t pushed) {
  OfiCall& c = calls_[slot];
  c.finished = true;
  c.status = status;
  c.reply_payload.assign(payload.begin(), payload.end());
  c.pushed = pushed;
  c.reply_arrived = true;
  if (c.push_recv != nullptr) {
    // Pushed bytes still to come: OnPushDone finishes the call. Otherwise the
    // receive is cancelled, and the call finishes when the cancellation
    // completes: the buffer is the caller's again only once no receive is
    // posted on it.
    const bool expected = status.ok() && pushed > 0 && !in_destructor_;
    if (!expected) fi_cancel(&ep_->fid, &c.push_recv->ctx);
    if (!in_destructor_) return;
    c.push_recv = nullptr;  // the endpoint closes with the worker
  }
  FinishCall(slot);
}

void OfiWorker::OnPushDone(uint32_t slot, uint32_t generation, const Status& st, uint64_t len) {
  if (slot >= calls_.size() || calls_[slot].generation != generation) return;
  OfiCall& c = calls_[slot];
  c.push_recv = nullptr;
  c.push_ok = st.ok();
  c.push_received = st.ok() ? len : 0;
  if (!c.finished) return;  // before the reply: the reply finishes the call
  if (c.status.ok() && c.pushed > 0 && (!st.ok() || len != c.pushed)) {
    c.status =
        st.ok() ? Status::Protocol(fmt::format("transport: {} bytes pushed, the reply says {}", len, c.pushed)) : st;
  }
  FinishCall(slot);
}

void OfiWorker::FinishCall(uint32_t slot) {
  OfiCall& c = calls_[slot];
  if (!c.done) return;
  ReplyCallback done = std::move(c.done);
  c.done = nullptr;
  if (OfiConnection* conn = FindConnection(c.connection_id); conn != nullptr && conn->outstanding > 0) {
    --conn->outstanding;
  }
  if (c.status.code() == Status::Code::kTimedOut) ++stats_.requests_timed_out;
  if (c.status.code() == Status::Code::kDisconnected) ++stats_.requests_failed_disconnect;
  ReplyView view;
  view.status = c.status;
  view.payload = c.reply_payload;
  view.bulk_in_bytes = c.status.ok() ? c.pushed : 0;
  --live_calls_;
  ++c.generation;
  c.finished = false;
  c.out_reg.reset();
  c.in_reg.reset();
  done(view);
  free_calls_.push_back(slot);
}

void OfiWorker::ExpireDeadlines(Clock::time_point now) {
  while (!deadlines_.empty() && deadlines_.top().first <= now) {
    const uint64_t rid = deadlines_.top().second;
    deadlines_.pop();
    const uint32_t slot = static_cast<uint32_t>((rid & 0xffffffffu) - 1);
    if (slot >= calls_.size()) continue;
    OfiCall& c = calls_[slot];
    if (c.generation != static_cast<uint32_t>(rid >> 32) || !c.done || c.finished) continue;
    CompleteCall(slot, Status::TimedOut(fmt::format("transport: request {:#x} timed out", rid)), {}, 0);
  }
  if (live_calls_ == 0 && !deadlines_.empty()) deadlines_ = {};
}

// A completed call leaves its entry in the deadline heap (a heap cannot
// remove from the middle), and entries leave only as they come due: a client
// that always has calls in flight (128 calls of 4 KiB, 30 s timeouts) would
// hold one entry per call of the last timeout period, millions, growing the
// heap by a page every few hundred calls. So, as on UCX (client_call.cc), the
// heap is rebuilt from the live calls once it holds more than twice as many
// entries as there are call slots: O(slots) work every O(slots) calls.
void OfiWorker::CompactDeadlines() {
  std::vector<DeadlineEntry> live;
  live.reserve(2 * calls_.size() + 65);
  for (uint32_t slot = 0; slot < calls_.size(); ++slot) {
    const OfiCall& c = calls_[slot];
    if (c.done && !c.finished) live.emplace_back(c.deadline, MakeRequestId(slot, c.generation));
  }
  deadlines_ = decltype(deadlines_)(std::greater<>{}, std::move(live));
}

// ---- Endpoint -------------------------------------------------------------------
Status OfiEndpoint::Call(uint16_t opcode, std::span<const uint8_t> payload, const CallOptions& options,
                         ReplyCallback done) {
  if (conn_->detached) return conn_->status;
  if (!done) return Status::InvalidArgument("transport: Call without a reply callback");
  return worker_->StartCall(*conn_, opcode, payload, options, std::move(done));
}

Result<ReplyMessage> OfiEndpoint::CallSync(uint16_t opcode, std::span<const uint8_t> payload,
                                           const CallOptions& options) {
  if (conn_->detached) return conn_->status;
  bool finished = false;
  Status status;
  ReplyMessage out;
  ROS2_RETURN_IF_ERROR(Call(opcode, payload, options, [&](const ReplyView& reply) {
    finished = true;
    status = reply.status;
    out.payload.assign(reply.payload.begin(), reply.payload.end());
    out.bulk_in_bytes = reply.bulk_in_bytes;
  }));
  const auto timeout = options.timeout.count() > 0 ? options.timeout : worker_->options().default_timeout;
  Status waited = worker_->RunUntil([&] { return finished; }, timeout + std::chrono::seconds(5));
  if (!waited.ok()) return waited;
  if (!status.ok()) return status;
  return out;
}

Status OfiEndpoint::AuthenticateSession(const SessionCredential& session) {
  if (conn_->detached) return conn_->status;
  return worker_->AuthenticateSession(*conn_, session);
}

void OfiEndpoint::Uncork() {
  conn_->corked = false;
  if (!conn_->detached) worker_->FlushBatch(*conn_);
}

void OfiEndpoint::Close() {
  if (conn_->detached) return;
  worker_->FlushBatch(*conn_);  // what the owner batched goes before the bye
  worker_->FailConnection(conn_->local_id, Status::Cancelled("transport: endpoint closed"), false, true);
}

}  // namespace ros2::transport::ofi
