// Rebuild of replicated objects across real engines (docs/replication.md,
// "Rebuild"), label `replication`: one etcd member and three ros2-engine
// processes sharing their management state in it, libros2 clients on the
// data plane.
//
// - RP_2GX values (single values in RocksDB and in extents) and a DFS file
//   (array extents) written; one engine killed -9, more values written and
//   some overwritten in degraded mode; rebuild starts by itself, reports done
//   with objects and bytes, the map marks the dead engine's targets DOWNOUT
//   with a higher version. Then the dead engine is restarted (its targets
//   stay DOWNOUT) and reintegrated: REINT while it catches up (written at
//   once, not read), then UP, and the fallback copies' space is given back
//   (the other engines' pool use comes down by most of what the rebuild
//   copied). Then a second engine (one of the two originals of many groups)
//   is drained: it serves while its copies move, then it is DOWNOUT, and it
//   is killed -9. Every acknowledged write and the file read back byte-exact
//   at every step and throughout each move; the last reads come from the
//   reintegrated engine and the client's.
// - While a rebuild runs, an exclude of the same pool is refused naming the
//   rebuild.
// - ClusterRebuild.Pull refuses a caller without the cluster key (a client
//   on the engine's control socket), a request signed with another key, and
//   the replay of a genuine one; the genuine one is answered.
//
// The cluster set-up is the one of replication_test.cc, copied in small (the
// shared harness for etcd + engines is not in src/testing yet).
#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <utility>

#include "control/control_channel.h"
#include "control/crypto.h"
#include "control/management_client.h"
#include "engine/rebuild_service.h"
#include "ros2/client.h"
#include "ros2/dfs.h"
#include "testing/engine_process.h"
#include "testing/etcd_cluster.h"
#include "testing/pattern.h"
#include "testing/status_assert.h"

#include "object_session.h"

namespace ros2::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTtlSeconds = 3;

// The shared etcd cluster, with each engine's member uuid and a client with
// the timeouts this test's kills need.
struct RebuildCluster : EtcdEngineCluster {
  std::vector<std::string> uuids;

  void Start(int engine_count, uint32_t targets, const std::string& rebuild) {
    ROS2_ASSERT_OK(EtcdEngineCluster::Start({.engines = engine_count,
                                             .targets = targets,
                                             .storage_class = "nvme",
                                             .data_size = "64MiB",
                                             .lease_ttl = std::chrono::seconds(kTtlSeconds),
                                             .rebuild = rebuild}));
    this->targets = targets;
    auto st = Mgmt(0)->GetEngineStatus();
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    // Engine i's uuid: the member whose control endpoint is engine i's.
    for (auto& engine : engines) {
      std::string uuid;
      for (const auto& m : st->members()) {
        if (m.endpoint() == engine->control()) uuid = m.engine_uuid();
      }
      ASSERT_FALSE(uuid.empty()) << "no member for " << engine->control();
      uuids.push_back(uuid);
    }
  }

  Result<std::unique_ptr<client::Client>> Client(size_t i) {
    client::ClientOptions o = ClientOptionsFor(i);
    o.reconnect_timeout = std::chrono::seconds(30);
    o.io_timeout = std::chrono::seconds(10);
    return client::Client::Connect(o);
  }

  // The states of engine `e`'s targets as engine `ask` sees the system map.
  std::vector<rpc::TargetState> TargetStates(size_t ask, size_t e, uint64_t* version = nullptr) {
    std::vector<rpc::TargetState> out;
    auto st = Mgmt(ask)->GetEngineStatus();
    if (!st.ok()) return out;
    if (version != nullptr) *version = st->map_version();
    for (const auto& t : st->targets()) {
      if (t.engine_uuid() == uuids[e]) out.push_back(t.state());
    }
    return out;
  }

  // The pool's space used on engine e (pool query answers for its own engine).
  uint64_t UsedBytes(size_t e) {
    auto q = Mgmt(e)->QueryPool("p");
    return q.ok() ? q->used_bytes() : 0;
  }

