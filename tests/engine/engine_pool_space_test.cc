// Pool membership and pool size on the data plane, attacked by a hostile
// client built directly on the transport and the object protocol, against a
// real ros2-engine: a target outside the request's pool is refused (no shard
// is created there), a pool accepts exactly its size and then NoSpace with
// nothing half-written, other pools are unaffected, the engine keeps serving,
// and pool query reports what is used.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "control/management_client.h"
#include "engine_cluster.h"
#include "object_session.h"
#include "testing/engine_process.h"

namespace ros2::testing {
namespace {

using transport::TransportKind;

constexpr uint64_t kMiB = uint64_t{1} << 20;

template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pred();
}

TEST(EnginePoolSecurity, RequestsForATargetOutsideThePoolAreRefusedAndCreateNothing) {
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "tcp", .storage_class = "nvme", .targets = 2}));
  // "narrow" is pinned to the first target of the system map (target 0);
  // "wide" spans both, which gives the attacker an endpoint to target 1.
  auto narrow_pool = c.mgmt->CreatePool("narrow", 64 * kMiB, 1);
  ASSERT_TRUE(narrow_pool.ok()) << narrow_pool.status().ToString();
  ROS2_ASSERT_OK(c.mgmt->CreatePool("wide", 64 * kMiB));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("narrow", "c"));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("wide", "c"));
  auto narrow = ObjectSession::Open(c.engine->control(), c.admin, "narrow", "c", TransportKind::kTcp);
  auto wide = ObjectSession::Open(c.engine->control(), c.admin, "wide", "c", TransportKind::kTcp);
  ASSERT_TRUE(narrow.ok() && wide.ok()) << narrow.status().ToString() << wide.status().ToString();
  ASSERT_EQ((*narrow)->target_count(), 1u);
  ASSERT_EQ((*wide)->target_count(), 2u);
  const uint32_t outside = (*narrow)->map().targets[0].engine_index == 0 ? 1 : 0;
  uint32_t outside_global = 0;  // the wide session's index of that target
  for (uint32_t i = 0; i < (*wide)->target_count(); ++i) {
    if ((*wide)->map().targets[i].engine_index == outside) outside_global = i;
  }

  // The hostile update: narrow's container and its valid capability, sent to
  // a target of this engine that is not in narrow's map.
  const ObjectId oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kS1, 0, 7);
  const auto data = Pattern(64 << 10, 7);
  obj::UpdateRequest req;
  req.header = (*narrow)->Header(0);
  req.header.target = outside;
  req.oid = oid;
  req.dkey = "d";
  req.akey = "a";
  req.type = obj::ValueType::kArray;
  req.index = 0;
  req.record_size = 1;
  req.length = data.size();
  req.csum.type = ChecksumType::kCrc32c;
  req.csum.chunk_size = 4096;
  req.csum.values = ComputeChunkChecksums(ChecksumType::kCrc32c, data, 4096);
  const std::string wide_capability = (*wide)->capability;
  (*wide)->capability = (*narrow)->capability;
  // The connection proves narrow's session too, so the capability gets past
  // the session check to the pool membership check this test is about.
  ROS2_ASSERT_OK((*wide)->endpoint(outside_global).AuthenticateSession((*narrow)->session()));
  for (int attempt = 0; attempt < 3; ++attempt) {  // the refusal is not a one-off
    auto r = (*wide)->Call(outside_global, obj::Opcode::kUpdate, obj::Encode(req), data);
    ASSERT_FALSE(r.ok()) << "an update for pool narrow was accepted on target " << outside;
    EXPECT_EQ(r.status().code(), Status::Code::kPermissionDenied) << r.status().ToString();
    EXPECT_NE(r.status().message().find("is not a target of pool"), std::string::npos) << r.status().ToString();
  }
  // A fetch there is refused the same way.
  obj::FetchRequest f{req.header, oid, "d", "a", obj::ValueType::kArray, 0, data.size(), 1};
  std::vector<std::byte> buf(data.size());
  auto fetched = (*wide)->Call(outside_global, obj::Opcode::kFetch, obj::Encode(f), {}, buf);
  ASSERT_FALSE(fetched.ok());
  EXPECT_EQ(fetched.status().code(), Status::Code::kPermissionDenied) << fetched.status().ToString();
  // No shard of narrow was created on the outside target.
  const std::string pool_dir = c.dir.path() + "/engine0/targets/" + std::to_string(outside) + "/" + narrow_pool->uuid();
  EXPECT_FALSE(std::filesystem::exists(pool_dir)) << pool_dir << " was created by a request from outside the pool";

  // Other pools are unaffected and the engine keeps serving both.
  (*wide)->capability = wide_capability;
  const ObjectId wide_oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kSX, 0, 8);
  ROS2_ASSERT_OK((*wide)->UpdateArray(wide_oid, "d", "a", 0, data));
  auto back = (*wide)->FetchArray(wide_oid, "d", "a", 0, data.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->data, data);
  ROS2_ASSERT_OK((*narrow)->UpdateArray(oid, "d", "a", 0, data));
  auto narrow_back = (*narrow)->FetchArray(oid, "d", "a", 0, data.size());
  ASSERT_TRUE(narrow_back.ok()) << narrow_back.status().ToString();
  EXPECT_EQ(narrow_back->data, data);

  auto rc = c.engine->Terminate();
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(*rc, 0) << c.engine->LogTail();
}

