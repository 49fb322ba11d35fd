// Sessions on a connection and the integrity of its messages: see
// connection_auth.h and docs/security.md.
#include "transport/connection_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/modes.h>
#include <sys/random.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "common/log.h"
#include "transport/fault_injection.h"
#include "transport/worker_impl.h"

namespace ros2::transport {

namespace {

constexpr uint32_t kClientToServer = 1;
constexpr uint32_t kServerToClient = 2;

void PutLe64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t GetLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

// ---- IntegrityKey ---------------------------------------------------------------
namespace {

// GCM128's block function: one AES block through the ECB context `key`.
void EcbBlock(const unsigned char in[16], unsigned char out[16], const void* key) {
  int len = 0;
  // Cannot fail for one whole block of an initialised ECB context without padding.
  (void)EVP_EncryptUpdate(static_cast<EVP_CIPHER_CTX*>(const_cast<void*>(key)), out, &len, in, 16);
}

}  // namespace

Result<std::unique_ptr<IntegrityKey>> IntegrityKey::Create(std::span<const uint8_t, 32> key, uint32_t direction) {
  std::unique_ptr<IntegrityKey> k(new IntegrityKey());
  k->direction_ = direction;
  k->block_ = EVP_CIPHER_CTX_new();
  if (k->block_ == nullptr || EVP_EncryptInit_ex(k->block_, EVP_aes_256_ecb(), nullptr, key.data(), nullptr) != 1 ||
      EVP_CIPHER_CTX_set_padding(k->block_, 0) != 1) {
    return Status::Internal("transport: AES-256 key setup failed (OpenSSL)");
  }
  k->gcm_ = CRYPTO_gcm128_new(k->block_, EcbBlock);
  if (k->gcm_ == nullptr) return Status::Internal("transport: GCM key setup failed (OpenSSL)");
  return k;
}

IntegrityKey::~IntegrityKey() {
  if (gcm_ != nullptr) CRYPTO_gcm128_release(gcm_);  // cleanses H and the state
  if (block_ != nullptr) EVP_CIPHER_CTX_free(block_);
}

bool IntegrityKey::Tag(uint64_t seq, std::span<const uint8_t> a, std::span<const uint8_t> b,
                       std::span<uint8_t, 16> tag) {
  uint8_t iv[12];
  std::memcpy(iv, &direction_, 4);
  PutLe64(iv + 4, seq);
  CRYPTO_gcm128_setiv(gcm_, iv, sizeof(iv));
  for (auto part : {a, b}) {
    if (!part.empty() && CRYPTO_gcm128_aad(gcm_, part.data(), part.size()) != 0) return false;
  }
  CRYPTO_gcm128_tag(gcm_, tag.data(), tag.size());
  return true;
}

// ---- Derivations ----------------------------------------------------------------
namespace {
std::atomic<bool> same_host_integrity{false};
}  // namespace

Status ReadSameHostIntegrity() {
  const char* v = std::getenv(kSameHostIntegrityEnv);
  const std::string_view value = v == nullptr ? "0" : v;
  if (value != "0" && value != "1" && !value.empty()) {
    return Status::InvalidArgument(fmt::format(
        "transport: {}={} is neither 1 (integrity tags on same-host tcp connections too) nor 0 (the default)",
        kSameHostIntegrityEnv, value));
  }
  same_host_integrity.store(value == "1", std::memory_order_relaxed);
  return Status::Ok();
}

bool SameHostIntegrity() {
  return same_host_integrity.load(std::memory_order_relaxed);
}

bool HostProofEnabled(const Context& context) {
  return context.cma_enabled() || context.resolved_kind() == TransportKind::kTcp;
}

bool IntegrityWanted(const Context& context, const Connection& conn) {
  if (!conn.info.same_host) return true;
  // A same-host context of another kind resolves to shared memory, whose
  // lanes never leave the host.
  if (context.resolved_kind() != TransportKind::kTcp) return false;
  if (SameHostIntegrity()) return true;
  // The client trusts the host id of the address it was given (from the
  // control plane); the server only what the kernel vouched for. Traffic
  // between two processes of one host never reaches a wire: only root
  // (out of scope) can read or alter it.
  return !conn.client_side && !conn.host_proven;
}

std::array<uint8_t, 32> DeriveConnectionSecret(std::string_view label, const SessionKey& key,
                                               std::span<const uint8_t, 16> challenge, uint64_t server_id,
                                               uint64_t client_id, const SessionId& session, uint8_t flags) {
  std::vector<uint8_t> input(label.begin(), label.end());
  input.insert(input.end(), challenge.begin(), challenge.end());
  uint8_t ids[16];
  PutLe64(ids, server_id);
  PutLe64(ids + 8, client_id);
  input.insert(input.end(), ids, ids + 16);
  input.insert(input.end(), session.begin(), session.end());
  input.push_back(flags);
  std::array<uint8_t, 32> out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), input.data(), input.size(), out.data(), &len);
  return out;
}