  // Sets every target of engine `e` to `state` in pool "p", as `ros2ctl pool
  // exclude|drain|reintegrate` does.
  Status SetStates(size_t ask, size_t e, rpc::TargetState state) {
    auto id = Uuid::Parse(uuids[e]);
    if (!id.ok()) return id.status();
    for (uint32_t t = 0; t < targets; ++t) {
      auto v = Mgmt(ask)->SetTargetState(*id, t, state, "p");
      if (!v.ok()) return v.status();
    }
    return Status::Ok();
  }

  uint32_t targets = 0;
};

struct Written {
  client::Object* object;
  std::string dkey;
  uint64_t seed;
  size_t size;
};

std::span<const std::byte> Bytes(const std::vector<std::byte>& v) {
  return {v.data(), v.size()};
}

bool All(const std::vector<rpc::TargetState>& states, rpc::TargetState s) {
  if (states.empty()) return false;
  for (auto x : states) {
    if (x != s) return false;
  }
  return true;
}

// The three engines' roles in RebuildThenSecondKill...: the client's, the
// one killed and rebuilt, the one drained.
struct Roles {
  size_t home, victim, second;
};

// After the victim's rebuild (`r`): it is restarted and reintegrated (REINT,
// caught up, UP; the fallback copies' space given back), then the second
// engine is drained (its copies moved, DOWNOUT) and killed -9. Every
// acknowledged write is checked (`check_all`) at each step and while the
// moves run; `write_round` adds writes during each move.
void ReintegrateThenDrain(RebuildCluster& c, Roles e, const rpc::RebuildStatus& r,
                          const std::function<void(int, int)>& write_round,
                          const std::function<void(const char*)>& check_all) {
  // Polls until `done` (or 30 s), checking every acknowledged write each round.
  auto follow = [&](const char* when, const std::function<bool()>& done) {
    const auto start = Clock::now();
    while (!done() && MsSince(start) < 30'000) ASSERT_NO_FATAL_FAILURE(check_all(when));
    ASSERT_TRUE(done()) << when << ": not done after 30 s";
  };
  auto job_done = [&](uint64_t after_ms) {
    auto q = c.Mgmt(e.home)->QueryPool("p");
    return q.ok() && q->rebuild().started_ms() > after_ms && q->rebuild().state() == "done";
  };

  // Reintegrate. The victim comes back: its targets stay DOWNOUT (it missed
  // writes). `pool reintegrate` makes them REINT: written at once, caught up
  // from the current copies, then UP; the fallback copies are then dropped
  // and their space comes back.
  const uint64_t last_job = r.started_ms();
  const uint64_t used_rebuilt = c.UsedBytes(e.home) + c.UsedBytes(e.second);
  ROS2_ASSERT_OK(c.Restart(e.victim));
  EXPECT_TRUE(All(c.TargetStates(e.home, e.victim), rpc::TARGET_DOWNOUT))
      << "a restarted engine's DOWNOUT targets stay out";
  const auto reint = Clock::now();
  ROS2_ASSERT_OK(c.SetStates(e.home, e.victim, rpc::TARGET_UP));
  const auto reint_states = c.TargetStates(e.home, e.victim);
  EXPECT_TRUE(All(reint_states, rpc::TARGET_REINT) || All(reint_states, rpc::TARGET_UP));
  ASSERT_NO_FATAL_FAILURE(write_round(160, 200));  // written to the victim at once, and to the fallbacks
  ASSERT_NO_FATAL_FAILURE(check_all("while the victim catches up"));
  ASSERT_NO_FATAL_FAILURE(follow("while the victim catches up", [&] {
    return job_done(last_job) && All(c.TargetStates(e.home, e.victim), rpc::TARGET_UP);
  }));
  const long long reint_ms = MsSince(reint);
  auto q = c.Mgmt(e.home)->QueryPool("p");
  ASSERT_TRUE(q.ok());
  const rpc::RebuildStatus reint_job = q->rebuild();
  // The fallback copies go: home's and second's use of the pool comes down by
  // most of what the rebuild copied.
  uint64_t used_after = used_rebuilt;
  const auto reclaim = Clock::now();
  while (MsSince(reclaim) < 15'000) {
    used_after = c.UsedBytes(e.home) + c.UsedBytes(e.second);
    if (used_after + r.bytes_done() / 2 <= used_rebuilt) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::printf(
      "reintegrate: REINT -> caught up and UP in %lld ms (%llu bytes pulled); fallback space given back in %lld ms: "
      "home + second used %llu -> %llu bytes (the rebuild copied %llu)\n",
      reint_ms, static_cast<unsigned long long>(reint_job.bytes_done()), MsSince(reclaim),
      static_cast<unsigned long long>(used_rebuilt), static_cast<unsigned long long>(used_after),
      static_cast<unsigned long long>(r.bytes_done()));
  EXPECT_GT(reint_job.bytes_done(), r.bytes_done() / 2) << "the victim pulled its copies back";
  EXPECT_LE(used_after + r.bytes_done() / 2, used_rebuilt) << "the fallback copies' space was not given back";

  // Drain the second engine: it serves while its copies move to the others,
  // then it is out (DOWNOUT); reads go on throughout.
  const auto drain = Clock::now();
  const uint64_t reint_job_ms = reint_job.started_ms();
  ROS2_ASSERT_OK(c.SetStates(e.home, e.second, rpc::TARGET_DRAIN));
  ASSERT_NO_FATAL_FAILURE(write_round(200, 220));  // to the draining engine and to where its copies go
  ASSERT_NO_FATAL_FAILURE(follow("while the second engine drains", [&] {
    return job_done(reint_job_ms) && All(c.TargetStates(e.home, e.second), rpc::TARGET_DOWNOUT);
  }));
  std::printf("drain: DRAIN -> data moved and DOWNOUT in %lld ms\n", MsSince(drain));

  // The drained engine killed -9: every acknowledged write and the file read
  // back from the reintegrated victim and home.
  const auto killed2 = Clock::now();
  c.Kill(e.second);
  ASSERT_NO_FATAL_FAILURE(check_all("after the drained engine's kill"));
  std::printf("drain: the drained engine killed -9 -> every write read back %lld ms after\n", MsSince(killed2));
}

TEST(RebuildTest, RebuildThenSecondKillLosesNoAcknowledgedWrite) {
  RebuildCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start(3, 2, "{ delay: 1s, client_share: 50 }"));
  auto mgmt = c.Mgmt(0);
  ASSERT_TRUE(mgmt->CreatePool("p", 1ull << 30).ok());
  ASSERT_TRUE(mgmt->CreateContainer("p", "rp2", {{"oclass", "RP_2GX"}, {"rd_fac", "1"}}).ok());
  const int leader = c.LeaderIndex(0);
  ASSERT_GE(leader, 0);
  const size_t home = leader == 0 ? 1 : 0;  // the client's control plane stays
  size_t victim = 0;
  while (victim == home || static_cast<int>(victim) == leader) ++victim;
  const size_t second = 3 - home - victim;  // killed after the rebuild

  auto cl = c.Client(home);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto pool = (*cl)->ConnectPool("p");
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto cont = (*pool)->OpenContainer("rp2");
  ASSERT_TRUE(cont.ok()) << cont.status().ToString();
  std::vector<std::unique_ptr<client::Object>> objects;
  for (uint64_t i = 0; i < 8; ++i) {
    auto o = (*cont)->OpenObject(client::Container::MakeObjectId(ObjectClass::kRP2GX, 0, 300 + i));
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    objects.push_back(std::make_unique<client::Object>(std::move(*o)));
  }
  std::vector<Written> acked;
  auto write_round = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      client::Object* o = objects[i % objects.size()].get();
      const std::string dkey = "k" + std::to_string(i);
      const size_t size = i % 3 == 0 ? 1000 : 12 * 1024;  // RocksDB, extents
      Status st = o->Put(dkey, "a", Bytes(Pattern(size, 5000 + i)));
      ASSERT_TRUE(st.ok()) << "write " << i << ": " << st.ToString();
      acked.push_back({o, dkey, static_cast<uint64_t>(5000 + i), size});
    }
  };
  ASSERT_NO_FATAL_FAILURE(write_round(0, 120));
  // Overwrites: the copy must hold the newest value, not an older one.
  for (int i = 0; i < 10; ++i) {
    Written& w = acked[i];
    ROS2_ASSERT_OK(w.object->Put(w.dkey, "a", Bytes(Pattern(w.size, 9000 + i))));
    w.seed = 9000 + i;
  }
  auto fs = dfs::Filesystem::Mount(**cont);
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  auto file = (*fs)->Open((*fs)->Root(), "f", O_CREAT | O_RDWR);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const auto file_data = Pattern(6 << 20, 91);  // six 1 MiB chunks (dkeys), array extents
  auto wrote = (*fs)->Write(*file, 0, Bytes(file_data));
  ASSERT_TRUE(wrote.ok()) << wrote.status().ToString();

  uint64_t version_up = 0;
  ASSERT_TRUE(All(c.TargetStates(home, victim, &version_up), rpc::TARGET_UP));
  const auto killed = Clock::now();
  c.Kill(victim);
  ASSERT_NO_FATAL_FAILURE(write_round(120, 160));  // degraded: survivors and fallbacks
  // Overwrites while the victim is out: once back it must not serve its old values.
  for (int i = 10; i < 20; ++i) {
    Written& w = acked[i];
    ROS2_ASSERT_OK(w.object->Put(w.dkey, "a", Bytes(Pattern(w.size, 9000 + i))));
    w.seed = 9000 + i;
  }
  std::printf("rebuild: engine kill -9 -> 40 degraded writes acknowledged after %lld ms\n", MsSince(killed));

  // Rebuild starts by itself (delay 1 s after DOWN) and reports done. While
  // it runs, an exclude of the same pool is refused naming the rebuild.
  rpc::PoolInfo info;
  bool saw_busy = false, refused = false;
  long long down_ms = -1;
  while (MsSince(killed) < 90'000) {
    if (down_ms < 0 && All(c.TargetStates(home, victim), rpc::TARGET_DOWN)) down_ms = MsSince(killed);
    auto q = mgmt->QueryPool("p");
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    info = *q;
    if (info.rebuild().state() == "busy" && !saw_busy) {
      saw_busy = true;
      auto ex = mgmt->SetTargetState(*Uuid::Parse(c.uuids[home]), 0, rpc::TARGET_DOWN, "p");
      if (ex.ok()) {
        ADD_FAILURE() << "an exclude was accepted while the pool rebuilt";
      } else {
        EXPECT_TRUE(ex.status().code() == Status::Code::kBusy) << ex.status().ToString();
        EXPECT_NE(ex.status().message().find("rebuild"), std::string::npos) << ex.status().ToString();
        refused = true;
      }
    }
    if (info.rebuild().state() == "done" || info.rebuild().state() == "failed") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const rpc::RebuildStatus& r = info.rebuild();
  ASSERT_EQ(r.state(), "done") << "rebuild " << r.state() << ": " << r.error();
  const long long done_ms = MsSince(killed);
  std::printf(
      "rebuild: DOWN after %lld ms; rebuild done %lld ms after the kill, took %llu ms: %llu of %llu objects, "
      "%llu of %llu bytes, %.1f MiB/s; exclude while busy %s\n",
      down_ms, done_ms, static_cast<unsigned long long>(r.finished_ms() - r.started_ms()),
      static_cast<unsigned long long>(r.objects_done()), static_cast<unsigned long long>(r.objects_total()),
      static_cast<unsigned long long>(r.bytes_done()), static_cast<unsigned long long>(r.bytes_total()),
      r.bytes_per_second() / (1 << 20), saw_busy ? (refused ? "refused" : "accepted") : "not seen (too fast)");
  EXPECT_GT(r.objects_done(), 0u);
  EXPECT_GT(r.bytes_done(), 0u);
  // Writes that land between the count and the copy are copied too.
  EXPECT_GE(r.bytes_done(), r.bytes_total());
  EXPECT_GT(r.bytes_total(), 1u << 20) << "about two thirds of the file and the values had a copy on the victim";
  EXPECT_EQ(r.engines_done(), r.engines_total());
  uint64_t version_out = 0;
  EXPECT_TRUE(All(c.TargetStates(home, victim, &version_out), rpc::TARGET_DOWNOUT));
  EXPECT_GT(version_out, version_up + 1) << "UP -> DOWN -> DOWNOUT: two map changes at least";
  // The home engine's targets were never excluded (the refusal changed nothing).
  EXPECT_TRUE(All(c.TargetStates(home, home), rpc::TARGET_UP));

  // Every acknowledged write and the file read back byte-exact.
  std::vector<std::byte> back(file_data.size());
  auto check_all = [&](const char* when) {
    for (const Written& w : acked) {
      auto got = w.object->Get(w.dkey, "a", 16 * 1024);
      ASSERT_TRUE(got.ok()) << "read " << w.dkey << " " << when << ": " << got.status().ToString();
      ASSERT_EQ(*got, Pattern(w.size, w.seed)) << "acknowledged write " << w.dkey << " read back different " << when;
    }
    auto read = (*fs)->Read(*file, 0, back);
    ASSERT_TRUE(read.ok()) << "the file " << when << ": " << read.status().ToString();
    ASSERT_EQ(*read, file_data.size()) << when;
    ASSERT_TRUE(back == file_data) << "the DFS file reads back different " << when;
  };
  ASSERT_NO_FATAL_FAILURE(ReintegrateThenDrain(c, {home, victim, second}, r, write_round, check_all));
  std::printf("drain: %zu values and a %zu-byte file checked at every step\n", acked.size(), file_data.size());
}

