// The data-plane contract on both providers: this process is the client, a
// real transport_test_peer process is the server, over UCX ("tcp", "shm") or
// libfabric ("ofi-tcp": tcp;ofi_rxm, "ofi-shm": shm). And a client of one
// provider is refused at once by a server of the other.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "common/checksum.h"
#include "testing/pattern.h"
#include "transport/ofi/worker.h"
#include "transport/testing/peer_process.h"
#include "transport/testing/test_protocol.h"
#include "transport/transport.h"

namespace ros2::transport {
namespace {

using namespace std::chrono_literals;
using ros2::testing::Pattern;

TransportOptions OptionsFor(const std::string& param) {
  TransportOptions o;
  const bool ofi = param.rfind("ofi-", 0) == 0;
  o.provider = ofi ? Provider::kOfi : Provider::kUcx;
  o.kind = ParseTransportKind(ofi ? param.substr(4) : param).value();
  o.default_timeout = 20s;
  return o;
}

std::span<const uint8_t> Bytes(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

class ProviderTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(peer_.Start(TRANSPORT_TEST_PEER_PATH, GetParam()).ok());
    auto ctx = Context::Create(OptionsFor(GetParam()));
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = std::move(*ctx);
    worker_ = ctx_->CreateWorker("provider-test").value();
    auto ep = worker_->Connect(peer_.address());
    ASSERT_TRUE(ep.ok()) << ep.status().ToString();
    ep_ = std::move(*ep);
  }
  void TearDown() override {
    ep_.reset();
    worker_.reset();
    ctx_.reset();
  }
  bool IsOfi() const { return GetParam().rfind("ofi-", 0) == 0; }

  testing::PeerProcess peer_;
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<Worker> worker_;
  std::shared_ptr<Endpoint> ep_;
};

TEST_P(ProviderTest, ContextNamesItsProvider) {
  const std::string d = ctx_->Describe();
  if (IsOfi()) {
    EXPECT_NE(d.find("transport=ofi"), std::string::npos) << d;
    EXPECT_NE(d.find(GetParam() == "ofi-shm" ? "provider=shm" : "provider=tcp;ofi_rxm"), std::string::npos) << d;
    EXPECT_EQ(ep_->info().am_transport, GetParam() == "ofi-shm" ? "shm" : "tcp;ofi_rxm");
  } else {
    EXPECT_EQ(d.find("transport=ofi"), std::string::npos) << d;
  }
}

TEST_P(ProviderTest, RoundTripAndHandlerErrors) {
  const std::string hello = "hello, engine";
  auto reply = ep_->CallSync(testing::kOpEcho, Bytes(hello));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_EQ(reply->payload.size(), 4 + hello.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(reply->payload.data()) + 4, hello.size()), hello);
  auto failed = ep_->CallSync(testing::kOpFail, {});
  EXPECT_EQ(failed.status().code(), Status::Code::kNotFound);
  EXPECT_NE(failed.status().message().find("no such thing"), std::string::npos);
  EXPECT_EQ(ep_->CallSync(777, {}).status().code(), Status::Code::kNotSupported);
  EXPECT_EQ(ep_->CallSync(testing::kOpDrop, {}).status().code(), Status::Code::kInternal);
}

// Every size through the peer and back (Pull, then Push), byte for byte:
// inline sizes, around the inline limit, and 1 MiB and 16 MiB tagged bulk.
// A completion callback runs inside the worker's progress: a connect or a
// wait there would progress it again (UCX answers that with an assertion
// that aborts the process). Both are refused, naming why, on either
// provider, and the worker goes on serving.
TEST_P(ProviderTest, ConnectAndWaitInsideACallbackAreRefusedNotFatal) {
  std::optional<Status> connected;
  std::optional<Status> waited;
  std::optional<Status> already;
  bool answered = false;
  ASSERT_TRUE(ep_->Call(testing::kOpEcho, Bytes("x"), {},
                        [&](const ReplyView& r) {
                          answered = r.status.ok();
                          connected = worker_->Connect(peer_.address()).status();
                          waited = worker_->RunUntil([] { return false; }, 10ms);
                          already = worker_->RunUntil([] { return true; }, 10ms);  // needs no progress
                        })
                  .ok());
  ASSERT_TRUE(worker_->RunUntil([&] { return connected.has_value(); }, 20s).ok());
  EXPECT_TRUE(answered);
  EXPECT_EQ(connected->code(), Status::Code::kBusy) << connected->ToString();
  EXPECT_NE(connected->message().find("cannot connect inside its own progress"), std::string::npos)
      << connected->ToString();
  EXPECT_EQ(waited->code(), Status::Code::kBusy) << waited->ToString();
  EXPECT_TRUE(already->ok()) << already->ToString();
  // Outside the callback both work, and the first endpoint still serves.
  auto second = worker_->Connect(peer_.address());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE((*second)->CallSync(testing::kOpEcho, Bytes("y")).ok());
  EXPECT_TRUE(ep_->CallSync(testing::kOpEcho, Bytes("z")).ok());
}

