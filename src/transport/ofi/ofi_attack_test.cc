// The security guarantees of docs/security.md on the libfabric provider,
// against a serving ofi worker (a forked process) and a raw
// libfabric endpoint that sends what a well-behaved worker never sends:
// requests naming another peer's connection, hello floods, oversize
// announcements, inline bulk and malformed batches; and session proofs with
// the right and a wrong key. Memory keys: ofi_rma_attack_test.cc.
#include "transport/ofi/ofi_attack_test_fixture.h"

namespace ros2::transport::ofi_attack {
namespace {

using namespace std::chrono_literals;

// The right key authenticates the connection (and, over tcp, turns on the
// integrity tags, which the server then checks on every request); a wrong
// key is refused and fails the endpoint naming the refusal. The honest
// endpoint is corked, as the client library's are: the proof leaves alone,
// unsealed, and the calls after it leave in sealed batches.
TEST_P(OfiAttackTest, SessionProofsAreCheckedAndIntegrityHolds) {
  auto so = Options();
  Server server(so, session_);
  auto ctx = Context::Create(Options()).value();
  auto worker = ctx->CreateWorker("honest").value();
  auto ep = worker->Connect(server.address()).value();
  ep->Cork();
  ASSERT_TRUE(ep->AuthenticateSession(session_).ok());
  int done = 0, ok = 0;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(ep->Call(kOpCount, {}, {}, [&](const ReplyView& r) { ++done, ok += r.status.ok(); }).ok());
  }
  ASSERT_TRUE(worker->RunUntil([&] { return done == 10; }, 5000ms).ok());
  EXPECT_EQ(ok, 10) << ep->status().ToString();
  ep->Uncork();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(ep->CallSync(kOpCount, {}).ok());