std::string SessionName(const SessionId& s) {
  return fmt::format(
      "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}", s[0],
      s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11], s[12], s[13], s[14], s[15]);
}

// ---- Hello ----------------------------------------------------------------------
Status WorkerImpl::PrepareServerAuth(Connection& conn, std::array<uint8_t, wire::kHelloAckSize>& ack_payload) {
  conn.auth = std::make_shared<ConnectionAuth>();
  if (getrandom(conn.auth->challenge.data(), conn.auth->challenge.size(), 0) !=
      static_cast<ssize_t>(conn.auth->challenge.size())) {
    return Status::FromErrno(errno, "transport: getrandom for a hello challenge");
  }
  conn.auth->integrity_asked = IntegrityWanted(context_, conn);
  ack_payload[0] = static_cast<uint8_t>((conn.cma ? wire::kHelloAckCmaAccepted : 0) |
                                        (conn.auth->integrity_asked ? wire::kHelloAckIntegrity : 0));
  std::memcpy(ack_payload.data() + 1, conn.auth->challenge.data(), wire::kNonceSize);
  return Status::Ok();
}

void WorkerImpl::AcceptHelloAck(Connection& conn, std::span<const uint8_t> payload) {
  conn.auth = std::make_shared<ConnectionAuth>();
  conn.auth->integrity_asked = (payload[0] & wire::kHelloAckIntegrity) != 0;
  std::memcpy(conn.auth->challenge.data(), payload.data() + 1, wire::kNonceSize);
}

// ---- Authenticate requests (server) ---------------------------------------------
void WorkerImpl::HandleAuthenticate(Connection& conn, const wire::Message& msg) {
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
  if (conn.ep == nullptr) return;
  ++stats_.replies_sent;
  (void)(conn.reply_batching ? SendOrBatch(conn, reply) : SendMessage(conn, reply, {}, nullptr));
  if (st.code() == Status::Code::kBusy && conn.auth != nullptr && conn.auth->sessions.empty()) {
    FlushBatch(conn);
    CloseWithReason(conn, st.message(), /*in_callback=*/true);  // over the limit: nothing more on it
  }
}

