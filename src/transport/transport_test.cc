// Two-process tests of the data plane: this process is the client, a real
// transport_test_peer process is the server (transport_test_fixture.h). Run
// over tcp and over shm; each asserts the transport actually in use. Calls,
// bulk in both directions and its paths (messages, rendezvous, RMA, shared
// segments), corked calls and batched replies, many outstanding calls.
#include "transport/transport_test_fixture.h"

namespace ros2::transport {
namespace {

using namespace std::chrono_literals;

class TransportTest : public TransportFixture {};

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
  EXPECT_EQ(info.bulk_mode, IsShm() ? BulkTransfer::kCma : BulkTransfer::kActiveMessage);
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
  EXPECT_EQ(ep->info().bulk_mode, BulkTransfer::kActiveMessage);
  const PeerStats before = GetPeerStats(*ep);
  EchoAllSizes(*ctx, *ep, /*arena=*/false);
  const PeerStats after = GetPeerStats(*ep);
  const uint64_t large = (1u << 20) + (64u << 20) + o.inline_limit + 1;
  EXPECT_EQ(after.am_bytes - before.am_bytes, 2 * large);
  EXPECT_EQ(after.cma_bytes, before.cma_bytes);
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
  EXPECT_EQ(ep->info().bulk_mode, BulkTransfer::kRma);
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
  const uint64_t made_before = ctx->registration_stats().made;
  EchoAllSizes(*ctx, *ep, /*arena=*/true);
  EXPECT_EQ(ctx->registration_stats().made, made_before) << "a call re-registered memory of its caller's region";
  EchoAllSizes(*ctx, *ep, /*arena=*/false);
  const PeerStats after = GetPeerStats(*ep);
  const uint64_t large = 2 * ((1u << 20) + (64u << 20) + o.inline_limit + 1);
  EXPECT_EQ(after.rma_bytes - before.rma_bytes, 2 * large);
  EXPECT_EQ(after.am_bytes, before.am_bytes);
  // Heap buffers: each large one registered by its call (both directions)...
  EXPECT_GE(ctx->registration_stats().made - made_before, 6u);
  // ...and released when the call completed: no key of them is left valid.
  EXPECT_EQ(ctx->registration_stats().live, 0u) << "a completed call left its buffer registered";
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

INSTANTIATE_TEST_SUITE_P(Transports, TransportTest, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ros2::transport