TEST(EnginePoolSecurity, APoolTakesExactlyItsSizeThenNoSpaceAndOtherPoolsGoOn) {
  EngineCluster c;
  // Shards of 16 MiB each in the configuration: the old per-shard capacity,
  // 32 MiB over the two targets, which the pool's 8 MiB must override.
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "tcp", .storage_class = "nvme", .data_size = "16MiB", .targets = 2}));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("small", 8 * kMiB));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("other", 64 * kMiB));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("small", "a"));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("small", "b"));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("other", "c"));
  auto a = ObjectSession::Open(c.engine->control(), c.admin, "small", "a", TransportKind::kTcp);
  auto b = ObjectSession::Open(c.engine->control(), c.admin, "small", "b", TransportKind::kTcp);
  auto other = ObjectSession::Open(c.engine->control(), c.admin, "other", "c", TransportKind::kTcp);
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());

  // 1 MiB extents spread over both targets and both containers: the pool's
  // 8 MiB are shared by all of them, and the 9th MiB is refused.
  const ObjectId oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kSX, 0, 11);
  uint64_t written = 0;
  Status refused;
  for (int i = 0; i < 40 && refused.ok(); ++i) {
    ObjectSession& s = i % 2 == 0 ? **a : **b;
    auto r = s.UpdateArray(oid, "k" + std::to_string(i), "a", 0, Pattern(kMiB, static_cast<uint8_t>(i)));
    if (r.ok()) {
      written += kMiB;
    } else {
      refused = r.status();
    }
  }
  ASSERT_FALSE(refused.ok()) << "wrote " << written << " bytes into an 8 MiB pool";
  EXPECT_EQ(refused.code(), Status::Code::kNoSpace) << refused.ToString();
  EXPECT_NE(refused.message().find("out of space"), std::string::npos) << refused.ToString();
  EXPECT_EQ(written, 8 * kMiB) << "the pool did not take exactly its size";
  const int refused_key = static_cast<int>(written / kMiB);
  // Nothing of the refused update is visible; small values too are refused now.
  ObjectSession& last = refused_key % 2 == 0 ? **a : **b;
  auto absent = last.FetchArray(oid, "k" + std::to_string(refused_key), "a", 0, 4096);
  ASSERT_TRUE(absent.ok()) << absent.status().ToString();
  EXPECT_EQ(absent->data, std::vector<std::byte>(4096));
  auto tiny = (*a)->UpdateSingle(oid, "tiny", "a", Pattern(100, 1));
  EXPECT_EQ(tiny.status().code(), Status::Code::kNoSpace) << tiny.status().ToString();
  // What was written reads back.
  auto first = (*a)->FetchArray(oid, "k0", "a", 0, kMiB);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->data, Pattern(kMiB, 0));

  // pool query: all of it used, none free.
  auto info = c.mgmt->QueryPool("small");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->used_bytes(), 8 * kMiB);
  EXPECT_EQ(info->free_bytes(), 0u);

  // Another pool is unaffected.
  ROS2_ASSERT_OK((*other)->UpdateArray(oid, "k0", "a", 0, Pattern(kMiB, 99)));
  auto other_info = c.mgmt->QueryPool("other");
  ASSERT_TRUE(other_info.ok());
  EXPECT_EQ(other_info->used_bytes(), kMiB);
  EXPECT_EQ(other_info->free_bytes(), 63 * kMiB);

  // Punching a key gives its space back (aggregation, within seconds).
  auto t0 = (*a)->TargetOf(oid, "k0");
  ASSERT_TRUE(t0.ok());
  obj::PunchRequest punch{(*a)->Header(*t0), obj::PunchScope::kDkey, oid, "k0", ""};
  ROS2_ASSERT_OK((*a)->Call(*t0, obj::Opcode::kPunch, obj::Encode(punch)).status());
  EXPECT_TRUE(WaitFor([&] { return c.mgmt->QueryPool("small")->used_bytes() == 7 * kMiB; }, std::chrono::seconds(20)))
      << "used: " << c.mgmt->QueryPool("small")->used_bytes();
  ROS2_ASSERT_OK((*b)->UpdateArray(oid, "again", "a", 0, Pattern(kMiB, 50)));

  // After a restart the pool's usage is the same, so the limit still holds.
  auto rc = c.engine->Terminate();
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(*rc, 0) << c.engine->LogTail();
  auto restarted = EngineProcess::Start(
      {.data_dir = c.dir.path() + "/engine0", .transport = "tcp", .storage_class = "nvme", .targets = 2});
  ASSERT_TRUE(restarted.ok()) << restarted.status().ToString();
  c.engine = std::move(*restarted);
  ASSERT_NO_FATAL_FAILURE(c.Connect());
  auto after = c.mgmt->QueryPool("small");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->used_bytes(), 8 * kMiB) << "the pool's usage was not recovered at start";
  auto s = ObjectSession::Open(c.engine->control(), c.admin, "small", "a", TransportKind::kTcp);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto over = (*s)->UpdateArray(oid, "k100", "a", 0, Pattern(4096, 3));
  EXPECT_EQ(over.status().code(), Status::Code::kNoSpace) << over.status().ToString();
  rc = c.engine->Terminate();
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(*rc, 0) << c.engine->LogTail();
}

}  // namespace
}  // namespace ros2::testing