TEST_P(ProviderTest, BulkIsByteExactInBothDirections) {
  const uint64_t limit = ctx_->options().inline_limit;
  uint32_t seed = 1;
  for (uint64_t size :
       {uint64_t{0}, uint64_t{1}, uint64_t{4096}, limit, limit + 1, uint64_t{1} << 20, uint64_t{16} << 20}) {
    SCOPED_TRACE("size " + std::to_string(size));
    std::vector<std::byte> out = Pattern(size, seed++);
    std::vector<std::byte> in(size, std::byte{0xEE});
    CallOptions co;
    co.bulk_out = out;
    co.bulk_in = in;
    auto reply = ep_->CallSync(testing::kOpEcho, {}, co);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    ASSERT_EQ(reply->payload.size(), 4u);
    uint32_t crc;
    std::memcpy(&crc, reply->payload.data(), 4);
    EXPECT_EQ(crc, Crc32c(out.data(), out.size()));
    EXPECT_EQ(reply->bulk_in_bytes, size);
    EXPECT_TRUE(in == out) << "server -> client bytes differ";
  }
  if (GetParam() == "ofi-tcp") {
    // tcp;ofi_rxm offers FI_RMA: the bulk above the inline limit (1 + 1 MiB
    // + 16 MiB, each way) moved by the server's fi_read / fi_write against
    // this worker's registrations, none by tagged messages.
    EXPECT_EQ(ep_->info().bulk_mode, BulkTransfer::kRma);
    EXPECT_EQ(worker_->stats().bulk_rma_bytes, 2 * ((limit + 1) + (uint64_t{1} << 20) + (uint64_t{16} << 20)));
    EXPECT_EQ(worker_->stats().bulk_am_bytes, 0u);
  } else if (IsOfi()) {
    EXPECT_EQ(ep_->info().bulk_mode, BulkTransfer::kActiveMessage);  // shm: tagged messages, no keys
    EXPECT_EQ(worker_->stats().bulk_rma_bytes, 0u);
  }
}

