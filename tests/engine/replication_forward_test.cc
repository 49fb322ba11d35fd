// The leader-forwarded replicated update (docs/replication.md, "Update
// protocol"), label `replication`: one etcd member and three ros2-engine
// processes (one target each), libros2 clients, and a raw object session
// (object_session.h) that reads each copy's target directly.
//
// - Updates, large and small, and punches through the group's leader land on
//   every copy; reads through the client land on every copy.
// - Conditional create-if-absent from two clients racing on the same keys:
//   one answer per key, and every copy holds the winner's value.
// - A forward sent by a client (on its own authenticated connection, or after
//   trying to authenticate for the engines' forward session) is refused,
//   naming why, and stores nothing.
// - The engine of a group's leader, or of another copy, killed -9 while a
//   writer runs: every write is acknowledged once the map marks it DOWN
//   (resent whole, to the next leader or the same one), and every
//   acknowledged write reads back from each surviving copy.
// - A conditional create acknowledged, its leader's engine killed -9 and
//   restarted (nvme stores), the same transaction resent: the same answer
//   (the decided record is durable with the value), while another
//   transaction on the key is still refused.
// - A leader killed -9 after its forward reached one copy only, its writer
//   giving up: once the map marks the leader DOWN, that copy forwards the
//   update to the other, so the value the new leader serves is on every
//   live copy; the same when the leader's engine restarts at once.
// - A copy refuses a forward (its store full): the update is taken back, and
//   every copy answers the old value every time; given room, the writer's
//   resend lands everywhere. A copy stopped while an update is forwarded to
//   it: the update is taken back from every copy the map still has.
// - While a forward to one copy hangs, neither the leader nor the copy that
//   stored the forward shows the update (their reads wait for the leader's
//   watermark); a forward to a copy the map marks DOWN fails at once.
// - An engine killed -9, marked DOWN, its RP_3G1 and RP_2G1 keys
//   overwritten or punched, restarted before its rebuild (nvme stores): it
//   comes back REINT, no read returns its stale values (every copy read,
//   before and after its catch-up), it ends UP holding the new values, and
//   the RP_2G1 fallback's copies are given back.
//
// The cluster set-up is a minimal copy of replication_test.cc's.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "control/control_channel.h"
#include "control/management_client.h"
#include "metrics/scrape.h"
#include "object/replica_rpc.h"
#include "placement/placement.h"
#include "ros2/client.h"
#include "testing/engine_process.h"
#include "testing/etcd_cluster.h"
#include "testing/pattern.h"
#include "testing/status_assert.h"

#include "object_session.h"

namespace ros2::testing {
namespace {

constexpr int kTtlSeconds = 3;

// The shared etcd cluster, a client with the timeouts this test's kills need,
// and raw sessions to read each copy directly.
struct ForwardCluster : EtcdEngineCluster {
  void Start(int engine_count, const std::string& storage_class, const std::string& rebuild = "") {
    ROS2_ASSERT_OK(EtcdEngineCluster::Start({.engines = engine_count,
                                             .storage_class = storage_class,
                                             .data_size = "32MiB",
                                             .lease_ttl = std::chrono::seconds(kTtlSeconds),
                                             .metrics = true,
                                             .rebuild = rebuild}));
  }

  Result<std::unique_ptr<client::Client>> Client(size_t i) {
    client::ClientOptions o = ClientOptionsFor(i);
    o.reconnect_timeout = std::chrono::seconds(30);
    o.io_timeout = std::chrono::seconds(10);
    return client::Client::Connect(o);
  }

  // A raw session on container `cont` of pool "p", to read copies directly.
  std::unique_ptr<ObjectSession> Raw(size_t i, const std::string& cont) {
    auto s = ObjectSession::Open(engines[i]->control(), admin, "p", cont, transport::TransportKind::kTcp);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
};

// The fetches each engine's targets completed (ros2_engine_ops_total, kind
// "fetch"), by engine; -1 when its metrics cannot be read.
std::vector<double> FetchesByEngine(ForwardCluster& c) {
  std::vector<double> out;
  for (size_t i = 0; i < c.engines.size(); ++i) {
    double total = -1;
    auto body = metrics::HttpGet(c.engines[i]->metrics(), "/metrics");
    auto samples = body.ok() ? metrics::ParseExposition(*body) : Result<std::vector<metrics::Sample>>(body.status());
    if (samples.ok()) {
      total = 0;
      for (const auto& s : *samples) {
        if (s.name == "ros2_engine_ops_total" && s.Label("kind") == "fetch") total += s.value;
      }
    }
    out.push_back(total);
  }
  return out;
}

std::span<const std::byte> Bytes(const std::vector<std::byte>& v) {
  return {v.data(), v.size()};
}

// The single value of (dkey, "a") as the copy on `target` holds it (NotFound
// when it holds none).
Result<std::vector<std::byte>> ReadCopy(ObjectSession& s, uint32_t target, const ObjectId& oid, const std::string& dkey,
                                        size_t capacity) {
  obj::FetchRequest req;
  req.header = s.Header(target);
  req.oid = oid;
  req.dkey = dkey;
  req.akey = "a";
  std::vector<std::byte> data(capacity);
  const auto payload = obj::Encode(req);
  ROS2_ASSIGN_OR_RETURN(auto reply, s.Call(target, obj::Opcode::kFetch, payload, {}, data));
  ROS2_ASSIGN_OR_RETURN(auto decoded, obj::DecodeFetchReply(reply.payload));
  if (decoded.size == 0) return Status::NotFound("no value");
  data.resize(reply.bulk_in_bytes);
  return data;
}

// A read of (dkey, "a") on the copy on `target`, in a thread of its own and
// through a raw session of its own (a held read blocks only itself). The
// session is opened (Open) while every engine answers; a finished read can
// be started again.
struct BackgroundRead {
  std::unique_ptr<ObjectSession> session;
  std::thread thread;
  std::atomic<bool> done{false};
  Result<std::vector<std::byte>> got = Status::Internal("not read yet");
  std::chrono::steady_clock::time_point finished;

  void Open(ForwardCluster& c, size_t home) {
    session = c.Raw(home, "rp3");
    ASSERT_NE(session, nullptr);
  }
  void Start(uint32_t target, const ObjectId& oid, const std::string& dkey, size_t capacity) {
    Join();
    done.store(false, std::memory_order_relaxed);
    thread = std::thread([this, target, oid, dkey, capacity] {
      got = ReadCopy(*session, target, oid, dkey, capacity);
      finished = std::chrono::steady_clock::now();
      done.store(true, std::memory_order_release);
    });
  }
  bool Done() const { return done.load(std::memory_order_acquire); }
  void Join() {
    if (thread.joinable()) thread.join();
  }
  ~BackgroundRead() { Join(); }
};

class ReplicationForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(c_.Start(3, storage_class_, rebuild_));
    auto mgmt = c_.Mgmt(0);
    ASSERT_TRUE(mgmt->CreatePool("p", 256 << 20).ok());
    ASSERT_TRUE(mgmt->CreateContainer("p", "rp3", {{"oclass", "RP_3G1"}, {"rd_fac", "2"}}).ok());
  }
  std::string storage_class_ = "ram";
  std::string rebuild_;  // the engines' rebuild section (empty: defaults)
  ForwardCluster c_;
};

TEST_F(ReplicationForwardTest, LeaderForwardedWritesLandOnEveryCopy) {
  auto cl = c_.Client(0);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto pool = (*cl)->ConnectPool("p");
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto cont = (*pool)->OpenContainer("rp3");
  ASSERT_TRUE(cont.ok()) << cont.status().ToString();
  const ObjectId oid = client::Container::MakeObjectId(ObjectClass::kRP3G1, 0, 7);
  auto obj = (*cont)->OpenObject(oid);
  ASSERT_TRUE(obj.ok()) << obj.status().ToString();
  // Inline (1000 bytes), an extent pulled by RMA from the client and then
  // from the leader (256 KiB), and one that is punched afterwards.
  const std::vector<std::pair<std::string, size_t>> values = {{"small", 1000}, {"large", 256 << 10}, {"gone", 64}};
  for (size_t i = 0; i < values.size(); ++i) {
    ROS2_ASSERT_OK(obj->Put(values[i].first, "a", Bytes(Pattern(values[i].second, 10 + i))));
  }
  ROS2_ASSERT_OK(obj->PunchDkey("gone"));

  auto raw = c_.Raw(1, "rp3");
  ASSERT_NE(raw, nullptr);
  auto copies = WriteTargets(raw->map(), oid, "small");
  ASSERT_TRUE(copies.ok()) << copies.status().ToString();
  ASSERT_EQ(copies->size(), 3u);
  for (uint32_t target : *copies) {
    for (size_t i = 0; i < 2; ++i) {
      auto got = ReadCopy(*raw, target, oid, values[i].first, values[i].second);
      ASSERT_TRUE(got.ok()) << "target " << target << " " << values[i].first << ": " << got.status().ToString();
      EXPECT_EQ(*got, Pattern(values[i].second, 10 + i)) << "target " << target << " " << values[i].first;
    }
    auto gone = ReadCopy(*raw, target, oid, "gone", 64);
    EXPECT_TRUE(gone.status().IsNotFound()) << "target " << target << ": the punch did not reach it";
  }

  // Reads through the client land on every copy (docs/replication.md, "Read
  // rule"): six fetches of one key, and each copy's engine served some.
  const auto before = FetchesByEngine(c_);
  for (int i = 0; i < 6; ++i) {
    auto back = obj->Get("small", "a", 1000);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, Pattern(1000, 10));
  }
  const auto after = FetchesByEngine(c_);
  int serving = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    ASSERT_GE(before[i], 0) << "engine " << i << "'s metrics";
    ASSERT_GE(after[i], 0) << "engine " << i << "'s metrics";
    if (after[i] > before[i]) ++serving;
  }
  EXPECT_EQ(serving, 3) << "the reads of an RP_3G1 key did not use every copy";
}

