// Two-process tests of the data plane: this process is the client, a real
// transport_test_peer process is the server. Run over tcp and over shm; each
// asserts the transport actually in use.
#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <ucp/api/ucp.h>
#include <functional>

#include "common/checksum.h"
#include "testing/pattern.h"
#include "testing/status_assert.h"
#include "transport/fault_injection.h"
#include "transport/shared_segment.h"
#include "transport/testing/peer_process.h"
#include "transport/testing/test_protocol.h"
#include "transport/transport.h"
#include "transport/wire.h"

namespace ros2::transport {
namespace {

using namespace std::chrono_literals;

class TransportTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(peer_.Start(TRANSPORT_TEST_PEER_PATH, GetParam()).ok());
    TransportOptions opts;
    opts.kind = ParseTransportKind(GetParam()).value();
    opts.default_timeout = 20s;
    auto ctx = Context::Create(opts);
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = std::move(*ctx);
    auto w = ctx_->CreateWorker("test-client");
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    worker_ = std::move(*w);
    auto ep = worker_->Connect(peer_.address());
    ASSERT_TRUE(ep.ok()) << ep.status().ToString();
    ep_ = std::move(*ep);
  }
  void TearDown() override {
    ep_.reset();
    worker_.reset();
    ctx_.reset();
  }
  bool IsShm() const { return GetParam() == "shm"; }

  // A second client (its own context, worker and endpoint to the peer) with
  // other options; members are destroyed endpoint first.
  struct Client {
    std::unique_ptr<Context> ctx;
    std::unique_ptr<Worker> worker;
    std::shared_ptr<Endpoint> ep;
  };
  // `faults` (fault_injection.h), if given, must outlive the client.
  Client ConnectWith(const TransportOptions& options, std::string_view name, FaultInjection* faults = nullptr) {
    Client c;
    c.ctx = Context::Create(options).value();
    c.worker = c.ctx->CreateWorker(name).value();
    SetFaultInjection(*c.worker, faults);
    c.ep = c.worker->Connect(peer_.address()).value();
    return c;
  }

  testing::PeerProcess peer_;
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<Worker> worker_;
  std::shared_ptr<Endpoint> ep_;
};

// A client that lies about its memory (fault_injection.h): it claims a cma
// proof it never made, and may damage the references to its segments.
class LyingClient : public FaultInjection {
 public:
  enum class Damage { kNone, kRangePastEnd, kWrongId, kNotASegment };
  LyingClient(bool claim_cma, Damage damage) : claim_cma_(claim_cma), damage_(damage) {}
  bool ClaimCmaProof() override { return claim_cma_; }
  void DamageSegmentReference(segment::Location& where) override {
    switch (damage_) {
      case Damage::kNone: break;
      case Damage::kRangePastEnd: where.offset += uint64_t{1} << 40; break;
      case Damage::kWrongId: where.ref.id ^= 2; break;
      case Damage::kNotASegment: where.ref.fd = 0; break;
    }
  }

 private:
  bool claim_cma_;
  Damage damage_;
};

using ros2::testing::Pattern;

std::span<const uint8_t> Bytes(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

TEST_P(TransportTest, UsesTheSelectedTransport) {
  const EndpointInfo& info = ep_->info();
  ASSERT_FALSE(info.lanes.empty()) << info.ucx_report;
  if (IsShm()) {
    EXPECT_TRUE(info.IsSharedMemoryOnly()) << info.ucx_report;
    EXPECT_FALSE(info.UsesTcp()) << info.ucx_report;
    EXPECT_TRUE(info.am_transport.rfind("posix/", 0) == 0 || info.am_transport.rfind("sysv/", 0) == 0)
        << info.am_transport << "\n"
        << info.ucx_report;
  } else {
    EXPECT_EQ(info.am_transport, "tcp/lo") << info.ucx_report;
    for (const std::string& lane : info.lanes) EXPECT_EQ(lane, "tcp/lo") << info.ucx_report;
  }
  // No verbs here: over shm, bulk moves by cross-memory attach (the hello
  // proved our pid); over tcp it rides rendezvous. A same-host peer is watched
  // by pidfd on top of UCX's error mode PEER.
  EXPECT_EQ(info.bulk_mode, IsShm() ? BulkMode::kCma : BulkMode::kActiveMessage);
  EXPECT_FALSE(info.rma_any_memory);
  EXPECT_EQ(info.failure_detection, FailureDetection::kPidWatch);
  EXPECT_TRUE(info.same_host);
  EXPECT_EQ(info.peer_pid, peer_.pid());
}

TEST_P(TransportTest, RoundTrip) {
  const std::string hello = "hello, engine";
  auto reply = ep_->CallSync(testing::kOpEcho, Bytes(hello));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_EQ(reply->payload.size(), 4 + hello.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(reply->payload.data()) + 4, hello.size()), hello);
  EXPECT_EQ(worker_->stats().replies_received, 1u);
}

TEST_P(TransportTest, HandlerErrorsTravelToTheClient) {
  auto failed = ep_->CallSync(testing::kOpFail, {});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), Status::Code::kNotFound);
  EXPECT_NE(failed.status().message().find("no such thing"), std::string::npos);
  auto unknown = ep_->CallSync(777, {});
  EXPECT_EQ(unknown.status().code(), Status::Code::kNotSupported);
  auto dropped = ep_->CallSync(testing::kOpDrop, {});
  EXPECT_EQ(dropped.status().code(), Status::Code::kInternal);
}