  SessionCredential wrong = session_;
  wrong.key[0] ^= 1;
  auto liar = ctx->CreateWorker("liar").value();
  auto lep = liar->Connect(server.address()).value();
  ASSERT_TRUE(lep->AuthenticateSession(wrong).ok());  // sent; refused by the server
  auto r = lep->CallSync(kOpCount, {});
  (void)liar->RunUntil([&] { return !lep->status().ok(); }, 3000ms);
  EXPECT_FALSE(lep->status().ok());
  EXPECT_NE(lep->status().message().find("refused"), std::string::npos) << lep->status().ToString();
  server.Stop();
  EXPECT_EQ(server.counts().authenticated, 20);
  EXPECT_GE(server.counts().stats.auth_refused, 1u);
  if (GetParam() == "tcp") {
    // The liar keyed its side and sealed its call; the server, which never
    // keyed that connection, refuses the sealed message.
    EXPECT_EQ(server.counts().handled, 20);
    EXPECT_EQ(server.counts().stats.integrity_refused, 1u);
  }
}

// A request naming another peer's connection is refused (counted, answered
// on the sender's own connection) and never reaches a handler.
TEST_P(OfiAttackTest, RequestsActOnlyOnTheSendersConnection) {
  Server server(Options(), session_);
  auto ctx = Context::Create(Options()).value();
  auto worker = ctx->CreateWorker("victim").value();
  auto victim = worker->Connect(server.address()).value();  // the server's connection 1
  RawPeer attacker(Options());
  attacker.Target(server.address());
  attacker.Hello(77);
  auto ack_bytes = attacker.Receive();
  ASSERT_TRUE(ack_bytes.has_value());
  auto ack = wire::Decode(*ack_bytes).value();
  ASSERT_EQ(ack.kind, wire::Kind::kHelloAck);
  ASSERT_EQ(ack.connection_id, 77u);
  const uint64_t mine = ack.request_id;
  ASSERT_NE(mine, 1u);
  wire::Message req;
  req.kind = wire::Kind::kRequest;
  req.opcode = kOpCount;
  req.request_id = 5;
  req.connection_id = 1;  // the victim's
  attacker.Send(req);
  auto answer_bytes = attacker.Receive();
  ASSERT_TRUE(answer_bytes.has_value());
  auto answer = wire::Decode(*answer_bytes).value();
  EXPECT_EQ(answer.kind, wire::Kind::kReply);
  EXPECT_EQ(answer.connection_id, 77u);  // on its own connection
  EXPECT_EQ(answer.status_code, static_cast<uint8_t>(Status::Code::kPermissionDenied));
  EXPECT_TRUE(victim->CallSync(kOpCount, {}).ok());
  server.Stop();
  EXPECT_EQ(server.counts().handled, 1);  // the victim's call only
  EXPECT_GE(server.counts().stats.misdirected_messages, 1u);
}

// Hellos from one address beyond max_connections_per_peer (of connections
// that proved nothing) are refused with a bye; an honest client still gets in.
TEST_P(OfiAttackTest, HelloFloodsAreBounded) {
  auto o = Options();
  o.max_connections_per_peer = 4;
  o.max_connections = 16;
  Server server(o, session_);
  RawPeer attacker(Options());
  attacker.Target(server.address());
  for (uint64_t i = 1; i <= 40; ++i) attacker.Hello(i);
  int acks = 0, byes = 0;
  while (auto m = attacker.Receive(1000ms)) {
    auto d = wire::Decode(*m);
    if (!d.ok()) continue;
    acks += d->kind == wire::Kind::kHelloAck;
    byes += d->kind == wire::Kind::kBye;
  }
  EXPECT_EQ(acks, 4);
  EXPECT_EQ(byes, 36);
  auto ctx = Context::Create(Options()).value();
  auto worker = ctx->CreateWorker("honest").value();
  auto ep = worker->Connect(server.address());
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  EXPECT_TRUE((*ep)->CallSync(kOpCount, {}).ok());
  server.Stop();
  EXPECT_EQ(server.counts().stats.hellos_refused, 36u);
}

// Oversize input is bounded: an announcement of a message above the largest
// one is dropped (nothing is allocated for it), inline bulk above the limit
// is answered with an error naming it, bytes above a posted receive are
// truncated by the provider; the server keeps serving.
TEST_P(OfiAttackTest, OversizeInputIsBounded) {
  Server server(Options(), session_);
  RawPeer attacker(Options());
  attacker.Target(server.address());
  attacker.Hello(9);
  auto ack = wire::Decode(attacker.Receive().value()).value();
  std::vector<uint8_t> frame(ofi::kFrameSize);
  const uint32_t magic = ofi::kFrameMagic, huge = 0xfffffff0u;
  const uint64_t tag = ofi::TagOf(ofi::kTagLarge, 1);
  std::memcpy(frame.data(), &magic, 4);
  std::memcpy(frame.data() + 4, &huge, 4);
  std::memcpy(frame.data() + 8, &tag, 8);
  attacker.Send(frame);
  attacker.Send(std::vector<uint8_t>(ofi::kRecvSize + 4096, 0xab));  // above a posted receive
  std::vector<uint8_t> inline_bytes(32 * 1024, 1);  // above the inline limit, within one posted receive
  wire::Message req;
  req.kind = wire::Kind::kRequest;
  req.opcode = kOpCount;
  req.request_id = 3;
  req.connection_id = ack.request_id;
  req.bulk_count = 1;
  req.bulk[0].direction = wire::BulkDirection::kOut;
  req.bulk[0].transfer = wire::BulkTransfer::kInline;
  req.bulk[0].length = inline_bytes.size();
  req.inline_data = inline_bytes;
  attacker.Send(req);
  std::optional<wire::Message> reply;
  std::vector<uint8_t> reply_bytes;
  while (auto m = attacker.Receive()) {
    auto d = wire::Decode(*m);
    if (d.ok() && d->kind == wire::Kind::kReply) {
      reply_bytes = *m;
      reply = wire::Decode(reply_bytes).value();
      break;
    }
  }
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status_code, static_cast<uint8_t>(Status::Code::kInvalidArgument));
  EXPECT_NE(std::string(reply->status_message).find("inline bulk up to"), std::string::npos) << reply->status_message;
  auto ctx = Context::Create(Options()).value();
  auto worker = ctx->CreateWorker("honest").value();
  auto ep = worker->Connect(server.address()).value();
  EXPECT_TRUE(ep->CallSync(kOpCount, {}).ok());
  server.Stop();
  EXPECT_GE(server.counts().stats.malformed_messages, 2u);
  EXPECT_EQ(server.counts().stats.inline_refused, 1u);
  EXPECT_EQ(server.counts().handled, 1);
}

