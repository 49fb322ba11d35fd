// Internal: sessions on a data-plane connection and the integrity of its
// messages (docs/security.md, "Sessions on the data plane"; the formats in
// docs/wire-format.md, "Session authentication" and "Integrity").
//
// A server-side connection starts unauthenticated: its hello ack carries a
// random 16-byte challenge. The client proves, for each session whose
// capabilities it will send on the connection, that it holds the session's
// key (an authenticate request: session id, flags, HMAC-SHA256 under the
// session key of the challenge, both connection ids, the session id and the
// flags). The server records the session for the connection; the engine
// accepts a capability only on a connection authenticated for its session.
// The first authentication of a connection that crosses hosts, or runs over
// tcp without a kernel-checked proof that both ends share this host
// (IntegrityWanted), also keys its integrity: from then on every message
// either side sends on it carries a sequence number and an AES-256-GMAC tag
// under a key both derive from the session key, the challenge and the
// connection ids.
//
// Not a public header; worker thread only.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/transport.h"
#include "transport/wire.h"

typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;
struct gcm128_context;

namespace ros2::transport {

struct Connection;  // worker_impl.h

// Sessions one connection may be authenticated for at once.
inline constexpr size_t kMaxSessionsPerConnection = 16;
// An authenticate request's payload: session id, flags byte, proof.
inline constexpr size_t kAuthPayloadSize = kSessionIdSize + 1 + 32;
inline constexpr uint8_t kAuthFlagIntegrity = 1;
inline constexpr size_t kReplayWindow = 1024;

// AES-256-GMAC tags of one direction of a connection (the IV is the direction
// and the message's sequence number, so no IV repeats under a key): AES-GCM's
// tag over the message as additional data, with no plaintext.
//
// Computed as GCM defines it, from its two parts: GHASH under H = AES(K, 0)
// (OpenSSL's GCM128 code, which uses the CPU's carry-less multiply) and the
// mask AES(K, J0) of the message's IV (one block of an AES-256-ECB context,
// AES-NI through OpenSSL's EVP). Both are constant time. The result is the
// EVP AES-256-GCM tag bit for bit (IntegrityKey test), without the EVP GCM
// context's re-initialisation per message, which cost about three times the
// GHASH of a small message.
class IntegrityKey {
 public:
  static Result<std::unique_ptr<IntegrityKey>> Create(std::span<const uint8_t, 32> key, uint32_t direction);
  ~IntegrityKey();
  IntegrityKey(const IntegrityKey&) = delete;
  IntegrityKey& operator=(const IntegrityKey&) = delete;
  // The tag of `a` then `b` as message `seq`; false if OpenSSL failed.
  bool Tag(uint64_t seq, std::span<const uint8_t> a, std::span<const uint8_t> b, std::span<uint8_t, 16> tag);

