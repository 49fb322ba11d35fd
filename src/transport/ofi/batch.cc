// Batches on the libfabric worker: a corked client endpoint gathers its
// requests, a server gathers the replies given while it dispatches a received
// batch (and, with SetReplyBatching, every reply until FlushBatches), and each
// gathered set leaves as one kBatch message (docs/wire-format.md, "Batches";
// the same rules as the UCX worker's SendOrBatch / FlushBatch).
#include <fmt/format.h>

#include "common/log.h"
#include "transport/ofi/worker.h"

namespace ros2::transport::ofi {

Status OfiWorker::SendOrBatch(OfiConnection& conn, const wire::Message& msg) {
  const uint64_t limit = options().batch_limit;
  const size_t entry = wire::BatchEntrySize(msg);
  if (limit == 0 || wire::kHeaderSize + entry > limit || !wire::Batchable(msg)) {
    FlushBatch(conn);  // keep the order: what was batched goes first
    return SendMessage(conn, msg);
  }
  if (conn.batch_count > 0 &&
      (conn.batch_bytes.size() + entry > limit || conn.batch_count == wire::kMaxBatchMessages)) {
    FlushBatch(conn);
  }
  if (conn.batch_count == 0) {
    if (conn.batch_bytes.capacity() < limit + wire::kIntegrityTrailerSize) {
      conn.batch_bytes.reserve(limit + wire::kIntegrityTrailerSize);
    }
    conn.batch_bytes.resize(wire::kHeaderSize);
    if (!conn.reply_batching) pending_batches_.push_back(conn.local_id);
  }
  const size_t at = conn.batch_bytes.size();
  conn.batch_bytes.resize(at + entry);
  auto n = wire::EncodeBatchEntry(msg, std::span<uint8_t>(conn.batch_bytes).subspan(at));
  if (!n.ok()) {
    conn.batch_bytes.resize(at);
    if (conn.batch_count == 0) conn.batch_bytes.clear();
    return n.status();
  }
  ++conn.batch_count;
  // Replies of large transfers do not all wait for the rest of their batch.
  conn.batch_pushed += msg.pushed_bytes;
  if (conn.batch_pushed >= options().batch_flush_bytes) FlushBatch(conn);
  return Status::Ok();
}

void OfiWorker::FlushBatch(OfiConnection& conn) {
  if (conn.batch_count == 0) return;
  const uint32_t count = conn.batch_count;
  conn.batch_count = 0;
  conn.batch_pushed = 0;
  if (conn.addr == FI_ADDR_UNSPEC || !conn.status.ok()) {
    conn.batch_bytes.clear();
    return;
  }
  // The batch's storage goes out in a pooled op; the op's former buffer
  // takes the next batch (no allocation once warm).
  Op* op = NewOp(Op::Kind::kSend);
  op->bytes.swap(conn.batch_bytes);
  MessageBytes& bytes = op->bytes;
  if (count == 1) {
    // One entry goes as the plain message it holds.
    bytes.erase(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(wire::kHeaderSize + wire::kBatchEntryPrefix));
  } else if (Status st = wire::EncodeBatchHeader(conn.remote_id, bytes.size() - wire::kHeaderSize, bytes); !st.ok()) {
    // Cannot happen for batches SendOrBatch built: fail loudly rather than drop calls.
    FreeOp(op);
    deferred_failures_.emplace_back(conn.local_id, st.WithContext("transport ofi: batch"));
    return;
  } else {
    ++stats_.batches_sent;
    stats_.batched_messages += count;
  }
  if (conn.auth != nullptr && conn.auth->keyed) {
    if (Status st = Seal(conn, bytes); !st.ok()) {
      FreeOp(op);
      deferred_failures_.emplace_back(conn.local_id, st);
      return;
    }
  }
  const uint64_t id = conn.local_id;
  op->fail_connection = id;  // a failed send fails the connection (OnCompletion)
  if (Status st = SendOp(conn.addr, op); !st.ok()) {
    deferred_failures_.emplace_back(id, Status::Disconnected(fmt::format("transport ofi: {}", st.message())));
  }
}

void OfiWorker::FlushPendingBatches() {
  auto pending = std::move(pending_batches_);
  pending_batches_.clear();
  for (uint64_t id : pending) {
    if (OfiConnection* conn = FindConnection(id); conn != nullptr) FlushBatch(*conn);
  }
  pending.clear();
  if (pending_batches_.empty()) pending_batches_.swap(pending);  // keep the capacity
}

// A received batch: every entry is checked before any is acted on (a
// malformed batch is dropped whole). Requests run with reply batching on, so
// the replies their handlers give at once leave together; replies complete
// their calls. The batch's source and integrity were checked by the caller.
void OfiWorker::HandleBatch(OfiConnection& conn, const wire::Message& msg) {
  const wire::DecodedBatch batch(batch_scratch_, msg);
  const auto& count = batch.count;
  const bool requests = batch.requests();
  if (!count.ok() || requests == conn.client_side) {
    // Nothing of it runs, and the connection closes naming the rule broken:
    // an honest peer never sends such a batch, and its calls in it fail now
    // with that reason instead of at their deadlines.
    ++stats_.malformed_messages;
    CloseForMalformedBatch(conn,
                           !count.ok() ? count.status().message() : std::string("a batch of the wrong direction"));
    return;
  }
  ++stats_.batches_received;
  const std::shared_ptr<OfiConnection> keep = connections_[conn.local_id];
  if (requests) {
    conn.reply_batching = true;
    for (size_t i = 0; i < *count && conn.status.ok(); ++i) HandleRequest(conn, batch.msg(i), batch.bytes(i));
    conn.reply_batching = false;
    FlushBatch(conn);
  } else {
    for (size_t i = 0; i < *count; ++i) HandleReply(conn, batch.msg(i));
  }
}

void OfiWorker::CloseForMalformedBatch(OfiConnection& conn, std::string_view why) {
  const Status reason =
      Status::Protocol(fmt::format("transport: worker '{}' closed connection {:#x} ({}): malformed batch: {}", name_,
                                   conn.local_id, conn.peer_name, why));
  ROS2_LOG_WARN("{}", reason.message());
  if (conn.client_side) {
    deferred_failures_.emplace_back(conn.local_id, reason);  // the calls fail with the reason
    return;
  }
  FailConnection(conn.local_id, reason, false, /*send_bye=*/true);
}

}  // namespace ros2::transport::ofi
