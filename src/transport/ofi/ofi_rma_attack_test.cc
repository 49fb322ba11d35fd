// The libfabric provider's one-sided bulk against hostile keys (docs/security.md,
// docs/transport.md "Remote memory"): memory keys that are forged, out of
// range, of another client's connection, or aimed at the server's own
// memory, sent by a raw libfabric peer to a serving ofi worker. The fixture
// and the suite's instantiation are ofi_attack_test.cc's.
#include <sys/mman.h>

#include "transport/ofi/ofi_attack_test_fixture.h"

namespace ros2::transport::ofi_attack {
namespace {

using namespace std::chrono_literals;

// A request whose bulk names memory by key (a kRma descriptor: the key, the
// registration's start, the buffer's address), as an ofi client's does.
struct RmaRequest {
  wire::Message msg;
  std::array<uint8_t, ofi::kRmaKeySize> rkey{};
  std::vector<uint8_t> payload;
  RmaRequest(uint16_t op, uint64_t connection, uint64_t request, wire::BulkDirection dir, const void* addr,
             uint64_t length, uint64_t key, const void* start, uint8_t fill = 0)
      : payload{fill} {
    const uint64_t s = reinterpret_cast<uint64_t>(start);
    std::memcpy(rkey.data(), &key, 8);
    std::memcpy(rkey.data() + 8, &s, 8);
    msg.kind = wire::Kind::kRequest;
    msg.opcode = op;
    msg.request_id = request;
    msg.connection_id = connection;
    msg.payload = payload;
    msg.bulk_count = 1;
    msg.bulk[0].direction = dir;
    msg.bulk[0].transfer = wire::BulkTransfer::kRma;
    msg.bulk[0].length = length;
    msg.bulk[0].remote_addr = reinterpret_cast<uint64_t>(addr);
    msg.bulk[0].rkey = rkey;
  }
};

// The reply to `request` (kept as bytes and decoded), or nullopt after `timeout`.
struct Answer {
  std::vector<uint8_t> bytes;
  wire::Message msg;
  std::string text() const { return std::string(msg.status_message); }
};
std::optional<Answer> AwaitReply(RawPeer& peer, uint64_t request, std::chrono::milliseconds timeout = 5000ms) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    auto m = peer.Receive(200ms);
    if (!m) continue;
    Answer a;
    a.bytes = std::move(*m);
    if (!wire::Decode(a.bytes, a.msg).ok() || a.msg.kind != wire::Kind::kReply || a.msg.request_id != request) continue;
    return a;
  }
  return std::nullopt;
}

uint64_t Connect(RawPeer& peer, const std::vector<uint8_t>& server, uint64_t my_id) {
  peer.Target(server);
  peer.Hello(my_id);
  auto ack = wire::Decode(peer.Receive().value()).value();
  EXPECT_EQ(ack.kind, wire::Kind::kHelloAck);
  EXPECT_NE(ack.payload[0] & wire::kHelloAckRma, 0) << "the server takes memory keys over tcp;ofi_rxm";
  return ack.request_id;
}