 private:
  IntegrityKey() = default;
  EVP_CIPHER_CTX* block_ = nullptr;  // AES-256-ECB under the key: the block function of gcm_
  gcm128_context* gcm_ = nullptr;
  uint32_t direction_ = 0;
};

// Per-connection state (Connection::auth).
// Whether `a` and `b` name the same session: two 8-byte compares, not a
// memcmp call (both sides check a session on every request).
inline bool SameSession(const SessionId& a, const SessionId& b) {
  static_assert(sizeof(SessionId) == 16);
  uint64_t x[2], y[2];
  std::memcpy(x, a.data(), sizeof(x));
  std::memcpy(y, b.data(), sizeof(y));
  return ((x[0] ^ y[0]) | (x[1] ^ y[1])) == 0;
}

struct ConnectionAuth {
  std::array<uint8_t, 16> challenge{};  // the server's, from the hello ack
  bool integrity_asked = false;         // server: integrity is required here; client: the ack said so
  bool keyed = false;                   // integrity is on: every message is sealed, both ways
  bool recv_pending = false;            // client: keyed, nothing sealed received yet
  std::vector<SessionId> sessions;      // server: proven; client: proofs sent
  // Server: what the per-peer limit counts the connection as ("pid N" once
  // its cma proof held, else "session <id>" once authenticated); empty: only
  // the worker-wide limit applies.
  std::string identity;
  std::unique_ptr<IntegrityKey> send, recv;
  uint64_t send_seq = 0;
  // Received sequence numbers: the highest accepted, and which of the
  // kReplayWindow below it were (bit i: recv_seq - i). UCX may deliver a
  // connection's messages out of order across lanes (a rendezvous and an
  // eager message over tcp), so a late one is accepted once; a number seen
  // before, or older than the window, is refused.
  uint64_t recv_seq = 0;
  std::bitset<kReplayWindow> recv_window;
};

// The server's check of a session proof (the payload of an authenticate
// message) on a served connection, shared by every provider: its size and
// flags, the session's key from `lookup`, the proof, the cap of sessions per
// connection and the integrity the connection must carry; then the session is
// recorded and, with the first, the integrity keys derived. `charge` gives a
// connection without an identity its per-peer one (it refuses with Busy over
// max_connections_per_peer). `where` starts every error's message.
Status AcceptSessionProof(ConnectionAuth& auth, const std::string& where, uint64_t local_id, uint64_t remote_id,
                          std::span<const uint8_t> payload, const SessionKeyLookup& lookup,
                          const std::function<Status(std::string identity)>& charge);

// The check of a received message's integrity on a connection whose
// authentication state is `auth` (null before the hello ack), shared by every
// provider: a keyed connection takes only sealed messages whose tag matches
// and whose sequence number is new (within the replay window; the client
// takes an unsealed refusal until the server's first sealed message), an
// unkeyed one only unsealed messages. `bytes` is the whole received message.
Status CheckSealedMessage(ConnectionAuth* auth, const wire::Message& msg, std::span<const uint8_t> bytes);

// Gives a served connection the per-peer identity `identity` (its
// ConnectionAuth::identity), or Busy naming the limit when `same` other
// served connections of the worker `worker` carry it already and that
// reaches max_connections_per_peer; shared by every provider.
Status ChargePeerIdentity(ConnectionAuth& auth, std::string identity, uint32_t same, uint32_t max_connections_per_peer,
                          std::string_view worker);

// Whether this side wants integrity on `conn` (docs/security.md, "Sessions on
// the data plane"): always when the peer is on another host; never over
// same-host shared memory; over tcp to a peer on this host, on the server
// unless the client's hello proved its pid (Connection::host_proven: a token
// the server's listener issued to that pid, which the kernel named by
// SO_PEERCRED), on the client never of its own accord (the server asks when
// it lacks the proof), and on both when SameHostIntegrity() is on.
bool IntegrityWanted(const Context& context, const Connection& conn);

// Whether same-host clients may prove their pid in the hello (cma::Authority
// tokens): for cma bulk over shared memory, and over tcp for the integrity
// rule above.
bool HostProofEnabled(const Context& context);

// The environment variable that turns integrity on for same-host tcp
// connections as well ("1"; "0" or unset: off), read by Context::Create:
// for measuring what the tags cost, and for a host whose loopback traffic
// is not private to root.
inline constexpr const char* kSameHostIntegrityEnv = "ROS2_SAME_HOST_INTEGRITY";
// Reads kSameHostIntegrityEnv into SameHostIntegrity(); InvalidArgument
// naming the variable and its value when it is neither "0" nor "1".
Status ReadSameHostIntegrity();
bool SameHostIntegrity();

// HMAC-SHA256(session key, label || challenge || server id || client id ||
// session || flags): the proof (label "ros2 session auth") or the
// connection's integrity key (label "ros2 connection key").
std::array<uint8_t, 32> DeriveConnectionSecret(std::string_view label, const SessionKey& key,
                                               std::span<const uint8_t, 16> challenge, uint64_t server_id,
                                               uint64_t client_id, const SessionId& session, uint8_t flags);

std::string SessionName(const SessionId& session);  // the uuid text

}  // namespace ros2::transport
