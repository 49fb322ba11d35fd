// The server side of the libfabric worker: hellos and their limits, requests
// and their handles (Pull, Push, Reply), session authentication and the
// integrity of messages (the same rules and formats as connection_auth.cc
// and connection_limits.cc apply to UCX connections).
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <sys/random.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "common/log.h"
#include "transport/ofi/frame_bytes.h"
#include "transport/ofi/worker.h"

namespace ros2::transport::ofi {
namespace {

using State = IncomingRequest::State;
constexpr uint32_t kClientToServer = 1;  // the directions of connection_auth.cc
constexpr uint32_t kServerToClient = 2;

int ServedSlot(TransportKind kind) {
  return kind == TransportKind::kShm ? 0 : kind == TransportKind::kRdma ? 2 : 1;
}

}  // namespace

void OfiWorker::RefuseMalformed(std::span<const uint8_t> bytes, fi_addr_t from, const Status& why) {
  if (from == FI_ADDR_NOTAVAIL) return;
  auto own = [&](uint64_t connection_id) -> OfiConnection* {
    OfiConnection* conn = FindConnection(connection_id);
    return conn != nullptr && !conn->client_side && conn->addr == from ? conn : nullptr;
  };
  if (const auto header = wire::PeekRequest(bytes)) {
    if (OfiConnection* conn = own(header->connection_id)) {
      ReplyError(*conn, header->request_id,
                 why.WithContext(fmt::format("transport: worker '{}' refused a malformed request", name_)));
    }
    return;
  }
  if (const auto batch = wire::PeekBatchConnection(bytes)) {
    if (OfiConnection* conn = own(*batch)) CloseForMalformedBatch(*conn, why.message());
  }
}

// ---- Hello ----------------------------------------------------------------------
Status OfiWorker::AdmitHello() {
  uint32_t total = 0;
  OfiConnection* oldest = nullptr;
  for (const auto& [id, c] : connections_) {
    if (c->client_side) continue;
    ++total;
    if (!c->authenticated && (oldest == nullptr || c->opened < oldest->opened)) oldest = c.get();
  }
  if (total < options().max_connections) return Status::Ok();
  if (oldest == nullptr) {
    return Status::Busy(fmt::format(
        "transport: refused: worker '{}' serves {} authenticated connections (max_connections)", name_, total));
  }
  ++stats_.connections_evicted;
  FailConnection(oldest->local_id,
                 Status::Disconnected(fmt::format("transport: closed: worker '{}' is full (max_connections {}) and "
                                                  "this connection never presented a valid capability",
                                                  name_, options().max_connections)),
                 false, true);
  return Status::Ok();
}

void OfiWorker::HandleHello(const wire::Message& msg, fi_addr_t from) {
  auto peer = wire::DecodeAddress(msg.payload);
  Status st =
      peer.ok() ? wire::CheckPeerWireVersion(peer->wire_version, fmt::format("peer pid {}", peer->pid)) : peer.status();
  if (st.ok()) st = CheckPeerProvider(peer->ucx_address, Provider::kOfi, fmt::format("peer pid {}", peer->pid));
  if (!st.ok() || peer->ucx_address.size() <= sizeof(kAddressTag)) {
    ++stats_.malformed_messages;
    ROS2_LOG_WARN("transport: worker '{}' refused a hello: {}", name_, st.ToString());
    return;
  }
  // The connection is bound to the peer address the hello names: the
  // acknowledgement (with the challenge) goes there, and only messages the
  // provider reports from there act on the connection. A hello that names
  // another process's address makes that process receive an ack it never
  // asked for (dropped), and gives the sender nothing.
  const auto inner = peer->ucx_address.subspan(sizeof(kAddressTag));
  fi_addr_t addr = FI_ADDR_UNSPEC;
  if (!InsertAddress(inner, &addr)) {
    ++stats_.malformed_messages;
    return;
  }
  if (from != FI_ADDR_NOTAVAIL && from != addr) {
    ++stats_.malformed_messages;
    ++stats_.misdirected_messages;
    return;  // a known peer sending a hello in another's name
  }
  auto refuse = [&](const Status& why) {
    ++stats_.hellos_refused;
    if (stats_.hellos_refused == 1 || (stats_.hellos_refused & (stats_.hellos_refused - 1)) == 0) {
      ROS2_LOG_WARN("transport: worker '{}' refused a hello ({} so far): {}", name_, stats_.hellos_refused,
                    why.ToString());
    }
    wire::Message bye;
    bye.kind = wire::Kind::kBye;
    bye.connection_id = msg.request_id;
    const std::string& reason = why.message();
    bye.payload = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(reason.data()),
                                           std::min<size_t>(reason.size(), wire::kMaxStatusMessage));
    MessageBytes bytes(wire::EncodedSize(bye), 0);
    if (wire::Encode(bye, bytes).ok()) (void)SendBytes(addr, std::move(bytes), nullptr);
  };
  // A hello flood from one address is bounded by max_connections_per_peer
  // (its connections that proved nothing), all hellos by max_connections.
  uint32_t from_peer = 0;
  for (const auto& [id, c] : connections_) from_peer += !c->client_side && c->addr == addr && !c->authenticated;
  if (from_peer >= options().max_connections_per_peer) {
    return refuse(
        Status::Busy(fmt::format("transport: refused: {} unauthenticated connections from pid {} "
                                 "(max_connections_per_peer)",
                                 from_peer, peer->pid)));
  }
  if (Status admitted = AdmitHello(); !admitted.ok()) return refuse(admitted);

