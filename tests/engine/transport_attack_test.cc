// Attacks on the data plane against a real
// ros2-engine: a hostile client (transport_attack_peer, a separate process
// built on the transport and object-protocol code) crafts what the normal
// client never sends, and each test checks that the attack is refused with a
// clear error, that the victim (this test process, an ordinary client) is
// unaffected, and that the engine keeps serving. docs/security.md has the
// attack table.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "attack_arena.h"
#include "common/checksum.h"
#include "testing/engine_process.h"
#include "testing/pattern.h"
#include "transport/cma.h"
#include "transport/connection_auth.h"
#include "transport/fault_injection.h"
#include "transport/worker_impl.h"

namespace ros2::testing {
namespace {

using transport::TransportKind;

// Inverse of the id mix the engine used before (a splitmix-style finaliser
// of salt + golden * counter): from one id, the next one.
uint64_t PredictNextOldId(uint64_t id) {
  auto unshift = [](uint64_t x, int s) {
    uint64_t r = x;
    for (int i = s; i < 64; i += s) r = x ^ (r >> s);
    return r;
  };
  constexpr uint64_t kMul = 0xbf58476d1ce4e5b9ull;
  uint64_t inv = kMul;
  for (int i = 0; i < 6; ++i) inv *= 2 - kMul * inv;
  uint64_t x = unshift(id, 29) * inv;
  x = unshift(x, 31) + 0x9e3779b97f4a7c15ull;
  x ^= x >> 31;
  x *= kMul;
  x ^= x >> 29;
  return x;
}

TEST(TransportAttack, ConnectionIdsRevealNothingAboutOthers) {
  Arena a;
  ASSERT_NO_FATAL_FAILURE(a.Start());
  auto r = RunAttacker(TRANSPORT_ATTACK_PEER_PATH, "ids", a.Args());
  ASSERT_TRUE(r.count("id1") && r.count("id2")) << "attacker printed no ids";
  const uint64_t id1 = std::stoull(r["id1"].text, nullptr, 16), id2 = std::stoull(r["id2"].text, nullptr, 16);
  EXPECT_NE(id1, id2);
  EXPECT_NE(PredictNextOldId(id1), id2) << "the second connection's id follows from the first";
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST(TransportAttack, ByeNamingAnotherConnectionIsRefused) {
  Arena a;
  ASSERT_NO_FATAL_FAILURE(a.Start());
  auto r =
      RunAttacker(TRANSPORT_ATTACK_PEER_PATH, "bye", a.Args({fmt::format("victim_conn={:x}", a.VictimConnectionId())}));
  EXPECT_EQ(r["own_connection"].code, static_cast<int>(Status::Code::kNotSupported)) << r["own_connection"].text;
  ROS2_ASSERT_OK(a.victim->endpoint(0).status());
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST(TransportAttack, FetchCannotWriteIntoAnotherClientsMemory) {
  Arena a;
  ASSERT_NO_FATAL_FAILURE(a.Start());
  const auto secret = Pattern(64 * 1024, 5);
  std::vector<std::byte> victim_buffer = secret;
  auto r = RunAttacker(
      TRANSPORT_ATTACK_PEER_PATH, "fetch-into",
      a.Args({fmt::format("victim_conn={:x}", a.VictimConnectionId()),
              fmt::format("victim_addr={:x}", reinterpret_cast<uint64_t>(victim_buffer.data())), "len=65536"}));
  ASSERT_TRUE(r["plant"].ok()) << r["plant"].text;
  EXPECT_EQ(r["attack"].code, static_cast<int>(Status::Code::kPermissionDenied)) << r["attack"].text;
  EXPECT_NE(r["attack"].text.find("naming connection"), std::string::npos) << r["attack"].text;
  EXPECT_EQ(victim_buffer, secret) << "the engine wrote the attacker's bytes into the victim's memory";
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST(TransportAttack, UpdateCannotReadAnotherClientsMemory) {
  Arena a;
  ASSERT_NO_FATAL_FAILURE(a.Start());
  const auto secret = Pattern(64 * 1024, 6);
  auto r =
      RunAttacker(TRANSPORT_ATTACK_PEER_PATH, "update-from",
                  a.Args({fmt::format("victim_conn={:x}", a.VictimConnectionId()),
                          fmt::format("victim_addr={:x}", reinterpret_cast<uint64_t>(secret.data())), "len=65536"}));
  EXPECT_EQ(r["attack"].code, static_cast<int>(Status::Code::kPermissionDenied)) << r["attack"].text;
  EXPECT_NE(r["attack"].text.find("naming connection"), std::string::npos) << r["attack"].text;
  EXPECT_NE(r["stored_crc"].text, fmt::format("{:08x}", Crc32c(secret.data(), secret.size())))
      << "the victim's memory was copied into the attacker's container";
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST(TransportAttack, ReplyCannotCompleteAnotherClientsCall) {
  Arena a;
  ASSERT_NO_FATAL_FAILURE(a.Start());
  const uint64_t victim_conn = a.VictimConnectionId();
  // The id the victim's next call will carry (slot and generation).
  auto& w = static_cast<transport::WorkerImpl&>(a.victim->worker());
  const uint32_t slot = w.free_calls_.empty() ? static_cast<uint32_t>(w.calls_.size()) : w.free_calls_.back();
  const uint32_t gen = slot < w.calls_.size() ? w.calls_[slot].generation + 1 : 1;
  const uint64_t next_id = transport::WorkerImpl::MakeRequestId(slot, gen);
  auto r = RunAttacker(
      TRANSPORT_ATTACK_PEER_PATH, "hijack-reply",
      a.Args({fmt::format("victim_conn={:x}", victim_conn), fmt::format("victim_req={:x}", next_id), "len=4096"}));
  ASSERT_TRUE(r["plant"].ok()) << r["plant"].text;
  // The engine answered the attacker's own connection with the refusal, under
  // the forged id (so the attacker's call itself only times out).
  EXPECT_EQ(r["attack"].code, static_cast<int>(Status::Code::kTimedOut)) << r["attack"].text;
  EXPECT_EQ(r["stale_replies"].text, "1") << "the refusal did not come back to the attacker";
  // The victim's next call gets its own data, not the attacker's.
  auto f = a.victim->FetchArray(a.victim_oid, "d", "a", 0, 4096);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->data, std::vector<std::byte>(a.victim_data.begin(), a.victim_data.begin() + 4096))
      << "the victim's call completed with the attacker's data";
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST(TransportAttack, InlineBulkBeyondTheLimitIsRefusedAtOnce) {
  Arena a;
  ASSERT_NO_FATAL_FAILURE(a.Start());
  // 64 KiB inline out (limit 16 KiB), and 2 MiB inline in (a reply that
  // large cannot be encoded: the caller used to wait for its deadline).
  auto r = RunAttacker(TRANSPORT_ATTACK_PEER_PATH, "inline-limit",
                       a.Args({"len=65536", "in_len=2097152", "timeout_ms=5000"}));
  EXPECT_EQ(r["inline_out"].code, static_cast<int>(Status::Code::kInvalidArgument)) << r["inline_out"].text;
  EXPECT_NE(r["inline_out"].text.find("inline limit"), std::string::npos) << r["inline_out"].text;
  EXPECT_EQ(r["inline_in"].code, static_cast<int>(Status::Code::kInvalidArgument)) << r["inline_in"].text;
  EXPECT_NE(r["inline_in"].text.find("inline limit"), std::string::npos) << r["inline_in"].text;
  EXPECT_LT(std::stoull(r["elapsed_ms"].text), 4000u) << "a refusal waited for the deadline";
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST(TransportAttack, CmaTokenFloodDoesNotEvictOtherClientsTokens) {
  Arena a;
  ASSERT_NO_FATAL_FAILURE(a.Start());
  // The victim got its token; before its hello arrives, the attacker floods.
  auto token = transport::cma::RequestToken(a.cluster.engine->pid(), std::chrono::milliseconds(2000));
  ROS2_ASSERT_OK(token);
  auto r = RunAttacker(TRANSPORT_ATTACK_PEER_PATH, "token-flood", a.Args({"count=5000"}));
  EXPECT_GT(std::stoull(r["tokens_refused"].text), 0u) << "the flood was never refused";
  EXPECT_EQ(r["first_refusal"].code, static_cast<int>(Status::Code::kBusy)) << r["first_refusal"].text;
  EXPECT_NE(r["first_refusal"].text.find("refused a token"), std::string::npos) << r["first_refusal"].text;
  // The victim's hello presents that token: cma is still accepted.
  transport::TransportOptions o;
  o.kind = TransportKind::kShm;
  auto ctx = transport::Context::Create(o);
  ROS2_ASSERT_OK(ctx);
  auto worker = (*ctx)->CreateWorker("victim");
  ROS2_ASSERT_OK(worker);
  transport::Worker& w = **worker;
  static transport::cma::Token copy;  // where the engine reads the token back
  copy = *token;
  std::array<uint8_t, transport::wire::kHelloProofSize> proof{};
  const auto addr = reinterpret_cast<uint64_t>(copy.data());
  std::memcpy(proof.data(), copy.data(), copy.size());
  std::memcpy(proof.data() + copy.size(), &addr, sizeof(addr));
  transport::MessageRewriter forger;
  forger.hello = [&](transport::wire::Message& m) { m.capability = proof; };
  transport::SetFaultInjection(w, &forger);
  const std::string target = a.TargetAddress();
  auto ep = w.Connect(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(target.data()), target.size()));
  transport::SetFaultInjection(w, nullptr);
  ROS2_ASSERT_OK(ep);
  EXPECT_EQ((*ep)->info().bulk_mode, transport::BulkTransfer::kCma) << "the victim's token was evicted by the flood";
  ep->reset();
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST(TransportAttack, OversizedSharedSegmentsAreNotMapped) {
  Arena a;
  ASSERT_NO_FATAL_FAILURE(a.Start());
  const uint64_t before = a.EngineVmSize();
  auto r = RunAttacker(TRANSPORT_ATTACK_PEER_PATH, "big-segments",
                       a.Args({"count=8", fmt::format("size={}", uint64_t{2} << 40)}));
  EXPECT_EQ(r["segments_served"].text, "0");
  EXPECT_EQ(r["segments_refused"].text, "8");
  EXPECT_EQ(r["first_refusal"].code, static_cast<int>(Status::Code::kInvalidArgument)) << r["first_refusal"].text;
  EXPECT_NE(r["first_refusal"].text.find("max_segment_size"), std::string::npos) << r["first_refusal"].text;
  ASSERT_TRUE(r.count("engine_vm_bytes"));
  EXPECT_LT(std::stoull(r["engine_vm_bytes"].text), before + (uint64_t{64} << 30))
      << "the engine mapped the attacker's segments";
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST(TransportAttack, CmaFromMemoryThatBlocksCannotStallTheTarget) {
  Arena a;
  ASSERT_NO_FATAL_FAILURE(a.Start());
  // While the attacker's stalled memory is in place, the victim's calls
  // (on the same target thread) complete well within their deadline.
  Status victim_call;
  std::vector<std::byte> got(4096);
  auto r = RunAttacker(TRANSPORT_ATTACK_PEER_PATH, "cma-stall", a.Args({"len=65536", "hold_ms=4000"}), "attack", [&] {
    obj::FetchRequest f{a.victim->Header(0), a.victim_oid, "d", "a", obj::ValueType::kArray, 0, 4096, 1};
    transport::CallOptions o;
    o.timeout = std::chrono::milliseconds(2000);
    o.capability = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(a.victim->capability.data()),
                                            a.victim->capability.size());
    o.bulk_in = got;
    const auto payload = obj::Encode(f);
    victim_call = a.victim->endpoint(0).CallSync(static_cast<uint16_t>(obj::Opcode::kFetch), payload, o).status();
  });
  EXPECT_EQ(r["attack"].code, static_cast<int>(Status::Code::kPermissionDenied)) << r["attack"].text;
  EXPECT_NE(r["attack"].text.find("shared segments"), std::string::npos) << r["attack"].text;
  EXPECT_TRUE(victim_call.ok()) << "the victim's call stalled behind the attacker's copy: " << victim_call.ToString();
  EXPECT_EQ(got, std::vector<std::byte>(a.victim_data.begin(), a.victim_data.begin() + 4096));
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST(TransportAttack, HelloFloodIsBoundedPerPeerAndTimesOut) {
  Arena a;
  ASSERT_NO_FATAL_FAILURE(a.Start("max_connections: 64, max_connections_per_peer: 8, unauthenticated_timeout: 1s"));
  auto r = RunAttacker(TRANSPORT_ATTACK_PEER_PATH, "conn-flood", a.Args({"count=40", "hold_ms=3000", "auth=0"}));
  EXPECT_EQ(r["connected"].text, "8");
  EXPECT_EQ(r["refused"].text, "32");
  EXPECT_EQ(r["first_refusal"].code, static_cast<int>(Status::Code::kDisconnected)) << r["first_refusal"].text;
  EXPECT_NE(r["first_refusal"].text.find("max_connections_per_peer"), std::string::npos) << r["first_refusal"].text;
  EXPECT_EQ(r["closed"].text, "8") << "connections that never authenticated were kept";
  EXPECT_NE(r["first_close"].text.find("unauthenticated_timeout"), std::string::npos) << r["first_close"].text;
  // The victim's connections authenticated with their first request and stay.
  ROS2_ASSERT_OK(a.victim->endpoint(0).status());
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST(TransportAttack, HelloFloodEvictsOnlyUnauthenticatedConnections) {
  Arena a;
  // The victim and the attacker's container session hold 2 of the 6.
  ASSERT_NO_FATAL_FAILURE(a.Start("max_connections: 6, max_connections_per_peer: 64"));
  ROS2_ASSERT_OK(a.attacker->UpdateArray(a.victim_oid, "d", "a", 0, Pattern(16, 1)));  // authenticates it
  auto r = RunAttacker(TRANSPORT_ATTACK_PEER_PATH, "conn-flood", a.Args({"count=20", "hold_ms=200", "auth=0"}));
  EXPECT_EQ(r["connected"].text, "20");
  EXPECT_EQ(r["closed"].text, "16") << "the flood was not bounded";
  EXPECT_NE(r["first_close"].text.find("max_connections"), std::string::npos) << r["first_close"].text;
  ROS2_ASSERT_OK(a.victim->endpoint(0).status());
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

// Issue 36, finding 3: a capability captured on the wire and sent from
// another tenant's connection. The engine accepts a capability only on a
// connection that proved its session's key.
TEST(TransportAttack, CapabilityReplayedFromAnotherConnectionIsRefused) {
  Arena a;
  ASSERT_NO_FATAL_FAILURE(a.Start());
  const auto& victim_cont = a.victim->container().container;
  const std::string victim_session = a.victim->pool().session_uuid;
  for (const std::string auth : {"1", "0"}) {  // from a connection proven for the attacker's session, and for none
    SCOPED_TRACE("auth=" + auth);
    auto r = RunAttacker(
        TRANSPORT_ATTACK_PEER_PATH, "replay",
        a.Args({"cap=" + Hex(a.victim->capability), "container=" + victim_cont.uuid(), "oid=1", "auth=" + auth}));
    const std::string proven = auth == "1" ? "session " + a.attacker->pool().session_uuid : "no session";
    for (const char* op : {"update", "fetch"}) {
      ASSERT_TRUE(r.count(op)) << "the attacker reported no " << op;
      EXPECT_EQ(r[op].code, static_cast<int>(Status::Code::kPermissionDenied)) << op << ": " << r[op].text;
      EXPECT_NE(r[op].text.find("capability of session " + victim_session), std::string::npos) << r[op].text;
      EXPECT_NE(r[op].text.find("authenticated for " + proven), std::string::npos) << r[op].text;
    }
  }
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

// Issue 36, finding 4: hellos whose address blob claims the victim's pid
// charge nobody (the per-peer cap counts pids the kernel vouched for), so
// the victim still connects while they are held.
TEST(TransportAttack, HellosClaimingAVictimsPidDoNotLockItOut) {
  Arena a;
  ASSERT_NO_FATAL_FAILURE(a.Start("max_connections: 256, max_connections_per_peer: 8"));
  Status victim_connect = Status::Internal("did not run");
  auto r = RunAttacker(
      TRANSPORT_ATTACK_PEER_PATH, "conn-flood",
      a.Args({"count=20", "hold_ms=2000", "auth=0", "claim_pid=" + std::to_string(getpid())}), "connected", [&] {
        auto more = ObjectSession::Open(a.cluster.engine->control(), a.cluster.admin, "p", "victim", a.kind);
        victim_connect = more.status();
        if (more.ok()) victim_connect = (*more)->FetchArray(a.victim_oid, "d", "a", 0, 16).status();
      });
  EXPECT_EQ(r["connected"].text, "20") << "a claimed pid was charged";
  EXPECT_TRUE(victim_connect.ok()) << "the victim was locked out: " << victim_connect.ToString();
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

// Issue 36, finding 4: claiming a different pid in every hello does not pass
// the cap: connections that proved no pid count by the session they
// authenticate for.
TEST(TransportAttack, ManyClaimedPidsDoNotPassThePerPeerCap) {
  Arena a;
  ASSERT_NO_FATAL_FAILURE(a.Start("max_connections: 256, max_connections_per_peer: 8"));
  auto r =
      RunAttacker(TRANSPORT_ATTACK_PEER_PATH, "conn-flood", a.Args({"count=20", "hold_ms=1000", "claim_pid=children"}));
  EXPECT_EQ(r["connected"].text, "20");
  EXPECT_EQ(r["closed"].text, "12") << "the cap was passed (or not reached)";
  EXPECT_NE(r["first_close"].text.find("max_connections_per_peer"), std::string::npos) << r["first_close"].text;
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

// Sets an environment variable for one scope (the engine a test starts
// inherits it; a transport Context reads ROS2_SAME_HOST_INTEGRITY when made).
struct ScopedEnv {
  const char* name;
  ScopedEnv(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~ScopedEnv() { unsetenv(name); }
};

// Integrity over tcp (docs/security.md): a request altered in transit or
// replayed is refused with an error naming the cause; the connection keeps
// serving; nothing is sealed over shared memory. Both processes run on this
// host, so ROS2_SAME_HOST_INTEGRITY=1 stands in for a connection across hosts.
TEST(TransportAttack, AlteredOrReplayedRequestsOverTcpAreRefused) {
  std::optional<ScopedEnv> tags(std::in_place, "ROS2_SAME_HOST_INTEGRITY", "1");
  Arena a;
  a.kind = TransportKind::kTcp;
  ASSERT_NO_FATAL_FAILURE(a.Start());
  transport::MessageRewriter rw;
  uint64_t sealed = 0;
  rw.sequence = [&](uint64_t&) { ++sealed; };
  transport::SetFaultInjection(a.attacker->worker(), &rw);
  ROS2_ASSERT_OK(a.attacker->UpdateArray(a.victim_oid, "d", "a", 0, Pattern(64, 3)));
  EXPECT_GT(sealed, 0u) << "requests over tcp are not sealed";
  // One byte of the next request altered after sealing.
  bool altered = false;
  rw.sealed = [&](std::span<uint8_t> covered) {
    if (!altered) covered[covered.size() - 1] ^= 1;
    altered = true;
  };
  auto bad = a.attacker->UpdateArray(a.victim_oid, "d", "a", 0, Pattern(64, 4));
  rw.sealed = nullptr;
  EXPECT_EQ(bad.status().code(), Status::Code::kPermissionDenied) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("integrity tag"), std::string::npos) << bad.status().ToString();
  // The same inside a batch (a corked endpoint): the batch is refused and
  // each of its requests answered, not left to its deadline.
  a.attacker->endpoint(0).Cork();
  altered = false;
  rw.sealed = [&](std::span<uint8_t> covered) {
    if (!altered) covered[covered.size() - 1] ^= 1;
    altered = true;
  };
  auto bad_batch = a.attacker->UpdateArray(a.victim_oid, "d", "a", 0, Pattern(64, 5));
  rw.sealed = nullptr;
  a.attacker->endpoint(0).Uncork();
  EXPECT_TRUE(altered);
  EXPECT_EQ(bad_batch.status().code(), Status::Code::kPermissionDenied) << bad_batch.status().ToString();
  EXPECT_NE(bad_batch.status().message().find("integrity tag"), std::string::npos) << bad_batch.status().ToString();
  // Two requests that arrive in the other order (UCX may reorder a
  // connection's messages across lanes): the late one is accepted once.
  int swaps = 0;
  rw.sequence = [&](uint64_t& seq) {
    if (swaps == 0) seq += 1;  // the first goes out as the second's number,
    if (swaps == 1) seq -= 1;  // the second as the first's
    ++swaps;
  };
  ROS2_ASSERT_OK(a.attacker->FetchArray(a.victim_oid, "d", "a", 0, 64));
  ROS2_ASSERT_OK(a.attacker->FetchArray(a.victim_oid, "d", "a", 0, 64));
  EXPECT_EQ(swaps, 2);
  // A request sent again under a sequence number already used.
  bool replayed = false;
  rw.sequence = [&](uint64_t& seq) {
    if (!replayed) seq = 1;
    replayed = true;
  };
  auto again = a.attacker->FetchArray(a.victim_oid, "d", "a", 0, 64);
  rw.sequence = nullptr;
  EXPECT_EQ(again.status().code(), Status::Code::kPermissionDenied) << again.status().ToString();
  EXPECT_NE(again.status().message().find("replayed"), std::string::npos) << again.status().ToString();
  // The connection still serves, and what was refused changed nothing.
  auto f = a.attacker->FetchArray(a.victim_oid, "d", "a", 0, 64);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->data, Pattern(64, 3));
  transport::SetFaultInjection(a.attacker->worker(), nullptr);
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());

  tags.reset();
  Arena shm;
  ASSERT_NO_FATAL_FAILURE(shm.Start());
  sealed = 0;
  rw.sequence = [&](uint64_t&) { ++sealed; };
  transport::SetFaultInjection(shm.attacker->worker(), &rw);
  ROS2_ASSERT_OK(shm.attacker->UpdateArray(shm.victim_oid, "d", "a", 0, Pattern(64, 3)));
  transport::SetFaultInjection(shm.attacker->worker(), nullptr);
  EXPECT_EQ(sealed, 0u) << "same-host shared memory pays for integrity it does not need";
}

// Messages of one ObjectSession call that were sealed (integrity tags).
uint64_t SealedMessagesOfAnUpdate(ObjectSession& s, const ObjectId& oid) {
  uint64_t sealed = 0;
  transport::MessageRewriter rw;
  rw.sequence = [&](uint64_t&) { ++sealed; };
  transport::SetFaultInjection(s.worker(), &rw);
  auto u = s.UpdateArray(oid, "d", "a", 0, Pattern(64, 3));
  EXPECT_TRUE(u.ok()) << u.status().ToString();
  transport::SetFaultInjection(s.worker(), nullptr);
  return sealed;
}

// The flags of the first authenticate request on a new connection from `s`'s
// worker to target 0, whose hello `hello` may rewrite: bit 0 is integrity,
// which the client asks for when the server's ack asked for it.
uint8_t AuthenticateFlags(Arena& a, ObjectSession& s, std::function<void(transport::wire::Message&)> hello) {
  transport::MessageRewriter rw;
  rw.hello = std::move(hello);
  int flags = -1;
  rw.authenticate = [&](std::span<uint8_t> p) { flags = p[transport::kSessionIdSize]; };
  transport::SetFaultInjection(s.worker(), &rw);
  const std::string address = a.TargetAddress();
  auto ep =
      s.worker().Connect(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(address.data()), address.size()));
  EXPECT_TRUE(ep.ok()) << ep.status().ToString();
  if (ep.ok()) {
    EXPECT_TRUE((*ep)->AuthenticateSession(s.session()).ok());
  }
  transport::SetFaultInjection(s.worker(), nullptr);
  EXPECT_GE(flags, 0) << "no authenticate request was sent";
  return static_cast<uint8_t>(flags);
}

// Same-host tcp (docs/security.md, "Sessions on the data plane"): a client
// whose hello proved its pid sends and receives untagged messages; one
// without the proof is asked for tags by the engine; ROS2_SAME_HOST_INTEGRITY=1
// on either side alone turns them on.
TEST(TransportAttack, SameHostTcpGoesUntaggedOnlyWithAKernelCheckedProof) {
  Arena a;
  a.kind = TransportKind::kTcp;
  ASSERT_NO_FATAL_FAILURE(a.Start());
  EXPECT_EQ(SealedMessagesOfAnUpdate(*a.attacker, a.victim_oid), 0u) << "a proven same-host tcp client pays for tags";
  EXPECT_EQ(AuthenticateFlags(a, *a.attacker, nullptr) & transport::kAuthFlagIntegrity, 0);
  // The same hello without its proof (a pid claimed, nothing the kernel
  // vouched for): the engine asks for tags.
  EXPECT_NE(AuthenticateFlags(a, *a.attacker, [](transport::wire::Message& m) { m.capability = {}; }) &
                transport::kAuthFlagIntegrity,
            0);
  // A proof with a token the listener never issued: the same.
  EXPECT_NE(AuthenticateFlags(a, *a.attacker,
                              [](transport::wire::Message& m) {
                                static std::array<uint8_t, transport::wire::kHelloProofSize> forged{};
                                forged.fill(0x5a);
                                m.capability = forged;
                              }) &
                transport::kAuthFlagIntegrity,
            0);
  {
    // The client alone turns tags on.
    ScopedEnv tags("ROS2_SAME_HOST_INTEGRITY", "1");
    auto s = ObjectSession::Open(a.cluster.engine->control(), a.cluster.admin, "p", "attacker", a.kind);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_GT(SealedMessagesOfAnUpdate(**s, a.victim_oid), 0u);
  }
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());

  // The engine alone (it inherited the variable; this process's new
  // context reads it unset).
  std::optional<ScopedEnv> tags(std::in_place, "ROS2_SAME_HOST_INTEGRITY", "1");
  Arena b;
  b.kind = TransportKind::kTcp;
  ASSERT_NO_FATAL_FAILURE(b.Start());
  tags.reset();
  auto s = ObjectSession::Open(b.cluster.engine->control(), b.cluster.admin, "p", "attacker", b.kind);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_GT(SealedMessagesOfAnUpdate(**s, b.victim_oid), 0u) << "the engine did not ask for tags";
  ASSERT_NO_FATAL_FAILURE(b.ExpectVictimUnaffected());
}

}  // namespace
}  // namespace ros2::testing