TEST_F(ReplicationForwardTest, ConditionalCreateGivesOneAnswerOnEveryCopy) {
  constexpr int kKeys = 20;
  const ObjectId oid = client::Container::MakeObjectId(ObjectClass::kRP3G1, 0, 9);
  // Two clients (through different engines' control planes) race to create
  // the same keys, each with its own value.
  std::vector<std::vector<Status>> answers(2, std::vector<Status>(kKeys));
  std::vector<std::thread> racers;
  for (int w = 0; w < 2; ++w) {
    racers.emplace_back([&, w] {
      auto cl = c_.Client(static_cast<size_t>(w));
      ASSERT_TRUE(cl.ok()) << cl.status().ToString();
      auto pool = (*cl)->ConnectPool("p");
      ASSERT_TRUE(pool.ok()) << pool.status().ToString();
      auto cont = (*pool)->OpenContainer("rp3");
      ASSERT_TRUE(cont.ok()) << cont.status().ToString();
      auto obj = (*cont)->OpenObject(oid);
      ASSERT_TRUE(obj.ok()) << obj.status().ToString();
      for (int k = 0; k < kKeys; ++k) {
        const auto value = Pattern(2000, static_cast<uint64_t>(100 * w + k));
        client::UpdateArgs args;
        args.dkey = "k" + std::to_string(k);
        args.akey = "a";
        args.data = Bytes(value);
        args.condition = client::Condition::kAbsent;
        answers[w][k] = obj->Update(args);
      }
    });
  }
  for (auto& t : racers) t.join();
  auto raw = c_.Raw(2, "rp3");
  ASSERT_NE(raw, nullptr);
  for (int k = 0; k < kKeys; ++k) {
    const std::string dkey = "k" + std::to_string(k);
    const bool first = answers[0][k].ok();
    ASSERT_NE(first, answers[1][k].ok()) << dkey << ": " << answers[0][k].ToString() << " / "
                                         << answers[1][k].ToString();
    const Status& loser = first ? answers[1][k] : answers[0][k];
    EXPECT_TRUE(loser.code() == Status::Code::kAlreadyExists) << dkey << ": " << loser.ToString();
    const auto winner = Pattern(2000, static_cast<uint64_t>(100 * (first ? 0 : 1) + k));
    auto copies = WriteTargets(raw->map(), oid, dkey);
    ASSERT_TRUE(copies.ok()) << copies.status().ToString();
    for (uint32_t target : *copies) {
      auto got = ReadCopy(*raw, target, oid, dkey, 2000);
      ASSERT_TRUE(got.ok()) << dkey << " on target " << target << ": " << got.status().ToString();
      EXPECT_EQ(*got, winner) << dkey << " on target " << target << " holds the loser's value";
    }
  }
}

// An update of akey "a" of `dkey` to `target`, made by hand (not through
// libros2), with a fresh epoch.
obj::UpdateRequest RawUpdate(const ObjectSession& raw, uint32_t target, const ObjectId& oid, const std::string& dkey,
                             size_t length) {
  obj::UpdateRequest u;
  u.header = raw.Header(target, /*epoch=*/HybridClock().Now());
  u.oid = oid;
  u.dkey = dkey;
  u.akey = "a";
  u.length = length;
  return u;
}

TEST_F(ReplicationForwardTest, ForwardFromAClientIsRefused) {
  auto raw = c_.Raw(0, "rp3");
  ASSERT_NE(raw, nullptr);
  const ObjectId oid = client::Container::MakeObjectId(ObjectClass::kRP3G1, 0, 11);
  auto copies = WriteTargets(raw->map(), oid, "forged");
  ASSERT_TRUE(copies.ok()) << copies.status().ToString();
  const uint32_t target = copies->back();  // a copy, not the leader
  const auto data = Pattern(100, 5);
  const obj::UpdateRequest u = RawUpdate(*raw, target, oid, "forged", data.size());
  obj::ForwardRequest fwd;
  fwd.body = obj::Encode(u);
  fwd.mac.fill(0x5a);
  const auto payload = obj::Encode(fwd);
  // On the client's own connection (authenticated for its session, with a
  // valid capability): refused, naming the missing engine authentication.
  auto forged = raw->Call(target, obj::Opcode::kForward, payload, Bytes(data));
  ASSERT_FALSE(forged.ok());
  EXPECT_TRUE(forged.status().code() == Status::Code::kPermissionDenied) << forged.status().ToString();
  EXPECT_NE(forged.status().message().find("did not authenticate as an engine"), std::string::npos)
      << forged.status().ToString();
  // Claiming the forward session without its key: the proof is refused and
  // the connection with it.
  transport::SessionCredential guess;
  const std::array<uint8_t, 16> forward_session = {'r', 'o', 's', '2', '-', 'r', 'e', 'p',
                                                   'l', 'i', 'c', 'a', '-', 'f', 'w', 'd'};
  guess.id = forward_session;
  guess.key.fill(0x11);
  transport::Endpoint& ep = raw->endpoint(target);
  Status proof = ep.AuthenticateSession(guess);
  if (proof.ok()) {
    auto after = raw->Call(target, obj::Opcode::kForward, payload, Bytes(data));
    ASSERT_FALSE(after.ok());
    EXPECT_TRUE(after.status().code() == Status::Code::kPermissionDenied) << after.status().ToString();
  }
  // Nothing was stored on any copy.
  auto fresh = c_.Raw(1, "rp3");
  ASSERT_NE(fresh, nullptr);
  for (uint32_t t : *copies) {
    auto got = ReadCopy(*fresh, t, oid, "forged", 100);
    EXPECT_TRUE(got.status().IsNotFound()) << "target " << t << ": " << got.status().ToString();
  }
}

