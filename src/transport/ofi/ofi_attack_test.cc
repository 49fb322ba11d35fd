// The security guarantees of docs/security.md on the libfabric provider,
// against a serving ofi worker (a forked process) and a raw
// libfabric endpoint that sends what a well-behaved worker never sends:
// requests naming another peer's connection, hello floods, oversize
// announcements and inline bulk; memory keys that are forged, out of range,
// of another client's connection, or aimed at the server's own memory; and
// session proofs with the right and a wrong key.
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "common/checksum.h"
#include "testing/subprocess.h"
#include "transport/ofi/fabric.h"
#include "transport/ofi/worker.h"
#include "transport/transport.h"
#include "transport/wire.h"

namespace ros2::transport {
namespace {

using namespace std::chrono_literals;
constexpr uint16_t kOpCount = 1;
// Pulls the whole bulk-out buffer and replies with the pull's status and
// the crc32c of the bytes; pushes bulk_in_capacity() bytes of payload[0]
// and replies with the push's status.
constexpr uint16_t kOpPull = 2;
constexpr uint16_t kOpPush = 3;

TransportOptions OfiOptions(const std::string& kind) {
  TransportOptions o;
  o.provider = Provider::kOfi;
  o.kind = ParseTransportKind(kind).value();
  o.default_timeout = 5s;
  o.connect_timeout = 5s;
  return o;
}

// A serving ofi worker in a child process (forked before it makes anything;
// a real second process, as an engine is): kOpCount counts the requests its
// handler saw and whether their connection proved `session`. Stop() has the
// child send back its counts and WorkerStats.
volatile sig_atomic_t g_stop = 0;

class Server {
 public:
  struct Counts {
    int handled = 0, authenticated = 0;
    WorkerStats stats;
  };
  Server(const TransportOptions& o, SessionCredential session) {
    int addr_pipe[2], stats_pipe[2];
    EXPECT_EQ(pipe(addr_pipe), 0);
    EXPECT_EQ(pipe(stats_pipe), 0);
    auto child = ros2::testing::ChildProcess::Fork([&]() -> int {
      close(addr_pipe[0]);
      close(stats_pipe[0]);
      Serve(o, session, addr_pipe[1], stats_pipe[1]);
      return 0;
    });
    EXPECT_TRUE(child.ok()) << child.status().ToString();
    if (child.ok()) child_ = std::move(*child);
    close(addr_pipe[1]);
    close(stats_pipe[1]);
    stats_fd_ = stats_pipe[0];
    uint32_t len = 0;
    if (read(addr_pipe[0], &len, sizeof(len)) == sizeof(len) && len > 0 && len < 65536) {
      address_.resize(len);
      size_t got = 0;
      while (got < len) {
        ssize_t n = read(addr_pipe[0], address_.data() + got, len - got);
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
    }
    close(addr_pipe[0]);
  }
  ~Server() {
    Stop();
    if (stats_fd_ >= 0) close(stats_fd_);
  }
  void Stop() {
    if (!child_.running()) return;
    child_.Signal(SIGUSR1);
    size_t got = 0;
    auto* p = reinterpret_cast<char*>(&counts_);
    while (got < sizeof(counts_)) {
      ssize_t n = read(stats_fd_, p + got, sizeof(counts_) - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    (void)child_.Wait(std::chrono::seconds(10));
    child_.Kill();  // reaps it, or ends one that ignored the stop
  }
  const std::vector<uint8_t>& address() const { return address_; }
  const Counts& counts() const { return counts_; }  // after Stop()

 private:
  static void Serve(TransportOptions o, SessionCredential session, int addr_fd, int stats_fd) {
    signal(SIGUSR1, [](int) { g_stop = 1; });
    o.remote_rma_target = false;  // as the engine: it only ever initiates RMA
    auto ctx = Context::Create(o);
    if (!ctx.ok()) _exit(1);
    auto worker = (*ctx)->CreateWorker("attack-target").value();
    Counts counts;
    (void)worker->RegisterHandler(kOpCount, [&](IncomingRequest r) {
      ++counts.handled;
      if (r.SessionAuthenticated(session.id)) ++counts.authenticated;
      r.Reply(Status::Ok());
    });
    (void)worker->RegisterHandler(kOpPull, [](IncomingRequest r) {
      auto buf = std::make_shared<std::vector<std::byte>>(r.bulk_out_size());
      r.Pull(*buf, [r, buf](const Status& st) mutable {
        const uint32_t crc = Crc32c(buf->data(), buf->size());
        r.Reply(st, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&crc), sizeof(crc)));
      });
    });
    (void)worker->RegisterHandler(kOpPush, [](IncomingRequest r) {
      const uint8_t fill = r.payload().empty() ? 0 : r.payload()[0];
      auto buf = std::make_shared<std::vector<std::byte>>(r.bulk_in_capacity(), std::byte{fill});
      r.Push(*buf, [r, buf](const Status& st) mutable { r.Reply(st); });
    });
    worker->SetSessionKeyLookup([session](const SessionId& id) -> Result<SessionKey> {
      if (id != session.id) return Status::NotFound("unknown session");
      return session.key;
    });
    const auto a = worker->address();
    const uint32_t len = static_cast<uint32_t>(a.size());
    (void)!write(addr_fd, &len, sizeof(len));
    (void)!write(addr_fd, a.data(), a.size());
    close(addr_fd);
    while (!g_stop) worker->Wait(1000us);
    counts.stats = worker->stats();
    (void)!write(stats_fd, &counts, sizeof(counts));
    close(stats_fd);
    _exit(0);
  }

  ros2::testing::ChildProcess child_;
  int stats_fd_ = -1;
  std::vector<uint8_t> address_;
  Counts counts_;
};

// A raw libfabric endpoint speaking the wire format by hand.
class RawPeer {
 public:
  explicit RawPeer(const TransportOptions& o) {
    fabric_ = ofi::Fabric::Open(o).value();
    EXPECT_EQ(fi_domain(fabric_->fabric(), fabric_->info(), &domain_, nullptr), 0);
    fi_av_attr av{};
    av.type = FI_AV_TABLE;
    EXPECT_EQ(fi_av_open(domain_, &av, &av_, nullptr), 0);
    fi_cq_attr cq{};
    cq.format = FI_CQ_FORMAT_TAGGED;
    EXPECT_EQ(fi_cq_open(domain_, &cq, &cq_, nullptr), 0);
    EXPECT_EQ(fi_endpoint(domain_, fabric_->info(), &ep_, nullptr), 0);
    EXPECT_EQ(fi_ep_bind(ep_, &av_->fid, 0), 0);
    EXPECT_EQ(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), 0);
    EXPECT_EQ(fi_enable(ep_), 0);
    std::vector<uint8_t> name(256);
    size_t len = name.size();
    EXPECT_EQ(fi_getname(&ep_->fid, name.data(), &len), 0);
    name.resize(len);
    std::vector<uint8_t> inner(ofi::kAddressTag, ofi::kAddressTag + 4);
    inner.insert(inner.end(), name.begin(), name.end());
    wire::WorkerAddress a;
    a.boot_id = wire::LocalHostId();
    a.pid = getpid();
    a.ucx_address = inner;
    address_.resize(wire::EncodedAddressSize(a));
    EXPECT_TRUE(wire::EncodeAddress(a, address_).ok());
    for (auto& b : recv_) b.resize(ofi::kRecvSize);
    for (size_t i = 0; i < recv_.size(); ++i) Post(i);
  }
  ~RawPeer() {
    for (fid_mr* mr : mrs_) fi_close(&mr->fid);
    fi_close(&ep_->fid);
    fi_close(&av_->fid);
    fi_close(&cq_->fid);
    fi_close(&domain_->fid);
  }
  void Target(const std::vector<uint8_t>& blob) {
    auto peer = wire::DecodeAddress(blob).value();
    auto inner = peer.ucx_address.subspan(4);
    ASSERT_EQ(fi_av_insert(av_, inner.data(), 1, &server_, 0, nullptr), 1);
  }
  void Send(std::vector<uint8_t> bytes) {
    sent_.push_back(std::move(bytes));
    const auto& b = sent_.back();
    ssize_t rc;
    send_ctx_.emplace_back();  // FI_CONTEXT mode: every operation has its own
    while ((rc = fi_send(ep_, b.data(), b.size(), nullptr, server_, &send_ctx_.back())) == -FI_EAGAIN) Drain(nullptr);
    ASSERT_EQ(rc, 0) << fi_strerror(static_cast<int>(-rc));
  }
  void Send(const wire::Message& m) {
    std::vector<uint8_t> bytes(wire::EncodedSize(m));
    ASSERT_TRUE(wire::Encode(m, bytes).ok());
    Send(std::move(bytes));
  }
  void Hello(uint64_t my_id) {
    wire::Message h;
    h.kind = wire::Kind::kHello;
    h.request_id = my_id;
    h.payload = address_;
    Send(h);
  }
  // One fi_read / fi_write against the server: its completion's error
  // (0: it completed), or the posting error; -FI_ETIMEDOUT after `timeout`.
  int Rma(bool write, void* buf, size_t n, uint64_t addr, uint64_t key, std::chrono::milliseconds timeout = 3000ms) {
    rma_ctx_.emplace_back();
    fi_context* ctx = &rma_ctx_.back();
    // A write completes once delivered, so that a refusal is seen here.
    iovec iov{buf, n};
    fi_rma_iov rma{addr, n, key};
    fi_msg_rma msg{};
    msg.msg_iov = &iov;
    msg.iov_count = 1;
    msg.addr = server_;
    msg.rma_iov = &rma;
    msg.rma_iov_count = 1;
    msg.context = ctx;
    ssize_t rc;
    while ((rc = write ? fi_writemsg(ep_, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE)
                       : fi_read(ep_, buf, n, nullptr, server_, addr, key, ctx)) == -FI_EAGAIN) {
      Drain(nullptr);
    }
    if (rc != 0) return static_cast<int>(rc);
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      Drain(nullptr);
      if (auto it = rma_done_.find(ctx); it != rma_done_.end()) return it->second;
      std::this_thread::sleep_for(100us);
    }
    return -FI_ETIMEDOUT;
  }
  // Registers `buf` on this peer's domain for remote read and write; its key.
  uint64_t Register(void* buf, size_t n, uint64_t key) {
    fid_mr* mr = nullptr;
    EXPECT_EQ(fi_mr_reg(domain_, buf, n, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, key, 0, &mr, nullptr), 0);
    mrs_.push_back(mr);
    return fi_mr_key(mr);
  }
  // The next wire message received within `timeout`, or nullopt.
  std::optional<std::vector<uint8_t>> Receive(std::chrono::milliseconds timeout = 3000ms) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    std::vector<uint8_t> got;
    while (std::chrono::steady_clock::now() < end) {
      if (Drain(&got)) return got;
      std::this_thread::sleep_for(100us);
    }
    return std::nullopt;
  }