// A key the client never registered, a range past its registration, a length
// above the server's limit and a buffer before its registration's start are
// each answered with an error naming the key, and nothing is read or written;
// the right key in range then works, and so does an honest client.
TEST_P(OfiAttackTest, ForgedAndOutOfRangeKeysAreRefused) {
  if (GetParam() == "shm") GTEST_SKIP() << "ofi-shm takes no memory keys (bulk is tagged)";
  Server server(Options(), session_);
  RawPeer attacker(Options());
  const uint64_t conn = Connect(attacker, server.address(), 41);
  std::vector<uint8_t> mine(256 * 1024);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<uint8_t>(i * 7);
  const std::vector<uint8_t> before = mine;
  const uint64_t key = attacker.Register(mine.data(), mine.size(), 0x5eed5eed5eedull);
  const uint64_t forged = key ^ 0x10000;
  const auto out = wire::BulkDirection::kOut;
  const auto in = wire::BulkDirection::kIn;
  struct Case {
    const char* what;
    RmaRequest req;
    Status::Code code;  // kIOError: refused by the client's provider; else by the server's checks
    uint64_t named_key;
  };
  uint64_t rid = 100;
  std::vector<Case> cases = {
      {"forged key (read)", RmaRequest(kOpPull, conn, ++rid, out, mine.data(), 65536, forged, mine.data()),
       Status::Code::kIOError, forged},
      {"forged key (write)", RmaRequest(kOpPush, conn, ++rid, in, mine.data(), 65536, forged, mine.data(), 0x66),
       Status::Code::kIOError, forged},
      {"range past the registration",
       RmaRequest(kOpPull, conn, ++rid, out, mine.data() + 200 * 1024, 128 * 1024, key, mine.data()),
       Status::Code::kIOError, key},
      {"write past the registration",
       RmaRequest(kOpPush, conn, ++rid, in, mine.data() + 200 * 1024, 128 * 1024, key, mine.data(), 0x66),
       Status::Code::kIOError, key},
      {"length above the limit",
       RmaRequest(kOpPull, conn, ++rid, out, mine.data(), ofi::kMaxRmaBulk + 1, key, mine.data()),
       Status::Code::kInvalidArgument, key},
      {"buffer before its registration",
       RmaRequest(kOpPull, conn, ++rid, out, mine.data(), 65536, key, mine.data() + 4096),
       Status::Code::kInvalidArgument, key},
  };
  for (Case& c : cases) {
    SCOPED_TRACE(c.what);
    const auto start = std::chrono::steady_clock::now();
    attacker.Send(c.req.msg);
    auto reply = AwaitReply(attacker, c.req.msg.request_id);
    ASSERT_TRUE(reply.has_value()) << "no answer";
    EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
    EXPECT_EQ(reply->msg.status_code, static_cast<uint8_t>(c.code)) << reply->text();
    EXPECT_NE(reply->text().find(fmt::format("{:#x}", c.named_key)), std::string::npos) << reply->text();
  }
  EXPECT_TRUE(mine == before) << "a refused write changed the client's memory";
  // The right key in range: the server reads exactly those bytes.
  RmaRequest good(kOpPull, conn, ++rid, out, mine.data() + 4096, 65536, key, mine.data());
  attacker.Send(good.msg);
  auto reply = AwaitReply(attacker, good.msg.request_id);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->msg.status_code, 0) << reply->text();
  uint32_t crc = 0;
  ASSERT_EQ(reply->msg.payload.size(), 4u);
  std::memcpy(&crc, reply->msg.payload.data(), 4);
  EXPECT_EQ(crc, Crc32c(mine.data() + 4096, 65536));
  auto ctx = Context::Create(Options()).value();
  auto worker = ctx->CreateWorker("honest").value();
  auto ep = worker->Connect(server.address()).value();
  EXPECT_TRUE(ep->CallSync(kOpCount, {}).ok());
  server.Stop();
  EXPECT_EQ(server.counts().stats.rkeys_refused, 2u);  // the two the server's own checks refused
  EXPECT_EQ(server.counts().handled, 1);
}