  auto conn = std::make_shared<OfiConnection>();
  conn->client_side = false;
  conn->local_id = ++last_connection_id_;
  conn->remote_id = msg.request_id;
  conn->addr = addr;
  conn->opened = Clock::now();
  const bool same_host = peer->boot_id == boot_id_;
  conn->peer_name = fmt::format("{}pid {}", same_host ? "" : "remote ", peer->pid);
  conn->info.same_host = same_host;
  conn->info.peer_pid = peer->pid;
  conn->info.am_transport = context_.ofi()->provider();
  conn->info.lanes = {context_.ofi()->provider()};
  conn->info.bulk_mode = BulkTransfer::kActiveMessage;
  WatchPeer(*conn);
  conn->auth = std::make_shared<ConnectionAuth>();
  if (getrandom(conn->auth->challenge.data(), conn->auth->challenge.size(), 0) !=
      static_cast<ssize_t>(conn->auth->challenge.size())) {
    return;
  }
  // Integrity: across hosts, and over every provider but shm.
  conn->auth->integrity_asked = !same_host || context_.resolved_kind() != TransportKind::kShm;
  // One-sided bulk wherever the fabric offers it (never shm: Fabric::Open).
  conn->rma = context_.ofi()->rma();
  if (conn->rma) conn->info.bulk_mode = BulkTransfer::kRma;
  std::array<uint8_t, wire::kHelloAckSize> ack_payload{};
  ack_payload[0] = (conn->auth->integrity_asked ? wire::kHelloAckIntegrity : 0) | (conn->rma ? wire::kHelloAckRma : 0);
  std::memcpy(ack_payload.data() + 1, conn->auth->challenge.data(), wire::kNonceSize);
  conn->served_slot = static_cast<int8_t>(ServedSlot(context_.resolved_kind()));
  served_[conn->served_slot].fetch_add(1, std::memory_order_relaxed);
  connections_[conn->local_id] = conn;
  wire::Message ack;
  ack.kind = wire::Kind::kHelloAck;
  ack.connection_id = conn->remote_id;
  ack.request_id = conn->local_id;
  ack.payload = ack_payload;
  if (Status sent = SendMessage(*conn, ack); !sent.ok()) FailConnection(conn->local_id, sent, false, false);
}

void OfiWorker::ExpireUnauthenticated(Clock::time_point now) {
  const auto timeout = options().unauthenticated_timeout;
  if (timeout.count() <= 0) return;
  std::vector<uint64_t> expired;
  for (const auto& [id, c] : connections_) {
    if (!c->client_side && !c->authenticated && now - c->opened > timeout) expired.push_back(id);
  }
  for (uint64_t id : expired) {
    ++stats_.connections_evicted;
    FailConnection(
        id, Status::Disconnected(fmt::format("transport: closed: no valid capability within {} ms", timeout.count())),
        false, true);
  }
}

// ---- Requests -------------------------------------------------------------------
IncomingRequest::State* OfiWorker::AcquireState() {
  std::unique_ptr<State> s;
  if (!state_pool_.empty()) {
    s = std::move(state_pool_.back());
    state_pool_.pop_back();
  } else {
    s = std::make_unique<State>();
  }
  s->backend = this;
  s->refs = 0;
  return s.release();
}

