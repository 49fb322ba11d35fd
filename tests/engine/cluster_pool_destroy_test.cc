// Pools and containers destroyed through one engine of an etcd cluster are
// dropped by every engine (docs/cluster.md, "Destroyed pools"), all real
// processes: an etcd member, three ros2-engine processes with control.store
// etcd://..., and a libros2 client that opened the pool through another
// engine than the one the destruction goes through. Label `cluster`.
//
// A container destroyed through engine 2: a write the client places on each
// engine's target is refused with NotFound naming the destroyed container
// (each engine learned it from its etcd watch, not from a restart). Then the
// pool, destroyed (force) through engine 2: every engine removes the pool's
// directory under each target, and the client's writes to each engine are
// refused the same way. The time from the destroy call's return to the last
// engine dropping the pool is printed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "control/control_channel.h"
#include "control/management_client.h"
#include "object_session.h"
#include "ros2/client.h"
#include "testing/engine_process.h"
#include "testing/etcd_cluster.h"
#include "testing/pattern.h"
#include "testing/status_assert.h"

namespace ros2::testing {
namespace {

using client::Client;
using client::Container;
using Clock = std::chrono::steady_clock;

// For each engine, a dkey of `oid` whose target is that engine's.
std::vector<std::string> KeyPerEngine(ObjectSession& placement, const EtcdEngineCluster& c, const ObjectId& oid) {
  std::vector<std::string> keys(c.engines.size());
  for (int k = 0; k < 2000; ++k) {
    const std::string dkey = "k" + std::to_string(k);
    auto t = placement.TargetOf(oid, dkey);
    if (!t.ok()) continue;
    for (size_t e = 0; e < c.engines.size(); ++e) {
      if (keys[e].empty() && placement.engine_of(*t) == c.engines[e]->engine_id()) keys[e] = dkey;
    }
  }
  return keys;
}

Status PutOnce(Container& container, const ObjectId& oid, const std::string& dkey, uint8_t seed) {
  auto obj = container.OpenObject(oid);
  if (!obj.ok()) return obj.status();
  return obj->Put(dkey, "a", Pattern(256, seed));
}

TEST(ClusterPoolDestroy, DestroyedThroughOneEngineIsDroppedByEvery) {
  EtcdEngineCluster c;
  ROS2_ASSERT_OK(c.Start({.storage_class = "nvme"}));  // shards with files: their removal shows
  std::vector<std::string> data_dirs;
  for (size_t e = 0; e < c.engines.size(); ++e) data_dirs.push_back(c.data_dir(e));
  auto mgmt0 = c.Mgmt(0);
  ROS2_ASSERT_OK(mgmt0->CreatePool("p", 64 << 20).status());
  ROS2_ASSERT_OK(mgmt0->CreateContainer("p", "c").status());
  ROS2_ASSERT_OK(mgmt0->CreateContainer("p", "gone").status());

  auto client = Client::Connect(c.ClientOptionsFor(1));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto pool = (*client)->ConnectPool("p");
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto kept = (*pool)->OpenContainer("c");
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  auto doomed = (*pool)->OpenContainer("gone");
  ASSERT_TRUE(doomed.ok()) << doomed.status().ToString();
  const std::string pool_uuid = (*pool)->summary().uuid;

  auto placement = ObjectSession::Open(c.engines[1]->control(), c.admin, "p", "c", transport::TransportKind::kTcp);
  ASSERT_TRUE(placement.ok()) << placement.status().ToString();
  const ObjectId oid = Container::MakeObjectId(ObjectClass::kSX, 0, 38);
  const std::vector<std::string> keys = KeyPerEngine(**placement, c, oid);
  for (size_t e = 0; e < keys.size(); ++e) {
    ASSERT_FALSE(keys[e].empty()) << "no key placed on engine " << e;
    ROS2_ASSERT_OK(PutOnce(**kept, oid, keys[e], 1));
    ROS2_ASSERT_OK(PutOnce(**doomed, oid, keys[e], 1));
  }
  for (const auto& d : data_dirs) ASSERT_TRUE(std::filesystem::exists(d + "/targets/0/" + pool_uuid)) << d;

  // A container destroyed through engine 2 (it forwards to the leader).
  auto mgmt2 = c.Mgmt(2);
  ROS2_ASSERT_OK(mgmt2->DestroyContainer("p", "gone"));
  for (size_t e = 0; e < keys.size(); ++e) {
    Status st;
    const auto t = Clock::now();
    do {  // each engine learns it from its etcd watch within milliseconds
      st = PutOnce(**doomed, oid, keys[e], 2);
      if (!st.ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (MsSince(t) < 3000);
    EXPECT_EQ(st.code(), Status::Code::kNotFound) << "engine " << e << ": " << st.ToString();
    EXPECT_NE(st.message().find("destroyed"), std::string::npos) << st.ToString();
    ROS2_ASSERT_OK(PutOnce(**kept, oid, keys[e], 2));  // the pool's other container is served on
  }

  // The pool, destroyed (force) through engine 2.
  ROS2_ASSERT_OK(mgmt2->DestroyPool("p", true));
  const auto destroyed = Clock::now();
  long long dropped_ms = -1;
  while (MsSince(destroyed) < 5000) {
    bool all_gone = true;
    for (const auto& d : data_dirs) all_gone = all_gone && !std::filesystem::exists(d + "/targets/0/" + pool_uuid);
    if (all_gone) {
      dropped_ms = MsSince(destroyed);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::printf("cluster: pool destroyed through engine 2 -> every engine dropped its directories in %lld ms\n",
              dropped_ms);
  ASSERT_GE(dropped_ms, 0) << "an engine kept the destroyed pool's directory";
  for (size_t e = 0; e < keys.size(); ++e) {
    Status st = PutOnce(**kept, oid, keys[e], 3);
    EXPECT_EQ(st.code(), Status::Code::kNotFound) << "engine " << e << ": " << st.ToString();
    EXPECT_NE(st.message().find("destroyed"), std::string::npos) << st.ToString();
  }
  EXPECT_EQ(mgmt0->QueryPool("p").status().code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace ros2::testing
