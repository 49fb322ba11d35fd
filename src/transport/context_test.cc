// Unit tests of transport selection, names and memory registration
// (one process, no peer).
#include <sched.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing/status_assert.h"
#include "transport/transport.h"

namespace ros2::transport {
namespace {

TEST(TransportNamesTest, ParseAndPrint) {
  for (TransportKind k : {TransportKind::kAuto, TransportKind::kTcp, TransportKind::kShm, TransportKind::kRdma}) {
    auto parsed = ParseTransportKind(TransportKindName(k));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, k);
  }
  auto bad = ParseTransportKind("infiniband");
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("infiniband"), std::string::npos);
}

TEST(TransportSelectionTest, RdmaWithoutDevicesFailsNamingWhatIsMissing) {
  TransportOptions o;
  o.kind = TransportKind::kRdma;
  auto ctx = Context::Create(o);
  ASSERT_FALSE(ctx.ok()) << "this machine has no verbs devices";
  EXPECT_EQ(ctx.status().code(), Status::Code::kNotSupported);
  EXPECT_NE(ctx.status().message().find("rc/dc verbs"), std::string::npos) << ctx.status().ToString();
  EXPECT_NE(ctx.status().message().find("tcp/lo"), std::string::npos) << ctx.status().ToString();
}

TEST(TransportSelectionTest, AutoPicksSharedMemoryHere) {
  auto ctx = Context::Create(TransportOptions{});
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  EXPECT_EQ((*ctx)->resolved_kind(), TransportKind::kShm);
  EXPECT_NE((*ctx)->ucx_tls().find("posix"), std::string::npos);
  EXPECT_NE((*ctx)->ucx_tls().find("tcp"), std::string::npos);  // for peers on other hosts
  EXPECT_NE((*ctx)->Describe().find("transport=shm"), std::string::npos);
}

TEST(TransportSelectionTest, TcpUsesOnlyTheNamedDevice) {
  TransportOptions o;
  o.kind = TransportKind::kTcp;
  auto ctx = Context::Create(o);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  for (const std::string& d : (*ctx)->devices()) EXPECT_TRUE(d == "tcp/lo" || d.rfind("self/", 0) == 0) << d;
  o.net_devices = "nosuchnic0";
  auto none = Context::Create(o);
  EXPECT_FALSE(none.ok());
}

