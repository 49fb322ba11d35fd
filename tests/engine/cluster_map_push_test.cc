// Pool maps pushed to clients (docs/cluster.md, "Map versions" and "Failure
// detection"), all real processes: an etcd member, three ros2-engine processes
// with control.store etcd://... and a 3 s lease TTL, and two libros2 clients of
// one pool — one watching its pool's map (the default), one with the watch off
// (ClientOptions::watch_pool_maps = false). Label `cluster`.
//
// An engine killed with -9: its targets DOWN and the map version up within
// 2 x TTL; the watching client holds the new map without a failed request (no
// engine counted a stale_map refusal for its next write); the other client's
// next write is refused once (StaleMap), refreshes its map and is resent. Then
// the engine serving the watch is killed too: the watch moves to another
// engine and the client still learns the next map. The measured times are
// printed (kill -> DOWN, kill -> client on the new map).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "metrics/scrape.h"
#include "object_session.h"
#include "ros2/client.h"
#include "testing/etcd_cluster.h"
#include "testing/pattern.h"
#include "testing/status_assert.h"

namespace ros2::testing {
namespace {

using client::Client;
using client::ClientOptions;
using client::Container;
using client::Pool;
using Clock = std::chrono::steady_clock;
constexpr auto kTtl = std::chrono::seconds(3);
constexpr long long kTtlMs = 3000;

// stale_map refusals counted by the live engines.
double StaleMapRefusals(EtcdEngineCluster& c) {
  double total = 0;
  for (size_t i = 0; i < c.engines.size(); ++i) {
    if (!c.alive(i)) continue;
    auto n = metrics::ScrapeSum(c.engines[i]->metrics(), "ros2_engine_refusals_total", "reason", "stale_map");
    if (!n.ok()) return -1;
    total += *n;
  }
  return total;
}

struct ClientOfPool {
  std::unique_ptr<Client> client;
  std::unique_ptr<Pool> pool;
  std::unique_ptr<Container> container;