// A large reply payload (above one posted receive on ofi) arrives whole.
TEST_P(ProviderTest, LargePayloadsRoundTrip) {
  std::string big(200 * 1024, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  auto reply = ep_->CallSync(testing::kOpEcho, Bytes(big));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_EQ(reply->payload.size(), 4 + big.size());
  EXPECT_EQ(0, std::memcmp(reply->payload.data() + 4, big.data(), big.size()));
}

TEST_P(ProviderTest, ThousandOutstandingRequests) {
  int done = 0, ok = 0;
  for (uint32_t i = 0; i < 1000; ++i) {
    std::string p = std::to_string(i);
    ASSERT_TRUE(ep_->Call(testing::kOpEcho, Bytes(p), {},
                          [&, p](const ReplyView& r) {
                            ++done;
                            ok += r.status.ok() && r.payload.size() == 4 + p.size() &&
                                  std::memcmp(r.payload.data() + 4, p.data(), p.size()) == 0;
                          })
                    .ok());
  }
  ASSERT_TRUE(worker_->RunUntil([&] { return done == 1000; }, 30000ms).ok());
  EXPECT_EQ(ok, 1000);
  EXPECT_EQ(ep_->outstanding(), 0u);
}

// Inline bulk of requests the handler keeps without pulling, pulled after the
// peer's progress pass has taken more messages than an ofi worker keeps
// receives posted (64): the server holds the bytes itself (it copies them
// only for such requests), so each pull still reads what its client sent.
TEST_P(ProviderTest, InlineBulkPulledAfterTheHandlerReturnedIsTheClients) {
  constexpr int kCalls = 200;
  std::vector<std::vector<std::byte>> outs;
  for (int i = 0; i < kCalls; ++i) outs.push_back(Pattern(4096, 100 + static_cast<uint32_t>(i)));
  int done = 0, ok = 0;
  for (int i = 0; i < kCalls; ++i) {
    CallOptions co;
    co.bulk_out = outs[static_cast<size_t>(i)];
    ASSERT_TRUE(ep_->Call(testing::kOpPullLater, {}, co,
                          [&, i](const ReplyView& r) {
                            ++done;
                            const auto& out = outs[static_cast<size_t>(i)];
                            uint32_t crc = 0;
                            if (r.status.ok() && r.payload.size() == 4) std::memcpy(&crc, r.payload.data(), 4);
                            ok += r.status.ok() && r.payload.size() == 4 && crc == Crc32c(out.data(), out.size());
                          })
                    .ok());
  }
  ASSERT_TRUE(worker_->RunUntil([&] { return done == kCalls; }, 30000ms).ok());
  EXPECT_EQ(ok, kCalls);
}

TEST_P(ProviderTest, RequestTimesOutAndTheEndpointStillWorks) {
  CallOptions co;
  co.timeout = 200ms;
  const auto start = std::chrono::steady_clock::now();
  auto r = ep_->CallSync(testing::kOpHold, {}, co);
  EXPECT_EQ(r.status().code(), Status::Code::kTimedOut) << r.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(worker_->stats().requests_timed_out, 1u);
  EXPECT_TRUE(ep_->CallSync(testing::kOpEcho, {}).ok());
}

// A held request's tagged bulk-in receive is cancelled when the call times
// out: the buffer is the caller's again, and nothing lands in it later.
TEST_P(ProviderTest, TimedOutCallReleasesItsBulkInBuffer) {
  std::vector<std::byte> in(1 << 20, std::byte{0x11});
  CallOptions co;
  co.timeout = 200ms;
  co.bulk_in = in;
  auto r = ep_->CallSync(testing::kOpHold, {}, co);
  EXPECT_EQ(r.status().code(), Status::Code::kTimedOut);
  EXPECT_TRUE(ep_->CallSync(testing::kOpEcho, {}).ok());
  EXPECT_EQ(in[0], std::byte{0x11});
}

// The peer's death fails outstanding calls (the peer is killed while it
// holds them) within the deadline, not never.
TEST_P(ProviderTest, PeerKilledFailsOutstandingRequests) {
  int done = 0, failed = 0;
  for (int i = 0; i < 4; ++i) {
    CallOptions co;
    co.timeout = 3000ms;
    ASSERT_TRUE(ep_->Call(testing::kOpHold, {}, co,
                          [&](const ReplyView& r) {
                            ++done;
                            failed += !r.status.ok();
                          })
                    .ok());
  }
  worker_->Progress();
  peer_.Kill();
  ASSERT_TRUE(worker_->RunUntil([&] { return done == 4; }, 15000ms).ok());
  EXPECT_EQ(failed, 4);
}

// A corked burst leaves in batches and the server's replies come back in
// batches, every call answered with its own bytes (inline bulk included).
TEST_P(ProviderTest, CorkedBurstTravelsInBatches) {
  constexpr int kCalls = 48;
  std::vector<std::vector<std::byte>> out;
  for (int i = 0; i < kCalls; ++i) out.push_back(Pattern(4096, 7000u + static_cast<uint64_t>(i)));
  int done = 0, ok = 0;
  ep_->Cork();
  for (int i = 0; i < kCalls; ++i) {
    const std::string p = std::to_string(i);
    CallOptions co;
    co.bulk_out = out[i];
    ASSERT_TRUE(ep_->Call(testing::kOpEcho, Bytes(p), co,
                          [&, p, i](const ReplyView& r) {
                            ++done;
                            uint32_t crc = 0;
                            if (r.payload.size() >= 4) std::memcpy(&crc, r.payload.data(), 4);
                            ok += r.status.ok() && r.payload.size() == 4 + p.size() &&
                                  std::memcmp(r.payload.data() + 4, p.data(), p.size()) == 0 &&
                                  crc == Crc32c(out[i].data(), out[i].size());
                          })
                    .ok());
  }
  ep_->Uncork();
  ASSERT_TRUE(worker_->RunUntil([&] { return done == kCalls; }, 30000ms).ok());
  EXPECT_EQ(ok, kCalls);
  const WorkerStats& st = worker_->stats();
  EXPECT_GE(st.batches_sent, 2u);  // 48 calls of 4 KiB: more than one batch_limit
  EXPECT_GE(st.batched_messages, static_cast<uint64_t>(kCalls) / 2);
  EXPECT_GE(st.batches_received, 1u) << "the replies of a batch come back batched";
}

// Many calls in flight, each with 4 KiB of bulk, issued back to back as a
// bandwidth client does (ros2-bench transport's bulk case, 128 in flight):
// Call only queues. No reply callback runs inside Call, even when the
// provider takes no more sends for a while (libfabric 1.17's shm moves one
// message above 4 KiB at a time per peer): a client that issues calls while
// it has free slots, and frees a slot in each reply callback, must come to
// the end of its burst (it spun forever inside Call before).
TEST_P(ProviderTest, CallsInFlightWithBulkNeverRunRepliesInsideCall) {
  constexpr int kCalls = 128;
  std::vector<std::vector<std::byte>> out;
  for (int i = 0; i < kCalls; ++i) out.push_back(Pattern(4096, 9000u + static_cast<uint64_t>(i)));
  int done = 0, ok = 0, inside_call = 0;
  bool issuing = false;
  for (int i = 0; i < kCalls; ++i) {
    CallOptions co;
    co.bulk_out = out[i];
    issuing = true;
    ASSERT_TRUE(ep_->Call(testing::kOpEcho, {}, co,
                          [&, i](const ReplyView& r) {
                            ++done;
                            inside_call += issuing;
                            uint32_t crc = 0;
                            if (r.payload.size() >= 4) std::memcpy(&crc, r.payload.data(), 4);
                            ok += r.status.ok() && crc == Crc32c(out[i].data(), out[i].size());
                          })
                    .ok());
    issuing = false;
  }
  EXPECT_EQ(inside_call, 0) << "reply callbacks ran inside Endpoint::Call";
  ASSERT_TRUE(worker_->RunUntil([&] { return done == kCalls; }, 30000ms).ok()) << done << " of " << kCalls;
  EXPECT_EQ(ok, kCalls);
  EXPECT_EQ(ep_->outstanding(), 0u);
}

// A peer that dies while the connection is idle (nothing sent to it) is
// noticed by the keepalives (keepalive_interval, 2 s) or the pid watch.
TEST_P(ProviderTest, IdleConnectionNoticesItsPeerDied) {
  ASSERT_TRUE(ep_->CallSync(testing::kOpEcho, {}).ok());
  peer_.Kill();
  const auto start = std::chrono::steady_clock::now();
  Status waited = worker_->RunUntil([&] { return !ep_->status().ok(); }, 12000ms);
  EXPECT_TRUE(waited.ok()) << "the endpoint still reports " << ep_->status().ToString();
  EXPECT_EQ(ep_->status().code(), Status::Code::kDisconnected) << ep_->status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 12s);
}