struct PeerStats {
  uint64_t malformed = 0, peers_lost = 0, rma_bytes = 0, am_bytes = 0, version_mismatches = 0, cma_bytes = 0,
           cma_refused = 0, segment_bytes = 0, segments_mapped = 0, segments_refused = 0;
};
PeerStats GetPeerStats(Endpoint& ep) {
  PeerStats p;
  auto r = ep.CallSync(testing::kOpStats, {});
  if (r.ok() && r->payload.size() == sizeof(p)) std::memcpy(&p, r->payload.data(), sizeof(p));
  return p;
}

// Echoes every size through the peer: client -> server by Pull, server -> client
// by Push. `arena` selects UCX-allocated buffers (one-sided RMA over shm) over
// heap buffers (active-message rendezvous).
void EchoAllSizes(Context& ctx, Endpoint& ep, bool arena) {
  const uint64_t limit = ctx.options().inline_limit;
  const std::vector<uint64_t> sizes = {0, 1, 4096, limit - 1, limit, limit + 1, 1u << 20, 64u << 20};
  uint32_t seed = 1;
  for (uint64_t size : sizes) {
    SCOPED_TRACE("size " + std::to_string(size) + (arena ? " arena" : " heap"));
    std::vector<std::byte> expect = Pattern(size, seed++);
    std::vector<std::byte> heap_out, heap_in;
    CallOptions co;
    if (arena && size > 0) {
      auto out = ctx.AllocateMemory(size);
      auto in = ctx.AllocateMemory(size);
      ASSERT_TRUE(out.ok() && in.ok());
      std::memcpy((*out)->mutable_base(), expect.data(), size);
      std::memset((*in)->mutable_base(), 0xEE, size);
      co.bulk_out = std::span<const std::byte>((*out)->base(), size);
      co.bulk_in = std::span<std::byte>((*in)->mutable_base(), size);
      co.bulk_out_region = *out;
      co.bulk_in_region = *in;
    } else {
      heap_out = expect;
      heap_in.assign(size, std::byte{0xEE});
      co.bulk_out = heap_out;
      co.bulk_in = heap_in;
    }
    auto reply = ep.CallSync(testing::kOpEcho, {}, co);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    ASSERT_EQ(reply->payload.size(), 4u);
    uint32_t server_crc;
    std::memcpy(&server_crc, reply->payload.data(), 4);
    EXPECT_EQ(server_crc, Crc32c(expect.data(), expect.size())) << "client -> server bytes differ";
    EXPECT_EQ(reply->bulk_in_bytes, size);
    EXPECT_TRUE(size == 0 || std::memcmp(co.bulk_in.data(), expect.data(), size) == 0)
        << "server -> client bytes differ";
  }
}

TEST_P(TransportTest, BulkIsByteExactInBothDirections) {
  const PeerStats before = GetPeerStats(*ep_);
  EchoAllSizes(*ctx_, *ep_, /*arena=*/false);
  EchoAllSizes(*ctx_, *ep_, /*arena=*/true);
  const PeerStats after = GetPeerStats(*ep_);
  // Large bulk, both directions, heap and arena: through the client's bounce
  // segments over shm (the server copies only segments, never ordinary
  // memory by cma), active-message rendezvous over tcp.
  const uint64_t large = 2 * ((1u << 20) + (64u << 20) + ctx_->options().inline_limit + 1);
  EXPECT_GT(worker_->stats().bulk_inline_bytes, 0u);
  EXPECT_EQ((IsShm() ? after.segment_bytes - before.segment_bytes : after.am_bytes - before.am_bytes), 2 * large);
  EXPECT_EQ(worker_->stats().bulk_bounce_bytes, IsShm() ? 2 * large : 0u);
  EXPECT_EQ(after.cma_bytes, before.cma_bytes);
  EXPECT_EQ((IsShm() ? after.am_bytes - before.am_bytes : 0u), 0u);
  EXPECT_EQ(after.rma_bytes, before.rma_bytes);
  EXPECT_EQ(after.cma_refused, before.cma_refused);
}

// With cma off on the client, a same-host shm peer moves bulk by active-message
// rendezvous: the path for clients that cannot or will not prove their pid.
TEST_P(TransportTest, ActiveMessagePathWithoutCma) {
  TransportOptions o = ctx_->options();
  o.same_host_cma = false;
  Client client = ConnectWith(o, "am-client");
  Context* ctx = client.ctx.get();
  Endpoint* ep = client.ep.get();
  EXPECT_EQ(ep->info().bulk_mode, BulkMode::kActiveMessage);
  const PeerStats before = GetPeerStats(*ep);
  EchoAllSizes(*ctx, *ep, /*arena=*/false);
  const PeerStats after = GetPeerStats(*ep);
  const uint64_t large = (1u << 20) + (64u << 20) + o.inline_limit + 1;
  EXPECT_EQ(after.am_bytes - before.am_bytes, 2 * large);
  EXPECT_EQ(after.cma_bytes, before.cma_bytes);
}

