// The engine's metrics endpoint against a real ros2-engine: the connections a
// client holds show under the transport they ride (and leave when it goes),
// failed enumerations (list, query) are counted as errors of their kind, and
// with ROS2_ENGINE_IO_STAGES=1 every fetch is timed through its stages.
#include <stdlib.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "engine_cluster.h"
#include "common/io_stages.h"
#include "metrics/scrape.h"
#include "object_session.h"
#include "testing/status_assert.h"

namespace ros2::testing {
namespace {

using transport::TransportKind;

// The sum of `name`'s samples whose labels include every pair of `match`.
double Sum(const std::vector<metrics::Sample>& samples, const std::string& name,
           const std::map<std::string, std::string>& match) {
  double total = 0;
  for (const auto& s : samples) {
    if (s.name != name) continue;
    bool all = true;
    for (const auto& [k, v] : match) all = all && s.Label(k) == v;
    if (all) total += s.value;
  }
  return total;
}

Result<std::vector<metrics::Sample>> Scrape(const std::string& endpoint) {
  ROS2_ASSIGN_OR_RETURN(std::string body, metrics::HttpGet(endpoint, "/metrics"));
  return metrics::ParseExposition(body);
}

void CheckConnectionsAndEnumerateErrors(const std::string& transport, TransportKind kind) {
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = transport, .targets = 2, .metrics_listen = "127.0.0.1:0"}));
  const std::string endpoint = c.engine->metrics();
  ASSERT_FALSE(endpoint.empty()) << "no metrics= in the engine's ready file";
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{8} << 20));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "c"));
  auto before = Scrape(endpoint);
  ROS2_ASSERT_OK(before);
  EXPECT_EQ(Sum(*before, "ros2_engine_connections", {}), 0);

  auto s = ObjectSession::Open(c.engine->control(), c.admin, "p", "c", kind);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ((*s)->target_count(), 2u);
  // One connection to each target, on the transport asked for and no other.
  const std::string other = transport == "shm" ? "tcp" : "shm";
  auto open = Scrape(endpoint);
  ROS2_ASSERT_OK(open);
  EXPECT_EQ(Sum(*open, "ros2_engine_connections", {{"transport", transport}}), 2);
  EXPECT_EQ(Sum(*open, "ros2_engine_connections", {{"transport", transport}, {"target", "0"}}), 1);
  EXPECT_EQ(Sum(*open, "ros2_engine_connections", {{"transport", other}}), 0);
  EXPECT_EQ(Sum(*open, "ros2_engine_connections", {{"transport", "rdma"}}), 0);

  // A list and a query the target cannot decode, and one misaddressed list:
  // three failed enumerations; a good list fails nothing.
  const std::vector<uint8_t> garbage = {1, 0, 0xde, 0xad, 0xbe, 0xef};
  EXPECT_FALSE((*s)->Call(0, obj::Opcode::kList, garbage).ok());
  EXPECT_FALSE((*s)->Call(0, obj::Opcode::kQuery, garbage).ok());
  obj::ListRequest list;
  list.header = (*s)->Header(0);
  list.kind = obj::ListKind::kObjects;
  list.max_entries = 16;
  auto good = (*s)->Call(0, obj::Opcode::kList, obj::Encode(list));
  EXPECT_TRUE(good.ok()) << good.status().ToString();
  list.header.target = 1;  // sent to target 0: a stale map
  EXPECT_FALSE((*s)->Call(0, obj::Opcode::kList, obj::Encode(list)).ok());
  auto after = Scrape(endpoint);
  ROS2_ASSERT_OK(after);
  const std::map<std::string, std::string> enumerate0{{"target", "0"}, {"kind", "enumerate"}};
  EXPECT_EQ(Sum(*after, "ros2_engine_op_errors_total", enumerate0), 3);
  EXPECT_EQ(Sum(*after, "ros2_engine_ops_total", enumerate0), 4);
  EXPECT_EQ(Sum(*after, "ros2_engine_refusals_total", {{"target", "0"}, {"reason", "stale_map"}}), 1);

  // The client goes: its connections leave the gauge.
  s->reset();
  double left = -1;
  for (int i = 0; i < 200 && left != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto now = Scrape(endpoint);
    ROS2_ASSERT_OK(now);
    left = Sum(*now, "ros2_engine_connections", {});
  }
  EXPECT_EQ(left, 0) << "connections still counted 10 s after the client closed them";
}

