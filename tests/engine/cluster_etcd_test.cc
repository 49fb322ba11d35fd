// Several engines sharing their management state in etcd (docs/cluster.md),
// all real processes: etcd members started by the test on loopback, ros2-engine
// processes with control.store etcd://..., and the control-plane clients and an
// object session on the data plane. Label `cluster`.
//
// - The leader's kill -9: a new leader within 2 x the lease TTL, every pool,
//   container and tenant intact, a capability revoked before the kill refused
//   on a surviving engine after it; the killed engine's targets DOWN with a
//   higher map version. The measured times are printed.
// - etcd wholly down: reads and writes on an open container go on (every
//   engine confirms to the others that none reaches etcd), management calls
//   fail naming etcd; a peer killed meanwhile fences the survivor; a libros2
//   replicated update it leads, sent while it is fenced, waits the fence out
//   and is acknowledged; when etcd returns, management and writes resume
//   with no manual step.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "control/control_channel.h"
#include "ros2/client.h"
#include "object_session.h"
#include "placement/placement.h"
#include "testing/engine_process.h"
#include "testing/etcd_cluster.h"
#include "testing/pattern.h"
#include "testing/status_assert.h"

namespace ros2::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTtl = std::chrono::seconds(3);

TEST(ClusterEtcdTest, LeaderKillKeepsStateAndRevocation) {
  EtcdEngineCluster c;
  ROS2_ASSERT_OK(c.Start({.etcd_members = 1, .engines = 3}));
  auto mgmt0 = c.Mgmt(0);
  ASSERT_TRUE(mgmt0->CreatePool("p", 64 << 20).ok());
  ASSERT_TRUE(mgmt0->CreateContainer("p", "c").ok());
  auto t1 = mgmt0->CreateTenant("t1");
  ASSERT_TRUE(t1.ok()) << t1.status().ToString();
  auto t2 = mgmt0->CreateTenant("t2");
  ASSERT_TRUE(t2.ok()) << t2.status().ToString();
  ASSERT_TRUE(mgmt0->SetAcl("p", "", "t2", control::kRightRead | control::kRightWrite).ok());
  ASSERT_TRUE(mgmt0->SetAcl("p", "c", "t2", control::kRightRead | control::kRightWrite).ok());

  // Every engine serves the same state.
  for (size_t i = 0; i < c.engines.size(); ++i) {
    auto pools = c.Mgmt(i)->ListPools();
    ASSERT_TRUE(pools.ok()) << pools.status().ToString();
    ASSERT_EQ(pools->size(), 1u) << "engine " << i;
  }
  const int leader = c.LeaderIndex(0);
  ASSERT_GE(leader, 0) << "no leader elected";
  const size_t survivor = leader == 0 ? 1 : 0;

  // t2 writes through a session opened on a surviving engine, then is deleted
  // (its capabilities revoked) on the leader.
  auto s = ObjectSession::Open(c.engines[survivor]->control(), {"t2", *t2}, "p", "c", transport::TransportKind::kTcp);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ObjectSession& session = **s;
  const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kSX, 11, 1);
  std::string dkey;  // a key whose target is on a surviving engine
  for (int k = 0; k < 200 && dkey.empty(); ++k) {
    auto t = session.TargetOf(oid, "k" + std::to_string(k));
    ASSERT_TRUE(t.ok());
    if (session.engine_of(*t) != c.engines[leader]->engine_id()) dkey = "k" + std::to_string(k);
  }
  ASSERT_FALSE(dkey.empty());
  ROS2_ASSERT_OK(session.UpdateSingle(oid, dkey, "a", Pattern(100, 1)));
  ASSERT_TRUE(c.Mgmt(leader)->DeleteTenant("t2").ok());
  std::this_thread::sleep_for(std::chrono::seconds(1));  // engines reload revocations every tick (<= 250 ms)

  auto before = c.Mgmt(survivor)->GetEngineStatus();
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  const std::string dead = c.engines[leader]->engine_id();
  const auto killed = Clock::now();
  c.Kill(leader);
  long long new_leader_ms = -1, down_ms = -1;
  uint64_t down_version = 0;
  while (MsSince(killed) < 4 * 3000 && (new_leader_ms < 0 || down_ms < 0)) {
    auto st = c.Mgmt(survivor)->GetEngineStatus();
    if (st.ok()) {
      if (new_leader_ms < 0 && !st->leader().empty() && st->leader() != c.engines[leader]->control()) {
        new_leader_ms = MsSince(killed);
      }
      if (down_ms < 0 && AllTargetsDown(*st, dead)) {
        down_ms = MsSince(killed);
        down_version = st->map_version();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::printf("cluster: leader kill -9 -> new leader in %lld ms, its targets DOWN in %lld ms (TTL %lld s)\n",
              new_leader_ms, down_ms, static_cast<long long>(kTtl.count()));
  ASSERT_GE(new_leader_ms, 0) << "no new leader within 4 x TTL";
  EXPECT_LT(new_leader_ms, 2 * 3000);
  ASSERT_GE(down_ms, 0) << "the killed leader's targets were not marked DOWN";
  EXPECT_LT(down_ms, 2 * 3000);
  EXPECT_GT(down_version, before->map_version());

  // State intact, seen from the survivor.
  auto m = c.Mgmt(survivor);
  auto pool = m->QueryPool("p");
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  EXPECT_EQ(pool->map_version(), down_version);
  ASSERT_TRUE(m->QueryContainer("p", "c").ok());
  auto tenants = m->ListTenants();
  ASSERT_TRUE(tenants.ok());
  EXPECT_NE(std::find(tenants->begin(), tenants->end(), "t1"), tenants->end());
  EXPECT_EQ(std::find(tenants->begin(), tenants->end(), "t2"), tenants->end());
  // t1 still authenticates; t2's capability stays revoked on the survivor.
  ASSERT_TRUE(c.Mgmt(survivor, {"t1", *t1})->ListPools().ok());
  auto refused = session.UpdateSingle(oid, dkey, "a", Pattern(100, 2));
  ASSERT_FALSE(refused.ok()) << "a revoked capability was accepted after the leader's kill";
  EXPECT_EQ(refused.status().code(), Status::Code::kUnauthenticated) << refused.status().ToString();
  // t2 logged in on the survivor before it was deleted elsewhere: refused now.
  auto t2_call = c.Mgmt(survivor, {"t2", *t2})->ListPools();
  ASSERT_FALSE(t2_call.ok()) << "a tenant deleted on another engine still authenticates";
  EXPECT_EQ(t2_call.status().code(), Status::Code::kUnauthenticated) << t2_call.status().ToString();
  // Management writes go on: a pool created on the survivor.
  EXPECT_TRUE(m->CreatePool("p2", 16 << 20).ok());

  // Clients given every engine, the dead leader first, move on to a live one:
  // a tenant made, a pool and container opened through libros2, written, the
  // tenant deleted (its capability revoked) and the write refused.
  std::string all = c.engines[leader]->control();
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (size_t i = 0; i < c.engines.size(); ++i) {
    if (static_cast<int>(i) != leader) all += "," + c.engines[i]->control();
  }
  for (const auto& e : {c.engines[leader].get(), c.engines[survivor].get()}) {
    auto ch = control::MakeControlChannel({.address = e->control()});
    ASSERT_TRUE(ch.ok());
    channels.push_back(*ch);
  }
  control::ManagementClient any(channels, c.admin, std::chrono::seconds(5));
  auto t3 = any.CreateTenant("t3");
  ASSERT_TRUE(t3.ok()) << t3.status().ToString();
  ASSERT_TRUE(any.SetAcl("p", "", "t3", control::kRightRead | control::kRightWrite).ok());
  ASSERT_TRUE(any.SetAcl("p", "c", "t3", control::kRightRead | control::kRightWrite).ok());
  {
    client::ClientOptions o;
    o.control = all;
    o.tenant = "t3";
    o.secret = *t3;
    o.transport = "tcp";
    o.reconnect_timeout = std::chrono::milliseconds(0);
    auto client = client::Client::Connect(o);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    auto pool = (*client)->ConnectPool("p");
    ASSERT_TRUE(pool.ok()) << "pool open through " << all << ": " << pool.status().ToString();
    auto cont = (*pool)->OpenContainer("c");
    ASSERT_TRUE(cont.ok()) << cont.status().ToString();
    // An S1 object whose one shard is on a live engine.
    Result<client::Object> obj = Status::NotFound("no object tried");
    Status put = Status::NotFound("no object tried");
    for (uint64_t lo = 77; lo < 120 && !put.ok(); ++lo) {
      obj = (*cont)->OpenObject(client::Container::MakeObjectId(ObjectClass::kS1, 0, lo));
      ASSERT_TRUE(obj.ok()) << obj.status().ToString();
      put = obj->Put("d", "a", Pattern(64, 5));
    }
    ROS2_ASSERT_OK(put);
    ASSERT_TRUE(any.DeleteTenant("t3").ok());
    std::this_thread::sleep_for(std::chrono::seconds(1));
    Status after = obj->Put("d", "a", Pattern(64, 6));
    ASSERT_FALSE(after.ok()) << "a capability revoked after the leader's kill was accepted";
  }

  // A non-leader engine's kill -9: DOWN and a new map version within 2 x TTL.
  const int leader2 = c.LeaderIndex(survivor);
  ASSERT_GE(leader2, 0);
  int victim = -1;
  for (size_t i = 0; i < c.engines.size(); ++i) {
    if (static_cast<int>(i) != leader && static_cast<int>(i) != leader2) victim = static_cast<int>(i);
  }
  ASSERT_GE(victim, 0);
  const std::string victim_id = c.engines[victim]->engine_id();
  auto before2 = c.Mgmt(leader2)->GetEngineStatus();
  ASSERT_TRUE(before2.ok());
  const auto killed2 = Clock::now();
  c.Kill(victim);
  long long down2_ms = -1;
  while (MsSince(killed2) < 4 * 3000 && down2_ms < 0) {
    auto st = c.Mgmt(leader2)->GetEngineStatus();
    if (st.ok() && AllTargetsDown(*st, victim_id)) {
      down2_ms = MsSince(killed2);
      EXPECT_GT(st->map_version(), before2->map_version());
      for (const auto& mem : st->members()) {
        if (mem.engine_uuid() == victim_id) {
          EXPECT_FALSE(mem.up());
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::printf("cluster: engine kill -9 -> its targets DOWN in %lld ms (TTL %lld s)\n", down2_ms,
              static_cast<long long>(kTtl.count()));
  ASSERT_GE(down2_ms, 0) << "the killed engine's targets were not marked DOWN";
  EXPECT_LT(down2_ms, 2 * 3000);
}

TEST(ClusterEtcdTest, ThreeEtcdMembersServeWithOneKilled) {
  EtcdEngineCluster c;
  ROS2_ASSERT_OK(c.Start({.etcd_members = 3, .engines = 2}));
  auto mgmt = c.Mgmt(1);
  ASSERT_TRUE(mgmt->CreatePool("p", 16 << 20).ok());
  c.etcd->Kill(0);  // the member every engine talks to first
  const auto killed = Clock::now();
  Status created = Status::IOError("never tried");
  while (MsSince(killed) < 10000 && !created.ok()) {
    created = mgmt->CreatePool("q", 16 << 20).status();
    if (!created.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(created.ok()) << created.ToString();
  std::printf("cluster: 3-member etcd, one killed: management served again after %lld ms\n", MsSince(killed));
  // Liveness goes on through the other members: no engine is marked DOWN.
  std::this_thread::sleep_for(2 * kTtl);
  auto st = c.Mgmt(0)->GetEngineStatus();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_FALSE(st->fenced());
  ASSERT_EQ(st->members_size(), 2);
  for (const auto& m : st->members()) EXPECT_TRUE(m.up()) << m.engine_uuid();
  for (const auto& t : st->targets()) EXPECT_EQ(t.state(), rpc::TARGET_UP) << t.engine_uuid();
}

TEST(ClusterEtcdTest, CapabilityKeyIsSealedInEtcd) {
  EtcdEngineCluster c;
  ROS2_ASSERT_OK(c.Start({.etcd_members = 1, .engines = 1}));
  // etcd holds nonce + sealed key + tag, never the 32 raw bytes.
  auto sealed = c.etcd->Etcdctl({"get", "--print-value-only", "ros2/meta/capability-key"});
  ASSERT_TRUE(sealed.ok()) << sealed.status().ToString();
  std::string value = *sealed;
  while (!value.empty() && value.back() == '\n') value.pop_back();
  EXPECT_EQ(value.size(), 12u + 32u + 16u);
  // An engine with another cluster key cannot open it and refuses to start.
  const std::string other_dir = c.dir.path() + "/other-key";
  ASSERT_EQ(::mkdir(other_dir.c_str(), 0700), 0);
  {
    std::ofstream out(other_dir + "/cluster.key");
    out << std::string(64, 'f') << "\n";
  }
  ::chmod((other_dir + "/cluster.key").c_str(), 0600);
  ROS2_ASSERT_OK(GiveToServiceUser(other_dir));
  EngineOptions o;
  o.data_dir = c.dir.path() + "/wrong-key-engine";
  o.targets = 1;
  o.control_extra = {"store: " + c.etcd->StoreUrl(), "cluster_key_file: " + other_dir + "/cluster.key"};
  auto wrong = EngineProcess::Start(o);
  ASSERT_FALSE(wrong.ok()) << "an engine started with the wrong cluster key";
  EXPECT_NE(wrong.status().message().find("cluster_key_file"), std::string::npos) << wrong.status().ToString();
}

// A key of `oid` whose target is on engine `engine`.
std::string DkeyOn(ObjectSession& session, const ObjectId& oid, const std::string& engine) {
  for (int k = 0; k < 500; ++k) {
    auto t = session.TargetOf(oid, "k" + std::to_string(k));
    if (t.ok() && session.engine_of(*t) == engine) return "k" + std::to_string(k);
  }
  return {};
}

TEST(ClusterEtcdTest, EtcdDownKeepsDataIoUntilAPeerGoesAndRecovers) {
  EtcdEngineCluster c;
  ROS2_ASSERT_OK(c.Start({.etcd_members = 1, .engines = 2}));
  auto mgmt = c.Mgmt(1);
  ASSERT_TRUE(mgmt->CreatePool("p", 64 << 20).ok());
  ASSERT_TRUE(mgmt->CreateContainer("p", "c").ok());
  auto s = ObjectSession::Open(c.engines[1]->control(), c.admin, "p", "c", transport::TransportKind::kTcp);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ObjectSession& session = **s;
  const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kSX, 12, 1);
  const std::string on0 = DkeyOn(session, oid, c.engines[0]->engine_id());
  const std::string on1 = DkeyOn(session, oid, c.engines[1]->engine_id());
  ASSERT_FALSE(on0.empty());
  ASSERT_FALSE(on1.empty());
  ROS2_ASSERT_OK(session.UpdateSingle(oid, on0, "a", Pattern(100, 1)));
  ROS2_ASSERT_OK(session.UpdateSingle(oid, on1, "a", Pattern(100, 1)));
  // A libros2 client with an RP_2G1 object led by engine 1 (the one fenced
  // below), for a replicated update sent while it is fenced.
  ASSERT_TRUE(mgmt->CreateContainer("p", "rp", {{"oclass", "RP_2G1"}, {"rd_fac", "1"}}).ok());
  ObjectId rp;
  for (uint64_t lo = 1; lo < 1000; ++lo) {
    rp = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kRP2G1, 0, lo);
    auto copies = WriteTargets(session.map(), rp, "fenced");
    ASSERT_TRUE(copies.ok()) << copies.status().ToString();
    if (session.engine_of((*copies)[0]) == c.engines[1]->engine_id()) break;
  }
  client::ClientOptions co = c.ClientOptionsFor(1);
  co.reconnect_timeout = std::chrono::seconds(30);
  co.io_timeout = std::chrono::seconds(10);
  auto cl = client::Client::Connect(co);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto rp_pool = (*cl)->ConnectPool("p");
  ASSERT_TRUE(rp_pool.ok()) << rp_pool.status().ToString();
  auto rp_cont = (*rp_pool)->OpenContainer("rp");
  ASSERT_TRUE(rp_cont.ok()) << rp_cont.status().ToString();
  auto rp_obj = (*rp_cont)->OpenObject(rp);
  ASSERT_TRUE(rp_obj.ok()) << rp_obj.status().ToString();
  ROS2_ASSERT_OK(rp_obj->Put("fenced", "a", Pattern(100, 1)));
  // Each engine learns the others' control endpoints at its ticks (250 ms).
  std::this_thread::sleep_for(std::chrono::seconds(1));

  c.etcd->Kill(0);
  const auto down = Clock::now();
  auto failed = mgmt->CreatePool("q", 16 << 20);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("etcd"), std::string::npos) << failed.status().ToString();
  // Past half the TTL, and past the whole TTL: no engine reaches etcd, every
  // engine answers the others, so the map cannot change: writes and reads go
  // on on both engines under the last map.
  for (auto wait : {std::chrono::milliseconds(kTtl) / 2 + std::chrono::milliseconds(800),
                    std::chrono::milliseconds(kTtl) + std::chrono::milliseconds(500)}) {
    std::this_thread::sleep_for(wait - std::chrono::milliseconds(MsSince(down)));
    const uint64_t seed = 2 + static_cast<uint64_t>(MsSince(down));
    for (const std::string& dkey : {on0, on1}) {
      auto written = session.UpdateSingle(oid, dkey, "a", Pattern(100, seed));
      ASSERT_TRUE(written.ok()) << "etcd down " << MsSince(down) << " ms: " << written.status().ToString()
                                << "\nengine 0:\n" << c.engines[0]->LogTail() << "\nengine 1:\n" << c.engines[1]->LogTail();
      auto read = session.FetchSingle(oid, dkey, "a", 4096);
      ASSERT_TRUE(read.ok()) << read.status().ToString();
      EXPECT_EQ(read->data, Pattern(100, seed));
    }
    auto refused = mgmt->ListPools();
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("etcd"), std::string::npos) << refused.status().ToString();
  }
  std::printf("cluster: etcd down %lld ms: writes and reads go on on both engines, management refused naming etcd\n",
              MsSince(down));

  // Engine 0 killed while etcd is down: engine 1 can no longer hear from every
  // engine the map has UP, so it fences (engine 0 might reach etcd).
  c.Kill(0);
  const auto killed = Clock::now();
  long long fenced_ms = -1;
  Status last;
  while (MsSince(killed) < 3 * 3000 && fenced_ms < 0) {
    last = StatusOf(session.UpdateSingle(oid, on1, "a", Pattern(100, 9)));
    if (!last.ok() && last.message().find("fenced") != std::string::npos) fenced_ms = MsSince(killed);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::printf("cluster: etcd down, a peer killed -9 -> the survivor fenced in %lld ms\n", fenced_ms);
  ASSERT_GE(fenced_ms, 0) << "engine 1 kept acknowledging writes with a silent peer: " << last.ToString();
  EXPECT_LT(fenced_ms, 1500);
  auto read = session.FetchSingle(oid, on1, "a", 4096);
  ASSERT_TRUE(read.ok()) << "a fenced engine serves reads: " << read.status().ToString();
  // A replicated update led by the fenced engine: its Busy is waited out
  // (docs/client.md, "Failure policy"), not handed to the caller.
  Status fenced_put = Status::Internal("not done");
  long long fenced_put_ms = -1;
  std::thread putter([&] {
    const auto start = Clock::now();
    fenced_put = rp_obj->Put("fenced", "a", Pattern(100, 2));
    fenced_put_ms = MsSince(start);
  });
  struct JoinAtEnd {
    std::thread& t;
    ~JoinAtEnd() {
      if (t.joinable()) t.join();
    }
  } join_putter{putter};

  // etcd back: management and writes resume with no manual step (the
  // update above is sent at once, while etcd starts).
  ROS2_ASSERT_OK(c.etcd->Restart(0));
  const auto back = Clock::now();
  Status created = Status::IOError("never tried");
  while (MsSince(back) < 15000 && !created.ok()) {
    created = mgmt->CreatePool("q", 16 << 20).status();
    if (!created.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(created.ok()) << created.ToString();
  Status written = Status::IOError("never tried");
  while (MsSince(back) < 15000 && !written.ok()) {
    written = StatusOf(session.UpdateSingle(oid, on1, "a", Pattern(100, 10)));
    // The engines joined again with their targets UP: a newer map.
    if (written.code() == Status::Code::kStaleMap) (void)session.RefreshMapVersion();
    if (!written.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(written.ok()) << written.ToString();
  std::printf("cluster: etcd back: management and writes again after %lld ms\n", MsSince(back));
  putter.join();
  std::printf("cluster: a replicated update sent to the fenced engine acknowledged after %lld ms (etcd back %lld ms "
              "ago)\n",
              fenced_put_ms, MsSince(back));
  ROS2_ASSERT_OK(fenced_put);
  auto fenced_back = rp_obj->Get("fenced", "a", 100);
  ASSERT_TRUE(fenced_back.ok()) << fenced_back.status().ToString();
  EXPECT_TRUE(*fenced_back == Pattern(100, 2));
  auto status = mgmt->GetEngineStatus();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_FALSE(status->fenced());
  for (const auto& m : status->members()) {
    if (m.engine_uuid() != c.engines[1]->engine_id()) continue;
    EXPECT_TRUE(m.up());
    EXPECT_EQ(m.lease_ttl_s(), 3);
  }
}

}  // namespace
}  // namespace ros2::testing