// A client that names cma buffers on a connection that never proved its pid is
// refused per request (the server must not touch memory of a process it has
// not identified), counted, and the connection keeps working.
TEST_P(TransportTest, UnprovenCmaDescriptorsAreRefused) {
  TransportOptions o = ctx_->options();
  o.same_host_cma = false;
  LyingClient liar(/*claim_cma=*/true, LyingClient::Damage::kNone);
  Client client = ConnectWith(o, "liar", &liar);
  Endpoint* ep = client.ep.get();
  ASSERT_NE(ep->info().bulk_mode, BulkMode::kCma);
  const PeerStats before = GetPeerStats(*ep);
  std::vector<std::byte> out(1 << 20, std::byte{9}), in(1 << 20);
  CallOptions co;
  co.bulk_out = out;
  co.bulk_in = in;
  auto r = ep->CallSync(testing::kOpEcho, {}, co);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kProtocol) << r.status().ToString();
  EXPECT_NE(r.status().message().find("did not prove its pid"), std::string::npos) << r.status().ToString();
  const PeerStats after = GetPeerStats(*ep);
  EXPECT_GT(after.malformed, before.malformed);
  EXPECT_EQ(after.cma_bytes, before.cma_bytes);
  EXPECT_TRUE(std::all_of(in.begin(), in.end(), [](std::byte b) { return b == std::byte{0}; }));
  auto still = ep->CallSync(testing::kOpEcho, Bytes("still here"));
  EXPECT_TRUE(still.ok()) << still.status().ToString();
}

// With force_rma_bulk on both sides, large bulk moves by the server's RMA
// (GET for pulls, PUT + flush for pushes) against the client's registered
// buffers: the path verbs endpoints take. UCX emulates it over tcp, so this
// checks our side of it (rkeys, chunking, flush before reply), not
// one-sidedness. Over shared memory a key names a process and a file, and
// the server refuses to unpack it.
TEST_P(TransportTest, RmaPathIsByteExact) {
  setenv("ROS2_TRANSPORT_FORCE_RMA", "1", 1);
  testing::PeerProcess rma_peer;
  const Status started = rma_peer.Start(TRANSPORT_TEST_PEER_PATH, GetParam());
  unsetenv("ROS2_TRANSPORT_FORCE_RMA");
  ROS2_ASSERT_OK(started);
  TransportOptions o = ctx_->options();
  o.force_rma_bulk = true;
  o.bulk_chunk_size = 256 * 1024;  // several chunks in flight for the 1 MiB case
  Client client;
  client.ctx = Context::Create(o).value();
  client.worker = client.ctx->CreateWorker("rma-client").value();
  client.ep = client.worker->Connect(rma_peer.address()).value();
  Context* ctx = client.ctx.get();
  Endpoint* ep = client.ep.get();
  EXPECT_EQ(ep->info().bulk_mode, BulkMode::kRma);
  if (IsShm()) {
    std::vector<std::byte> out = Pattern(1 << 20, 3), in(1 << 20);
    CallOptions co;
    co.bulk_out = out;
    co.bulk_in = in;
    auto r = ep->CallSync(testing::kOpEcho, Bytes("rma over shm"), co);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Status::Code::kPermissionDenied) << r.status().ToString();
    EXPECT_NE(r.status().message().find("memory key"), std::string::npos) << r.status().ToString();
    EXPECT_TRUE(ep->CallSync(testing::kOpEcho, Bytes("still here")).ok());
    return;
  }
  const PeerStats before = GetPeerStats(*ep);
  EchoAllSizes(*ctx, *ep, /*arena=*/true);
  EchoAllSizes(*ctx, *ep, /*arena=*/false);
  const PeerStats after = GetPeerStats(*ep);
  const uint64_t large = 2 * ((1u << 20) + (64u << 20) + o.inline_limit + 1);
  EXPECT_EQ(after.rma_bytes - before.rma_bytes, 2 * large);
  EXPECT_EQ(after.am_bytes, before.am_bytes);
  EXPECT_GE(ctx->registration_stats().misses, 1u);  // heap buffers went through the cache
}