// Client B names client A's keys and buffers: the server moves bulk only
// with the address of the connection the request came in on, so B's
// provider, which has no such keys, refuses, and A's memory is neither read
// for B nor written by B's request. A keeps working.
TEST_P(OfiAttackTest, KeysOfAnotherClientsConnectionReachNothing) {
  if (GetParam() == "shm") GTEST_SKIP() << "ofi-shm takes no memory keys (bulk is tagged)";
  Server server(Options(), session_);
  auto ctx = Context::Create(Options()).value();
  auto alice = ctx->CreateWorker("alice").value();
  auto ep = alice->Connect(server.address()).value();
  ASSERT_EQ(ep->info().bulk_mode, BulkTransfer::kRma);
  std::vector<std::byte> secret(64 * 1024);
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<std::byte>(i * 13 + 1);
  std::vector<std::byte> inbox(64 * 1024, std::byte{0xAA});
  CallOptions pull;
  pull.bulk_out = secret;
  auto r = ep->CallSync(kOpPull, {}, pull);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const uint8_t fill = 0x11;
  CallOptions push;
  push.bulk_in = inbox;
  ASSERT_TRUE(ep->CallSync(kOpPush, std::span<const uint8_t>(&fill, 1), push).ok());
  ASSERT_EQ(inbox[0], std::byte{0x11});
  ASSERT_GT(alice->stats().bulk_rma_bytes, 0u);
  // Registrations of Alice's buffers, valid in her domain (as a call's are
  // while it runs), as Bob would name them had he learnt them.
  auto* ofi_alice = static_cast<ofi::OfiWorker*>(alice.get());
  auto out_reg = ofi_alice->RegisterBulk(secret.data(), secret.size(), nullptr, FI_REMOTE_READ).value();
  auto in_reg = ofi_alice->RegisterBulk(inbox.data(), inbox.size(), nullptr, FI_REMOTE_WRITE).value();

  RawPeer bob(Options());
  const uint64_t conn = Connect(bob, server.address(), 42);
  RmaRequest steal(kOpPull, conn, 7, wire::BulkDirection::kOut, secret.data(), secret.size(), out_reg->key,
                   out_reg->base);
  RmaRequest scribble(kOpPush, conn, 8, wire::BulkDirection::kIn, inbox.data(), inbox.size(), in_reg->key, in_reg->base,
                      0x66);
  for (RmaRequest* req : {&steal, &scribble}) {
    bob.Send(req->msg);
    // Alice progresses meanwhile: were the server to aim at her, her provider
    // would serve it.
    std::optional<Answer> reply;
    std::thread t([&] { reply = AwaitReply(bob, req->msg.request_id); });
    const auto end = std::chrono::steady_clock::now() + 3s;
    while (t.joinable() && std::chrono::steady_clock::now() < end && !reply) alice->Progress();
    t.join();
    ASSERT_TRUE(reply.has_value()) << "no answer to request " << req->msg.request_id;
    EXPECT_NE(reply->msg.status_code, 0) << "the server moved bulk with another client's key";
    if (req == &steal && reply->msg.payload.size() == 4) {
      uint32_t crc;
      std::memcpy(&crc, reply->msg.payload.data(), 4);
      EXPECT_NE(crc, Crc32c(secret.data(), secret.size())) << "the server read alice's memory for bob";
    }
  }
  (void)alice->RunUntil([] { return false; }, 100ms);
  for (std::byte b : inbox) ASSERT_EQ(b, std::byte{0x11}) << "bob's push landed in alice's buffer";
  EXPECT_TRUE(ep->CallSync(kOpPull, {}, pull).ok());
  server.Stop();
  EXPECT_EQ(server.counts().handled, 0);  // kOpCount only; the pulls and pushes ran their handlers
}

// The server registers nothing for remote access: reads and writes a raw
// peer aims at it, under any small key or a random one, all fail, and the
// server keeps serving.
TEST_P(OfiAttackTest, ServerMemoryIsNotRemotelyAccessible) {
  if (GetParam() == "shm") GTEST_SKIP() << "ofi-shm takes no memory keys (bulk is tagged)";
  Server server(Options(), session_);
  std::vector<uint8_t> buf(4096, 0x77);
  uint64_t id = 43;
  for (uint64_t key : {0ull, 1ull, 0x5eed5eed5eedull}) {
    for (bool write : {false, true}) {
      SCOPED_TRACE(fmt::format("key {:#x} {}", key, write ? "write" : "read"));
      // A fresh peer each time: tcp;ofi_rxm closes the connection of a
      // refused access, and the next would fail at the sender.
      RawPeer attacker(Options());
      (void)Connect(attacker, server.address(), ++id);
      EXPECT_NE(attacker.Rma(write, buf.data(), buf.size(), 0, key), 0);
    }
  }
  EXPECT_TRUE(std::all_of(buf.begin(), buf.end(), [](uint8_t b) { return b == 0x77; }));
  auto ctx = Context::Create(Options()).value();
  auto worker = ctx->CreateWorker("honest").value();
  auto ep = worker->Connect(server.address()).value();
  EXPECT_TRUE(ep->CallSync(kOpCount, {}).ok());
  server.Stop();
  EXPECT_EQ(server.counts().handled, 1);
}