Status AcceptSessionProof(ConnectionAuth& auth, const std::string& where, uint64_t local_id, uint64_t remote_id,
                          std::span<const uint8_t> payload, const SessionKeyLookup& lookup,
                          const std::function<Status(std::string identity)>& charge) {
  if (payload.size() != kAuthPayloadSize) {
    return Status::InvalidArgument(
        fmt::format("{}: payload of {} bytes (expected {})", where, payload.size(), kAuthPayloadSize));
  }
  if (!lookup) return Status::NotSupported(where + ": this worker authenticates no sessions");
  SessionId session;
  std::memcpy(session.data(), payload.data(), session.size());
  const uint8_t flags = payload[kSessionIdSize];
  const auto proof = payload.subspan(kSessionIdSize + 1);
  const std::string who = fmt::format("{} for session {}", where, SessionName(session));
  if ((flags & ~kAuthFlagIntegrity) != 0) return Status::InvalidArgument(fmt::format("{}: flags {:#x}", who, flags));
  auto key = lookup(session);
  if (!key.ok()) return Status::PermissionDenied(fmt::format("{}: {}", who, key.status().message()));
  const auto expected =
      DeriveConnectionSecret("ros2 session auth", *key, auth.challenge, local_id, remote_id, session, flags);
  if (CRYPTO_memcmp(expected.data(), proof.data(), expected.size()) != 0) {
    return Status::PermissionDenied(who + ": the proof does not match (the client does not hold the session's key)");
  }
  if (std::find(auth.sessions.begin(), auth.sessions.end(), session) != auth.sessions.end()) return Status::Ok();
  if (auth.sessions.size() >= kMaxSessionsPerConnection) {
    return Status::Busy(fmt::format("{}: the connection holds {} sessions already", who, auth.sessions.size()));
  }
  const bool first = auth.sessions.empty() && !auth.keyed;
  const bool integrity = (flags & kAuthFlagIntegrity) != 0;
  if (first && auth.integrity_asked && !integrity) {
    return Status::PermissionDenied(who +
                                    ": the connection crosses hosts or runs over tcp without a proof that the "
                                    "client is on this host, so its messages must carry integrity tags, and the "
                                    "client did not turn them on");
  }
  if (auth.identity.empty()) ROS2_RETURN_IF_ERROR(charge("session " + SessionName(session)));
  if (first && integrity) {
    const auto secret =
        DeriveConnectionSecret("ros2 connection key", *key, auth.challenge, local_id, remote_id, session, flags);
    ROS2_ASSIGN_OR_RETURN(auth.send, IntegrityKey::Create(secret, kServerToClient));
    ROS2_ASSIGN_OR_RETURN(auth.recv, IntegrityKey::Create(secret, kClientToServer));
    auth.keyed = true;
  }
  auth.sessions.push_back(session);
  return Status::Ok();
}

Status WorkerImpl::AuthenticateConnection(Connection& conn, const wire::Message& msg) {
  const std::string where = fmt::format("transport: worker '{}' refused to authenticate connection {:#x} ({})", name_,
                                        conn.local_id, conn.peer_name);
  if (conn.client_side || conn.auth == nullptr) return Status::PermissionDenied(where + ": not a served connection");
  ROS2_RETURN_IF_ERROR(AcceptSessionProof(*conn.auth, where, conn.local_id, conn.remote_id, msg.payload,
                                          session_key_lookup_,
                                          [&](std::string identity) { return ChargeIdentity(conn, std::move(identity)); }));
  conn.authenticated = true;
  return Status::Ok();
}