// A pull as an engine makes it, and as a client or an attacker could.
grpc::Status CallPull(const std::string& address, const rpc::RebuildPullRequest& req, rpc::RebuildPullResponse* resp) {
  auto channel = control::MakeControlChannel({.address = address});
  EXPECT_TRUE(channel.ok());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return rpc::ClusterRebuild::NewStub(*channel)->Pull(&ctx, req, resp);
}

TEST(RebuildTest, PullRefusesClientsForgeriesAndReplays) {
  RebuildCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start(2, 1, ""));
  auto mgmt = c.Mgmt(0);
  auto pool = mgmt->CreatePool("p", 256 << 20);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto map = c.Mgmt(0)->GetEngineStatus();
  ASSERT_TRUE(map.ok());
  rpc::RebuildPullBody body;
  body.set_pool_uuid(pool->uuid());
  body.set_requester_engine(c.uuids[1]);
  body.set_max_bytes(1 << 20);
  body.set_count_only(true);
  rpc::PoolMap* m = body.mutable_map();
  m->set_version(map->map_version());
  *m->mutable_engines() = map->engines();
  *m->mutable_targets() = map->targets();
  const std::string address = c.engines[0]->control();

  // A client: no cluster key, so no MAC (or a made-up one).
  rpc::RebuildPullRequest unsigned_req;
  unsigned_req.set_body(body.SerializeAsString());
  unsigned_req.set_mac(std::string(32, 'x'));
  rpc::RebuildPullResponse resp;
  grpc::Status st = CallPull(address, unsigned_req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  EXPECT_NE(st.error_message().find("MAC"), std::string::npos) << st.error_message();
  EXPECT_TRUE(resp.body().empty());

  // Signed with another key: refused the same way.
  control::Aes256Key other{};
  other.fill(7);
  auto other_key = engine::RebuildPullKey(other);
  ASSERT_TRUE(other_key.ok());
  engine::RebuildPeers forger(std::move(*other_key), "");
  rpc::RebuildPullBody forged_body = body;
  auto forged = forger.Sign(&forged_body);
  ASSERT_TRUE(forged.ok());
  st = CallPull(address, *forged, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();

  // An engine's request (the cluster key): answered, with a MAC the puller checks; its replay is refused.
  auto key_text = control::ReadSecretFile(c.dir.path() + "/keys/cluster.key");
  ASSERT_TRUE(key_text.ok()) << key_text.status().ToString();
  auto cluster_key = control::ParseAes256KeyHex(*key_text);
  ASSERT_TRUE(cluster_key.ok()) << cluster_key.status().ToString();
  auto key = engine::RebuildPullKey(*cluster_key);
  ASSERT_TRUE(key.ok());
  engine::RebuildPeers engine_side(std::move(*key), "");
  auto genuine = engine_side.Sign(&body);
  ASSERT_TRUE(genuine.ok());
  st = CallPull(address, *genuine, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.mac().size(), 32u);
  rpc::RebuildPullBodyOut out;
  ASSERT_TRUE(out.ParseFromString(resp.body()));
  EXPECT_TRUE(out.cursor().done()) << "an empty pool has nothing to scan";
  st = CallPull(address, *genuine, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  EXPECT_NE(st.error_message().find("replay"), std::string::npos) << st.error_message();
  // Through RebuildPeers (fresh nonce each time, the answer's MAC checked): answered.
  auto pulled = engine_side.Pull(address, body, std::chrono::seconds(10));
  ASSERT_TRUE(pulled.ok()) << pulled.status().ToString();
  // A part outside its stride (a strided scan would cover no dkey, or divide
  // by nothing): refused by name, even signed.
  for (auto [stride, part] : {std::pair<uint32_t, uint32_t>{3, 3}, {0, 1}, {1, 7}}) {
    body.set_stride(stride);
    body.set_part(part);
    auto odd = engine_side.Sign(&body);
    ASSERT_TRUE(odd.ok());
    st = CallPull(address, *odd, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << stride << "/" << part;
    EXPECT_NE(st.error_message().find("of a stride of"), std::string::npos) << st.error_message();
  }

  // The data plane's read (obj::Opcode::kRebuildRead) from a client's own
  // connection (its session proven, a valid capability): refused, naming the
  // missing engine authentication, and nothing is pushed into its buffer.
  ASSERT_TRUE(mgmt->CreateContainer("p", "c", {}).ok());
  auto raw = ObjectSession::Open(c.engines[0]->control(), c.admin, "p", "c", transport::TransportKind::kTcp);
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  const ObjectId oid = client::Container::MakeObjectId(ObjectClass::kS1, 0, 5);
  const auto data = Pattern(64 << 10, 3);
  ROS2_ASSERT_OK((*raw)->UpdateArray(oid, "d", "a", 0, data).status());
  auto target = (*raw)->TargetOf(oid, "d");
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  rpc::RebuildReadRequest read;
  read.set_pool_uuid(pool->uuid());
  read.set_container((*raw)->container().container.uuid());
  read.set_target(0);
  read.set_nonce(std::string(16, 'n'));
  rpc::RebuildReadExtent* e = read.add_extents();
  e->set_oid(std::string(reinterpret_cast<const char*>(&oid.hi), 8) + std::string(reinterpret_cast<const char*>(&oid.lo), 8));
  e->set_dkey("d");
  e->set_akey("a");
  e->set_count(data.size());
  e->set_record_size(1);
  const std::string payload = read.SerializeAsString();
  std::vector<std::byte> into(data.size());
  auto stolen = (*raw)->Call(*target, obj::Opcode::kRebuildRead,
                             {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()}, {}, into);
  ASSERT_FALSE(stolen.ok());
  EXPECT_EQ(stolen.status().code(), Status::Code::kPermissionDenied) << stolen.status().ToString();
  EXPECT_NE(stolen.status().message().find("did not authenticate as an engine"), std::string::npos)
      << stolen.status().ToString();
  EXPECT_TRUE(std::all_of(into.begin(), into.end(), [](std::byte b) { return b == std::byte{0}; }))
      << "a refused rebuild read pushed data";
}

}  // namespace
}  // namespace ros2::testing
