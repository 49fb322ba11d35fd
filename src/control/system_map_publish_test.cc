// SystemMap's publishing of new versions (docs/cluster.md, "Map versions"):
// its own writes and maps observed from elsewhere reach the listeners once per
// newer version, older maps are ignored, WaitNewer wakes on a newer version
// and on StopWaiters, and times out otherwise.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "control/state_store.h"
#include "control/system_map.h"
#include "testing/temp_dir.h"

namespace ros2::control {
namespace {

EngineRegistration OneTarget(const Uuid& engine) {
  EngineRegistration reg;
  reg.engine = engine;
  reg.address = "host";
  reg.targets.push_back({0, "worker-address", 1 << 20});
  return reg;
}

TEST(SystemMapPublishTest, WritesAndObservedMapsReachListenersOncePerNewerVersion) {
  ros2::testing::TempDir dir;
  auto store = StateStore::Open(dir.path() + "/db");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto map = SystemMap::Load(store->get());
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  std::vector<uint64_t> heard;
  (*map)->AddListener([&heard](uint64_t v) { heard.push_back(v); });

  const Uuid engine = Uuid::Generate();
  auto v1 = (*map)->RegisterEngine(OneTarget(engine));
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  auto v2 = (*map)->SetTargetState(engine, 0, rpc::TARGET_DOWN);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  // No change, no version, nothing published.
  ASSERT_TRUE((*map)->SetTargetState(engine, 0, rpc::TARGET_DOWN).ok());
  EXPECT_EQ(heard, (std::vector<uint64_t>{*v1, *v2}));
  EXPECT_EQ((*map)->known_version(), *v2);

  // A map read elsewhere (an etcd watch): newer is adopted, older ignored.
  rpc::PoolMap newer = (*map)->Snapshot();
  newer.set_version(*v2 + 5);
  (*map)->Observe(newer);
  rpc::PoolMap older = newer;
  older.set_version(*v2 + 1);
  (*map)->Observe(older);
  EXPECT_EQ(heard.back(), *v2 + 5);
  EXPECT_EQ(heard.size(), 3u);
  EXPECT_EQ((*map)->Snapshot().version(), *v2 + 5);
}

TEST(SystemMapPublishTest, WaitNewerWakesOnANewVersionAndOnStop) {
  ros2::testing::TempDir dir;
  auto store = StateStore::Open(dir.path() + "/db");
  ASSERT_TRUE(store.ok());
  auto map = SystemMap::Load(store->get());
  ASSERT_TRUE(map.ok());
  const uint64_t start = (*map)->known_version();
  // Nothing changes: the wait times out with the same version.
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ((*map)->WaitNewer(start, std::chrono::milliseconds(50)), start);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(45));

  std::atomic<uint64_t> woke{0};
  std::thread waiter([&] { woke = (*map)->WaitNewer(start, std::chrono::seconds(30)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto v = (*map)->RegisterEngine(OneTarget(Uuid::Generate()));
  ASSERT_TRUE(v.ok());
  waiter.join();
  EXPECT_EQ(woke.load(), *v);

  std::thread stopped([&] { (*map)->WaitNewer(*v, std::chrono::seconds(30)); });
  t0 = std::chrono::steady_clock::now();
  (*map)->StopWaiters();
  stopped.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_TRUE((*map)->stopped());
}

}  // namespace
}  // namespace ros2::control
