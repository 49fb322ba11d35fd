// Pool and container lifecycle across engines and restarts: a destroyed
// container's shards are never recreated (durable tombstones), an engine that
// joined another's management endpoint follows destructions and closed
// sessions made there, and shards open in the background (created with their
// container; requests for a shard still opening wait while the target serves
// the other containers).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "common/checksum.h"
#include "control/control_channel.h"
#include "control/management_client.h"
#include "control/session_client.h"
#include "engine_cluster.h"
#include "object_session.h"
#include "testing/engine_process.h"

namespace ros2::testing {
namespace {

using transport::TransportKind;

// Does any target of the engine in `engine_dir` hold a shard of `container`?
bool HasShardDir(const std::string& engine_dir, const std::string& pool, const std::string& container) {
  std::error_code ec;
  for (const auto& t : std::filesystem::directory_iterator(engine_dir + "/targets", ec)) {
    if (std::filesystem::exists(t.path() / pool / container)) return true;
  }
  return false;
}

// An update of `container` sent with `capability` through `session`'s endpoints
// (the session may belong to another container of the same pool).
Status UpdateWith(ObjectSession& session, uint32_t target, const Uuid& container, const std::string& capability,
                  const ObjectId& oid) {
  obj::UpdateRequest req;
  req.header = session.Header(target);
  req.header.container = container;
  req.oid = oid;
  req.dkey = "d";
  req.akey = "a";
  const auto data = Pattern(64, 7);
  req.length = data.size();
  const std::string saved = session.capability;
  session.capability = capability;
  auto reply = session.Call(target, obj::Opcode::kUpdate, obj::Encode(req), data);
  session.capability = saved;
  return reply.status();
}

template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

TEST(EngineLifecycle, DestroyedContainerStaysDestroyedAcrossRestart) {
  EngineCluster c;
  EngineOptions options{.transport = "tcp", .storage_class = "nvme", .targets = 1};
  ASSERT_NO_FATAL_FAILURE(c.Start(options));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{64} << 20));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "gone"));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "kept"));
  const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 1, 1);
  std::string pool_uuid, gone_uuid, gone_capability;
  transport::SessionCredential gone_session;
  {
    auto s = ObjectSession::Open(c.engine->control(), c.admin, "p", "gone", TransportKind::kTcp);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ROS2_ASSERT_OK((*s)->UpdateSingle(oid, "d", "a", Pattern(100, 1)));
    pool_uuid = (*s)->container().container.pool_uuid();
    gone_uuid = (*s)->container().container.uuid();
    gone_capability = (*s)->capability;
    gone_session = (*s)->session();
  }
  const std::string engine_dir = c.dir.path() + "/engine0";
  ASSERT_TRUE(HasShardDir(engine_dir, pool_uuid, gone_uuid));
  ASSERT_TRUE(c.mgmt->DestroyContainer("p", "gone").ok());
  ASSERT_TRUE(WaitFor([&] { return !HasShardDir(engine_dir, pool_uuid, gone_uuid); }, std::chrono::seconds(5)));

  c.engine->Kill();
  options.data_dir = engine_dir;
  auto restarted = EngineProcess::Start(options);
  ASSERT_TRUE(restarted.ok()) << restarted.status().ToString();
  c.engine = std::move(*restarted);
  ASSERT_NO_FATAL_FAILURE(c.Connect());

  // The old capability is still unexpired and correctly signed; the tombstone
  // alone must stop it from recreating the destroyed container's shard.
  auto kept = ObjectSession::Open(c.engine->control(), c.admin, "p", "kept", TransportKind::kTcp);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  // The connection proves the old session too, so the capability gets past
  // the session check to the tombstone.
  ROS2_ASSERT_OK((*kept)->endpoint(0).AuthenticateSession(gone_session));
  Status st = UpdateWith(**kept, 0, *Uuid::Parse(gone_uuid), gone_capability, oid);
  EXPECT_EQ(st.code(), Status::Code::kNotFound) << st.ToString();
  EXPECT_FALSE(HasShardDir(engine_dir, pool_uuid, gone_uuid)) << "a destroyed container's shard was recreated";
  ROS2_ASSERT_OK((*kept)->UpdateSingle(oid, "d", "a", Pattern(100, 2)));  // the pool's other container still works
  auto rc = c.engine->Terminate();
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(*rc, 0) << c.engine->LogTail();
}