// tcp;ofi_rxm one-sided bulk: a buffer in memory the transport allocated is
// registered once and the registration reused while the application holds
// the region (released within a housekeeping tick once it lets go); any other
// buffer is registered for its call alone. Both move their bytes exactly.
TEST(OfiRegistrationTest, OnlyTransportAllocatedMemoryKeepsItsRegistration) {
  testing::PeerProcess peer;
  ASSERT_TRUE(peer.Start(TRANSPORT_TEST_PEER_PATH, "ofi-tcp").ok());
  auto ctx = Context::Create(OptionsFor("ofi-tcp")).value();
  auto worker = ctx->CreateWorker("registrations").value();
  auto* ofi = static_cast<ofi::OfiWorker*>(worker.get());
  auto ep = worker->Connect(peer.address()).value();
  constexpr uint64_t kLen = 64 * 1024;
  const auto echo = [&](std::span<std::byte> out, std::span<std::byte> in, std::shared_ptr<const MemoryRegion> region,
                        uint32_t seed) {
    std::vector<std::byte> bytes = Pattern(kLen, seed);
    std::copy(bytes.begin(), bytes.end(), out.begin());
    std::fill(in.begin(), in.end(), std::byte{0xEE});
    CallOptions co;
    co.bulk_out = out;
    co.bulk_in = in;
    co.bulk_out_region = region;
    co.bulk_in_region = region;
    auto reply = ep->CallSync(testing::kOpEcho, {}, co);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_TRUE(std::equal(in.begin(), in.end(), bytes.begin())) << "seed " << seed;
  };
  std::weak_ptr<const MemoryRegion> gone;
  {
    auto region = ctx->AllocateMemory(2 * kLen).value();
    gone = region;
    std::span<std::byte> all(region->mutable_base(), 2 * kLen);
    const uint64_t before = ofi->registrations_made();
    for (uint32_t i = 0; i < 3; ++i) echo(all.subspan(0, kLen), all.subspan(kLen), region, 10 + i);
    EXPECT_EQ(ofi->registrations_made() - before, 2u) << "one per access (read, write), then cached";
  }
  (void)worker->RunUntil([&] { return gone.expired(); }, 2000ms);
  EXPECT_TRUE(gone.expired()) << "the cache kept a region the application let go";
  std::vector<std::byte> out(kLen), in(kLen);
  const uint64_t before = ofi->registrations_made();
  for (uint32_t i = 0; i < 3; ++i) echo(out, in, nullptr, 20 + i);
  EXPECT_EQ(ofi->registrations_made() - before, 6u) << "a buffer of the application's is registered per call";
  EXPECT_EQ(worker->stats().bulk_am_bytes, 0u);
}