TEST_F(ReplicationForwardTest, LeaderRequestNamingACopyOutsideTheMapIsRefused) {
  auto raw = c_.Raw(0, "rp3");
  ASSERT_NE(raw, nullptr);
  const ObjectId oid = client::Container::MakeObjectId(ObjectClass::kRP3G1, 0, 12);
  auto copies = WriteTargets(raw->map(), oid, "elsewhere");
  ASSERT_TRUE(copies.ok()) << copies.status().ToString();
  const uint32_t leader = copies->front();
  const auto data = Pattern(100, 6);
  const obj::UpdateRequest u = RawUpdate(*raw, leader, oid, "elsewhere", data.size());
  // A real copy's target index with another worker address (a real one's
  // bytes changed), and a real address under another target index: both
  // name a copy the engine's map does not have.
  const std::string real = raw->pool().map.targets(static_cast<int>(copies->back())).worker_address();
  std::string altered = real;
  altered.back() = static_cast<char>(altered.back() ^ 0x5a);
  const uint32_t copy_index = raw->map().targets[copies->back()].engine_index;
  for (const obj::ReplicaPeer& forged :
       {obj::ReplicaPeer{copy_index, altered}, obj::ReplicaPeer{copy_index + 1000, real}}) {
    obj::LeaderRequest lead;
    lead.op = obj::Opcode::kUpdate;
    lead.body = obj::Encode(u);
    lead.peers = {forged};
    auto refused = raw->Call(leader, obj::Opcode::kLeader, obj::Encode(lead), Bytes(data));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), Status::Code::kPermissionDenied) << refused.status().ToString();
    EXPECT_NE(refused.status().message().find("no target of the pool map has"), std::string::npos)
        << refused.status().ToString();
  }
  // Nothing was stored, and the engine still leads a real update.
  for (uint32_t t : *copies) {
    auto got = ReadCopy(*raw, t, oid, "elsewhere", 100);
    EXPECT_TRUE(got.status().IsNotFound()) << "target " << t << ": " << got.status().ToString();
  }
}

// A client of engine `home` and its pool "p".
void ConnectPoolP(ForwardCluster& c, size_t home, std::unique_ptr<client::Client>* client,
                  std::unique_ptr<client::Pool>* pool) {
  auto cl = c.Client(home);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  *client = std::move(*cl);
  auto p = (*client)->ConnectPool("p");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  *pool = std::move(*p);
}

// A libros2 client of engine `home` with object `oid` of container "rp3"
// (pool "p") open; members end in the reverse order, the object first.
struct OpenedRp3 {
  std::unique_ptr<client::Client> client;
  std::unique_ptr<client::Pool> pool;
  std::unique_ptr<client::Container> cont;
  std::optional<client::Object> obj;
};
void OpenRp3(ForwardCluster& c, size_t home, const ObjectId& oid, OpenedRp3* out) {
  ASSERT_NO_FATAL_FAILURE(ConnectPoolP(c, home, &out->client, &out->pool));
  auto cont = out->pool->OpenContainer("rp3");
  ASSERT_TRUE(cont.ok()) << cont.status().ToString();
  out->cont = std::move(*cont);
  auto obj = out->cont->OpenObject(oid);
  ASSERT_TRUE(obj.ok()) << obj.status().ToString();
  out->obj.emplace(std::move(*obj));
}

// A group whose copy `copy` (0: the leader) is on an engine that is neither
// the client's control plane (`home`) nor the management leader: that
// engine (`victim`) can be killed or stopped while the client goes on.
struct Victim {
  size_t home = 0;
  ObjectId oid;
  std::vector<uint32_t> copies;  // the group's targets, the leader first
  uint32_t target = 0;           // copies[copy]
  size_t engine = 0;             // the index of its engine in the cluster
};

void PickVictim(ForwardCluster& c_, ObjectSession& raw, size_t copy, size_t home, int mgmt_leader, Victim* v) {
  v->home = home;
  for (uint64_t lo = 1; lo < 1000; ++lo) {
    v->oid = client::Container::MakeObjectId(ObjectClass::kRP3G1, 0, lo);
    auto copies = WriteTargets(raw.map(), v->oid, "k0");
    ASSERT_TRUE(copies.ok());
    const std::string& engine = raw.engine_of((*copies)[copy]);
    bool ok = true;
    for (size_t i : {home, static_cast<size_t>(mgmt_leader)}) ok = ok && engine != c_.engines[i]->engine_id();
    if (ok) {
      v->copies = *copies;
      v->target = (*copies)[copy];
      break;
    }
  }
  ASSERT_EQ(v->copies.size(), 3u);
  v->engine = 0;
  while (c_.engines[v->engine]->engine_id() != raw.engine_of(v->target)) ++v->engine;
  ASSERT_NE(v->engine, home);
}

// A replicated update of `length` bytes of (dkey, "a"), as libros2 sends it
// to the group's leader v.copies[0], naming the other copies by the map
// `raw` holds; its header from `writer`'s session.
obj::LeaderRequest LeaderUpdate(const ObjectSession& writer, const ObjectSession& raw, const Victim& v,
                                const std::string& dkey, size_t length) {
  obj::LeaderRequest lead;
  lead.op = obj::Opcode::kUpdate;
  lead.body = obj::Encode(RawUpdate(writer, v.copies[0], v.oid, dkey, length));
  for (size_t i = 1; i < v.copies.size(); ++i) {
    lead.peers.push_back({raw.map().targets[v.copies[i]].engine_index,
                          raw.pool().map.targets(static_cast<int>(v.copies[i])).worker_address()});
  }
  return lead;
}

// What each kill test starts from: `home`, the engine its clients use (not
// the management leader's), a raw session through it, and `v`, the copy
// `copy` of a fresh rp3 object's group (PickVictim).
struct VictimScene {
  int mgmt_leader = -1;
  size_t home = 0;
  std::unique_ptr<ObjectSession> raw;
  Victim v;
};
void SetUpVictim(ForwardCluster& c, size_t copy, VictimScene* s) {
  s->mgmt_leader = c.LeaderIndex(0);
  ASSERT_GE(s->mgmt_leader, 0);
  s->home = s->mgmt_leader == 0 ? 1 : 0;
  s->raw = c.Raw(s->home, "rp3");
  ASSERT_NE(s->raw, nullptr);
  ASSERT_NO_FATAL_FAILURE(PickVictim(c, *s->raw, copy, s->home, s->mgmt_leader, &s->v));
}

// SetUpVictim, then "k0" holds `old_value` on every copy, written through the
// group's leader by `*writer` (a raw session of its own, for the test's
// later leader requests).
void SetUpVictimWithOldValue(ForwardCluster& c, size_t copy, const std::vector<std::byte>& old_value, VictimScene* s,
                             std::unique_ptr<ObjectSession>* writer) {
  ASSERT_NO_FATAL_FAILURE(SetUpVictim(c, copy, s));
  *writer = c.Raw(s->home, "rp3");
  ASSERT_NE(*writer, nullptr);
  const obj::LeaderRequest first = LeaderUpdate(**writer, *s->raw, s->v, "k0", old_value.size());
  ROS2_ASSERT_OK((*writer)->Call(s->v.copies[0], obj::Opcode::kLeader, obj::Encode(first), Bytes(old_value)).status());
}

// Kills -9 the engine of copy `copy` of the group (0: the leader) while one
// client writes; every write must be acknowledged and read back from every
// surviving copy and through the client.
void KillACopyMidWrites(ForwardCluster& c_, size_t copy) {
  VictimScene scene;
  ASSERT_NO_FATAL_FAILURE(SetUpVictim(c_, copy, &scene));
  auto& [mgmt_leader, home, raw, v] = scene;
  const ObjectId oid = v.oid;
  const uint32_t victim_target = v.target;
  const size_t victim = v.engine;

  OpenedRp3 opened;
  ASSERT_NO_FATAL_FAILURE(OpenRp3(c_, home, oid, &opened));
  auto& obj = opened.obj;
  constexpr int kWrites = 40;
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    c_.engines[victim]->Kill();
  });
  for (int i = 0; i < kWrites; ++i) {
    const size_t size = i % 2 == 0 ? 900 : 40 << 10;
    Status st = obj->Put("k" + std::to_string(i), "a", Bytes(Pattern(size, 500 + i)));
    ASSERT_TRUE(st.ok()) << "write " << i << ": " << st.ToString();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  killer.join();
  ROS2_ASSERT_OK(raw->RefreshMapVersion());
  // Every acknowledged write is on every surviving copy of its key.
  for (int i = 0; i < kWrites; ++i) {
    const std::string dkey = "k" + std::to_string(i);
    const size_t size = i % 2 == 0 ? 900 : 40 << 10;
    for (uint32_t t = 0; t < raw->target_count(); ++t) {
      if (t == victim_target) continue;
      auto got = ReadCopy(*raw, t, oid, dkey, size);
      ASSERT_TRUE(got.ok()) << dkey << " on target " << t << ": " << got.status().ToString();
      EXPECT_EQ(*got, Pattern(size, 500 + i)) << dkey << " on target " << t;
    }
    auto back = obj->Get(dkey, "a", size);
    ASSERT_TRUE(back.ok()) << dkey << ": " << back.status().ToString();
    EXPECT_EQ(*back, Pattern(size, 500 + i)) << dkey;
  }
}