void OfiWorker::Release(State* s) {
  if (!s->replied && s->conn) {
    ++s->refs;
    IncomingRequest(s).Reply(Status::Internal("transport: handler dropped the request without replying"));
    --s->refs;
  }
  // s->conn is kept for the next request of the same peer (FailConnection
  // clears it in free states).
  s->pulled = s->pushed = s->replied = false;
  s->pushed_bytes = 0;
  s->inline_push.clear();
  std::unique_ptr<State> owned(s);
  if (!in_destructor_ && state_pool_.size() < 1024) state_pool_.push_back(std::move(owned));
}

void OfiWorker::HandleRequest(OfiConnection& conn, const wire::Message& msg, std::span<const uint8_t> bytes) {
  if (msg.opcode == wire::kAuthenticateOpcode) return HandleAuthenticate(conn, msg);
  ++stats_.requests_received;
  for (uint8_t i = 0; i < msg.bulk_count; ++i) {
    const wire::BulkDescriptor& d = msg.bulk[i];
    if (d.transfer == wire::BulkTransfer::kRma) {
      if (Status st = CheckRmaDescriptor(conn, msg.request_id, d); !st.ok()) {
        ++stats_.malformed_messages;
        ++stats_.rkeys_refused;
        return ReplyError(conn, msg.request_id, st);
      }
      continue;
    }
    const bool inline_too_long = d.transfer == wire::BulkTransfer::kInline && d.length > options().inline_limit;
    const bool foreign = d.transfer != wire::BulkTransfer::kInline && d.transfer != wire::BulkTransfer::kActiveMessage;
    if (inline_too_long || foreign) {
      ++stats_.malformed_messages;
      if (inline_too_long) ++stats_.inline_refused;
      return ReplyError(conn, msg.request_id,
                        Status::InvalidArgument(fmt::format(
                            "transport: worker '{}': request {:#x}: bulk-{} of {} bytes by transfer {} (this "
                            "provider takes inline bulk up to {} bytes, tagged messages and memory keys)",
                            name_, msg.request_id, d.direction == wire::BulkDirection::kOut ? "out" : "in", d.length,
                            static_cast<int>(d.transfer), options().inline_limit)));
    }
  }
  State* s = AcquireState();
  // A pooled state keeps the connection it last served: a peer's next
  // request usually finds it and skips a lookup and a reference count round
  // trip (FailConnection clears it in free states).
  if (s->conn.get() != &conn) s->conn = connections_[conn.local_id];
  // The bytes (a posted receive buffer, or a received batch in one) are
  // reposted once this message is handled: copy them, and point the decoded
  // message's views at the copy. The inline bulk-out section (last, unless a
  // trailer follows) is not copied yet: a handler that pulls while it runs,
  // as the engine's update and the bench peer do, copies it once, straight
  // from the receive buffer into its own; it is copied here only if the
  // handler keeps the request unpulled.
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
  s->msg.inline_data = inline_last ? msg.inline_data : moved(msg.inline_data);  // the receive buffer's, for now
  for (uint8_t i = 0; i < s->msg.bulk_count; ++i) s->msg.bulk[i].rkey = moved(msg.bulk[i].rkey);
  s->msg.status_message = {};
  s->msg.integrity = {};
  // Held across the handler, so that the state outlives it whatever the
  // handler does with its handle, and the inline bytes can be kept below.
  IncomingRequest hold(s);
  {
    IncomingRequest req(s);
    const uint16_t op = msg.opcode;
    if (op >= handlers_.size() || !handlers_[op]) {
      ++stats_.unknown_opcode;
      req.Reply(Status::NotSupported(fmt::format("transport: worker '{}' has no handler for opcode {}", name_, op)));
    } else {
      handlers_[op](std::move(req));
    }
  }
  if (inline_last && inline_len > 0 && s->refs > 1 && !s->pulled) {
    // The handler kept the request without pulling: keep the inline bytes too.
    const size_t at = s->copy.size();
    s->copy.insert(s->copy.end(), msg.inline_data.begin(), msg.inline_data.end());
    s->msg.inline_data = std::span<const uint8_t>(s->copy.data() + at, inline_len);
  }
}