// Corked calls leave in batches (several requests a message) and the peer
// answers each batch's requests in batches of replies; every call still gets
// its own reply, error and bulk byte-exact. A call whose bulk cannot ride a
// batch (above the inline limit) goes out at once, after the batch before it.
TEST_P(TransportTest, CorkedCallsShareMessagesAndStayByteExact) {
  constexpr int kCalls = 300;
  std::vector<std::string> payloads(kCalls);
  std::vector<std::vector<std::byte>> outs(kCalls), ins(kCalls);
  int completed = 0, good = 0;
  const WorkerStats before = worker_->stats();
  ep_->Cork();
  for (int i = 0; i < kCalls; ++i) {
    payloads[i] = "corked-" + std::to_string(i);
    const bool fail = i % 7 == 3;
    const bool large = i == 150;  // above the inline limit: sent on its own
    outs[i] = Pattern(large ? (1u << 20) : (i % 3 == 0 ? 4096 : 100 + i), i);
    ins[i].resize(outs[i].size());
    CallOptions co;
    co.bulk_out = outs[i];
    co.bulk_in = ins[i];
    Status st =
        ep_->Call(fail ? testing::kOpFail : testing::kOpEcho, Bytes(payloads[i]), co, [&, i, fail](const ReplyView& r) {
          ++completed;
          if (fail) {
            good += r.status.code() == Status::Code::kNotFound &&
                    r.status.message().find("no such thing") != std::string::npos;
          } else if (r.status.ok() && r.payload.size() == 4 + payloads[i].size() &&
                     std::memcmp(r.payload.data() + 4, payloads[i].data(), payloads[i].size()) == 0 &&
                     ins[i] == outs[i]) {
            ++good;
          }
        });
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  ep_->Uncork();
  EXPECT_EQ(ep_->outstanding(), static_cast<uint32_t>(kCalls));
  ASSERT_TRUE(worker_->RunUntil([&] { return completed == kCalls; }, 60s).ok());
  EXPECT_EQ(good, kCalls);
  const WorkerStats& after = worker_->stats();
  // The 299 small calls' bytes alone need this many batches of batch_limit
  // bytes; nearly every call rode in one (a batch of one leaves as a plain
  // message, and the 1 MiB call could not ride at all).
  uint64_t small_bytes = 0;
  for (int i = 0; i < kCalls; ++i) small_bytes += i == 150 ? 0 : outs[i].size();
  EXPECT_GE(after.batches_sent - before.batches_sent, small_bytes / ctx_->options().batch_limit);
  EXPECT_GE(after.batched_messages - before.batched_messages, 250u);
  EXPECT_GT(after.batches_received, before.batches_received) << "the peer did not batch its replies";
  EXPECT_EQ(after.requests_sent - before.requests_sent, static_cast<uint64_t>(kCalls));
}

// Replies given after their request's receive callback (as the engine's after
// storage I/O) leave in batches when the server turns reply batching on: 64
// corked calls answered later all complete with their own payload.
TEST_P(TransportTest, RepliesGivenLaterLeaveInBatches) {
  constexpr int kCalls = 64;
  std::vector<std::string> payloads(kCalls);
  int good = 0, completed = 0;
  const uint64_t batches_before = worker_->stats().batches_received;
  ep_->Cork();
  for (int i = 0; i < kCalls; ++i) {
    payloads[i] = "later-" + std::to_string(i);
    ASSERT_TRUE(ep_->Call(testing::kOpEchoLater, Bytes(payloads[i]), {},
                          [&, i](const ReplyView& r) {
                            ++completed;
                            good += r.status.ok() && std::string(r.payload.begin(), r.payload.end()) == payloads[i];
                          })
                    .ok());
  }
  ep_->Uncork();
  ASSERT_TRUE(worker_->RunUntil([&] { return completed == kCalls; }, 20s).ok());
  EXPECT_EQ(good, kCalls);
  EXPECT_GT(worker_->stats().batches_received, batches_before) << "the later replies did not come batched";
}

// The replies to a batch of requests leave whenever the gathered ones have
// pushed batch_flush_bytes, not all at the end: eight corked 1 MiB echoes from
// a shared segment come back in groups of batch_flush_bytes / 1 MiB, eight
// small ones as one batch.
TEST_P(TransportTest, LargeTransferRepliesAreNotHeldForTheirBatch) {
  constexpr uint64_t kLarge = uint64_t{1} << 20;
  const uint64_t flush = ctx_->options().batch_flush_bytes;
  ASSERT_EQ(flush % kLarge, 0u);
  ASSERT_GE(flush, 2 * kLarge);  // groups of two or more: still batches
  ASSERT_LE(flush, 4 * kLarge);  // and at least two of them out of eight calls
  constexpr int kCalls = 8;
  auto out_seg = SharedBuffer::Create(kCalls * kLarge);
  auto in_seg = SharedBuffer::Create(kCalls * kLarge);
  ASSERT_TRUE(out_seg.ok() && in_seg.ok());
  auto run = [&](uint64_t size) {
    int completed = 0, good = 0;
    const uint64_t batches_before = worker_->stats().batches_received;
    ep_->Cork();
    for (int i = 0; i < kCalls; ++i) {
      const std::vector<std::byte> expect = Pattern(size, 500 + i);
      std::byte* out = (*out_seg)->data() + i * kLarge;
      std::byte* in = (*in_seg)->data() + i * kLarge;
      std::memcpy(out, expect.data(), size);
      std::memset(in, 0, size);
      CallOptions co;
      co.bulk_out = std::span<const std::byte>(out, size);
      co.bulk_in = std::span<std::byte>(in, size);
      EXPECT_TRUE(ep_->Call(testing::kOpEcho, Bytes("flush"), co,
                            [&, i, in, size](const ReplyView& r) {
                              ++completed;
                              good += r.status.ok() && std::memcmp(in, (*out_seg)->data() + i * kLarge, size) == 0;
                            })
                      .ok());
    }
    ep_->Uncork();
    EXPECT_TRUE(worker_->RunUntil([&] { return completed == kCalls; }, 20s).ok());
    EXPECT_EQ(good, kCalls) << size;
    return worker_->stats().batches_received - batches_before;
  };
  const uint64_t large_batches = run(kLarge);
  if (IsShm()) {
    EXPECT_EQ(large_batches, kCalls * kLarge / flush) << "replies of 1 MiB pushes were not sent in groups";
    EXPECT_EQ(run(64), 1u) << "small replies did not come as one batch";
  }
}

// A cork left on does not strand calls: the worker's next progress sends them.
TEST_P(TransportTest, CorkedCallsLeaveWhenTheWorkerProgresses) {
  ep_->Cork();
  const std::string hello = "still corked";
  auto reply = ep_->CallSync(testing::kOpEcho, Bytes(hello));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(reply->payload.data()) + 4, hello.size()), hello);
  int completed = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        ep_->Call(testing::kOpEcho, Bytes(hello), {}, [&](const ReplyView& r) { completed += r.status.ok(); }).ok());
  }
  ASSERT_TRUE(worker_->RunUntil([&] { return completed == 3; }, 20s).ok());
  ep_->Uncork();
}