TEST(EngineMetrics, ConnectionsByTransportAndEnumerateErrorsOverTcp) {
  CheckConnectionsAndEnumerateErrors("tcp", TransportKind::kTcp);
}

TEST(EngineMetrics, ConnectionsByTransportAndEnumerateErrorsOverShm) {
  CheckConnectionsAndEnumerateErrors("shm", TransportKind::kShm);
}

// Fetches of 4 KiB extents from an nvme shard, with the stages on: each is
// counted once in every stage, the device stage included, and the device
// held I/O for some time; without the variable the families are absent.
void CheckStages(const std::string& transport, TransportKind kind) {
  ::setenv("ROS2_ENGINE_IO_STAGES", "1", 1);
  EngineCluster c;
  c.Start({.transport = transport, .storage_class = "nvme", .targets = 1, .metrics_listen = "127.0.0.1:0"});
  ::unsetenv("ROS2_ENGINE_IO_STAGES");
  ASSERT_NE(c.engine, nullptr);
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{64} << 20));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "c"));
  auto s = ObjectSession::Open(c.engine->control(), c.admin, "p", "c", kind);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const ObjectId oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kS1, 0, 7);
  const auto data = Pattern(4096, 3);
  constexpr int kFetches = 20;
  for (int i = 0; i < kFetches; ++i) ROS2_ASSERT_OK((*s)->UpdateArray(oid, "d", "a", uint64_t(i) * 4096, data));
  auto before = Scrape(c.engine->metrics());
  ROS2_ASSERT_OK(before);
  for (int i = 0; i < kFetches; ++i) {
    auto f = (*s)->FetchArray(oid, "d", "a", uint64_t(i) * 4096, 4096);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->data, data);
  }
  auto after = Scrape(c.engine->metrics());
  ROS2_ASSERT_OK(after);
  for (std::string_view stage : io_stages::kStageNames) {
    const std::map<std::string, std::string> m{{"stage", std::string(stage)}};
    EXPECT_EQ(Sum(*after, "ros2_engine_io_stage_reads_total", m) - Sum(*before, "ros2_engine_io_stage_reads_total", m),
              kFetches)
        << stage;
  }
  const std::map<std::string, std::string> total{{"stage", "total"}}, device{{"stage", "device"}};
  EXPECT_GT(Sum(*after, "ros2_engine_io_stage_seconds_total", device), 0);
  EXPECT_GE(Sum(*after, "ros2_engine_io_stage_seconds_total", total),
            Sum(*after, "ros2_engine_io_stage_seconds_total", device));
  EXPECT_GT(Sum(*after, "ros2_engine_device_inflight_seconds_total", {}), 0);
}

TEST(EngineMetrics, ReadStagesOverShm) {
  CheckStages("shm", TransportKind::kShm);
}

TEST(EngineMetrics, ReadStagesOverTcp) {
  CheckStages("tcp", TransportKind::kTcp);
}

TEST(EngineMetrics, NoStageFamiliesWithoutTheSwitch) {
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "tcp", .targets = 1, .metrics_listen = "127.0.0.1:0"}));
  auto body = metrics::HttpGet(c.engine->metrics(), "/metrics");
  ROS2_ASSERT_OK(body);
  EXPECT_EQ(body->find("ros2_engine_io_stage"), std::string::npos);
  EXPECT_NE(body->find("ros2_engine_connections"), std::string::npos);
}

}  // namespace
}  // namespace ros2::testing