// ---- Malformed batches --------------------------------------------------------
// Batches a well-behaved worker never sends, raw over libfabric on the
// attacker's own (hello-acknowledged) connection: the batch cut short, an
// entry whose length runs past the end, more entries than a batch may hold,
// and replies sent to the server. The server decodes batches with the shared
// wire::DecodedBatch; on libfabric it runs no entry of such a batch and closes
// the connection with a bye naming the rule. It keeps serving: a victim's
// calls before, between and after succeed, and only they reach the handler.
namespace {

// A request (or reply) of the attacker's on `connection`, as a batch entry.
std::vector<uint8_t> BatchEntry(uint64_t connection, uint64_t request_id, wire::Kind kind) {
  wire::Message m;
  m.kind = kind;
  m.opcode = kind == wire::Kind::kRequest ? kOpCount : 0;
  m.request_id = request_id;
  m.connection_id = connection;
  std::vector<uint8_t> out(wire::BatchEntrySize(m));
  EXPECT_TRUE(wire::EncodeBatchEntry(m, out).ok());
  return out;
}

// A batch of `count` entries for `connection`, its header's length covering them.
std::vector<uint8_t> Batch(uint64_t connection, size_t count, wire::Kind kind = wire::Kind::kRequest) {
  std::vector<uint8_t> batch(wire::kHeaderSize);
  for (size_t i = 0; i < count; ++i) {
    const auto e = BatchEntry(connection, i + 1, kind);
    batch.insert(batch.end(), e.begin(), e.end());
  }
  EXPECT_TRUE(wire::EncodeBatchHeader(connection, batch.size() - wire::kHeaderSize, batch).ok());
  return batch;
}

struct MalformedBatch {
  std::string name;
  std::function<std::vector<uint8_t>(uint64_t connection)> make;
  std::string rule;  // what the bye must name
};

std::vector<MalformedBatch> MalformedBatches() {
  return {
      {"truncated",
       [](uint64_t c) {
         auto b = Batch(c, 2);
         b.resize(b.size() - 20);  // the header still claims the whole payload
         return b;
       },
       "truncated in payload"},
      {"entry length past the end",
       [](uint64_t c) {
         auto b = Batch(c, 2);
         const size_t second = wire::kHeaderSize + BatchEntry(c, 1, wire::Kind::kRequest).size();
         const uint32_t huge = 0x00ffffff;
         std::memcpy(b.data() + second, &huge, sizeof(huge));  // entry 1's length prefix
         return b;
       },
       "bytes remain"},
      {"more entries than a batch holds", [](uint64_t c) { return Batch(c, wire::kMaxBatchMessages + 1); },
       fmt::format("more than {} entries", wire::kMaxBatchMessages)},
      {"replies sent to the server", [](uint64_t c) { return Batch(c, 2, wire::Kind::kReply); }, "wrong direction"},
  };
}

}  // namespace

TEST_P(OfiAttackTest, MalformedBatchesAreRefusedByNameAndTheServerKeepsServing) {
  Server server(Options(), session_);
  auto ctx = Context::Create(Options()).value();
  auto worker = ctx->CreateWorker("victim").value();
  auto victim = worker->Connect(server.address()).value();
  int victim_calls = 0;
  auto victim_call = [&] {
    auto r = victim->CallSync(kOpCount, {});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    ++victim_calls;
  };
  victim_call();
  uint64_t my_id = 100;
  for (const MalformedBatch& attack : MalformedBatches()) {
    SCOPED_TRACE(attack.name);
    RawPeer attacker(Options());
    attacker.Target(server.address());
    attacker.Hello(++my_id);
    auto ack = wire::Decode(attacker.Receive().value()).value();
    ASSERT_EQ(ack.kind, wire::Kind::kHelloAck);
    attacker.Send(attack.make(ack.request_id));
    std::optional<wire::Message> bye;
    std::vector<uint8_t> bye_bytes;
    while (auto m = attacker.Receive()) {
      auto d = wire::Decode(*m);
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      ASSERT_NE(d->kind, wire::Kind::kReply) << "an entry of the malformed batch was answered";
      if (d->kind != wire::Kind::kBye) continue;
      bye_bytes = *m;
      bye = wire::Decode(bye_bytes).value();
      break;
    }
    ASSERT_TRUE(bye.has_value()) << "the connection was not closed";
    EXPECT_EQ(bye->connection_id, my_id);
    const std::string reason(reinterpret_cast<const char*>(bye->payload.data()), bye->payload.size());
    EXPECT_NE(reason.find("malformed batch"), std::string::npos) << reason;
    EXPECT_NE(reason.find(attack.rule), std::string::npos) << reason;
    victim_call();
  }
  victim_call();
  server.Stop();
  EXPECT_EQ(server.counts().handled, victim_calls);  // no entry of an attacker's batch ran
  EXPECT_GE(server.counts().stats.malformed_messages, MalformedBatches().size());
}

INSTANTIATE_TEST_SUITE_P(Providers, OfiAttackTest, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return "ofi_" + info.param; });

}  // namespace
}  // namespace ros2::transport::ofi_attack