TEST_P(TransportTest, ThousandOutstandingRequests) {
  constexpr int kCalls = 1000;
  std::vector<std::string> payloads(kCalls);
  std::vector<std::vector<std::byte>> outs(kCalls), ins(kCalls);
  int completed = 0, good = 0;
  for (int i = 0; i < kCalls; ++i) {
    payloads[i] = "request-" + std::to_string(i);
    outs[i] = Pattern(i % 10 == 0 ? 4096 : 16, i);
    ins[i].resize(outs[i].size());
    CallOptions co;
    co.bulk_out = outs[i];
    co.bulk_in = ins[i];
    Status st = ep_->Call(testing::kOpEcho, Bytes(payloads[i]), co, [&, i](const ReplyView& r) {
      ++completed;
      if (r.status.ok() && r.payload.size() == 4 + payloads[i].size() &&
          std::memcmp(r.payload.data() + 4, payloads[i].data(), payloads[i].size()) == 0 && ins[i] == outs[i]) {
        ++good;
      }
    });
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  EXPECT_GT(ep_->outstanding(), 0u);
  ASSERT_TRUE(worker_->RunUntil([&] { return completed == kCalls; }, 60s).ok());
  EXPECT_EQ(good, kCalls);
  EXPECT_EQ(ep_->outstanding(), 0u);
}

// A client that always has calls in flight never reaches "no live call", when
// the only moment the whole deadline heap is cleared; its completed calls' entries must not
// pile up (one per call of the last timeout period), and a call that does time
// out among them must still fail in time.
TEST_P(TransportTest, BusyClientKeepsItsDeadlineHeapSmallAndStillTimesOut) {
  constexpr int kCalls = 20000;
  constexpr int kWindow = 4;
  int issued = 0, completed = 0, good = 0;
  const std::string payload = "busy";
  std::function<void()> issue = [&] {
    ++issued;
    Status st = ep_->Call(testing::kOpEcho, Bytes(payload), {}, [&](const ReplyView& r) {
      ++completed;
      if (r.status.ok()) ++good;
      if (issued < kCalls) issue();
    });
    ASSERT_TRUE(st.ok()) << st.ToString();
  };
  for (int i = 0; i < kWindow; ++i) issue();
  Status held;
  bool held_done = false;
  CallOptions hold;
  hold.timeout = 300ms;
  ASSERT_TRUE(ep_->Call(testing::kOpHold, {}, hold,
                        [&](const ReplyView& r) {
                          held = r.status;
                          held_done = true;
                        })
                  .ok());
  ASSERT_TRUE(worker_->RunUntil([&] { return completed == kCalls && held_done; }, 60s).ok());
  EXPECT_EQ(good, kCalls);
  EXPECT_EQ(held.code(), Status::Code::kTimedOut) << held.ToString();
  const WorkerStats& st = worker_->stats();
  EXPECT_GT(st.deadline_compactions, 0u);
  EXPECT_LT(st.deadline_entries, 200u) << "completed calls' deadlines piled up";
}

TEST_P(TransportTest, RequestTimesOut) {
  CallOptions co;
  co.timeout = 200ms;
  const auto start = std::chrono::steady_clock::now();
  auto r = ep_->CallSync(testing::kOpHold, {}, co);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.status().code(), Status::Code::kTimedOut) << r.status().ToString();
  EXPECT_LT(took, 5s);
  EXPECT_EQ(worker_->stats().requests_timed_out, 1u);
  // The endpoint still works afterwards.
  EXPECT_TRUE(ep_->CallSync(testing::kOpEcho, {}).ok());
}

TEST_P(TransportTest, PeerKilledMidTransferFailsOutstandingRequests) {
  constexpr int kCalls = 20;
  std::vector<std::byte> out = Pattern(8 << 20, 3);
  std::vector<std::vector<std::byte>> ins(kCalls, std::vector<std::byte>(1 << 20));
  int failed = 0, completed = 0;
  for (int i = 0; i < kCalls; ++i) {
    CallOptions co;
    co.bulk_out = out;
    co.bulk_in = ins[i];
    ASSERT_TRUE(ep_->Call(testing::kOpHold, {}, co,
                          [&](const ReplyView& r) {
                            ++completed;
                            if (r.status.code() == Status::Code::kDisconnected) ++failed;
                          })
                    .ok());
  }
  // Wait until the peer holds a few (their bulk is being pulled), then kill it.
  uint64_t held = 0;
  ASSERT_TRUE(worker_
                  ->RunUntil(
                      [&] {
                        auto r = ep_->CallSync(testing::kOpHeldCount, {});
                        if (r.ok() && r->payload.size() == 8) std::memcpy(&held, r->payload.data(), 8);
                        return held >= 2;
                      },
                      30s)
                  .ok());
  const auto start = std::chrono::steady_clock::now();
  peer_.Kill();
  ASSERT_TRUE(worker_->RunUntil([&] { return completed == kCalls; }, 10s).ok()) << completed << " of " << kCalls;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(failed, kCalls);
  EXPECT_EQ(ep_->status().code(), Status::Code::kDisconnected) << ep_->status().ToString();
  EXPECT_EQ(ep_->outstanding(), 0u);
  EXPECT_EQ(worker_->stats().peers_lost, 1u);
  // New calls fail at once with the same clear error.
  auto again = ep_->CallSync(testing::kOpEcho, {});
  EXPECT_EQ(again.status().code(), Status::Code::kDisconnected);
}