void OfiWorker::Pull(State* s, std::span<std::byte> dst, Completion done) {
  const wire::BulkDescriptor* d = s->msg.FindBulk(wire::BulkDirection::kOut);
  auto finish = [&](const Status& st) {
    if (done) done(st);
  };
  if (d == nullptr) return finish(Status::InvalidArgument("transport: Pull on a request without bulk-out data"));
  if (s->pulled) return finish(Status::InvalidArgument("transport: second Pull on one request"));
  if (dst.size() != d->length) {
    return finish(Status::InvalidArgument(
        fmt::format("transport: Pull into {} bytes, the client offers {}", dst.size(), d->length)));
  }
  s->pulled = true;
  if (d->transfer == wire::BulkTransfer::kInline) {
    std::memcpy(dst.data(), s->msg.inline_data.data(), dst.size());
    stats_.bulk_inline_bytes += dst.size();
    return finish(Status::Ok());
  }
  if (d->transfer == wire::BulkTransfer::kRma) {
    Completion cb = std::move(done);
    Status st = StartRma(s, *d, dst.data(), dst.size(), /*write=*/false, cb);
    if (!st.ok() && cb) cb(st);
    return;
  }
  auto* conn = static_cast<OfiConnection*>(s->conn.get());
  ++s->refs;
  auto cb = [this, s, done = std::move(done), n = dst.size()](const Status& st, uint64_t len) {
    Status result = st;
    if (st.ok() && len != n) result = Status::Protocol(fmt::format("transport: bulk of {} bytes, {} expected", len, n));
    if (result.ok()) stats_.bulk_am_bytes += n;
    if (done) done(result);
    IncomingRequest drop(s);  // balances the reference taken above
    --s->refs;
  };
  auto op = RecvTagged(conn->addr, TagOf(kTagBulkOut, s->msg.request_id), dst, std::move(cb));
  if (!op.ok()) {
    --s->refs;
    return finish(op.status());
  }
}

void OfiWorker::Push(State* s, std::span<const std::byte> src, Completion done) {
  const wire::BulkDescriptor* d = s->msg.FindBulk(wire::BulkDirection::kIn);
  auto finish = [&](const Status& st) {
    if (done) done(st);
  };
  if (d == nullptr) return finish(Status::InvalidArgument("transport: Push on a request without a bulk-in buffer"));
  if (s->pushed || s->replied) return finish(Status::InvalidArgument("transport: Push after Push or Reply"));
  if (src.size() > d->length) {
    return finish(Status::InvalidArgument(
        fmt::format("transport: Push of {} bytes into a {}-byte client buffer", src.size(), d->length)));
  }
  s->pushed = true;
  s->pushed_bytes = src.size();
  if (src.empty()) return finish(Status::Ok());
  if (d->transfer == wire::BulkTransfer::kRma && src.size() > options().inline_limit) {
    Completion cb = std::move(done);
    Status st = StartRma(s, *d, const_cast<std::byte*>(src.data()), src.size(), /*write=*/true, cb);
    if (!st.ok()) {
      s->pushed_bytes = 0;
      if (cb) cb(st);
    }
    return;
  }
  // A short push into an RMA buffer rides the reply, as inline bulk does.
  if (d->transfer == wire::BulkTransfer::kInline || d->transfer == wire::BulkTransfer::kRma) {
    const auto* b = reinterpret_cast<const uint8_t*>(src.data());
    s->inline_push.assign(b, b + src.size());
    stats_.bulk_inline_bytes += src.size();
    return finish(Status::Ok());
  }
  auto* conn = static_cast<OfiConnection*>(s->conn.get());
  ++s->refs;
  auto cb = [this, s, done = std::move(done)](const Status& st, uint64_t) {
    if (st.ok()) stats_.bulk_am_bytes += s->pushed_bytes;
    if (done) done(st);
    IncomingRequest drop(s);
    --s->refs;
  };
  Status st = SendTagged(conn->addr, TagOf(kTagPush, s->msg.request_id), src, std::move(cb));
  if (!st.ok()) {
    --s->refs;
    s->pushed_bytes = 0;
    return finish(st);
  }
}

void OfiWorker::Reply(State* s, const Status& status, std::span<const uint8_t> payload) {
  if (auto it = writes_in_flight_.empty() ? writes_in_flight_.end() : writes_in_flight_.find(s);
      it != writes_in_flight_.end()) {
    // The pushed bytes are not in the client's buffer yet: the reply leaves
    // once they are (rma.cc).
    s->replied = true;
    it->second.given = true;
    it->second.status = status;
    it->second.payload.assign(payload.begin(), payload.end());
    return;
  }
  SendReply(s, status, payload);
}

