// Sends on the libfabric worker: pooled ops, the per-peer queues of sends the
// provider answered EAGAIN (posted again by Progress), and SendMessage.
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <fmt/format.h>

#include "transport/ofi/fabric_library.h"
#include "transport/ofi/frame_bytes.h"
#include "transport/ofi/worker.h"

namespace ros2::transport::ofi {

Op* OfiWorker::NewOp(Op::Kind kind) {
  Op* op;
  if (op_pool_.empty()) {
    op = new Op();
  } else {
    op = op_pool_.back();
    op_pool_.pop_back();
  }
  op->kind = kind;
  return op;
}

void OfiWorker::FreeOp(Op* op) {
  if (op_pool_.size() >= kOpPoolSize || in_destructor_) {
    delete op;
    return;
  }
  // Back to its first state, keeping the byte buffer's capacity (up to one
  // posted receive's worth) for the next message.
  op->ctx = fi_context{};
  op->index = 0;
  op->bytes.clear();
  if (op->bytes.capacity() > kRecvSize) MessageBytes().swap(op->bytes);
  op->from = FI_ADDR_UNSPEC;
  op->done = nullptr;
  op->cancelled = false;
  op->to = FI_ADDR_UNSPEC;
  op->tagged = false;
  op->tag = 0;
  op->data = nullptr;
  op->len = 0;
  op->fail_connection = 0;
  op->resend_once = false;
  op_pool_.push_back(op);
}

Status OfiWorker::SendBytes(fi_addr_t to, MessageBytes bytes, std::function<void(const Status&, uint64_t)> done) {
  Op* op = NewOp(Op::Kind::kSend);
  op->bytes = std::move(bytes);
  op->done = std::move(done);
  return SendOp(to, op);
}

Status OfiWorker::SendOp(fi_addr_t to, Op* op) {
  if (op->bytes.size() > kRecvSize) {
    // Announce, then send tagged: the receiver posts a receive of this length.
    if (op->bytes.size() > kMaxLarge) {
      const size_t n = op->bytes.size();
      FreeOp(op);
      return Status::InvalidArgument(fmt::format("transport ofi: message of {} bytes", n));
    }
    const uint64_t tag = TagOf(kTagLarge, ++next_large_tag_);
    Op* frame = NewOp(Op::Kind::kSend);
    frame->bytes.resize(kFrameSize);
    PutLe32(frame->bytes.data(), kFrameMagic);
    PutLe32(frame->bytes.data() + 4, static_cast<uint32_t>(op->bytes.size()));
    PutLe64(frame->bytes.data() + 8, tag);
    if (Status st = Submit(frame, to, frame->bytes.data(), frame->bytes.size()); !st.ok()) {
      FreeOp(op);
      return st;
    }
    op->kind = Op::Kind::kBulkSend;
    op->tagged = true;
    op->tag = tag;
  }
  return Submit(op, to, op->bytes.data(), op->bytes.size());
}

Status OfiWorker::SendTagged(fi_addr_t to, uint64_t tag, std::span<const std::byte> data,
                             std::function<void(const Status&, uint64_t)> done) {
  Op* op = NewOp(Op::Kind::kBulkSend);
  op->done = std::move(done);
  op->tagged = true;
  op->tag = tag;
  return Submit(op, to, data.data(), data.size());
}

ssize_t OfiWorker::PostSend(Op* op) {
  return op->tagged ? fi_tsend(ep_, op->data, op->len, nullptr, op->to, op->tag, &op->ctx)
                    : fi_send(ep_, op->data, op->len, nullptr, op->to, &op->ctx);
}

Status OfiWorker::Submit(Op* op, fi_addr_t to, const void* data, size_t len) {
  op->to = to;
  op->data = data;
  op->len = len;
  auto queue = send_queues_.find(to);
  if (queue == send_queues_.end() || queue->second.empty()) {
    const ssize_t rc = PostSend(op);
    if (rc == 0) {
      ++ops_in_flight_;
      transfers_in_flight_ += op->tagged;
      return Status::Ok();
    }
    if (rc != -FI_EAGAIN) {
      const bool tagged = op->tagged;
      FreeOp(op);
      return FiStatus(tagged ? "fi_tsend" : "fi_send", rc);
    }
    if (queue == send_queues_.end()) queue = send_queues_.try_emplace(to).first;
  }
  // The provider takes no more now (its queues to this peer are full: over
  // shm one message above 4 KiB at a time per peer): the send waits its turn
  // behind the others to this peer, and Progress posts it. The caller does
  // not wait, and no completion runs inside its call. The patience counts
  // from when the send reached the head of its queue: a long queue that
  // moves is a live peer.
  op->patience = send_patience_;
  op->give_up_at = Clock::now() + send_patience_;
  queue->second.push_back(op);
  transfers_in_flight_ += op->tagged;
  ++queued_sends_;
  ++ops_in_flight_;
  return Status::Ok();
}

void OfiWorker::FlushSendQueues() {
  std::vector<Op*> failed;
  Clock::time_point now{};
  for (auto it = send_queues_.begin(); it != send_queues_.end();) {
    std::deque<Op*>& queue = it->second;
    while (!queue.empty()) {
      Op* op = queue.front();
      const ssize_t rc = PostSend(op);
      if (rc == -FI_EAGAIN) {
        if (now == Clock::time_point{}) now = Clock::now();
        if (now < op->give_up_at) break;  // the peer's turn comes again at the next progress
      }
      queue.pop_front();
      --queued_sends_;
      if (rc == 0 && !queue.empty()) {
        if (now == Clock::time_point{}) now = Clock::now();
        queue.front()->give_up_at = now + queue.front()->patience;
      }
      if (rc != 0) {
        // Refused, or not taken within the patience (the peer is gone: rxm
        // answers EAGAIN while it reconnects): the send fails, and its
        // completion says so (the connection fails with it).
        op->cancelled = rc != -FI_EAGAIN;
        failed.push_back(op);
      }
    }
    it = queue.empty() ? send_queues_.erase(it) : std::next(it);
  }
  // Outside the loop: a callback may send (and change the queues).
  for (Op* op : failed) {
    const Status why =
        op->cancelled ? Status::IOError("transport ofi: the provider refused a queued send")
                      : Status::IOError(fmt::format("transport ofi: the provider took no send to this peer for {} ms",
                                                    op->patience.count()));
    op->cancelled = false;
    OnCompletion(op, why, 0, FI_ADDR_NOTAVAIL);
  }
}

Status OfiWorker::SendMessage(OfiConnection& conn, const wire::Message& msg,
                              std::function<void(const Status&, uint64_t)> done, bool resend_once) {
  if (conn.addr == FI_ADDR_UNSPEC)
    return conn.status.ok() ? Status::Disconnected("transport ofi: no peer") : conn.status;
  // Encoded straight into a pooled op's buffer (no allocation once warm).
  Op* op = NewOp(Op::Kind::kSend);
  op->bytes.resize(wire::EncodedSize(msg));
  auto n = wire::Encode(msg, op->bytes);
  Status sealed = n.status();
  if (sealed.ok()) {
    op->bytes.resize(*n);
    if (conn.auth != nullptr && conn.auth->keyed) sealed = Seal(conn, op->bytes);
  }
  if (!sealed.ok()) {
    FreeOp(op);
    return sealed;
  }
  // A send the provider fails (the peer is gone: rxm reports it on the
  // completion, or keeps answering EAGAIN) fails the connection, so its
  // calls end and nothing more is tried on it (OnCompletion).
  op->fail_connection = conn.local_id;
  op->resend_once = resend_once;
  op->done = std::move(done);
  const uint64_t id = conn.local_id;
  Status st = SendOp(conn.addr, op);
  if (!st.ok() && st.code() != Status::Code::kInvalidArgument) {
    deferred_failures_.emplace_back(id, Status::Disconnected(fmt::format("transport ofi: {}", st.message())));
  }
  return st;
}

}  // namespace ros2::transport::ofi