// A request for a container whose shard is still being opened; reports its
// reply through `done` / `status`.
struct PendingUpdate {
  bool done = false;
  Status status;
  std::vector<std::byte> data;
};

Status StartUpdate(ObjectSession& session, const Uuid& container, const std::string& capability, const ObjectId& oid,
                   uint8_t seed, PendingUpdate* out) {
  obj::UpdateRequest req;
  req.header = session.Header(0);
  req.header.container = container;
  req.oid = oid;
  req.dkey = "d";
  req.akey = "a";
  req.type = obj::ValueType::kSingle;
  out->data = Pattern(64, seed);
  req.length = out->data.size();
  req.csum.type = ChecksumType::kCrc32c;
  req.csum.chunk_size = 4096;
  req.csum.values = ComputeChunkChecksums(ChecksumType::kCrc32c, out->data, 4096);
  transport::CallOptions options;
  options.timeout = std::chrono::seconds(20);
  options.capability = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(capability.data()), capability.size());
  options.bulk_out = out->data;
  return session.endpoint(0).Call(static_cast<uint16_t>(obj::Opcode::kUpdate), obj::Encode(req), options,
                                  [out](const transport::ReplyView& reply) {
                                    out->status = reply.status;
                                    out->done = true;
                                  });
}

// Starts `c` with one nvme target over tcp whose container shards are
// `shard_size` each, creates pool "p" of `pool_bytes` and container `label`,
// and opens a session on that container into `*session`.
void StartWithContainer(EngineCluster& c, const std::string& shard_size, uint64_t pool_bytes, const std::string& label,
                        std::unique_ptr<ObjectSession>* session) {
  ASSERT_NO_FATAL_FAILURE(
      c.Start({.transport = "tcp", .storage_class = "nvme", .data_size = shard_size, .targets = 1}));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", pool_bytes));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", label));
  auto s = ObjectSession::Open(c.engine->control(), c.admin, "p", label, TransportKind::kTcp);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  *session = std::move(*s);
}