// A client killed while the server pulls its bulk: the server must survive,
// drop that client (peers_lost) and keep serving others.
TEST_P(TransportTest, ServerSurvivesAClientKilledMidTransfer) {
  std::string hex;
  for (uint8_t b : peer_.address()) {
    char two[3];
    snprintf(two, sizeof two, "%02x", b);
    hex += two;
  }
  testing::PeerProcess doomed;
  ASSERT_TRUE(doomed.Start(TRANSPORT_TEST_PEER_PATH, GetParam(), {"client", hex}).ok());
  uint64_t held = 0;
  ASSERT_TRUE(worker_
                  ->RunUntil(
                      [&] {
                        auto r = ep_->CallSync(testing::kOpHeldCount, {});
                        if (r.ok() && r->payload.size() == 8) std::memcpy(&held, r->payload.data(), 8);
                        return held >= 1;
                      },
                      30s)
                  .ok());
  doomed.Kill();
  PeerStats st;
  ASSERT_TRUE(worker_
                  ->RunUntil(
                      [&] {
                        st = GetPeerStats(*ep_);
                        return st.peers_lost >= 1;
                      },
                      20s)
                  .ok())
      << "the server did not notice the dead client";
  auto r = ep_->CallSync(testing::kOpEcho, Bytes("still here"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(worker_
                  ->RunUntil(
                      [&] {
                        auto c = ep_->CallSync(testing::kOpHeldCount, {});
                        if (c.ok() && c->payload.size() == 8) std::memcpy(&held, c->payload.data(), 8);
                        return held == 0;
                      },
                      20s)
                  .ok())
      << "the server still holds " << held << " requests of the dead client";
}

// Sends raw bytes to the peer's worker through a bare UCX endpoint, bypassing
// the encoder, and checks the peer rejects them, counts them and keeps serving.
TEST_P(TransportTest, MalformedMessagesAreRejectedAndCounted) {
  ucp_config_t* cfg = nullptr;
  ASSERT_EQ(ucp_config_read(nullptr, nullptr, &cfg), UCS_OK);
  ucp_config_modify(cfg, "TLS", IsShm() ? "posix,sysv,cma" : "tcp");
  ucp_config_modify(cfg, "NET_DEVICES", "lo");
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES;
  p.features = UCP_FEATURE_AM;
  ucp_context_h raw_ctx;
  ASSERT_EQ(ucp_init(&p, cfg, &raw_ctx), UCS_OK);
  ucp_config_release(cfg);
  ucp_worker_params_t wp{};
  ucp_worker_h raw_worker;
  ASSERT_EQ(ucp_worker_create(raw_ctx, &wp, &raw_worker), UCS_OK);
  auto peer_addr = wire::DecodeAddress(peer_.address()).value();
  ucp_ep_params_t ep_params{};
  ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep_params.address = reinterpret_cast<const ucp_address_t*>(peer_addr.ucx_address.data());
  ucp_ep_h raw_ep;
  ASSERT_EQ(ucp_ep_create(raw_worker, &ep_params, &raw_ep), UCS_OK);

  // A valid request with every kind of damage: truncations, bad magic, a
  // length that points past the end, an unknown connection id.
  std::string payload = "x";
  wire::Message m;
  m.kind = wire::Kind::kRequest;
  m.opcode = testing::kOpEcho;
  m.request_id = 1;
  m.connection_id = 12345;
  m.payload = Bytes(payload);
  std::vector<uint8_t> good(wire::EncodedSize(m));
  ASSERT_TRUE(wire::Encode(m, good).ok());
  std::vector<std::vector<uint8_t>> bad;
  for (size_t cut : {size_t{0}, size_t{1}, size_t{10}, good.size() - 1})
    bad.emplace_back(good.begin(), good.begin() + cut);
  bad.push_back(good), bad.back()[0] ^= 0xff;  // magic
  bad.push_back(good), bad.back()[24] = 0xff;  // payload length past the end
  bad.push_back(good), bad.back()[2] = 99;     // version
  bad.push_back(good);                         // valid, but an unknown connection
  std::vector<uint8_t> noise = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17,
                                18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34,
                                35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50};
  bad.push_back(noise);
  {
    // Batches: one whose second entry is damaged (dropped whole), one of valid
    // requests for a connection the peer does not know.
    wire::Message e = m;
    std::vector<uint8_t> batch(wire::kHeaderSize);
    for (int i = 0; i < 2; ++i) {
      const size_t at = batch.size();
      batch.resize(at + wire::BatchEntrySize(e));
      ASSERT_TRUE(wire::EncodeBatchEntry(e, std::span<uint8_t>(batch).subspan(at)).ok());
    }
    ASSERT_TRUE(wire::EncodeBatchHeader(12345, batch.size() - wire::kHeaderSize, batch).ok());
    bad.push_back(batch);  // unknown connection
    std::vector<uint8_t> damaged = batch;
    damaged[wire::kHeaderSize + wire::BatchEntrySize(e) + wire::kBatchEntryPrefix] ^= 0xff;  // entry 1's magic
    bad.push_back(damaged);
  }
  for (auto& msg : bad) {
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags = UCP_AM_SEND_FLAG_EAGER;
    void* req = ucp_am_send_nbx(raw_ep, 0x52, nullptr, 0, msg.data(), msg.size(), &rp);
    while (UCS_PTR_IS_PTR(req) && ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(raw_worker);
    if (UCS_PTR_IS_PTR(req)) ucp_request_free(req);
  }
  // Flush so everything reached the peer before asking it for its counters.
  ucp_request_param_t fp{};
  void* freq = ucp_ep_flush_nbx(raw_ep, &fp);
  while (UCS_PTR_IS_PTR(freq) && ucp_request_check_status(freq) == UCS_INPROGRESS) ucp_worker_progress(raw_worker);
  if (UCS_PTR_IS_PTR(freq)) ucp_request_free(freq);

  PeerStats stats;
  ASSERT_TRUE(worker_
                  ->RunUntil(
                      [&] {
                        ucp_worker_progress(raw_worker);
                        stats = GetPeerStats(*ep_);
                        return stats.malformed >= bad.size();
                      },
                      20s)
                  .ok())
      << "peer counted " << stats.malformed << " of " << bad.size();
  EXPECT_EQ(stats.malformed, bad.size());
  EXPECT_EQ(stats.version_mismatches, 1u);  // the one with version 99
  EXPECT_TRUE(ep_->CallSync(testing::kOpEcho, Bytes(payload)).ok());

  ucp_request_param_t cp{};
  cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  cp.flags = UCP_EP_CLOSE_FLAG_FORCE;
  void* creq = ucp_ep_close_nbx(raw_ep, &cp);
  while (UCS_PTR_IS_PTR(creq) && ucp_request_check_status(creq) == UCS_INPROGRESS) ucp_worker_progress(raw_worker);
  if (UCS_PTR_IS_PTR(creq)) ucp_request_free(creq);
  ucp_worker_destroy(raw_worker);
  ucp_cleanup(raw_ctx);
}

// Buffers inside shared segments (SharedBuffer): over shm the server maps the
// segment once and moves bulk with memcpy (kSegment), byte-exact at every size
// and at an unaligned offset; bulk below segment_min_bulk rides the messages,
// from segment_min_bulk on (inline-sized or not) it goes by segment. Over tcp
// segments are ordinary memory.
TEST_P(TransportTest, SharedSegmentBulkIsByteExact) {
  const uint64_t limit = ctx_->options().inline_limit;
  const uint64_t seg_min = ctx_->options().segment_min_bulk;
  ASSERT_LT(seg_min, uint64_t{4096});  // 4096 below is inline-sized and goes by segment
  auto out_seg = SharedBuffer::Create((64u << 20) + 4096);
  auto in_seg = SharedBuffer::Create((64u << 20) + 4096);
  ASSERT_TRUE(out_seg.ok() && in_seg.ok()) << out_seg.status().ToString() << in_seg.status().ToString();
  const PeerStats before = GetPeerStats(*ep_);
  uint64_t large = 0;
  uint32_t seed = 100;
  uint64_t small = 0;
  for (uint64_t size :
       {uint64_t{1}, seg_min - 1, seg_min, uint64_t{4096}, limit + 1, uint64_t{1} << 20, uint64_t{64} << 20}) {
    for (uint64_t offset : {uint64_t{0}, uint64_t{4093}}) {
      SCOPED_TRACE(fmt::format("size {} offset {}", size, offset));
      const std::vector<std::byte> expect = Pattern(size, seed++);
      std::byte* out = (*out_seg)->data() + offset;
      std::byte* in = (*in_seg)->data() + offset;
      std::memcpy(out, expect.data(), size);
      std::memset(in, 0xEE, size);
      CallOptions co;
      co.bulk_out = std::span<const std::byte>(out, size);
      co.bulk_in = std::span<std::byte>(in, size);
      auto reply = ep_->CallSync(testing::kOpEcho, {}, co);
      ASSERT_TRUE(reply.ok()) << reply.status().ToString();
      uint32_t server_crc;
      std::memcpy(&server_crc, reply->payload.data(), 4);
      EXPECT_EQ(server_crc, Crc32c(expect.data(), size)) << "client -> server bytes differ";
      EXPECT_EQ(reply->bulk_in_bytes, size);
      EXPECT_EQ(std::memcmp(in, expect.data(), size), 0) << "server -> client bytes differ";
      if (size > limit) large += 2 * size;
      if (size >= seg_min && size <= limit) small += 2 * size;
    }
  }
  const PeerStats after = GetPeerStats(*ep_);
  EXPECT_EQ(after.segment_bytes - before.segment_bytes, IsShm() ? large + small : 0u);
  EXPECT_EQ(after.segments_mapped - before.segments_mapped, IsShm() ? 2u : 0u);  // once per segment
  EXPECT_EQ(after.cma_bytes, before.cma_bytes);
  EXPECT_EQ(after.segments_refused, before.segments_refused);
  if (!IsShm()) {
    EXPECT_EQ(after.am_bytes - before.am_bytes, large);
  }
}

// A handler writes straight into the client's segment (the engine's zero-copy
// fetch); with heap memory there is no direct buffer and Push is the way.
TEST_P(TransportTest, DirectPushLandsInTheClientsSegment) {
  auto seg = SharedBuffer::Create(2u << 20);
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  const uint64_t size = (1u << 20) + 12345;
  std::byte* in = (*seg)->data() + 8192;
  CallOptions co;
  co.bulk_in = std::span<std::byte>(in, size);
  auto reply = ep_->CallSync(testing::kOpFillDirect, {}, co);
  if (!IsShm()) {
    ASSERT_FALSE(reply.ok());
    EXPECT_EQ(reply.status().code(), Status::Code::kNotSupported) << reply.status().ToString();
    return;
  }
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->bulk_in_bytes, size);
  for (uint64_t i = 0; i < size; ++i) ASSERT_EQ(in[i], testing::FillByte(i)) << "byte " << i;
  EXPECT_EQ((*seg)->data()[8191], std::byte{0});  // nothing outside the buffer
  EXPECT_EQ(in[size], std::byte{0});
  // Ordinary memory travels through the client's bounce segment: the server
  // fills that directly, and the client copies it into the caller's buffer.
  std::vector<std::byte> heap(size);
  co.bulk_in = heap;
  auto bounced = ep_->CallSync(testing::kOpFillDirect, {}, co);
  ASSERT_TRUE(bounced.ok()) << bounced.status().ToString();
  EXPECT_EQ(bounced->bulk_in_bytes, size);
  for (uint64_t i = 0; i < size; ++i) ASSERT_EQ(heap[i], testing::FillByte(i)) << "byte " << i;
}

// Damaged segment references (a range past the segment's end, an id that is not
// the segment's, an fd that is not a segment) are refused per request with an
// error naming the segment, nothing is written, and the connection keeps
// working; an unproven connection may not name segments at all. Over tcp no
// connection is proven, so segments are ordinary memory and the damage never
// reaches the wire: those calls succeed.
TEST_P(TransportTest, DamagedSegmentReferencesAreRefused) {
  auto seg = SharedBuffer::Create(4u << 20);
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  using Damage = LyingClient::Damage;
  struct Case {
    Damage damage;
    bool unproven;
    const char* expect;
  };
  for (const Case& c :
       {Case{Damage::kRangePastEnd, false, "outside its"}, Case{Damage::kWrongId, false, "not the segment"},
        Case{Damage::kNotASegment, false, "not a memfd"}, Case{Damage::kNone, true, "did not prove its pid"}}) {
    SCOPED_TRACE(fmt::format("damage {} unproven {}", static_cast<int>(c.damage), c.unproven));
    TransportOptions o = ctx_->options();
    if (c.unproven) o.same_host_cma = false;
    LyingClient liar(/*claim_cma=*/c.unproven, c.damage);
    Client client = ConnectWith(o, "segment-liar", &liar);
    const PeerStats before = GetPeerStats(*client.ep);
    std::memset((*seg)->data(), 0, (*seg)->size());
    std::byte* in = (*seg)->data();
    CallOptions co;
    co.bulk_in = std::span<std::byte>(in, 1u << 20);
    auto r = client.ep->CallSync(testing::kOpFill, {}, co);
    if (!IsShm() && !c.unproven) {
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      continue;
    }
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().ToString();
    EXPECT_TRUE(std::all_of(in, in + (1u << 20), [](std::byte b) { return b == std::byte{0}; }));
    const PeerStats after = GetPeerStats(*client.ep);
    EXPECT_EQ(after.segment_bytes, before.segment_bytes);
    if (c.damage == Damage::kWrongId || c.damage == Damage::kNotASegment) {
      EXPECT_EQ(after.segments_refused - before.segments_refused, 1u);
    }
    EXPECT_TRUE(client.ep->CallSync(testing::kOpEcho, Bytes("still here")).ok());
  }
}

// A peer of another data-plane wire version: its address blob says so, and
// Connect refuses at once with both versions named instead of timing out on a
// hello the peer would drop.
TEST_P(TransportTest, ConnectToAnotherWireVersionFailsClearly) {
  std::vector<uint8_t> blob(peer_.address().begin(), peer_.address().end());
  ASSERT_EQ(wire::DecodeAddress(blob).value().wire_version, wire::kVersion);
  blob[5] =
      static_cast<uint8_t>(wire::kVersion + 1);  // the wire version byte of the address blob (docs/wire-format.md)
  const auto start = std::chrono::steady_clock::now();
  auto ep = worker_->Connect(blob);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(ep.ok());
  EXPECT_EQ(ep.status().code(), Status::Code::kNotSupported) << ep.status().ToString();
  const std::string msg = ep.status().message();
  EXPECT_NE(msg.find(fmt::format("wire version {}", wire::kVersion + 1)), std::string::npos) << msg;
  EXPECT_NE(msg.find(fmt::format("speaks version {}", wire::kVersion)), std::string::npos) << msg;
  EXPECT_NE(msg.find(fmt::format("pid {}", peer_.pid())), std::string::npos) << msg;
  EXPECT_LT(took, 1s);  // refused, not timed out
  // The existing connection is untouched.
  EXPECT_TRUE(ep_->CallSync(testing::kOpEcho, Bytes("still here")).ok());
}

// `auto` on a host without verbs: a same-host peer is reached over shared memory
// only, although tcp is enabled for remote peers.
TEST(TransportAutoTest, SameHostPeerUsesSharedMemory) {
  testing::PeerProcess peer;
  ASSERT_TRUE(peer.Start(TRANSPORT_TEST_PEER_PATH, "auto").ok());
  auto ctx = Context::Create(TransportOptions{}).value();
  EXPECT_EQ(ctx->resolved_kind(), TransportKind::kShm);
  auto worker = ctx->CreateWorker("auto-client").value();
  auto ep = worker->Connect(peer.address());
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  EXPECT_TRUE((*ep)->info().IsSharedMemoryOnly()) << (*ep)->info().ucx_report;
  EXPECT_FALSE((*ep)->info().UsesTcp()) << (*ep)->info().ucx_report;
  EXPECT_TRUE((*ep)->CallSync(testing::kOpEcho, Bytes("auto")).ok());
  ep->reset();
  worker.reset();
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportTest, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ros2::transport