TEST(TransportSelectionTest, BadOptionsAreRejected) {
  TransportOptions o;
  o.bulk_chunk_size = 0;
  EXPECT_EQ(Context::Create(o).status().code(), Status::Code::kInvalidArgument);
  o = TransportOptions{};
  o.inline_limit = 2u << 20;
  EXPECT_EQ(Context::Create(o).status().code(), Status::Code::kInvalidArgument);
  o = TransportOptions{};
  o.batch_limit = 2u << 20;
  auto too_big = Context::Create(o);
  EXPECT_EQ(too_big.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(too_big.status().message().find("batch_limit"), std::string::npos) << too_big.status().ToString();
}

// The tcp segment rule: whatever the user set, this process receives exactly
// kTcpSegmentSize and sends at most that (a peer closes a connection that
// sends it more).
TEST(TransportTcpSegmentsTest, UserSettingsAreKeptToWhatPeersReceive) {
  TransportOptions o;
  o.kind = TransportKind::kTcp;
  setenv("UCX_TCP_TX_SEG_SIZE", "4m", 1);
  setenv("UCX_TCP_RX_SEG_SIZE", "1m", 1);
  ROS2_ASSERT_OK(Context::Create(o));
  EXPECT_STREQ(std::getenv("UCX_TCP_TX_SEG_SIZE"), "262144");
  EXPECT_STREQ(std::getenv("UCX_TCP_RX_SEG_SIZE"), "262144");
  // Smaller sends are the user's to choose.
  setenv("UCX_TCP_TX_SEG_SIZE", "64k", 1);
  setenv("UCX_TCP_RX_SEG_SIZE", "64k", 1);
  ROS2_ASSERT_OK(Context::Create(o));
  EXPECT_STREQ(std::getenv("UCX_TCP_TX_SEG_SIZE"), "64k");
  EXPECT_STREQ(std::getenv("UCX_TCP_RX_SEG_SIZE"), "262144");
  setenv("UCX_TCP_TX_SEG_SIZE", "lots", 1);
  auto bad = Context::Create(o);
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("UCX_TCP_TX_SEG_SIZE=lots"), std::string::npos) << bad.status().ToString();
  unsetenv("UCX_TCP_TX_SEG_SIZE");
  unsetenv("UCX_TCP_RX_SEG_SIZE");
  o.tcp_seg_size = 1u << 20;
  auto too_big = Context::Create(o);
  EXPECT_EQ(too_big.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(too_big.status().message().find("tcp_seg_size"), std::string::npos) << too_big.status().ToString();
  o.tcp_seg_size = kTcpSegmentSize;
  ROS2_ASSERT_OK(Context::Create(o));
  EXPECT_STREQ(std::getenv("UCX_TCP_TX_SEG_SIZE"), "262144");
}

TEST(TransportSelectionTest, SameHostIntegrityTakesOnlyZeroOrOne) {
  TransportOptions o;
  o.kind = TransportKind::kTcp;
  setenv("ROS2_SAME_HOST_INTEGRITY", "yes", 1);
  auto bad = Context::Create(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("ROS2_SAME_HOST_INTEGRITY=yes"), std::string::npos) << bad.status().ToString();
  for (const char* good : {"1", "0"}) {
    setenv("ROS2_SAME_HOST_INTEGRITY", good, 1);
    auto ctx = Context::Create(o);
    EXPECT_TRUE(ctx.ok()) << good << ": " << ctx.status().ToString();
  }
  unsetenv("ROS2_SAME_HOST_INTEGRITY");
}

// No address cache: every RegisterMemory of application memory is a
// registration of its own (UCX's rcache makes repeating one cheap), held
// only by its references, and it ends with the last of them.
TEST(RegistrationTest, ARegistrationEndsWithItsLastReference) {
  TransportOptions o;
  o.kind = TransportKind::kShm;
  auto ctx = Context::Create(o).value();
  std::vector<std::byte> a(1 << 20);
  {
    auto r1 = ctx->RegisterMemory(a.data(), a.size());
    ROS2_ASSERT_OK(r1.status());
    auto r2 = ctx->RegisterMemory(a.data() + 4096, 8192);  // inside the first range
    ROS2_ASSERT_OK(r2.status());
    EXPECT_NE(r1->get(), r2->get()) << "a second registration of the same pages was served from a cache";
    EXPECT_FALSE((*r1)->packed_rkey().empty());
    EXPECT_FALSE((*r1)->ucx_allocated());
    EXPECT_TRUE((*r1)->Contains(a.data(), a.size()));
    EXPECT_EQ(ctx->registration_stats().made, 2u);
    EXPECT_EQ(ctx->registration_stats().live, 2u);
    std::shared_ptr<const MemoryRegion> kept = *r1;  // a second reference keeps it
    r1->reset();
    r2->reset();
    EXPECT_EQ(ctx->registration_stats().live, 1u);
    EXPECT_EQ(kept->base(), a.data());
  }
  EXPECT_EQ(ctx->registration_stats().live, 0u) << "a registration outlived every reference";
  EXPECT_EQ(ctx->registration_stats().made, 2u);
  // Transport-allocated memory is not application memory: not counted.
  auto arena = ctx->AllocateMemory(1 << 16);
  ROS2_ASSERT_OK(arena.status());
  EXPECT_EQ(ctx->registration_stats().made, 2u);
  EXPECT_TRUE(ctx->RegisterMemory(nullptr, 10).status().IsInvalidArgument());
  EXPECT_TRUE(ctx->RegisterMemory(a.data(), 0).status().IsInvalidArgument());
}

TEST(RegistrationTest, AllocatedMemoryIsUcxAllocatedAndWritable) {
  auto ctx = Context::Create(TransportOptions{}).value();
  auto r = ctx->AllocateMemory(1 << 20);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE((*r)->ucx_allocated());
  EXPECT_GE((*r)->length(), 1u << 20);
  std::memset((*r)->mutable_base(), 0x3c, 1 << 20);
  EXPECT_EQ((*r)->base()[12345], std::byte{0x3c});
  EXPECT_FALSE(ctx->AllocateMemory(0).ok());
  EXPECT_FALSE(ctx->RegisterMemory(nullptr, 10).ok());
}

TEST(AffinityTest, PinsTheCallingThreadOnly) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &allowed)) ++cpu;
  bool pinned_inside = false;
  bool ok_inside = false;
  std::thread t([&] {
    ok_inside = PinCurrentThreadToCpu(cpu).ok();
    pinned_inside = CurrentThreadPinnedToOneCpu();
  });
  t.join();
  EXPECT_TRUE(ok_inside);
  EXPECT_TRUE(pinned_inside);
  // The test's own thread keeps its mask.
  EXPECT_EQ(CurrentThreadPinnedToOneCpu(), CPU_COUNT(&allowed) == 1);
  Status bad = PinCurrentThreadToCpu(-1);
  EXPECT_EQ(bad.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("CPU -1"), std::string::npos) << bad.ToString();
}

TEST(AffinityTest, CpuSetsAndCpuNumbers) {
  // A helper thread started by a pinned one gets the whole set back.
  const std::vector<int> all = CurrentThreadCpus();
  ASSERT_FALSE(all.empty());
  std::vector<int> inside_pinned, inside_restored;
  std::thread t([&] {
    ASSERT_TRUE(PinCurrentThreadToCpu(all.back()).ok());
    inside_pinned = CurrentThreadCpus();
    ASSERT_TRUE(SetCurrentThreadCpus(all).ok());
    inside_restored = CurrentThreadCpus();
  });
  t.join();
  EXPECT_EQ(inside_pinned, std::vector<int>{all.back()});
  EXPECT_EQ(inside_restored, all);
  EXPECT_FALSE(SetCurrentThreadCpus({}).ok());

  EXPECT_EQ(ParseCpu("0"), 0);
  EXPECT_EQ(ParseCpu("1023"), 1023);
  for (const char* bad : {"", "-1", "1024", "x", "1x", " 1", "1.0"}) EXPECT_EQ(ParseCpu(bad), std::nullopt) << bad;
}

}  // namespace
}  // namespace ros2::transport
