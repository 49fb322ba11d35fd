// Two-process tests of the data plane when something goes wrong
// (transport_test_fixture.h): timeouts, a peer killed mid-transfer, malformed
// messages, unproven or damaged memory references, another wire version; the
// failure is reported, counted, and the connection or server keeps working.
#include <signal.h>

#include <fstream>
#include <thread>

#include "transport/transport_test_fixture.h"

namespace ros2::transport {
namespace {

using namespace std::chrono_literals;

class TransportFailureTest : public TransportFixture {};

// A client that always has calls in flight never reaches "no live call", when
// the only moment the whole deadline heap is cleared; its completed calls' entries must not
// pile up (one per call of the last timeout period), and a call that does time
// out among them must still fail in time.
TEST_P(TransportFailureTest, BusyClientKeepsItsDeadlineHeapSmallAndStillTimesOut) {
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

TEST_P(TransportFailureTest, RequestTimesOut) {
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

TEST_P(TransportFailureTest, PeerKilledMidTransferFailsOutstandingRequests) {
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
TEST_P(TransportFailureTest, ServerSurvivesAClientKilledMidTransfer) {
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
TEST_P(TransportFailureTest, MalformedMessagesAreRejectedAndCounted) {
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

// Damaged segment references (a range past the segment's end, an id that is not
// the segment's, an fd that is not a segment) are refused per request with an
// error naming the segment, nothing is written, and the connection keeps
// working; an unproven connection may not name segments at all. Over tcp no
// connection is proven, so segments are ordinary memory and the damage never
// reaches the wire: those calls succeed.
TEST_P(TransportFailureTest, DamagedSegmentReferencesAreRefused) {
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
TEST_P(TransportFailureTest, ConnectToAnotherWireVersionFailsClearly) {
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

// A peer that exited, killed but not yet reaped (its pid still names it, so
// the pid watch opens), no longer listens: Connect fails Disconnected, which
// a caller's failure policy waits out as any lost peer (until the pool map
// marks it DOWN), not NotSupported, which a caller takes as final.
TEST_P(TransportFailureTest, ConnectToAPeerThatExitedIsDisconnected) {
  const std::vector<uint8_t> address = peer_.address();
  ASSERT_EQ(::kill(peer_.pid(), SIGKILL), 0);
  bool zombie = false;
  for (int i = 0; i < 500 && !zombie; ++i) {
    std::ifstream stat("/proc/" + std::to_string(peer_.pid()) + "/stat");
    std::string pid, comm, state;
    stat >> pid >> comm >> state;
    zombie = state == "Z";
    if (!zombie) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(zombie) << "the killed peer never became a zombie";
  // UCX logs the refused socket; the line goes through the process's log
  // ("ucx: ...", on stderr in the engine and the tools), never UCX's own
  // printer, which writes on stdout, the program's own output (ros2-bench's
  // JSON records).
  ::testing::internal::CaptureStdout();
  auto ep = worker_->Connect(address);
  std::fflush(stdout);
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(printed.find(" UCX "), std::string::npos) << "UCX printed on stdout:\n" << printed;
  ASSERT_FALSE(ep.ok());
  EXPECT_EQ(ep.status().code(), Status::Code::kDisconnected) << ep.status().ToString();
  EXPECT_NE(ep.status().message().find(fmt::format("pid {}", peer_.pid())), std::string::npos)
      << ep.status().ToString();
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

// A client that names cma buffers on a connection that never proved its pid is
// refused per request (the server must not touch memory of a process it has
// not identified), counted, and the connection keeps working.
TEST_P(TransportFailureTest, UnprovenCmaDescriptorsAreRefused) {
  TransportOptions o = ctx_->options();
  o.same_host_cma = false;
  LyingClient liar(/*claim_cma=*/true, LyingClient::Damage::kNone);
  Client client = ConnectWith(o, "liar", &liar);
  Endpoint* ep = client.ep.get();
  ASSERT_NE(ep->info().bulk_mode, BulkTransfer::kCma);
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

INSTANTIATE_TEST_SUITE_P(Transports, TransportFailureTest, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ros2::transport
