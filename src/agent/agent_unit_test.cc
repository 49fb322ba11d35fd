// Unit tests of offload mode's pieces that need no cluster: the agent config,
// the region geometry and range checks, the argument codec.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <sys/eventfd.h>

#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "agent/agent_config.h"
#include "agent/op_call.h"
#include "client/offload/host_session.h"
#include "agent/token_bucket.h"
#include "offload/wire.h"
#include "common/config.h"
#include "testing/temp_dir.h"

namespace ros2::agent {
namespace {

AgentConfig Parse(const std::string& text, Status* st) {
  AgentConfig c;
  auto root = ParseYaml(text, "agent.yaml");
  if (!root.ok()) {
    *st = root.status();
    return c;
  }
  *st = ApplyAgentConfig(*root, "agent.yaml", &c);
  return c;
}

TEST(AgentConfigTest, ParsesTenantsAndSettings) {
  Status st;
  AgentConfig c = Parse(R"(
socket: /tmp/a.sock
socket_mode: "0660"
control: unix:/tmp/control.sock
transport: shm
spin: 20us
client_spin: 5us
max_sessions_per_tenant: 3
max_arena: 256MiB
tenants:
  - { name: admin, secret_file: /etc/hostname, uids: [0] }
  - { name: bob, secret_file: /etc/hostname, uids: [4242], gids: [100], qos: { bandwidth: 50MiB, iops: 1000 } }
)",
                        &st);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(c.socket, "/tmp/a.sock");
  EXPECT_EQ(c.socket_mode, 0660u);
  EXPECT_EQ(c.transport, "shm");
  EXPECT_EQ(c.spin, std::chrono::microseconds(20));
  EXPECT_EQ(c.client_spin, std::chrono::microseconds(5));
  EXPECT_EQ(c.max_sessions_per_tenant, 3u);
  EXPECT_EQ(c.max_arena, uint64_t{256} << 20);
  ASSERT_EQ(c.tenants.size(), 2u);
  EXPECT_EQ(FindTenant(c, 0, 0)->name, "admin");
  EXPECT_EQ(FindTenant(c, 4242, 1)->name, "bob");
  EXPECT_EQ(FindTenant(c, 7, 100)->name, "bob");  // by gid
  EXPECT_EQ(FindTenant(c, 7, 7), nullptr);
  EXPECT_EQ(c.tenants[0].qos.bandwidth, 0u);  // absent: unlimited
  EXPECT_EQ(c.tenants[1].qos.bandwidth, uint64_t{50} << 20);
  EXPECT_EQ(c.tenants[1].qos.iops, 1000u);
  c.origin = "agent.yaml";
  EXPECT_TRUE(FinalizeAgentConfig(&c).ok());
}

TEST(AgentConfigTest, RefusesBadSettingsNamingTheKey) {
  Status st;
  Parse("tenants: [{name: a, secret_file: /etc/hostname, uids: [-1]}]", &st);
  EXPECT_NE(st.message().find("tenants[0].uids[0]"), std::string::npos) << st.ToString();
  Parse("transport: carrier-pigeon", &st);
  EXPECT_NE(st.message().find("transport"), std::string::npos) << st.ToString();
  Parse("provider: psm9", &st);
  EXPECT_NE(st.message().find("provider: expected ucx or ofi, got 'psm9'"), std::string::npos) << st.ToString();
  EXPECT_EQ(Parse("provider: ofi", &st).provider, "ofi");
  EXPECT_TRUE(st.ok()) << st.ToString();
  Parse("max_ring_entries: 1000", &st);
  EXPECT_NE(st.message().find("max_ring_entries"), std::string::npos) << st.ToString();
  Parse("max_sessions_per_tenant: 0", &st);
  EXPECT_NE(st.message().find("max_sessions_per_tenant: 1 .. 65536"), std::string::npos) << st.ToString();
  Parse("client_spin: 2s", &st);
  EXPECT_NE(st.message().find("client_spin: at most 1s"), std::string::npos) << st.ToString();
  Parse("tenants: [{name: a, secret_file: /etc/hostname, uids: [1], qos: {bandwidth: fast}}]", &st);
  EXPECT_NE(st.message().find("tenants[0].qos.bandwidth"), std::string::npos) << st.ToString();
  Parse("tenants: [{name: a, secret_file: /etc/hostname, uids: [1], qos: {latency: 1}}]", &st);
  EXPECT_NE(st.message().find("qos.latency: unknown setting"), std::string::npos) << st.ToString();
  Parse("colour: blue", &st);
  EXPECT_NE(st.message().find("colour: unknown setting"), std::string::npos) << st.ToString();
  Parse("tenants: [{name: a, secret_file: /etc/hostname}]", &st);
  EXPECT_NE(st.message().find("no uid and no gid"), std::string::npos) << st.ToString();

  AgentConfig c = Parse("control: x\ntenants: [{name: a, secret_file: /nonexistent/s, uids: [1]}]", &st);
  ASSERT_TRUE(st.ok());
  Status fin = FinalizeAgentConfig(&c);
  EXPECT_FALSE(fin.ok());
  EXPECT_NE(fin.message().find("/nonexistent/s"), std::string::npos) << fin.ToString();
  AgentConfig none = Parse("control: x", &st);
  EXPECT_NE(FinalizeAgentConfig(&none).message().find("at least one"), std::string::npos);
}

TEST(RingFormatTest, GeometryAndRanges) {
  RingGeometry g = ComputeGeometry(256, 512, 1 << 20);
  EXPECT_EQ(g.sq_offset, kHeaderSize);
  EXPECT_GE(g.cq_offset, g.sq_offset + 256 * sizeof(SubmitEntry));
  EXPECT_EQ(g.arena_offset % 4096, 0u);
  EXPECT_GE(g.arena_offset, g.cq_offset + 512 * sizeof(CompleteEntry));
  EXPECT_EQ(g.total_size, g.arena_offset + (1 << 20));
  EXPECT_EQ(offsetof(RingHeader, sq_tail) % 64, 0u);
  EXPECT_EQ(offsetof(RingHeader, cq_head) - offsetof(RingHeader, cq_tail), 64u);

  EXPECT_TRUE(ArenaRangeOk(0, 100, 100));
  EXPECT_TRUE(ArenaRangeOk(100, 0, 100));
  EXPECT_FALSE(ArenaRangeOk(1, 100, 100));
  EXPECT_FALSE(ArenaRangeOk(101, 0, 100));
  EXPECT_FALSE(ArenaRangeOk(50, ~uint64_t{0} - 10, 100));  // no wrap-around
  EXPECT_FALSE(ArenaRangeOk(~uint64_t{0}, 2, 100));
  EXPECT_TRUE(IsPowerOfTwo(1024));
  EXPECT_FALSE(IsPowerOfTwo(1000));
  EXPECT_FALSE(IsPowerOfTwo(0));
}

TEST(WireTest, RoundTripsEntriesAttrsAndRefusesTruncation) {
  dfs::Entry e;
  e.oid = ObjectId{0x0102030405060708ULL, 42};
  e.parent = ObjectId{7, 8};
  e.name = "file.bin";
  e.mode = S_IFREG | 0640;
  e.uid = 1000;
  e.gid = 100;
  e.chunk_size = 65536;
  dfs::Attr a;
  a.ino = 99;
  a.mode = e.mode;
  a.size = 123456789;
  a.mtime = {1700000000, 5};
  a.oid = e.oid;
  ArgWriter w;
  w.Entry(e);
  w.Attr(a);
  w.Str("tail");
  ArgReader r(w.bytes());
  dfs::Entry e2;
  dfs::Attr a2;
  std::string s;
  ASSERT_TRUE(r.Entry(&e2));
  ASSERT_TRUE(r.Attr(&a2));
  ASSERT_TRUE(r.Str(&s, 16));
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(e2.oid, e.oid);
  EXPECT_EQ(e2.parent, e.parent);
  EXPECT_EQ(e2.name, e.name);
  EXPECT_EQ(e2.mode, e.mode);
  EXPECT_EQ(e2.chunk_size, e.chunk_size);
  EXPECT_EQ(a2.size, a.size);
  EXPECT_EQ(a2.mtime.tv_sec, a.mtime.tv_sec);
  EXPECT_EQ(a2.mtime.tv_nsec, a.mtime.tv_nsec);
  EXPECT_EQ(s, "tail");

  // Every truncation of the block is refused, never read past.
  for (size_t cut = 0; cut < w.size(); ++cut) {
    std::span<const std::byte> part(w.bytes().data(), cut);
    ArgReader t(part);
    dfs::Entry x;
    dfs::Attr y;
    std::string z;
    EXPECT_FALSE(t.Entry(&x) && t.Attr(&y) && t.Str(&z, 16)) << cut;
  }
  // A string longer than its limit, or than the block, is refused.
  ArgWriter big;
  big.U32(1u << 30);
  ArgReader rb(big.bytes());
  EXPECT_FALSE(rb.Str(&s, ~size_t{0}));
  ArgWriter longname;
  longname.Str(std::string(300, 'x'));
  ArgReader rl(longname.bytes());
  EXPECT_FALSE(rl.Str(&s, dfs::kMaxNameLength));
}

// An agent in this process (its engine unreachable: nothing here needs one)
// and a host session throwing random and malformed entries at it: every one
// gets an error completion (or, a Nop, success), nothing crashes or reads out
// of bounds (this runs under the sanitizers with the unit tests), and a
// forged ring index closes the session with the host told.
TEST(OpTableTest, EveryOpcodeHasOneRowAndNoOtherHas) {
  std::set<std::string> names;
  for (unsigned op = 0; op <= kLastRingOp; ++op) {
    const OpSpec* spec = FindOp(static_cast<uint8_t>(op));
    ASSERT_NE(spec, nullptr) << "opcode " << op;
    EXPECT_EQ(static_cast<unsigned>(spec->op), op);
    EXPECT_NE(spec->handler, nullptr) << spec->name;
    EXPECT_TRUE(names.insert(spec->name).second) << "two rows named " << spec->name;
    EXPECT_STREQ(OpName(static_cast<uint8_t>(op)), spec->name);
  }
  for (unsigned op = kLastRingOp + 1; op < 256; ++op) {
    EXPECT_EQ(FindOp(static_cast<uint8_t>(op)), nullptr) << "opcode " << op;
  }
  EXPECT_STREQ(OpName(kLastRingOp + 1), "unknown");
  // The data opcodes carry a payload; the ones without an entry name need no entry.
  EXPECT_EQ(FindOp(static_cast<uint8_t>(RingOp::kRead))->layout, ArgLayout::kEntryData);
  EXPECT_EQ(FindOp(static_cast<uint8_t>(RingOp::kWrite))->layout, ArgLayout::kEntryData);
  EXPECT_EQ(FindOp(static_cast<uint8_t>(RingOp::kMount))->layout, ArgLayout::kSession);
  EXPECT_EQ(FindOp(static_cast<uint8_t>(RingOp::kLookupPath))->layout, ArgLayout::kMount);
}

TEST(InProcessAgentTest, RandomEntriesGetErrorCompletions) {
  ros2::testing::TempDir tmp("r2a");  // short: the agent's socket goes in it
  const std::string& dir = tmp.path();
  std::ofstream(dir + "/admin.secret") << "not-checked-here\n";
  AgentConfig config;
  config.socket = dir + "/agent.sock";
  config.control = "unix:" + dir + "/no-engine.sock";
  config.transport = "tcp";
  config.spin = std::chrono::microseconds(10);
  config.max_sessions_per_tenant = 1;
  config.tenants.push_back({"admin", dir + "/admin.secret", {::getuid()}, {}});
  ASSERT_TRUE(FinalizeAgentConfig(&config).ok());
  auto agent = Agent::Start(config);
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  int stop = ::eventfd(0, EFD_CLOEXEC);
  std::thread loop([&] { (*agent)->Run(stop); });

  HostOptions o;
  o.socket = config.socket;
  o.ring_entries = 32;
  o.arena_size = 64 * 1024;
  auto s = HostSession::Connect(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  HostSession& h = **s;
  EXPECT_EQ(h.tenant(), "admin");
  auto second = HostSession::Connect(o);  // over the tenant's session limit
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kBusy) << second.status().ToString();
  EXPECT_NE(second.status().message().find("max_sessions_per_tenant"), std::string::npos);

  std::mt19937_64 rng(42);
  auto pick = [&](std::initializer_list<uint64_t> v) { return *(v.begin() + rng() % v.size()); };
  const uint64_t arena = h.arena_size();
  constexpr int kEntries = 3000;
  int nops = 0;
  for (int i = 0; i < kEntries; ++i) {
    SubmitEntry e{};
    do {
      e.opcode = static_cast<uint8_t>(rng() % 40);               // known and unknown
    } while (e.opcode == static_cast<uint8_t>(RingOp::kMount));  // would dial the missing engine
    e.flags = rng() % 8 == 0 ? 1 : 0;
    e.mount = static_cast<uint16_t>(rng());
    e.op_flags = static_cast<uint32_t>(rng());
    e.offset = rng();
    e.buf_off = pick({0, arena - 1, arena, arena + 1, rng() % arena, rng(), ~uint64_t{0}});
    e.buf_len = pick({0, 1, arena, arena + 1, rng() % arena, rng(), ~uint64_t{0}});
    e.args_off = pick({0, arena - 16, arena, rng() % arena, rng()});
    e.args_len = static_cast<uint32_t>(pick({0, 8, 64, 65536, rng()}));
    e.args_cap = static_cast<uint32_t>(pick({0, 64, 70000, rng()}));
    e.entry.chunk_size = pick({0, 1, 4096, rng()});
    e.entry.mode = static_cast<uint32_t>(rng());
    e.user_data = static_cast<uint64_t>(i);
    // Random bytes under the argument area, where it is inside the arena.
    auto a = h.Allocate(64);
    ASSERT_TRUE(a.ok());
    for (uint64_t k = 0; k < a->size; ++k) a->data[k] = static_cast<std::byte>(rng());
    h.Free(*a);
    nops += e.opcode == 0 && e.flags == 0 && e.args_len <= e.args_cap && e.args_cap <= kMaxArgsSize &&
            ArenaRangeOk(e.args_off, e.args_cap, arena) && ArenaRangeOk(e.buf_off, e.buf_len, arena);
    ASSERT_TRUE(h.SubmitRaw(e).ok()) << i;
    if (i % 16 == 15) {
      std::vector<IoCompletion> out(32);
      (void)h.Reap(out, 0, std::chrono::milliseconds(0));
    }
  }
  std::vector<IoCompletion> out(64);
  int ok = 0, failed = 0;
  std::set<int> errnos;
  // Earlier reaps (discarded above) took some; reap the rest and count what is seen.
  while (h.batch_in_flight() > 0) {
    auto n = h.Reap(out, 1, std::chrono::seconds(10));
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    for (size_t i = 0; i < *n; ++i) {
      if (out[i].status.ok()) {
        ++ok;
      } else {
        ++failed;
        errnos.insert(out[i].error);
        EXPECT_FALSE(out[i].status.message().empty() && out[i].error != EFAULT) << out[i].status.ToString();
      }
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_LE(ok, nops);  // only a well-formed Nop succeeds
  for (int e : errnos) EXPECT_TRUE(e == EFAULT || e == EOPNOTSUPP || e == EBADF) << e;

  // Still serving: a Nop round trip.
  SubmitEntry nop{};
  nop.user_data = 7;
  ASSERT_TRUE(h.SubmitRaw(nop).ok());
  auto n = h.Reap(std::span<IoCompletion>(out).first(1), 1, std::chrono::seconds(10));
  ASSERT_TRUE(n.ok() && *n == 1) << n.status().ToString();
  EXPECT_TRUE(out[0].status.ok()) << out[0].status.ToString();
  EXPECT_EQ(out[0].user_data, 7u);

  // A tail beyond the ring: the agent closes the session and the host is told.
  h.ForceSubmissionTail(1u << 31);
  SubmitEntry after{};
  // Wait for the agent to act on the forged tail before submitting anything
  // (a submission would store a sane tail over it): its status stops
  // listing the session.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool closed = false;
  while (!closed && std::chrono::steady_clock::now() < deadline) {
    auto status = QueryAgentStatus(config.socket, std::chrono::seconds(5));
    ASSERT_TRUE(status.ok()) << status.status().ToString();
    closed = nlohmann::json::parse(*status)["sessions"].empty();
    if (!closed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(closed) << "the agent kept the session with a tail beyond the ring";
  Status st = h.SubmitRaw(after);
  if (st.ok()) {
    auto r = h.Reap(std::span<IoCompletion>(out).first(1), 1, std::chrono::seconds(10));
    st = r.ok() ? Status::Ok() : r.status();
  }
  EXPECT_EQ(st.code(), Status::Code::kDisconnected) << st.ToString();

  uint64_t one = 1;
  ASSERT_EQ(::write(stop, &one, sizeof one), 8);
  loop.join();
  s->reset();
  agent->reset();
  ::close(stop);
  std::filesystem::remove_all(dir);
}

// --- QoS token buckets, driven by an injected clock ---
constexpr int64_t kSec = 1'000'000'000;

TEST(TokenBucketTest, RateBurstAndRefill) {
  TokenBucket b(1000, 0);  // 1000/s, burst 100, starts full
  EXPECT_EQ(b.burst(), 100u);
  EXPECT_EQ(b.WaitFor(100, 0).count(), 0);
  b.Take(100);
  // Empty: 50 tokens take 50 ms to come back.
  EXPECT_EQ(b.WaitFor(50, 0), std::chrono::milliseconds(50));
  EXPECT_GT(b.WaitFor(50, kSec / 100).count(), 0);  // 10 ms: 10 tokens
  EXPECT_EQ(b.WaitFor(50, kSec / 20).count(), 0);   // 50 ms: 50 tokens
  // Refill stops at the burst: after a long pause only 100 pass at once.
  EXPECT_EQ(b.WaitFor(1, 10 * kSec).count(), 0);
  EXPECT_DOUBLE_EQ(b.tokens(), 100.0);
}

TEST(TokenBucketTest, LargerThanBurstPassesAndLeavesDebt) {
  TokenBucket b(1000, 0);
  b.Take(100);
  // 500 tokens (> burst 100) wait for a full bucket, not for 500 tokens.
  EXPECT_EQ(b.WaitFor(500, 0), std::chrono::milliseconds(100));
  EXPECT_EQ(b.WaitFor(500, kSec / 10).count(), 0);
  b.Take(500);
  EXPECT_DOUBLE_EQ(b.tokens(), -400.0);
  // The debt is paid before the next token: 401 tokens = 401 ms.
  EXPECT_EQ(b.WaitFor(1, kSec / 10), std::chrono::milliseconds(401));
}

TEST(TokenBucketTest, UnlimitedAndLiveRateChange) {
  TokenBucket b(0, 0);
  EXPECT_EQ(b.WaitFor(uint64_t{1} << 40, 0).count(), 0);
  b.Take(uint64_t{1} << 40);
  b.SetRate(1000, 0);  // from unlimited: starts full
  EXPECT_DOUBLE_EQ(b.tokens(), 100.0);
  b.Take(100);
  EXPECT_EQ(b.WaitFor(100, 0), std::chrono::milliseconds(100));
  b.SetRate(10000, 0);  // ten times faster from now on: burst 1000
  EXPECT_EQ(b.WaitFor(100, 0), std::chrono::milliseconds(10));
  b.SetRate(0, 0);
  EXPECT_EQ(b.WaitFor(1000000, 0).count(), 0);
}

TEST(TenantQosTest, BothBucketsLimitAndServedIsCounted) {
  int64_t now = 0;
  TenantQos q(QosLimits{1 << 20, 10}, [&] { return now; });  // 1 MiB/s, 10 I/Os per second
  EXPECT_EQ(q.TryAcquire(4096).count(), 0);                  // iops burst is 1
  EXPECT_GT(q.TryAcquire(4096).count(), 0);                  // the I/O bucket is empty
  now += kSec / 10;
  EXPECT_EQ(q.TryAcquire(4096).count(), 0);
  EXPECT_EQ(q.bytes_served(), 8192u);
  EXPECT_EQ(q.ios_served(), 2u);
  // Over a simulated 2 s at full demand, the byte rate is what was set.
  q.SetLimits(QosLimits{1 << 20, 0});
  uint64_t start = q.bytes_served();
  int64_t t0 = now;
  while (now - t0 < 2 * kSec) {
    auto w = q.TryAcquire(64 << 10);
    if (w.count() > 0) now += w.count();
  }
  double rate = static_cast<double>(q.bytes_served() - start) / 2.0;
  EXPECT_NEAR(rate, 1 << 20, (1 << 20) * 0.1);
  EXPECT_EQ(q.limits().bandwidth, uint64_t{1} << 20);
  EXPECT_EQ(q.limits().iops, 0u);
}

}  // namespace
}  // namespace ros2::agent