TEST(EngineLifecycle, ShardsOpenInTheBackgroundWhileOtherContainersAreServed) {
  EngineCluster c;
  // nvme shards: creating one (RocksDB, the data file) takes milliseconds to
  // tens of milliseconds, against well under one for an RPC.
  std::unique_ptr<ObjectSession> a;
  ASSERT_NO_FATAL_FAILURE(StartWithContainer(c, "1GiB", uint64_t{8} << 30, "a", &a));
  const std::string engine_dir = c.dir.path() + "/engine0";
  const std::string pool_uuid = a->container().container.pool_uuid();
  // Created with the container, before any I/O named it.
  EXPECT_TRUE(WaitFor([&] { return HasShardDir(engine_dir, pool_uuid, a->container().container.uuid()); },
                      std::chrono::seconds(10)));
  const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 3, 1);
  ROS2_ASSERT_OK(a->UpdateSingle(oid, "d", "a", Pattern(100, 1)));  // waits for a's shard if need be

  // Container b: its shard starts opening at creation. Updates for it sent at
  // once wait for the open; a's requests, sent after them on the same
  // connection, are answered first.
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "b"));
  auto channel = control::MakeControlChannel({.address = c.engine->control()});
  ASSERT_TRUE(channel.ok());
  control::SessionClient sessions(*channel);
  auto b = sessions.OpenContainer(c.admin, a->pool().session_uuid, "b");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const Uuid b_uuid = *Uuid::Parse(b->container.uuid());
  constexpr int kParked = 4;
  std::vector<PendingUpdate> pending(kParked);
  for (int i = 0; i < kParked; ++i) {
    ROS2_ASSERT_OK(StartUpdate(*a, b_uuid, b->capability, oid, static_cast<uint8_t>(10 + i), &pending[i]));
  }
  // a's first reply comes while b's shard is still opening: not every one of
  // b's parked updates (sent earlier on the same connection) is answered yet.
  // (Only the first: a shard open takes tens of milliseconds, one round trip
  // well under one, but a loaded machine can stretch several round trips
  // past the open.)
  int answered_before_a = 0;
  for (int i = 0; i < 3; ++i) {
    ROS2_ASSERT_OK(a->UpdateSingle(oid, "d", "a", Pattern(100, static_cast<uint8_t>(2 + i))));
    if (i == 0) {
      for (const auto& p : pending) answered_before_a += p.done ? 1 : 0;
    }
    auto got = a->FetchSingle(oid, "d", "a", 100);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->data, Pattern(100, static_cast<uint8_t>(2 + i)));
  }
  EXPECT_LT(answered_before_a, kParked) << "container a's request waited for container b's shard to open";

  // b's parked updates all succeed, in the order they were sent.
  ROS2_ASSERT_OK(a->worker().RunUntil(
      [&] { return std::all_of(pending.begin(), pending.end(), [](const PendingUpdate& p) { return p.done; }); },
      std::chrono::seconds(30)));
  for (const auto& p : pending) EXPECT_TRUE(p.status.ok()) << p.status.ToString();
  auto b_session = ObjectSession::Open(c.engine->control(), c.admin, "p", "b", TransportKind::kTcp);
  ASSERT_TRUE(b_session.ok()) << b_session.status().ToString();
  auto got = (*b_session)->FetchSingle(oid, "d", "a", 64);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->data, Pattern(64, 10 + kParked - 1)) << "the parked updates were applied out of order";

  // A container destroyed while its shard is still opening leaves nothing
  // behind once the open finishes.
  auto brief = c.mgmt->CreateContainer("p", "brief");
  ASSERT_TRUE(brief.ok()) << brief.status().ToString();
  ASSERT_TRUE(c.mgmt->DestroyContainer("p", "brief").ok());
  EXPECT_TRUE(WaitFor([&] { return !HasShardDir(engine_dir, pool_uuid, brief->uuid()); }, std::chrono::seconds(20)))
      << "the shard of a container destroyed while it opened was left on disk";

  // A pool destroyed right after a container was created in it (its shard
  // still opening) leaves no directory on the target once that open finishes.
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "late"));
  ROS2_ASSERT_OK(c.mgmt->DestroyPool("p", /*force=*/true));
  EXPECT_TRUE(WaitFor([&] { return !std::filesystem::exists(engine_dir + "/targets/0/" + pool_uuid); },
                      std::chrono::seconds(20)))
      << "the destroyed pool's directory was left on disk";

  // SIGTERM while a shard opens: a clean exit.
  ROS2_ASSERT_OK(c.mgmt->CreatePool("q", uint64_t{8} << 30));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("q", "last"));
  auto rc = c.engine->Terminate();
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(*rc, 0) << c.engine->LogTail();
}

TEST(EngineLifecycle, ShardsAreNotPreallocatedWhateverTheConfiguredDataSize) {
  EngineCluster c;
  // vos.data_size no longer sizes shards (the pool's size bounds them): a
  // configuration asking for shards larger than any disk here still works,
  // and a shard's data file holds what was written, not a preallocation.
  std::unique_ptr<ObjectSession> s;
  ASSERT_NO_FATAL_FAILURE(StartWithContainer(c, "1024TiB", uint64_t{1} << 30, "big", &s));
  const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 4, 1);
  ROS2_ASSERT_OK(s->UpdateSingle(oid, "d", "a", Pattern(1 << 20, 1)));
  const std::string shard = c.dir.path() + "/engine0/targets/0/" + s->container().container.pool_uuid() + "/" +
                            s->container().container.uuid();
  std::error_code ec;
  const auto size = std::filesystem::file_size(shard + "/data", ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_GE(size, uint64_t{1} << 20);
  EXPECT_LE(size, uint64_t{8} << 20) << "the data file was preallocated";
  auto rc = c.engine->Terminate();
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(*rc, 0) << c.engine->LogTail();
}