  static ClientOfPool Open(ClientOptions o, bool watch) {
    ClientOfPool c;
    o.watch_pool_maps = watch;
    auto client = Client::Connect(o);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    if (!client.ok()) return c;
    c.client = std::move(*client);
    auto pool = c.client->ConnectPool("p");
    EXPECT_TRUE(pool.ok()) << pool.status().ToString();
    if (!pool.ok()) return c;
    c.pool = std::move(*pool);
    auto cont = c.pool->OpenContainer("c");
    EXPECT_TRUE(cont.ok()) << cont.status().ToString();
    if (cont.ok()) c.container = std::move(*cont);
    return c;
  }
  uint64_t version() const { return pool->summary().map_version; }
  Status Put(const ObjectId& oid, const std::string& dkey, uint8_t seed) const {
    auto obj = container->OpenObject(oid);
    if (!obj.ok()) return obj.status();
    const auto data = Pattern(256, seed);
    return obj->Put(dkey, "a", data);
  }
};

TEST(ClusterMapPush, KilledEngineReachesWatchingAndStaleClients) {
  EtcdEngineCluster c;
  ROS2_ASSERT_OK(c.Start({.engines = 3, .lease_ttl = kTtl, .metrics = true}));
  ASSERT_TRUE(c.Mgmt(0)->CreatePool("p", 64 << 20).ok());
  ASSERT_TRUE(c.Mgmt(0)->CreateContainer("p", "c").ok());
  const int leader = c.LeaderIndex(0);
  ASSERT_GE(leader, 0) << "no leader elected";
  // The victim is neither the leader nor engine 0 (the clients' control endpoint).
  size_t victim = 1;
  if (leader == 1) victim = 2;

  auto watching = ClientOfPool::Open(c.ClientOptionsFor(0), true);
  auto blind = ClientOfPool::Open(c.ClientOptionsFor(0), false);
  ASSERT_TRUE(watching.container && blind.container);
  auto placement = ObjectSession::Open(c.engines[0]->control(), c.admin, "p", "c", transport::TransportKind::kTcp);
  ASSERT_TRUE(placement.ok()) << placement.status().ToString();
  const ObjectId oid = Container::MakeObjectId(ObjectClass::kSX, 0, 21);
  std::string dkey;  // a key whose target survives both kills below
  for (int k = 0; k < 500 && dkey.empty(); ++k) {
    auto t = (*placement)->TargetOf(oid, "k" + std::to_string(k));
    ASSERT_TRUE(t.ok());
    const std::string& engine = (*placement)->engine_of(*t);
    if (engine != c.engines[victim]->engine_id() && engine != c.engines[0]->engine_id()) {
      dkey = "k" + std::to_string(k);
    }
  }
  ASSERT_FALSE(dkey.empty());
  ROS2_ASSERT_OK(watching.Put(oid, dkey, 1));
  ROS2_ASSERT_OK(blind.Put(oid, dkey, 2));
  const uint64_t v0 = watching.version();
  ASSERT_EQ(blind.version(), v0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the watch stream is open

  const std::string victim_id = c.engines[victim]->engine_id();
  const auto killed = Clock::now();
  c.Kill(victim);
  long long down_ms = -1, watch_ms = -1;
  uint64_t down_version = 0;
  auto mgmt = c.Mgmt(0);
  while (MsSince(killed) < 4 * kTtlMs && (down_ms < 0 || watch_ms < 0)) {
    if (watch_ms < 0 && watching.version() > v0) watch_ms = MsSince(killed);
    if (down_ms < 0) {
      auto st = mgmt->GetEngineStatus();
      if (st.ok() && AllTargetsDown(*st, victim_id)) {
        down_ms = MsSince(killed);
        down_version = st->map_version();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::printf(
      "cluster: engine kill -9 -> targets DOWN in %lld ms, watching client on the new map in %lld ms "
      "(TTL %lld s)\n",
      down_ms, watch_ms, static_cast<long long>(kTtl.count()));
  ASSERT_GE(down_ms, 0) << "the killed engine's targets were not marked DOWN";
  EXPECT_LT(down_ms, 2 * kTtlMs);
  ASSERT_GE(watch_ms, 0) << "the watching client never saw a newer map";
  EXPECT_LT(watch_ms, 2 * kTtlMs);
  EXPECT_GT(down_version, v0);
  EXPECT_GE(watching.version(), down_version);
  EXPECT_EQ(blind.version(), v0) << "the client without a watch learned the map without a request";

  // (a) The watching client's write: no engine refuses it as stale.
  const double stale0 = StaleMapRefusals(c);
  ASSERT_GE(stale0, 0);
  ROS2_ASSERT_OK(watching.Put(oid, dkey, 3));
  EXPECT_EQ(StaleMapRefusals(c), stale0) << "the watching client's write was refused as stale";
  // (b) The other client's write: refused once with StaleMap, the map
  // refreshed, resent, acknowledged.
  const auto resent = Clock::now();
  ROS2_ASSERT_OK(blind.Put(oid, dkey, 4));
  const long long resent_ms = MsSince(resent);
  EXPECT_GE(StaleMapRefusals(c), stale0 + 1) << "the stale client's write was not refused as stale";
  EXPECT_GE(blind.version(), down_version);
  std::printf(
      "cluster: client without a watch: StaleMap refusal, map refresh and resend in %lld ms (map v%llu -> "
      "v%llu)\n",
      resent_ms, static_cast<unsigned long long>(v0), static_cast<unsigned long long>(blind.version()));
  auto read = watching.container->OpenObject(oid);
  ASSERT_TRUE(read.ok());
  auto value = read->Get(dkey, "a");
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(*value, Pattern(256, 4));

  // The engine serving the watch (engine 0) dies: the watch moves to another
  // engine and the client still learns the map that marks engine 0 DOWN.
  const uint64_t v1 = watching.version();
  const std::string first_id = c.engines[0]->engine_id();
  const size_t last = 3 - victim;  // the engine that survives both kills
  const auto killed0 = Clock::now();
  c.Kill(0);
  auto mgmt_last = c.Mgmt(last);
  long long down0_ms = -1, watch0_ms = -1;
  while (MsSince(killed0) < 5 * kTtlMs && (down0_ms < 0 || watch0_ms < 0)) {
    if (watch0_ms < 0 && watching.version() > v1) watch0_ms = MsSince(killed0);
    if (down0_ms < 0) {
      auto st = mgmt_last->GetEngineStatus();
      if (st.ok() && AllTargetsDown(*st, first_id)) down0_ms = MsSince(killed0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::printf(
      "cluster: kill -9 of the engine serving the watch -> DOWN in %lld ms, client on the new map (watch "
      "moved to another engine) in %lld ms\n",
      down0_ms, watch0_ms);
  ASSERT_GE(down0_ms, 0) << "engine 0 was not marked DOWN";
  ASSERT_GE(watch0_ms, 0) << "the watch did not move to another engine";
  EXPECT_LT(watch0_ms, 3 * kTtlMs);
}

}  // namespace
}  // namespace ros2::testing