TEST_F(ReplicationForwardTest, KillTheLeaderMidWritesEveryAckedWriteReadsBack) {
  KillACopyMidWrites(c_, 0);
}

// The leader finds the copy gone and answers Disconnected; the client resends
// to the same leader once the map marks the copy DOWN.
TEST_F(ReplicationForwardTest, KillACopyMidWritesEveryAckedWriteReadsBack) {
  KillACopyMidWrites(c_, 2);
}

// The read rule (docs/replication.md, "Read rule") and forwards to a copy
// the map marks DOWN. The engine of one copy (C2, not the leader) is stopped
// (SIGSTOP: no reset, as a cut link) so the leader's forward to it hangs:
// - while it hangs, neither the leader (which stored the update beside its
//   forwards) nor the other copy C1 (which stored the forward) returns the
//   update, read directly or through the client: their reads are held, or
//   answer the old value; once C2 is resumed the write is acknowledged, the
//   held reads answer (C1's on the leader's watermark alone, which no
//   further forward carries: within a second, not at the in-doubt window's
//   end) and every copy shows the new value;
// - stopped again, then excluded (the map marks its target DOWN) while a
//   write's forward to it hangs: the leader closes its endpoint to it, the
//   forward fails at once and the client's resend under the new map
//   completes, well before the forward timeout (the lease TTL) would.
TEST_F(ReplicationForwardTest, ReadsSeeNoUpdateBeforeEveryCopyHoldsIt) {
  VictimScene scene;
  ASSERT_NO_FATAL_FAILURE(SetUpVictim(c_, 2, &scene));
  auto& [mgmt_leader, home, raw, v] = scene;
  OpenedRp3 opened;
  ASSERT_NO_FATAL_FAILURE(OpenRp3(c_, home, v.oid, &opened));
  auto& obj = opened.obj;
  const auto before = Pattern(1000, 1);
  const auto after = Pattern(1000, 2);
  ROS2_ASSERT_OK(obj->Put("k0", "a", Bytes(before)));

  BackgroundRead on_leader;
  BackgroundRead on_copy;
  ASSERT_NO_FATAL_FAILURE(on_leader.Open(c_, home));
  ASSERT_NO_FATAL_FAILURE(on_copy.Open(c_, home));
  const pid_t victim = c_.engines[v.engine]->pid();
  ASSERT_EQ(::kill(victim, SIGSTOP), 0);
  Status written;
  std::thread writer([&] { written = obj->Put("k0", "a", Bytes(after)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  on_leader.Start(v.copies[0], v.oid, "k0", 1000);
  on_copy.Start(v.copies[1], v.oid, "k0", 1000);
  std::atomic<bool> client_done{false};
  Result<std::vector<std::byte>> through_client = Status::Internal("not read yet");
  std::thread client_reader([&] {
    through_client = obj->Get("k0", "a", 1000);
    client_done.store(true, std::memory_order_release);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  // What answered while the forward to C2 hangs shows the old value.
  for (const auto& [name, read] : {std::pair<const char*, BackgroundRead*>{"the leader", &on_leader},
                                   std::pair<const char*, BackgroundRead*>{"copy C1", &on_copy}}) {
    if (!read->Done()) continue;
    EXPECT_TRUE(read->got.ok() && *read->got == before)
        << name << " showed an update a copy did not hold yet: " << read->got.status().ToString();
  }
  if (client_done.load(std::memory_order_acquire)) {  // (threads still run: no ASSERT before the joins)
    EXPECT_TRUE(through_client.ok() && *through_client == before)
        << "a read returned an update a copy did not hold yet: " << through_client.status().ToString();
  }
  const bool copy_held = !on_copy.Done();
  const auto resumed = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(victim, SIGCONT), 0);
  writer.join();
  ROS2_ASSERT_OK(written);
  on_leader.Join();
  on_copy.Join();
  client_reader.join();
  for (auto* read : {&on_leader, &on_copy}) ROS2_ASSERT_OK(read->got.status());
  ROS2_ASSERT_OK(through_client.status());
  if (copy_held) {
    const auto released = std::chrono::duration_cast<std::chrono::milliseconds>(on_copy.finished - resumed);
    std::printf("a read held on copy C1 answered %lld ms after the stopped copy resumed\n",
                static_cast<long long>(released.count()));
    EXPECT_LT(released.count(), 1000) << "C1's held read waited for more than the leader's watermark";
  }
  for (uint32_t t : v.copies) {
    auto got = ReadCopy(*raw, t, v.oid, "k0", 1000);
    ASSERT_TRUE(got.ok()) << "target " << t << ": " << got.status().ToString();
    EXPECT_EQ(*got, after) << "target " << t;
  }

  ASSERT_EQ(::kill(victim, SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  std::chrono::milliseconds took{0};
  std::thread second([&] {
    written = obj->Put("k1", "a", Bytes(after));
    took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto excluded = c_.Mgmt(home)->SetTargetState(*Uuid::Parse(c_.engines[v.engine]->engine_id()), 0, rpc::TARGET_DOWN);
  second.join();
  ASSERT_EQ(::kill(victim, SIGCONT), 0);
  ASSERT_TRUE(excluded.ok()) << excluded.status().ToString();
  ROS2_ASSERT_OK(written);
  std::printf(
      "write with a forward to a stopped copy excluded 300 ms in: acknowledged after %lld ms (forward "
      "timeout %d s)\n",
      static_cast<long long>(took.count()), kTtlSeconds);
  EXPECT_LT(took.count(), kTtlSeconds * 1000 - 500) << "the forward to the excluded copy waited for its timeout";
  auto back = obj->Get("k1", "a", 1000);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, after);
}

// A leader dies after its forward reached one copy (C1) only: the other
// copy's (C2's) engine is stopped, so it never pulls the data from the dead
// leader; the writer, unanswered, gives up (a raw request, never resent).
// When the map marks the leader DOWN, C1 holds an update C2 lacks, and C1
// now leads and serves reads: it forwards the update to C2 itself, so what
// a reader sees there survives the loss of C1 too. With `restart`, the
// leader's engine is started again at once (before its lease expires: never
// marked DOWN, its targets come back at new worker addresses): C1 resolves
// the update when the map no longer has the old address.
void ForwardToOneCopyThenKillTheLeader(ForwardCluster& c_, bool restart) {
  VictimScene scene;
  ASSERT_NO_FATAL_FAILURE(SetUpVictim(c_, 0, &scene));
  auto& [mgmt_leader, home, raw, v] = scene;
  auto writer_session = c_.Raw(home, "rp3");
  ASSERT_NE(writer_session, nullptr);
  size_t c2 = 0;
  while (c_.engines[c2]->engine_id() != raw->engine_of(v.copies[2])) ++c2;
  OpenedRp3 opened;
  ASSERT_NO_FATAL_FAILURE(OpenRp3(c_, home, v.oid, &opened));
  auto& obj = opened.obj;
  ROS2_ASSERT_OK(obj->Put("warm", "a", Bytes(Pattern(100, 40))));  // the leader's endpoints to both copies

  const auto value = Pattern(256 << 10, 41);
  const obj::LeaderRequest lead = LeaderUpdate(*writer_session, *raw, v, "k0", value.size());
  BackgroundRead held;  // of C1
  ASSERT_NO_FATAL_FAILURE(held.Open(c_, home));
  const pid_t stopped = c_.engines[c2]->pid();
  ASSERT_EQ(::kill(stopped, SIGSTOP), 0);
  Status written;
  std::thread writer([&] {
    written = writer_session->Call(v.copies[0], obj::Opcode::kLeader, obj::Encode(lead), Bytes(value)).status();
  });
  // The forward reaches C1, which stores it above the leader's watermark
  // (the leader never settles it: C2 is stopped), so C1 holds its reads: a
  // read that answered before the update is on C2 would show a value lost
  // with C1. Until the forward is there, a read answers NotFound.
  bool holding = false;
  for (int i = 0; i < 50 && !holding; ++i) {
    held.Start(v.copies[1], v.oid, "k0", value.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    holding = !held.Done();
    if (!holding && held.got.ok() && *held.got == value) {
      ADD_FAILURE() << "copy C1 served an update no other copy held";
      break;  // the engines are resumed and the writer joined below
    }
  }
  c_.Kill(v.engine);
  ASSERT_EQ(::kill(stopped, SIGCONT), 0);
  writer.join();
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(holding) << "no read of the forwarded update was held on the copy that stored it";
  EXPECT_FALSE(written.ok()) << "acknowledged although a copy was stopped";
  if (restart) ROS2_ASSERT_OK(c_.Restart(v.engine));
  // Resolved once the map marks the leader DOWN (lease expiry: at most 2 x
  // TTL), or no longer has its address. The bound counts from the restart's
  // end: an engine's start on a loaded machine is not what is tested.
  const auto resolving = std::chrono::steady_clock::now();
  bool on_c2 = false;
  while (!on_c2 && MsSince(resolving) < 4 * kTtlSeconds * 1000) {
    auto got = ReadCopy(*raw, v.copies[2], v.oid, "k0", value.size());
    if (got.status().code() == Status::Code::kStaleMap) (void)raw->RefreshMapVersion();
    on_c2 = got.ok() && *got == value;
    if (!on_c2) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::printf("the update the dead leader forwarded to one copy reached the other %lld ms after the kill%s\n",
              MsSince(killed), restart ? " (the leader restarted at once)" : "");
  if (!on_c2) {
    // The copies' own account of the resolution (ROS2_ENGINE_TEST_LOG_LEVEL=debug for the forwards).
    std::string logs;
    for (size_t i = 0; i < c_.engines.size(); ++i) {
      if (i != v.engine || restart) logs += fmt::format("\nengine {}:\n{}", i, c_.engines[i]->LogTail());
    }
    ADD_FAILURE() << "the copy that lacked the dead leader's update never received it" << logs;
  }
  // The held read answers once the update is on every live copy: the value,
  // or StaleMap when the map changed meanwhile (the client refreshes it and
  // reads again).
  held.Join();
  if (held.got.status().code() == Status::Code::kStaleMap) {
    ROS2_ASSERT_OK(held.session->RefreshMapVersion());
    held.got = ReadCopy(*held.session, v.copies[1], v.oid, "k0", value.size());
  }
  ASSERT_TRUE(held.got.ok()) << held.got.status().ToString();
  EXPECT_TRUE(*held.got == value) << "the held read on C1 answered another value";
  if (restart) return;  // the restarted leader (a ram store) leads again without the update
  auto back = obj->Get("k0", "a", value.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == value) << "the new leader serves another value";
}

TEST_F(ReplicationForwardTest, AnUpdateOnOneCopyOfADeadLeaderReachesTheOthers) {
  ForwardToOneCopyThenKillTheLeader(c_, /*restart=*/false);
}

TEST_F(ReplicationForwardTest, AnUpdateOnOneCopyOfARestartedLeaderReachesTheOthers) {
  ForwardToOneCopyThenKillTheLeader(c_, /*restart=*/true);
}

// A copy (C2) that refuses a forward, its store full (NoSpace), while the
// leader and the other copy (C1) store it, and a writer that never resends
// (a raw leader request): the leader answers NoSpace at once, and keeps the
// update open, so neither C1 nor the leader serves it while C2 lacks it
// (without that, C1 answers the value as soon as the leader's watermark
// passes the failed update, about 1 ms after its answer). Once C2 has room
// again (the data that filled it punched), the leader's next forward stores
// it there, and the held reads answer the value.
std::vector<rpc::TargetState> TargetStates(ForwardCluster& c, size_t ask, size_t e);

// Reads (dkey, "a") from each copy of `targets`, `rounds` times over: each
// read must answer `want` within a second (not held, not another value).
void ExpectEveryCopyAnswers(ObjectSession& raw, const std::vector<uint32_t>& targets, const ObjectId& oid,
                            const std::string& dkey, const std::vector<std::byte>& want, size_t capacity, int rounds,
                            const char* when) {
  for (int round = 0; round < rounds; ++round) {
    for (uint32_t t : targets) {
      const auto start = std::chrono::steady_clock::now();
      auto got = ReadCopy(raw, t, oid, dkey, capacity);
      if (got.status().code() == Status::Code::kStaleMap && raw.RefreshMapVersion().ok()) {
        got = ReadCopy(raw, t, oid, dkey, capacity);
      }
      const long long took = MsSince(start);
      ASSERT_TRUE(got.ok()) << when << ": the copy on target " << t << ": " << got.status().ToString();
      EXPECT_TRUE(*got == want) << when << ": the copy on target " << t << " answered another value (" << got->size()
                                << " bytes), round " << round;
      EXPECT_LT(took, 1000) << when << ": a read of the copy on target " << t << " was held " << took << " ms";
    }
  }
}

// An S1 object of container "s1" (pool "p") on `target` only, written until
// its store is full; returns it in `filler`.
void FillTarget(ForwardCluster& c, size_t home, ObjectSession& raw, uint32_t target,
                std::unique_ptr<client::Client>* cl, std::unique_ptr<client::Pool>* pool,
                std::unique_ptr<client::Container>* s1, std::optional<client::Object>* filler) {
  ASSERT_TRUE(c.Mgmt(0)->CreateContainer("p", "s1", {{"oclass", "S1"}}).ok());
  auto client = c.Client(home);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  *cl = std::move(*client);
  auto p = (*cl)->ConnectPool("p");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  *pool = std::move(*p);
  auto cont = (*pool)->OpenContainer("s1");
  ASSERT_TRUE(cont.ok()) << cont.status().ToString();
  *s1 = std::move(*cont);
  for (uint64_t lo = 1; lo < 1000 && !*filler; ++lo) {
    const ObjectId oid = client::Container::MakeObjectId(ObjectClass::kS1, 0, lo);
    auto targets = WriteTargets(raw.map(), oid, "f0");
    ASSERT_TRUE(targets.ok()) << targets.status().ToString();
    if (targets->front() != target) continue;
    auto obj = (*s1)->OpenObject(oid);
    ASSERT_TRUE(obj.ok()) << obj.status().ToString();
    filler->emplace(std::move(*obj));
  }
  ASSERT_TRUE(filler->has_value());
  int filled = 0;
  for (size_t size : {size_t{1} << 20, size_t{64} << 10}) {  // then what is left between
    for (Status st; st.ok(); ++filled) {
      st = (*filler)->Put("f" + std::to_string(filled), "a", Bytes(Pattern(size, filled)));
      ASSERT_TRUE(st.ok() || st.IsNoSpace()) << st.ToString();
      ASSERT_LT(filled, 4096) << "the store never filled";
    }
  }
  std::printf("target %u's store full after %d values\n", target, filled);
}

// One copy (C2) refuses an update (its store is full) that the leader and
// the other copy (C1) stored; the writer gets the refusal. The update is
// taken back: every copy answers the old value, at once and every time,
// never the refused one (reads go round the copies: a copy serving it
// while another lacks it would make them alternate). Given room, the same
// transaction resent lands on every copy.
TEST_F(ReplicationForwardTest, AnUpdateRefusedByOneCopyIsTakenBackFromEveryCopy) {
  const auto old_value = Pattern(1000, 42);
  VictimScene scene;
  std::unique_ptr<ObjectSession> writer_session;
  ASSERT_NO_FATAL_FAILURE(SetUpVictimWithOldValue(c_, 2, old_value, &scene, &writer_session));
  auto& [mgmt_leader, home, raw, v] = scene;

  std::unique_ptr<client::Client> cl;
  std::unique_ptr<client::Pool> pool;
  std::unique_ptr<client::Container> s1;
  std::optional<client::Object> filler;
  ASSERT_NO_FATAL_FAILURE(FillTarget(c_, home, *raw, v.copies[2], &cl, &pool, &s1, &filler));

  const auto value = Pattern(256 << 10, 43);
  const obj::LeaderRequest lead = LeaderUpdate(*writer_session, *raw, v, "k0", value.size());
  const auto refused = std::chrono::steady_clock::now();
  const Status written =
      writer_session->Call(v.copies[0], obj::Opcode::kLeader, obj::Encode(lead), Bytes(value)).status();
  ASSERT_TRUE(written.IsNoSpace()) << "the leader answered " << written.ToString();
  ASSERT_NO_FATAL_FAILURE(
      ExpectEveryCopyAnswers(*raw, v.copies, v.oid, "k0", old_value, value.size(), 20, "after the refusal"));
  std::printf("every copy answered the old value 20 times over, %lld ms after the refusal\n", MsSince(refused));

  // C2 has room again: the writer's resend (the same transaction) lands.
  ROS2_ASSERT_OK(filler->PunchObject());
  const auto freed = std::chrono::steady_clock::now();
  Status resent;
  do {
    resent = writer_session->Call(v.copies[0], obj::Opcode::kLeader, obj::Encode(lead), Bytes(value)).status();
    if (!resent.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (!resent.ok() && MsSince(freed) < 2 * kTtlSeconds * 1000);
  ROS2_ASSERT_OK(resent);
  ASSERT_NO_FATAL_FAILURE(
      ExpectEveryCopyAnswers(*raw, v.copies, v.oid, "k0", value, value.size(), 3, "after the resend"));
}

// A copy (C2) is stopped (SIGSTOP) while an update is forwarded: the
// forward to it times out, and the writer gets the failure. The leader
// takes the update back from itself and C1 at once and from C2 once it
// resumes and answers the abort; or, if the map
// marks C2 DOWN meanwhile, the abort ends there. Either way the leader and
// C1 then answer the old value, every time, and so does C2 while it
// answers. C2 is stopped just after it renewed its lease: the lease expires
// a TTL later, as the forward times out, and the map marks C2 DOWN only
// once the expiry is seen, so the forward times out first as a rule. When
// the map marked C2 DOWN first, the failure is on an excluded copy: not
// taken back, the leader and C1 both answer the update (printed).
// The leader's and C1's shards are quiet for 2 s before the forward times
// out, and aggregated then: bounded below the open update's epoch, which
// keeps the old value it hides (without the bound, the discard leaves the
// key empty).
TEST_F(ReplicationForwardTest, AnUpdateTimedOutOnAStoppedCopyIsTakenBackFromEveryCopy) {
  const auto old_value = Pattern(1000, 44);
  VictimScene scene;
  std::unique_ptr<ObjectSession> writer_session;
  ASSERT_NO_FATAL_FAILURE(SetUpVictimWithOldValue(c_, 2, old_value, &scene, &writer_session));
  auto& [mgmt_leader, home, raw, v] = scene;
  ASSERT_NO_FATAL_FAILURE(ExpectEveryCopyAnswers(*raw, v.copies, v.oid, "k0", old_value, 1000, 1, "before"));

  const auto value = Pattern(256 << 10, 45);
  const obj::LeaderRequest lead = LeaderUpdate(*writer_session, *raw, v, "k0", value.size());
  const pid_t stopped = c_.engines[v.engine]->pid();
  auto victim_mgmt = c_.Mgmt(v.engine);
  ASSERT_NE(victim_mgmt, nullptr);
  for (int i = 0; i < 300; ++i) {
    auto st = victim_mgmt->GetEngineStatus();
    if (st.ok() && st->lease_age_ms() < 100) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(::kill(stopped, SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  const Status written =
      writer_session->Call(v.copies[0], obj::Opcode::kLeader, obj::Encode(lead), Bytes(value)).status();
  const long long failed_after = MsSince(start);
  ASSERT_EQ(::kill(stopped, SIGCONT), 0);
  ASSERT_FALSE(written.ok()) << "acknowledged although a copy was stopped";
  const bool timed_out = written.message().find("no reply in time") != std::string::npos;
  std::printf("the update failed after %lld ms (%s): %s\n", failed_after, written.ToString().c_str(),
              timed_out ? "the forward to C2 timed out" : "the map marked C2 DOWN first (not an abort)");

  // The leader's reads wait until the abort settled (C2 answered it, or the
  // map marked C2 DOWN); C1's and C2's once each discarded it.
  const std::vector<uint32_t> survivors = {v.copies[0], v.copies[1]};
  const auto resumed = std::chrono::steady_clock::now();
  bool settled = false;
  while (!settled && MsSince(resumed) < 4 * kTtlSeconds * 1000) {
    auto got = ReadCopy(*raw, v.copies[0], v.oid, "k0", value.size());
    if (got.status().code() == Status::Code::kStaleMap) (void)raw->RefreshMapVersion();
    ASSERT_FALSE(timed_out && got.ok() && *got == value) << "the leader served the update it failed";
    settled = got.ok() || got.status().IsNotFound();
  }
  ASSERT_TRUE(settled) << "the leader's reads never answered again";
  std::printf("the leader answers again %lld ms after C2 resumed\n", MsSince(resumed));
  if (!timed_out) {
    ASSERT_NO_FATAL_FAILURE(
        ExpectEveryCopyAnswers(*raw, survivors, v.oid, "k0", value, value.size(), 10, "C2 excluded first"));
    return;
  }
  ASSERT_NO_FATAL_FAILURE(
      ExpectEveryCopyAnswers(*raw, survivors, v.oid, "k0", old_value, value.size(), 10, "after the failure"));
  for (int round = 0; round < 10; ++round) {
    auto got = ReadCopy(*raw, v.copies[2], v.oid, "k0", value.size());
    EXPECT_FALSE(got.ok() && *got == value) << "C2 served the update the leader failed";
  }
}

// The same cluster on nvme stores: what a restart keeps. A DOWN engine's
// rebuild waits a minute: an engine restarted meanwhile comes back before it.
class ReplicationForwardDurableTest : public ReplicationForwardTest {
 protected:
  ReplicationForwardDurableTest() {
    storage_class_ = "nvme";
    rebuild_ = "{ delay: 60s }";
  }
};

// A replicated update refused StaleMap by its leader, when the client has
// learned the newer map before it handles that answer (another thread's
// refresh, or the pool map watch), is resent under the newer map. The
// client's watch is off, so the map changes only when the test refreshes
// it: the update is submitted under map v, the leader answers StaleMap (it
// knows v + 1: a target outside the object's group excluded), the pool map
// is refreshed to v + 1, and only then is the answer handled. Comparing the
// map the attempt was placed with (v) against the one it places with now
// (v + 1) sends it again; comparing the current map with itself found "no
// change" every time and failed the update after reconnect_timeout. (The
// durable cluster's rebuild waits a minute: no later map, DOWNOUT after the
// rebuild, moves the map on by itself within the client's window.)
TEST_F(ReplicationForwardDurableTest, AStaleMapAnswerHandledAfterTheMapMovedOnIsResent) {
  auto mgmt = c_.Mgmt(0);
  ASSERT_TRUE(mgmt->CreateContainer("p", "rp2", {{"oclass", "RP_2G1"}, {"rd_fac", "1"}}).ok());
  client::ClientOptions o = c_.ClientOptionsFor(0);
  o.watch_pool_maps = false;
  o.reconnect_timeout = std::chrono::seconds(5);
  o.io_timeout = std::chrono::seconds(10);
  auto cl = client::Client::Connect(o);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto pool = (*cl)->ConnectPool("p");
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto cont = (*pool)->OpenContainer("rp2");
  ASSERT_TRUE(cont.ok()) << cont.status().ToString();

  // An object whose two copies leave one target out: that one is excluded.
  auto raw = c_.Raw(0, "rp2");
  ASSERT_NE(raw, nullptr);
  ObjectId oid;
  uint32_t outside = 0;
  for (uint64_t lo = 1; lo < 1000; ++lo) {
    oid = client::Container::MakeObjectId(ObjectClass::kRP2G1, 0, lo);
    auto copies = WriteTargets(raw->map(), oid, "k");
    ASSERT_TRUE(copies.ok()) << copies.status().ToString();
    if (copies->size() != 2) continue;
    outside = 3 - (*copies)[0] - (*copies)[1];
    break;
  }
  auto obj = (*cont)->OpenObject(oid);
  ASSERT_TRUE(obj.ok()) << obj.status().ToString();
  ROS2_ASSERT_OK(obj->Put("k", "a", Bytes(Pattern(500, 1))));  // connected under map v
  const uint64_t before = (*pool)->summary().map_version;

  size_t engine = 0;
  while (c_.engines[engine]->engine_id() != raw->engine_of(outside)) ++engine;
  auto excluded = mgmt->SetTargetState(*Uuid::Parse(c_.engines[engine]->engine_id()), 0, rpc::TARGET_DOWN, "p");
  ASSERT_TRUE(excluded.ok()) << excluded.status().ToString();
  ASSERT_GT(*excluded, before);
  // Every engine learns the new map from its watch of the store, within
  // milliseconds; the client (no watch) keeps map v.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_EQ((*pool)->summary().map_version, before);

  auto eq = (*cont)->CreateEventQueue();
  ASSERT_TRUE(eq.ok()) << eq.status().ToString();
  const auto value = Pattern(700, 2);
  client::UpdateArgs args;
  args.dkey = "k";
  args.akey = "a";
  args.data = Bytes(value);
  ROS2_ASSERT_OK(obj->SubmitUpdate(**eq, args, 7));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the leader's StaleMap arrives, unhandled
  auto refreshed = (*pool)->RefreshMap();
  ASSERT_TRUE(refreshed.ok()) << refreshed.status().ToString();
  ASSERT_EQ(*refreshed, *excluded);

  std::array<client::Event, 1> events;
  auto waited = (*eq)->Wait(events, 1, std::chrono::seconds(15));
  ASSERT_TRUE(waited.ok()) << waited.status().ToString();
  ASSERT_EQ(*waited, 1u);
  EXPECT_EQ(events[0].user_data, 7u);
  ROS2_ASSERT_OK(events[0].result.status);
  auto back = obj->Get("k", "a", 700);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, value);
}

// A create-if-absent of (dkey, "a") at `epoch`, sent by hand to the group's
// leader `copies[0]` naming the other copies: what libros2 sends, and
// resends with the same epoch after a failure.
Result<transport::ReplyMessage> CreateIfAbsent(ObjectSession& raw, const std::vector<uint32_t>& copies,
                                               const ObjectId& oid, const std::string& dkey, Epoch epoch,
                                               const std::vector<std::byte>& data) {
  obj::UpdateRequest u;
  u.header = raw.Header(copies[0], epoch);
  u.header.flags = obj::kFlagIfAbsent;
  u.oid = oid;
  u.dkey = dkey;
  u.akey = "a";
  u.length = data.size();
  obj::LeaderRequest lead;
  lead.op = obj::Opcode::kUpdate;
  lead.body = obj::Encode(u);
  for (size_t i = 1; i < copies.size(); ++i) {
    lead.peers.push_back({raw.map().targets[copies[i]].engine_index,
                          raw.pool().map.targets(static_cast<int>(copies[i])).worker_address()});
  }
  return raw.Call(copies[0], obj::Opcode::kLeader, obj::Encode(lead), Bytes(data));
}

TEST_F(ReplicationForwardDurableTest, ConditionalResendAfterTheLeadersRestartGetsTheFirstAnswer) {
  VictimScene scene;
  ASSERT_NO_FATAL_FAILURE(SetUpVictim(c_, 0, &scene));
  auto& [mgmt_leader, home, raw, v] = scene;
  const auto first = Pattern(3000, 31);
  const Epoch txid = HybridClock().Now();
  auto created = CreateIfAbsent(*raw, v.copies, v.oid, "k0", txid, first);
  ROS2_ASSERT_OK(created.status());
  // The leader's engine dies and comes back on its stores (its worker
  // addresses are new: a new session reads them from the map).
  const auto restart = std::chrono::steady_clock::now();
  c_.Kill(v.engine);
  ROS2_ASSERT_OK(c_.Restart(v.engine));
  std::printf("leader's engine killed -9 and restarted in %lld ms\n", MsSince(restart));
  raw = c_.Raw(home, "rp3");
  ASSERT_NE(raw, nullptr);
  auto copies = WriteTargets(raw->map(), v.oid, "k0");
  ASSERT_TRUE(copies.ok()) << copies.status().ToString();
  ASSERT_EQ(*copies, v.copies) << "the restarted engine's target leads the group again";
  // The acknowledgement was lost, say: the client resends the same
  // transaction. This leader stored it before its restart, so it answers as
  // the first time instead of deciding again against the value it made.
  auto resent = CreateIfAbsent(*raw, v.copies, v.oid, "k0", txid, first);
  EXPECT_TRUE(resent.ok()) << "the resend of an acknowledged create-if-absent after the leader's restart: "
                           << resent.status().ToString();
  // Another transaction on the key is still decided, and refused.
  auto other = CreateIfAbsent(*raw, v.copies, v.oid, "k0", HybridClock().Now(), Pattern(3000, 32));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), Status::Code::kAlreadyExists) << other.status().ToString();
  for (uint32_t t : v.copies) {
    auto got = ReadCopy(*raw, t, v.oid, "k0", first.size());
    ASSERT_TRUE(got.ok()) << "target " << t << ": " << got.status().ToString();
    EXPECT_EQ(*got, first) << "target " << t;
  }
}

// A client of engine `home`, its pool "p" and the containers "rp2" and
// "rp3" (kept together: the containers need the pool and the client).
struct RpContainers {
  std::unique_ptr<client::Client> client;
  std::unique_ptr<client::Pool> pool;
  std::map<std::string, std::unique_ptr<client::Container>> by_name;
};
void OpenRpContainers(ForwardCluster& c, size_t home, RpContainers* out) {
  ASSERT_NO_FATAL_FAILURE(ConnectPoolP(c, home, &out->client, &out->pool));
  for (const char* name : {"rp2", "rp3"}) {
    auto cont = out->pool->OpenContainer(name);
    ASSERT_TRUE(cont.ok()) << cont.status().ToString();
    out->by_name[name] = std::move(*cont);
  }
}

// The states of engine `e`'s targets in the system map engine `ask` holds.
std::vector<rpc::TargetState> TargetStates(ForwardCluster& c, size_t ask, size_t e) {
  std::vector<rpc::TargetState> out;
  auto st = c.Mgmt(ask)->GetEngineStatus();
  if (!st.ok()) return out;
  for (const auto& t : st->targets()) {
    if (t.engine_uuid() == c.engines[e]->engine_id()) out.push_back(t.state());
  }
  return out;
}

// The keys BackFromDown... writes: RP_3G1 and RP_2G1 values, each read
// through a client `kReads` times (successive fetches start at each readable
// copy in turn) and from each copy directly.
struct StaleCase {
  ObjectId oid;
  std::string dkey;
  size_t size;
  uint64_t seed;  // the value's pattern; 0: punched (reads as absent)
};
constexpr int kReads = 6;

void ExpectEveryReadNew(client::Container& cont, const std::vector<StaleCase>& keys, const char* when) {
  for (const StaleCase& k : keys) {
    auto obj = cont.OpenObject(k.oid);
    ASSERT_TRUE(obj.ok()) << obj.status().ToString();
    for (int r = 0; r < kReads; ++r) {
      auto got = obj->Get(k.dkey, "a", k.size);
      ASSERT_TRUE(got.ok()) << when << ": " << k.oid.ToString() << " " << k.dkey << ": " << got.status().ToString();
      if (k.seed == 0) {
        EXPECT_TRUE(got->empty()) << when << ": " << k.dkey << " was punched while the engine was DOWN, read "
                                  << got->size() << " bytes (read " << r << ")";
      } else {
        EXPECT_TRUE(*got == Pattern(k.size, k.seed)) << when << ": " << k.oid.ToString() << " " << k.dkey << " read "
                                                     << r << " is not the value acknowledged while the engine was DOWN";
      }
    }
  }
}

// An engine killed -9, marked DOWN, its keys overwritten (and one punched)
// through libros2, then restarted before its rebuild (docs/replication.md,
// "Target states"): its target comes back REINT, not UP, so no read goes
// to its stale copies; it is caught up (written meanwhile, its replicated
// copies pulled from the survivors) and then UP, read again, with every
// value the one acknowledged while it was DOWN. The RP_2G1 fallback's
// copies are given back. With the engine's targets back UP at once, a
// third of the RP_3G1 reads return the old values.
TEST_F(ReplicationForwardDurableTest, AnEngineBackFromDownServesNoStaleRead) {
  auto mgmt = c_.Mgmt(0);
  ASSERT_TRUE(mgmt->CreateContainer("p", "rp2", {{"oclass", "RP_2G1"}, {"rd_fac", "1"}}).ok());
  const int leader = c_.LeaderIndex(0);
  ASSERT_GE(leader, 0);
  const size_t home = leader == 0 ? 1 : 0;
  const size_t victim = 3 - home - static_cast<size_t>(leader);
  auto raw = c_.Raw(home, "rp2");
  ASSERT_NE(raw, nullptr);
  uint32_t victim_target = 0;
  while (raw->engine_of(victim_target) != c_.engines[victim]->engine_id()) ++victim_target;
  // An RP_2G1 object with a copy on the victim (its other copy elsewhere).
  ObjectId rp2;
  std::vector<uint32_t> rp2_copies;
  for (uint64_t lo = 1; lo < 1000 && rp2_copies.empty(); ++lo) {
    rp2 = client::Container::MakeObjectId(ObjectClass::kRP2G1, 0, lo);
    auto copies = WriteTargets(raw->map(), rp2, "k0");
    ASSERT_TRUE(copies.ok()) << copies.status().ToString();
    if (std::find(copies->begin(), copies->end(), victim_target) != copies->end()) rp2_copies = *copies;
  }
  ASSERT_EQ(rp2_copies.size(), 2u);
  const ObjectId rp3 = client::Container::MakeObjectId(ObjectClass::kRP3G1, 0, 77);

  RpContainers writer;
  ASSERT_NO_FATAL_FAILURE(OpenRpContainers(c_, home, &writer));
  auto& conts = writer.by_name;
  auto cont_of = [&](const ObjectId& oid) { return oid == rp3 ? conts["rp3"].get() : conts["rp2"].get(); };
  std::vector<StaleCase> keys;
  for (const ObjectId& oid : {rp3, rp2}) {
    for (int i = 0; i < 6; ++i) keys.push_back({oid, "k" + std::to_string(i), i % 2 == 0 ? 900u : 40u << 10, 0});
  }
  auto put_all = [&](uint64_t base) {
    for (size_t i = 0; i < keys.size(); ++i) {
      auto obj = cont_of(keys[i].oid)->OpenObject(keys[i].oid);
      ASSERT_TRUE(obj.ok()) << obj.status().ToString();
      keys[i].seed = base + i;
      ROS2_ASSERT_OK(obj->Put(keys[i].dkey, "a", Bytes(Pattern(keys[i].size, keys[i].seed))));
    }
  };
  ASSERT_NO_FATAL_FAILURE(put_all(100));

  const auto killed = std::chrono::steady_clock::now();
  c_.Kill(victim);
  while (TargetStates(c_, home, victim) != std::vector<rpc::TargetState>{rpc::TARGET_DOWN}) {
    ASSERT_LT(MsSince(killed), 20'000) << "the victim's target never went DOWN";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const long long down_ms = MsSince(killed);
  // Overwritten while DOWN (the survivors and the RP_2G1 fallback take them),
  // and one key of each object punched.
  ASSERT_NO_FATAL_FAILURE(put_all(200));
  for (size_t i : {size_t{5}, size_t{11}}) {
    auto obj = cont_of(keys[i].oid)->OpenObject(keys[i].oid);
    ASSERT_TRUE(obj.ok()) << obj.status().ToString();
    ROS2_ASSERT_OK(obj->PunchDkey(keys[i].dkey));
    keys[i].seed = 0;
  }
  PoolMap degraded = raw->map();  // the map as it is now, the victim DOWN
  degraded.targets[victim_target].state = TargetState::kDown;
  auto fallback_copies = WriteTargets(degraded, rp2, "k0");
  ASSERT_TRUE(fallback_copies.ok()) << fallback_copies.status().ToString();
  uint32_t fallback = UINT32_MAX;
  for (uint32_t t : *fallback_copies) {
    if (std::find(rp2_copies.begin(), rp2_copies.end(), t) == rp2_copies.end()) fallback = t;
  }
  ASSERT_NE(fallback, UINT32_MAX) << "the RP_2G1 group has no fallback while its copy is DOWN";

  const auto restarted = std::chrono::steady_clock::now();
  ROS2_ASSERT_OK(c_.Restart(victim));
  std::vector<rpc::TargetState> back;
  while ((back = TargetStates(c_, home, victim)) == std::vector<rpc::TargetState>{rpc::TARGET_DOWN}) {
    ASSERT_LT(MsSince(restarted), 20'000) << "the restarted victim's target stayed DOWN";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::printf("kill -9 -> DOWN %lld ms; restart -> registered in %lld ms, state %s\n", down_ms, MsSince(restarted),
              back.empty() ? "?" : rpc::TargetState_Name(back[0]).c_str());
  EXPECT_EQ(back, std::vector<rpc::TargetState>{rpc::TARGET_REINT})
      << "an engine back from DOWN before its rebuild must catch up before it is read";

  // A fresh client (its map has the victim back) reads every key from every
  // copy it reads, while the victim catches up.
  RpContainers fresh;
  ASSERT_NO_FATAL_FAILURE(OpenRpContainers(c_, home, &fresh));
  auto& fresh_conts = fresh.by_name;
  auto read_all = [&](const char* when) {
    for (const char* name : {"rp3", "rp2"}) {
      std::vector<StaleCase> mine;
      for (const StaleCase& k : keys) {
        if ((k.oid == rp3) == (std::string(name) == "rp3")) mine.push_back(k);
      }
      ASSERT_NO_FATAL_FAILURE(ExpectEveryReadNew(*fresh_conts[name], mine, when));
    }
  };
  ASSERT_NO_FATAL_FAILURE(read_all("back from DOWN, catching up"));

  // Caught up: UP, and read again.
  while (TargetStates(c_, home, victim) != std::vector<rpc::TargetState>{rpc::TARGET_UP}) {
    ASSERT_LT(MsSince(restarted), 30'000) << "the victim never caught up (UP)";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const long long up_ms = MsSince(restarted);
  std::map<bool, std::unique_ptr<ObjectSession>> caught;  // by "is rp3"
  for (bool is_rp3 : {false, true}) {
    caught[is_rp3] = c_.Raw(home, is_rp3 ? "rp3" : "rp2");
    ASSERT_NE(caught[is_rp3], nullptr);
  }
  for (const StaleCase& k : keys) {
    auto got = ReadCopy(*caught[k.oid == rp3], victim_target, k.oid, k.dkey, k.size);
    if (k.seed == 0) {
      EXPECT_TRUE(got.status().IsNotFound()) << k.dkey << " punched while DOWN is still on the caught-up copy";
    } else {
      ASSERT_TRUE(got.ok()) << k.oid.ToString() << " " << k.dkey
                            << " on the caught-up copy: " << got.status().ToString();
      EXPECT_TRUE(*got == Pattern(k.size, k.seed)) << k.oid.ToString() << " " << k.dkey << " on the caught-up copy";
    }
  }
  // The fresh client's map watch brings the UP map; its reads then use the
  // victim's copies too (its fetch count grows).
  const auto before = FetchesByEngine(c_);
  for (int round = 0; round < 20; ++round) {
    ASSERT_NO_FATAL_FAILURE(read_all("caught up, UP"));
    const auto after = FetchesByEngine(c_);
    if (after[victim] > before[victim]) break;
    ASSERT_LT(round, 19) << "the caught-up victim is never read";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // The RP_2G1 fallback's copies (written while DOWN) are given back.
  bool reclaimed = false;
  while (!reclaimed && MsSince(restarted) < 30'000) {
    reclaimed = ReadCopy(*caught[false], fallback, rp2, "k0", 900).status().IsNotFound();
    if (!reclaimed) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(reclaimed) << "the fallback target " << fallback << " still holds its copy of the RP_2G1 group";
  std::printf("restart -> caught up and UP in %lld ms; fallback copies reclaimed at %lld ms\n", up_ms,
              MsSince(restarted));
}

}  // namespace
}  // namespace ros2::testing