// ofi-shm: one server takes several client endpoints, two of one process
// and one of another (libfabric 1.17's shm provider would give the second
// the first one's slot were the client to speak first; the hello goes by the
// server's door, docs/transport.md), each with its own calls and bulk, and
// the first still works after the others came.
TEST(OfiShmTest, OneServerTakesManyClientEndpoints) {
  testing::PeerProcess peer;
  ASSERT_TRUE(peer.Start(TRANSPORT_TEST_PEER_PATH, "ofi-shm").ok());
  TransportOptions o = OptionsFor("ofi-shm");
  o.connect_timeout = 3000ms;
  const auto echo = [](Endpoint& ep, uint32_t seed) {
    std::vector<std::byte> out = Pattern(256 * 1024, seed), in(256 * 1024);
    CallOptions co;
    co.bulk_out = out;
    co.bulk_in = in;
    auto reply = ep.CallSync(testing::kOpEcho, {}, co);
    return reply.ok() && in == out;
  };
  const pid_t child = fork();
  if (child == 0) {  // another process's client endpoint, meanwhile
    auto ctx = Context::Create(o);
    if (!ctx.ok()) _exit(2);
    auto w = (*ctx)->CreateWorker("other-process");
    if (!w.ok()) _exit(3);
    auto ep = (*w)->Connect(peer.address());
    _exit(ep.ok() && echo(**ep, 9) ? 0 : 1);
  }
  auto ctx = Context::Create(o).value();
  auto w1 = ctx->CreateWorker("first").value();
  auto w2 = ctx->CreateWorker("second").value();
  auto e1 = w1->Connect(peer.address());
  ASSERT_TRUE(e1.ok()) << e1.status().ToString();
  EXPECT_TRUE(echo(**e1, 1));
  auto e2 = w2->Connect(peer.address());
  ASSERT_TRUE(e2.ok()) << e2.status().ToString();
  EXPECT_TRUE(echo(**e2, 2));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the other process's endpoint: " << status;
  EXPECT_TRUE(echo(**e1, 3)) << "the first endpoint after the others came";
  EXPECT_TRUE(echo(**e2, 4));
}

INSTANTIATE_TEST_SUITE_P(Providers, ProviderTest, ::testing::Values("tcp", "shm", "ofi-tcp", "ofi-shm"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

// A client of one provider given the address of a server of the other is
// refused at Connect, at once, naming both providers.
TEST(ProviderMixTest, MixedProvidersAreRefusedClearly) {
  for (const auto& [server, client] : {std::pair<std::string, std::string>{"tcp", "ofi-tcp"}, {"ofi-tcp", "tcp"}}) {
    SCOPED_TRACE(server + " server, " + client + " client");
    testing::PeerProcess peer;
    ASSERT_TRUE(peer.Start(TRANSPORT_TEST_PEER_PATH, server).ok());
    auto ctx = Context::Create(OptionsFor(client)).value();
    auto worker = ctx->CreateWorker("mixed").value();
    const auto start = std::chrono::steady_clock::now();
    auto ep = worker->Connect(peer.address());
    ASSERT_FALSE(ep.ok());
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
    EXPECT_EQ(ep.status().code(), Status::Code::kNotSupported) << ep.status().ToString();
    const std::string msg = ep.status().message();
    EXPECT_NE(msg.find("'ofi'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'ucx'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("transport.provider"), std::string::npos) << msg;
  }
}

TEST(ProviderConfigTest, NamesAreParsedAndBadOnesNamed) {
  EXPECT_EQ(ParseProvider("ucx").value(), Provider::kUcx);
  EXPECT_EQ(ParseProvider("ofi").value(), Provider::kOfi);
  auto bad = ParseProvider("verbs");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'verbs'"), std::string::npos);
  TransportOptions o;
  o.provider = Provider::kOfi;
  o.ofi_provider = "no-such-provider";
  auto ctx = Context::Create(o);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().code(), Status::Code::kNotSupported);
  EXPECT_NE(ctx.status().message().find("no-such-provider"), std::string::npos) << ctx.status().ToString();
}

}  // namespace
}  // namespace ros2::transport
