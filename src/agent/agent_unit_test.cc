// Unit tests of offload mode's pieces that need no cluster: the agent config,
// the region geometry and range checks, the argument codec.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "agent/agent_config.h"
#include "agent/wire.h"
#include "common/config.h"

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
max_arena: 256MiB
tenants:
  - { name: admin, secret_file: /etc/hostname, uids: [0] }
  - { name: bob, secret_file: /etc/hostname, uids: [4242], gids: [100] }
)",
                        &st);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(c.socket, "/tmp/a.sock");
  EXPECT_EQ(c.socket_mode, 0660u);
  EXPECT_EQ(c.transport, "shm");
  EXPECT_EQ(c.spin, std::chrono::microseconds(20));
  EXPECT_EQ(c.max_arena, uint64_t{256} << 20);
  ASSERT_EQ(c.tenants.size(), 2u);
  EXPECT_EQ(FindTenant(c, 0, 0)->name, "admin");
  EXPECT_EQ(FindTenant(c, 4242, 1)->name, "bob");
  EXPECT_EQ(FindTenant(c, 7, 100)->name, "bob");  // by gid
  EXPECT_EQ(FindTenant(c, 7, 7), nullptr);
  c.origin = "agent.yaml";
  EXPECT_TRUE(FinalizeAgentConfig(&c).ok());
}

TEST(AgentConfigTest, RefusesBadSettingsNamingTheKey) {
  Status st;
  Parse("tenants: [{name: a, secret_file: /etc/hostname, uids: [-1]}]", &st);
  EXPECT_NE(st.message().find("tenants[0].uids[0]"), std::string::npos) << st.ToString();
  Parse("transport: carrier-pigeon", &st);
  EXPECT_NE(st.message().find("transport"), std::string::npos) << st.ToString();
  Parse("max_ring_entries: 1000", &st);
  EXPECT_NE(st.message().find("max_ring_entries"), std::string::npos) << st.ToString();
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

}  // namespace
}  // namespace ros2::agent