TEST(EngineLifecycle, JoinedEngineFollowsDestructionsAndClosedSessions) {
  EngineCluster c;
  // nvme shards, so the test can watch their directories come and go.
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "tcp", .storage_class = "nvme", .targets = 1}));
  EngineOptions second;
  second.storage_class = "nvme";
  second.data_dir = c.dir.path() + "/engine1";
  second.transport = "tcp";
  second.targets = 1;
  second.join = c.engine->control();
  second.join_secret_file = c.engine->admin_secret_file();
  second.sync_interval = "200ms";
  auto e1 = EngineProcess::Start(second);
  ASSERT_TRUE(e1.ok()) << e1.status().ToString();
  const std::string joined_engine = (*e1)->engine_id();

  ROS2_ASSERT_OK(c.mgmt->CreatePool("wide", uint64_t{8} << 20));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("wide", "c1"));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("wide", "c2"));

  // Finds an object of `s` placed on the joined engine.
  auto object_on_joined = [&](ObjectSession& s, uint32_t* target) {
    for (uint64_t i = 0; i < 64; ++i) {
      const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 2, i);
      auto t = s.TargetOf(oid, "d");
      if (t.ok() && s.engine_of(*t) == joined_engine) {
        *target = *t;
        return oid;
      }
    }
    ADD_FAILURE() << "no object of 64 placed on the joined engine";
    return ObjectId{};
  };

  // 1. A container destroyed at the management endpoint disappears from the
  //    joined engine, and its capability stops working there.
  auto s1 = ObjectSession::Open(c.engine->control(), c.admin, "wide", "c1", TransportKind::kTcp);
  ASSERT_TRUE(s1.ok()) << s1.status().ToString();
  uint32_t target = 0;
  const ObjectId oid1 = object_on_joined(**s1, &target);
  ROS2_ASSERT_OK((*s1)->UpdateSingle(oid1, "d", "a", Pattern(100, 1)));
  const std::string pool_uuid = (*s1)->container().container.pool_uuid();
  const std::string c1_uuid = (*s1)->container().container.uuid();
  ASSERT_TRUE(HasShardDir(second.data_dir, pool_uuid, c1_uuid));
  ASSERT_TRUE(c.mgmt->DestroyContainer("wide", "c1").ok());
  EXPECT_TRUE(WaitFor([&] { return !HasShardDir(second.data_dir, pool_uuid, c1_uuid); }, std::chrono::seconds(10)))
      << "the joined engine kept the destroyed container's shard";
  EXPECT_FALSE((*s1)->UpdateSingle(oid1, "d", "a", Pattern(100, 2)).ok());
  EXPECT_FALSE(HasShardDir(second.data_dir, pool_uuid, c1_uuid));

  // 2. A session closed at the management endpoint is refused by the joined
  //    engine once it synced the revocation.
  auto s2 = ObjectSession::Open(c.engine->control(), c.admin, "wide", "c2", TransportKind::kTcp);
  ASSERT_TRUE(s2.ok()) << s2.status().ToString();
  const ObjectId oid2 = object_on_joined(**s2, &target);
  ROS2_ASSERT_OK((*s2)->UpdateSingle(oid2, "d", "a", Pattern(100, 3)));
  auto channel = control::MakeControlChannel({.address = c.engine->control()});
  ASSERT_TRUE(channel.ok());
  control::SessionClient sessions(*channel);
  ASSERT_TRUE(sessions.Disconnect(c.admin, (*s2)->pool().session_uuid).ok());
  Status last;
  EXPECT_TRUE(WaitFor(
      [&] {
        last = (*s2)->UpdateSingle(oid2, "d", "a", Pattern(100, 4)).status();
        return !last.ok();
      },
      std::chrono::seconds(10)))
      << "the joined engine still accepts a closed session's capability";
  EXPECT_EQ(last.code(), Status::Code::kUnauthenticated) << last.ToString();

  auto rc = (*e1)->Terminate();
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(*rc, 0) << (*e1)->LogTail();
}

}  // namespace
}  // namespace ros2::testing
