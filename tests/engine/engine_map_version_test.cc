// Pool map versions on the data plane (docs/cluster.md, "Map versions"),
// against a real ros2-engine: a request made with an older map than the
// engine's is refused with StaleMap naming both versions (in the message and
// in the reply's StaleMapReply), runs nothing, and counts as a `stale_map`
// refusal; after the client fetches the current map the same request is
// served; a request made with a newer map than the engine's is served, and the
// version it claims is not adopted (older-but-current requests still pass).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine_cluster.h"
#include "metrics/scrape.h"
#include "object_session.h"
#include "testing/pattern.h"
#include "testing/status_assert.h"

namespace ros2::testing {
namespace {

using transport::TransportKind;

double StaleMapRefusals(const std::string& endpoint) {
  auto total = metrics::ScrapeSum(endpoint, "ros2_engine_refusals_total", "reason", "stale_map");
  return total.ok() ? *total : -1;
}

obj::UpdateRequest SingleUpdate(ObjectSession& s, uint32_t target, const ObjectId& oid, const std::string& dkey,
                                std::span<const std::byte> data) {
  obj::UpdateRequest req;
  req.header = s.Header(target);
  req.oid = oid;
  req.dkey = dkey;
  req.akey = "a";
  req.type = obj::ValueType::kSingle;
  req.length = data.size();
  return req;
}

TEST(EngineMapVersion, OlderMapIsRefusedWithBothVersionsAndNewerIsServed) {
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "tcp", .targets = 2, .metrics_listen = "127.0.0.1:0"}));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{64} << 20));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "c"));
  auto s = ObjectSession::Open(c.engine->control(), c.admin, "p", "c", TransportKind::kTcp);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ObjectSession& session = **s;
  const uint64_t old_version = session.map().version;
  const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kSX, 5, 1);
  ROS2_ASSERT_OK(session.UpdateSingle(oid, "d", "a", Pattern(100, 1)));
  const double refusals_before = StaleMapRefusals(c.engine->metrics());
  ASSERT_GE(refusals_before, 0);

  // A map change the session does not hear of: target 1 drained and back up.
  auto engine = Uuid::Parse(c.engine->engine_id());
  ASSERT_TRUE(engine.ok());
  ROS2_ASSERT_OK(c.mgmt->SetTargetState(*engine, 1, rpc::TARGET_DRAIN));
  auto up = c.mgmt->SetTargetState(*engine, 1, rpc::TARGET_UP);
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  const uint64_t new_version = *up;
  ASSERT_GT(new_version, old_version);

  auto target = session.TargetOf(oid, "d");
  ASSERT_TRUE(target.ok());
  const auto data = Pattern(100, 2);
  obj::UpdateRequest req = SingleUpdate(session, *target, oid, "d", data);
  ASSERT_EQ(req.header.map_version, old_version);
  // The raw call carries no data: a refusal must come before the length check.
  auto refused = session.CallRaw(*target, obj::Opcode::kUpdate, obj::Encode(req));
  ASSERT_EQ(refused.status.code(), Status::Code::kStaleMap) << refused.status.ToString();
  const std::string& msg = refused.status.message();
  EXPECT_NE(msg.find("version " + std::to_string(old_version)), std::string::npos) << msg;
  EXPECT_NE(msg.find("version " + std::to_string(new_version)), std::string::npos) << msg;
  auto stale = obj::DecodeStaleMapReply(refused.payload);
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  EXPECT_EQ(stale->engine_version, new_version);
  EXPECT_EQ(stale->request_version, old_version);
  // Every kind of request is checked: a fetch and a list too.
  obj::FetchRequest fetch;
  fetch.header = session.Header(*target);
  fetch.oid = oid;
  fetch.dkey = "d";
  fetch.akey = "a";
  EXPECT_EQ(session.CallRaw(*target, obj::Opcode::kFetch, obj::Encode(fetch)).status.code(), Status::Code::kStaleMap);
  obj::ListRequest list;
  list.header = session.Header(*target);
  list.kind = obj::ListKind::kObjects;
  list.max_entries = 16;
  EXPECT_EQ(session.CallRaw(*target, obj::Opcode::kList, obj::Encode(list)).status.code(), Status::Code::kStaleMap);
  EXPECT_EQ(StaleMapRefusals(c.engine->metrics()) - refusals_before, 3);
  // Nothing ran: the value is the first one.
  {
    const uint64_t keep = session.map().version;
    session.set_map_version(new_version);
    auto read = session.FetchSingle(oid, "d", "a", 4096);
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    EXPECT_EQ(read->data, Pattern(100, 1));
    session.set_map_version(keep);
  }

  // The client refreshes and resends: served.
  auto refreshed = session.RefreshMapVersion();
  ASSERT_TRUE(refreshed.ok()) << refreshed.status().ToString();
  EXPECT_EQ(*refreshed, new_version);
  ROS2_ASSERT_OK(session.UpdateSingle(oid, "d", "a", data));

  // A newer version than the engine's is served and not adopted.
  session.set_map_version(new_version + 1000);
  ROS2_ASSERT_OK(session.UpdateSingle(oid, "d", "a", Pattern(100, 3)));
  session.set_map_version(new_version);
  auto read = session.FetchSingle(oid, "d", "a", 4096);
  ASSERT_TRUE(read.ok()) << "a client's claimed version was adopted: " << read.status().ToString();
  EXPECT_EQ(read->data, Pattern(100, 3));
}

}  // namespace
}  // namespace ros2::testing