// A raw peer playing the server of one client connection: it answers the
// hello (taking memory keys), and serves requests by fi_read of the bulk-out
// and fi_write of the bulk-in the descriptors name, recording their keys.
class KeyRecordingServer {
 public:
  struct Keys {
    uint64_t out_key = 0, out_offset = 0, in_key = 0, in_offset = 0, length = 0;
  };
  KeyRecordingServer(const TransportOptions& o, std::vector<uint8_t> client) : peer_(o), client_(std::move(client)) {}
  RawPeer& peer() { return peer_; }
  // Answers the hello; false when none came.
  bool Accept() {
    auto hello = peer_.Receive(5000ms);
    wire::Message h;
    if (!hello || !wire::Decode(*hello, h).ok() || h.kind != wire::Kind::kHello) return false;
    client_conn_ = h.request_id;
    peer_.Target(client_);
    std::array<uint8_t, wire::kHelloAckSize> ack_payload{};
    ack_payload[0] = wire::kHelloAckRma;
    wire::Message ack;
    ack.kind = wire::Kind::kHelloAck;
    ack.connection_id = client_conn_;
    ack.request_id = 99;
    ack.payload = ack_payload;
    peer_.Send(ack);
    return true;
  }
  // Serves one request: reads its bulk-out into `read`, writes `write` to
  // its bulk-in, replies; the keys it was given, or nullopt.
  std::optional<Keys> Serve(std::vector<std::byte>& read, std::vector<std::byte>& write) {
    wire::Message m;
    std::optional<std::vector<uint8_t>> bytes;
    const auto end = std::chrono::steady_clock::now() + 5000ms;
    do {  // past anything else (a keepalive frame)
      bytes = peer_.Receive(500ms);
    } while ((!bytes || !wire::Decode(*bytes, m).ok() || m.kind != wire::Kind::kRequest) &&
             std::chrono::steady_clock::now() < end);
    if (!bytes || m.kind != wire::Kind::kRequest || m.bulk_count != 2) return std::nullopt;
    Keys k;
    for (uint32_t i = 0; i < 2; ++i) {
      const wire::BulkDescriptor& d = m.bulk[i];
      uint64_t key = 0, start = 0;
      std::memcpy(&key, d.rkey.data(), 8);
      std::memcpy(&start, d.rkey.data() + 8, 8);
      // tcp;ofi_rxm's keys name offsets from the registration's start.
      (d.direction == wire::BulkDirection::kOut ? k.out_key : k.in_key) = key;
      (d.direction == wire::BulkDirection::kOut ? k.out_offset : k.in_offset) = d.remote_addr - start;
      k.length = d.length;
    }
    read.resize(k.length);
    write.resize(k.length);
    const int rd = peer_.Rma(false, read.data(), k.length, k.out_offset, k.out_key);
    const int wr = peer_.Rma(true, write.data(), k.length, k.in_offset, k.in_key);
    wire::Message reply;
    reply.kind = wire::Kind::kReply;
    reply.request_id = m.request_id;
    reply.connection_id = client_conn_;
    reply.pushed_bytes = k.length;
    peer_.Send(reply);
    if (rd != 0 || wr != 0) return std::nullopt;
    return k;
  }

 private:
  RawPeer peer_;
  std::vector<uint8_t> client_;
  uint64_t client_conn_ = 0;
};