 private:
  void Post(size_t i) { (void)fi_recv(ep_, recv_[i].data(), recv_[i].size(), nullptr, FI_ADDR_UNSPEC, &ctx_[i]); }
  bool Drain(std::vector<uint8_t>* out) {
    fi_cq_tagged_entry e[8];
    ssize_t n = fi_cq_read(cq_, e, 8);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      fi_cq_readerr(cq_, &err, 0);
      if (err.op_context != nullptr) rma_done_[err.op_context] = err.err == 0 ? -FI_EOTHER : -err.err;
      for (size_t k = 0; k < recv_.size(); ++k) {
        if (err.op_context == &ctx_[k]) Post(k);  // a receive the provider gave back
      }
      return false;
    }
    bool found = false;
    for (ssize_t i = 0; i < n; ++i) {
      rma_done_[e[i].op_context] = 0;
      for (size_t k = 0; k < recv_.size(); ++k) {
        if (e[i].op_context != &ctx_[k]) continue;
        if (out != nullptr && !found) {
          out->assign(recv_[k].begin(), recv_[k].begin() + static_cast<std::ptrdiff_t>(e[i].len));
          found = true;
        } else {
          pending_.emplace_back(recv_[k].begin(), recv_[k].begin() + static_cast<std::ptrdiff_t>(e[i].len));
        }
        Post(k);
      }
    }
    if (!found && out != nullptr && !pending_.empty()) {
      *out = std::move(pending_.front());
      pending_.erase(pending_.begin());
      found = true;
    }
    return found;
  }

  std::unique_ptr<ofi::Fabric> fabric_;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
  fi_addr_t server_ = FI_ADDR_UNSPEC;
  std::vector<uint8_t> address_;
  std::array<std::vector<uint8_t>, 16> recv_;
  std::array<fi_context, 16> ctx_{};
  std::deque<std::vector<uint8_t>> sent_;
  std::deque<fi_context> send_ctx_;
  std::deque<fi_context> rma_ctx_;
  std::map<void*, int> rma_done_;
  std::vector<fid_mr*> mrs_;
  std::vector<std::vector<uint8_t>> pending_;
};

class OfiAttackTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    session_.id.fill(0x5a);
    session_.key.fill(0x33);
  }
  TransportOptions Options() const { return OfiOptions(GetParam()); }
  SessionCredential session_;
};

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
      {"more entries than a batch holds",
       [](uint64_t c) { return Batch(c, wire::kMaxBatchMessages + 1); },
       fmt::format("more than {} entries", wire::kMaxBatchMessages)},
      {"replies sent to the server",
       [](uint64_t c) { return Batch(c, 2, wire::Kind::kReply); },
       "wrong direction"},
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
  // Alice's registrations (cached by her worker, so still valid in her
  // domain), as Bob would name them had he learnt them.
  auto* ofi_alice = static_cast<ofi::OfiWorker*>(alice.get());
  auto out_reg = ofi_alice->Register(secret.data(), secret.size(), FI_REMOTE_READ).value();
  auto in_reg = ofi_alice->Register(inbox.data(), inbox.size(), FI_REMOTE_WRITE).value();

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

// Over tcp;ofi_rxm. (shm: a process with several shm endpoints over time,
// as this test's, does not get its hellos answered yet; docs/transport.md.)
INSTANTIATE_TEST_SUITE_P(Providers, OfiAttackTest, ::testing::Values("tcp"),
                         [](const auto& info) { return "ofi_" + info.param; });

}  // namespace
}  // namespace ros2::transport
