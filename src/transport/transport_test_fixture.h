// The fixture of the two-process data-plane tests (transport_test.cc,
// transport_failure_test.cc): this process is the client, a real
// transport_test_peer process (TRANSPORT_TEST_PEER_PATH) is the server, over
// the transport named by the test's parameter (tcp or shm). Test code only.
#pragma once

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <ucp/api/ucp.h>

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

using namespace std::chrono_literals;

class TransportFixture : public ::testing::TestWithParam<std::string> {
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

inline std::span<const uint8_t> Bytes(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

struct PeerStats {
  uint64_t malformed = 0, peers_lost = 0, rma_bytes = 0, am_bytes = 0, version_mismatches = 0, cma_bytes = 0,
           cma_refused = 0, segment_bytes = 0, segments_mapped = 0, segments_refused = 0;
};
inline PeerStats GetPeerStats(Endpoint& ep) {
  PeerStats p;
  auto r = ep.CallSync(testing::kOpStats, {});
  if (r.ok() && r->payload.size() == sizeof(p)) std::memcpy(&p, r->payload.data(), sizeof(p));
  return p;
}

// Echoes every size through the peer: client -> server by Pull, server -> client
// by Push. `arena` selects UCX-allocated buffers (one-sided RMA over shm) over
// heap buffers (active-message rendezvous).
inline void EchoAllSizes(Context& ctx, Endpoint& ep, bool arena) {
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

}  // namespace ros2::transport