// A client frees the buffers of a finished call and maps new memory at the
// same address: the call's keys must name nothing any more (a registration
// kept past its call would let the server read and write whatever memory is
// mapped there later, and on a provider that pins pages would serve the old
// pages), and a call through the new mapping moves its bytes exactly.
TEST_P(OfiAttackTest, KeysOfAFreedBufferNameNothingAfterItsCall) {
  if (GetParam() == "shm") GTEST_SKIP() << "ofi-shm takes no memory keys (bulk is tagged)";
  constexpr size_t kLen = 256 * 1024;
  auto ctx = Context::Create(Options()).value();
  auto client = ctx->CreateWorker("remapper").value();
  KeyRecordingServer server(Options(), std::vector<uint8_t>(client->address().begin(), client->address().end()));
  auto* map = static_cast<std::byte*>(mmap(nullptr, 2 * kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(map, MAP_FAILED);
  std::span<std::byte> out(map, kLen), in(map + kLen, kLen);
  const auto fill = [](std::span<std::byte> b, uint8_t seed) {
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>(i * 31 + seed);
  };
  fill(out, 1);
  std::vector<std::byte> got1, got2, sent1(kLen), sent2(kLen);
  fill(sent1, 2);
  fill(sent2, 4);
  std::optional<KeyRecordingServer::Keys> keys1, keys2;
  std::atomic<int> phase{0};
  int stale_read = 0, stale_write = 0;
  std::vector<std::byte> stolen(kLen, std::byte{0});
  std::thread t([&] {
    if (!server.Accept()) return;
    auto s1 = sent1;
    keys1 = server.Serve(got1, s1);
    while (phase.load() < 1) std::this_thread::sleep_for(1ms);
    auto s2 = sent2;
    keys2 = server.Serve(got2, s2);
    while (phase.load() < 2) std::this_thread::sleep_for(1ms);
    if (!keys1) return;
    stale_read = server.peer().Rma(false, stolen.data(), kLen, keys1->out_offset, keys1->out_key);
    std::vector<std::byte> junk(kLen, std::byte{0x66});
    stale_write = server.peer().Rma(true, junk.data(), kLen, keys1->in_offset, keys1->in_key);
    phase.store(3);
  });
  auto ep = client->Connect(server.peer().address());
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  CallOptions co;
  co.bulk_out = out;
  co.bulk_in = in;
  auto r1 = (*ep)->CallSync(kOpPull, {}, co);
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  ASSERT_TRUE(keys1.has_value());
  EXPECT_TRUE(std::equal(got1.begin(), got1.end(), out.begin())) << "the first call's bulk-out";
  EXPECT_TRUE(std::equal(in.begin(), in.end(), sent1.begin())) << "the first call's bulk-in";
  // Free the buffers; new memory, with new bytes, at the same address.
  ASSERT_EQ(munmap(map, 2 * kLen), 0);
  ASSERT_EQ(mmap(map, 2 * kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), map);
  fill(out, 3);
  phase.store(1);
  auto r2 = (*ep)->CallSync(kOpPull, {}, co);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  ASSERT_TRUE(keys2.has_value());
  EXPECT_TRUE(std::equal(got2.begin(), got2.end(), out.begin())) << "the new mapping's bytes were not the ones read";
  EXPECT_TRUE(std::equal(in.begin(), in.end(), sent2.begin())) << "the write did not land in the new mapping";
  EXPECT_NE(keys2->out_key, keys1->out_key) << "the new memory was served under the freed buffer's registration";
  std::vector<std::byte> secret(kLen);
  fill(secret, 5);
  std::copy(secret.begin(), secret.end(), out.begin());
  std::copy(secret.begin(), secret.end(), in.begin());
  phase.store(2);
  (void)client->RunUntil([&] { return phase.load() == 3; }, 10000ms);
  t.join();
  EXPECT_NE(stale_read, 0) << "a finished call's key still reads the memory now at its address";
  EXPECT_NE(stale_write, 0) << "a finished call's key still writes the memory now at its address";
  EXPECT_FALSE(std::equal(stolen.begin(), stolen.end(), secret.begin()));
  EXPECT_TRUE(std::equal(out.begin(), out.end(), secret.begin()));
  EXPECT_TRUE(std::equal(in.begin(), in.end(), secret.begin())) << "the stale key's write landed";
  munmap(map, 2 * kLen);
}

// Key tests over tcp;ofi_rxm only: ofi-shm takes no memory keys.

}  // namespace
}  // namespace ros2::transport::ofi_attack