void OfiWorker::SendReply(State* s, const Status& status, std::span<const uint8_t> payload) {
  s->replied = true;
  auto* conn = static_cast<OfiConnection*>(s->conn.get());
  if (conn == nullptr || !conn->status.ok()) return;
  const wire::BulkDescriptor* out = s->msg.FindBulk(wire::BulkDirection::kOut);
  if (out != nullptr && out->transfer == wire::BulkTransfer::kActiveMessage && !s->pulled) {
    // The client's tagged bulk-out send completes only once received: take
    // it into scratch memory (at most its first MiB; the rest is truncated).
    s->pulled = true;
    if (scratch_.empty()) scratch_.resize(1u << 20);
    const size_t n = std::min<size_t>(scratch_.size(), out->length);
    (void)RecvTagged(conn->addr, TagOf(kTagBulkOut, s->msg.request_id),
                     std::span<std::byte>(reinterpret_cast<std::byte*>(scratch_.data()), n), nullptr);
  }
  wire::Message m;
  m.kind = wire::Kind::kReply;
  m.request_id = s->msg.request_id;
  m.connection_id = conn->remote_id;
  m.status_code = static_cast<uint8_t>(status.code());
  std::string_view text = status.ok() ? std::string_view() : std::string_view(status.message());
  m.status_message = text.substr(0, wire::kMaxStatusMessage);
  std::string overflow;
  if (payload.size() > wire::kMaxPayload) {
    m.status_code = static_cast<uint8_t>(Status::Code::kInternal);
    overflow = fmt::format("transport: reply payload of {} bytes exceeds {}", payload.size(), wire::kMaxPayload);
    m.status_message = overflow;
    payload = {};
  }
  m.payload = payload;
  m.pushed_bytes = s->pushed_bytes;
  if (!s->inline_push.empty()) m.inline_data = s->inline_push;
  // The answer to a refused transfer leaves alone: the peer's provider may
  // have closed the connection (rma.cc).
  const bool rma_failed = !rma_failed_.empty() && rma_failed_.count(s) > 0;
  const bool batch = (conn->reply_batching || batch_replies_) && !rma_failed;
  if (Status st = batch ? SendOrBatch(*conn, m) : SendMessage(*conn, m, nullptr, rma_failed); !st.ok()) {
    ROS2_LOG_DEBUG("transport: reply to request {:#x} failed: {}", m.request_id, st.ToString());
    return;
  }
  ++stats_.replies_sent;
}

void OfiWorker::ReplyError(OfiConnection& conn, uint64_t request_id, const Status& why) {
  wire::Message m;
  m.kind = wire::Kind::kReply;
  m.request_id = request_id;
  m.connection_id = conn.remote_id;
  m.status_code = static_cast<uint8_t>(why.code());
  m.status_message = std::string_view(why.message()).substr(0, wire::kMaxStatusMessage);
  if (SendMessage(conn, m).ok()) ++stats_.replies_sent;
}

// ---- Sessions ---------------------------------------------------------------------
void OfiWorker::HandleAuthenticate(OfiConnection& conn, const wire::Message& msg) {
  ++stats_.requests_received;
  Status st = AuthenticateConnection(conn, msg);
  if (!st.ok()) {
    ++stats_.auth_refused;
    ROS2_LOG_DEBUG("transport: worker '{}': {}", name_, st.ToString());
  }
  wire::Message reply;
  reply.kind = wire::Kind::kReply;
  reply.request_id = msg.request_id;
  reply.connection_id = conn.remote_id;
  reply.status_code = static_cast<uint8_t>(st.code());
  if (!st.ok()) reply.status_message = std::string_view(st.message()).substr(0, wire::kMaxStatusMessage);
  ++stats_.replies_sent;
  (void)SendMessage(conn, reply);
  if (st.code() == Status::Code::kBusy && conn.auth->sessions.empty()) {
    deferred_failures_.emplace_back(conn.local_id, Status::Disconnected(st.message()));
  }
}

Status OfiWorker::AuthenticateConnection(OfiConnection& conn, const wire::Message& msg) {
  const std::string where = fmt::format("transport: worker '{}' refused to authenticate connection {:#x} ({})", name_,
                                        conn.local_id, conn.peer_name);
  if (conn.client_side || conn.auth == nullptr) return Status::PermissionDenied(where + ": not a served connection");
  auto charge = [&](std::string identity) -> Status {
    uint32_t same = 0;
    for (const auto& [id, c] : connections_) {
      same += c.get() != &conn && !c->client_side && c->auth && c->auth->identity == identity;
    }
    return ChargePeerIdentity(*conn.auth, std::move(identity), same, options().max_connections_per_peer, name_);
  };
  ROS2_RETURN_IF_ERROR(
      AcceptSessionProof(*conn.auth, where, conn.local_id, conn.remote_id, msg.payload, session_key_lookup_, charge));
  conn.authenticated = true;
  return Status::Ok();
}