// ---- AuthenticateSession (client) -----------------------------------------------
Status WorkerImpl::AuthenticateSession(Connection& conn, const SessionCredential& cred) {
  if (!conn.status.ok()) return conn.status;
  if (!conn.client_side || conn.auth == nullptr || conn.remote_id == 0) {
    return Status::Disconnected(fmt::format("transport: {} has not accepted the connection", conn.peer_name));
  }
  ConnectionAuth& auth = *conn.auth;
  for (const SessionId& s : auth.sessions) {
    if (SameSession(s, cred.id)) return Status::Ok();  // proved already: what every request after the first finds
  }
  if (auth.sessions.size() >= kMaxSessionsPerConnection) {
    return Status::Busy(fmt::format("transport: the connection to {} is authenticated for {} sessions already",
                                    conn.peer_name, auth.sessions.size()));
  }
  const bool first = auth.sessions.empty() && !auth.keyed;
  const uint8_t flags = first && (auth.integrity_asked || IntegrityWanted(context_, conn)) ? kAuthFlagIntegrity : 0;
  std::array<uint8_t, kAuthPayloadSize> payload{};
  std::memcpy(payload.data(), cred.id.data(), cred.id.size());
  payload[kSessionIdSize] = flags;
  const auto proof = DeriveConnectionSecret("ros2 session auth", cred.key, auth.challenge, conn.remote_id,
                                            conn.local_id, cred.id, flags);
  std::memcpy(payload.data() + kSessionIdSize + 1, proof.data(), proof.size());
  if (faults_ != nullptr) faults_->RewriteAuthenticate(payload);
  FlushBatch(conn);  // what was gathered before leaves first, as it was
  const uint64_t id = conn.local_id;
  const SessionId session = cred.id;
  ReplyCallback done = [this, id, session, first](const ReplyView& reply) {
    if (reply.status.ok()) return;
    Connection* c = FindConnection(id);
    if (c == nullptr || c->auth == nullptr) return;
    if (first) {
      DeferFailure(id, Status::Disconnected(fmt::format("transport: {} refused this connection's session: {}",
                                                        c->peer_name, reply.status.ToString())));
      return;
    }
    auto& s = c->auth->sessions;
    s.erase(std::remove(s.begin(), s.end(), session), s.end());
  };
  ROS2_RETURN_IF_ERROR(StartCall(conn, wire::kAuthenticateOpcode, payload, CallOptions{}, std::move(done)));
  FlushBatch(conn);  // the proof itself is never sealed into a batch with what follows
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

// ---- Sealing and checking messages ----------------------------------------------
bool WorkerImpl::Sealing(const Connection& conn) {
  return conn.auth != nullptr && conn.auth->keyed;
}

Status WorkerImpl::Seal(Connection& conn, std::span<uint8_t> head, std::span<const uint8_t> tail,
                        std::span<uint8_t, wire::kIntegrityTrailerSize> trailer) {
  ConnectionAuth& auth = *conn.auth;
  wire::SetIntegrityFlag(head);
  uint64_t seq = ++auth.send_seq;
  if (faults_ != nullptr) faults_->RewriteSequence(seq);
  PutLe64(trailer.data(), seq);
  if (!auth.send->Tag(seq, head, tail, trailer.subspan<8, wire::kIntegrityTagSize>())) {
    return Status::Internal(fmt::format("transport: integrity tag for {} failed (OpenSSL)", conn.peer_name));
  }
  if (faults_ != nullptr) faults_->DamageSealed(head);
  return Status::Ok();
}

Status WorkerImpl::SealSendBuffer(Connection& conn, SendBuffer& buf, size_t skip, std::span<const uint8_t> tail,
                                  bool iov) {
  if (iov) return Seal(conn, buf.bytes, tail, buf.trailer);
  const size_t n = buf.bytes.size();
  buf.bytes.resize(n + wire::kIntegrityTrailerSize);
  auto bytes = std::span<uint8_t>(buf.bytes);
  return Seal(conn, bytes.subspan(skip, n - skip), {}, bytes.subspan(n).first<wire::kIntegrityTrailerSize>());
}

Status WorkerImpl::CheckIntegrity(Connection& conn, const wire::Message& msg, std::span<const uint8_t> bytes) {
  return CheckSealedMessage(conn.auth.get(), msg, bytes);
}

Status CheckSealedMessage(ConnectionAuth* auth, const wire::Message& msg, std::span<const uint8_t> bytes) {
  const bool sealed = !msg.integrity.empty();
  if (auth == nullptr || !auth->keyed) {
    if (!sealed) return Status::Ok();
    return Status::PermissionDenied("an integrity trailer on a connection whose integrity is not keyed");
  }
  if (!sealed) {
    // The client, until the server's first sealed message: a refusal of its
    // first proof comes unsealed (the server never keyed).
    const bool refusal = (msg.kind == wire::Kind::kReply && msg.status_code != 0) || msg.kind == wire::Kind::kBye;
    if (auth->recv_pending && refusal) return Status::Ok();
    return Status::PermissionDenied("a message without its integrity trailer");
  }
  const uint64_t seq = GetLe64(msg.integrity.data());
  std::array<uint8_t, wire::kIntegrityTagSize> tag{};
  const auto covered = bytes.first(bytes.size() - wire::kIntegrityTrailerSize);
  if (!auth->recv->Tag(seq, covered, {}, tag) || CRYPTO_memcmp(tag.data(), msg.integrity.data() + 8, tag.size()) != 0) {
    return Status::PermissionDenied(
        fmt::format("integrity tag of message {} does not match (altered in transit, or "
                    "not sealed with this connection's key)",
                    seq));
  }
  if (seq == 0) return Status::PermissionDenied("message with sequence number 0");
  if (seq > auth->recv_seq) {
    const uint64_t shift = seq - auth->recv_seq;
    if (shift >= kReplayWindow) {
      auth->recv_window.reset();
    } else {
      auth->recv_window <<= shift;
    }
    auth->recv_window.set(0);
    auth->recv_seq = seq;
  } else {
    const uint64_t behind = auth->recv_seq - seq;
    if (behind >= kReplayWindow) {
      return Status::PermissionDenied(
          fmt::format("message {} is older than the replay window ({} messages below the highest accepted, {})", seq,
                      kReplayWindow, auth->recv_seq));
    }
    if (auth->recv_window.test(behind)) {
      return Status::PermissionDenied(fmt::format("message {} replayed (accepted before)", seq));
    }
    auth->recv_window.set(behind);
  }
  auth->recv_pending = false;
  return Status::Ok();
}

bool WorkerImpl::RefuseUnsealed(Connection& conn, const wire::Message& msg, std::span<const uint8_t> bytes) {
  if (conn.auth == nullptr && msg.integrity.empty()) return false;  // the common shm case: nothing to check
  Status st = CheckIntegrity(conn, msg, bytes);
  if (st.ok()) return false;
  ++stats_.integrity_refused;
  ++stats_.malformed_messages;
  const std::string why = fmt::format("transport: worker '{}' refused a message on connection {:#x} ({}): {}", name_,
                                      conn.local_id, conn.peer_name, st.message());
  if (stats_.integrity_refused == 1 || (stats_.integrity_refused & (stats_.integrity_refused - 1)) == 0) {
    ROS2_LOG_WARN("{} ({} so far)", why, stats_.integrity_refused);
  }
  if (conn.client_side) {
    DeferFailure(conn.local_id, Status::Disconnected(why));  // what arrives on it can no longer be trusted
  } else if (msg.kind == wire::Kind::kRequest) {
    ReplyError(conn, msg.request_id, Status::PermissionDenied(why));
  } else if (msg.kind == wire::Kind::kBatch) {
    // Each request of the refused batch is answered, so its caller fails at
    // once and learns why (the entries are only read for their ids).
    std::vector<wire::Message> entries(wire::kMaxBatchMessages);
    std::vector<std::span<const uint8_t>> entry_bytes(wire::kMaxBatchMessages);
    auto count = wire::DecodeBatch(msg, entries, entry_bytes);
    for (size_t i = 0; count.ok() && i < *count; ++i) {
      if (entries[i].kind == wire::Kind::kRequest)
        ReplyError(conn, entries[i].request_id, Status::PermissionDenied(why));
    }
  }
  return true;
}

// ---- Public handles -------------------------------------------------------------
bool IncomingRequest::SessionAuthenticated(const SessionId& session) const {
  if (state_ == nullptr || state_->conn == nullptr || state_->conn->auth == nullptr) return false;
  for (const SessionId& s : state_->conn->auth->sessions) {
    if (SameSession(s, session)) return true;
  }
  return false;
}

std::string IncomingRequest::AuthenticatedSessions() const {
  if (state_ == nullptr || state_->conn == nullptr || state_->conn->auth == nullptr ||
      state_->conn->auth->sessions.empty()) {
    return "no session";
  }
  std::string out;
  for (const SessionId& s : state_->conn->auth->sessions) out += (out.empty() ? "session " : ", ") + SessionName(s);
  return out;
}

Status EndpointImpl::AuthenticateSession(const SessionCredential& session) {
  return worker_->AuthenticateSession(*conn_, session);
}

}  // namespace ros2::transport