Status OfiWorker::AuthenticateSession(OfiConnection& conn, const SessionCredential& cred) {
  if (!conn.status.ok()) return conn.status;
  if (!conn.client_side || conn.auth == nullptr || conn.remote_id == 0) {
    return Status::Disconnected(fmt::format("transport: {} has not accepted the connection", conn.peer_name));
  }
  ConnectionAuth& auth = *conn.auth;
  if (std::find(auth.sessions.begin(), auth.sessions.end(), cred.id) != auth.sessions.end()) return Status::Ok();
  if (auth.sessions.size() >= kMaxSessionsPerConnection) {
    return Status::Busy(fmt::format("transport: the connection to {} is authenticated for {} sessions already",
                                    conn.peer_name, auth.sessions.size()));
  }
  const bool first = auth.sessions.empty() && !auth.keyed;
  const bool want = !conn.info.same_host || context_.resolved_kind() != TransportKind::kShm;
  const uint8_t flags = first && (auth.integrity_asked || want) ? kAuthFlagIntegrity : 0;
  std::array<uint8_t, kAuthPayloadSize> payload{};
  std::memcpy(payload.data(), cred.id.data(), cred.id.size());
  payload[kSessionIdSize] = flags;
  const auto proof = DeriveConnectionSecret("ros2 session auth", cred.key, auth.challenge, conn.remote_id,
                                            conn.local_id, cred.id, flags);
  std::memcpy(payload.data() + kSessionIdSize + 1, proof.data(), proof.size());
  // A corked connection batches its calls, and a batch is sealed when it
  // leaves: what was gathered before goes now, unsealed as it was made, and
  // the proof leaves alone, before the key below seals what follows (sealed
  // into the same batch, the server, not keyed yet, refuses the proof).
  FlushBatch(conn);
  const uint64_t id = conn.local_id;
  const SessionId session = cred.id;
  ReplyCallback done = [this, id, session, first](const ReplyView& reply) {
    if (reply.status.ok()) return;
    OfiConnection* c = FindConnection(id);
    if (c == nullptr || c->auth == nullptr) return;
    if (first) {
      deferred_failures_.emplace_back(
          id, Status::Disconnected(fmt::format("transport: {} refused this connection's session: {}", c->peer_name,
                                               reply.status.ToString())));
      return;
    }
    auto& s = c->auth->sessions;
    s.erase(std::remove(s.begin(), s.end(), session), s.end());
  };
  ROS2_RETURN_IF_ERROR(StartCall(conn, wire::kAuthenticateOpcode, payload, CallOptions{}, std::move(done)));
  FlushBatch(conn);
  if (flags & kAuthFlagIntegrity) {
    const auto secret = DeriveConnectionSecret("ros2 connection key", cred.key, auth.challenge, conn.remote_id,
                                               conn.local_id, cred.id, flags);
    ROS2_ASSIGN_OR_RETURN(auth.send, IntegrityKey::Create(secret, kClientToServer));
    ROS2_ASSIGN_OR_RETURN(auth.recv, IntegrityKey::Create(secret, kServerToClient));
    auth.keyed = true;
    auth.recv_pending = true;
  }
  auth.sessions.push_back(cred.id);
  return Status::Ok();
}

// ---- Integrity ------------------------------------------------------------------
Status OfiWorker::Seal(OfiConnection& conn, MessageBytes& bytes) {
  ConnectionAuth& auth = *conn.auth;
  wire::SetIntegrityFlag(bytes);
  const size_t n = bytes.size();
  bytes.resize(n + wire::kIntegrityTrailerSize);
  const uint64_t seq = ++auth.send_seq;
  PutLe64(bytes.data() + n, seq);
  auto tag = std::span<uint8_t>(bytes).subspan(n + 8).first<wire::kIntegrityTagSize>();
  if (!auth.send->Tag(seq, std::span<const uint8_t>(bytes.data(), n), {}, tag)) {
    return Status::Internal(fmt::format("transport: integrity tag for {} failed (OpenSSL)", conn.peer_name));
  }
  return Status::Ok();
}

Status OfiWorker::CheckIntegrity(OfiConnection& conn, const wire::Message& msg, std::span<const uint8_t> bytes) {
  return CheckSealedMessage(conn.auth.get(), msg, bytes);
}

}  // namespace ros2::transport::ofi
