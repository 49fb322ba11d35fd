// The read rule for listings and queries of replicated objects
// (docs/replication.md, "Read rule"), label `replication`: one etcd member
// and three ros2-engine processes (one target each), a libros2 client, and
// raw object sessions (object_session.h) that ask each copy's target
// directly.
//
// - While the first update of a dkey hangs on one copy (its engine
//   SIGSTOPped, as a cut link), neither the leader (which stored it beside
//   its forwards) nor the copy that stored the forward lists that dkey, or
//   answers it as the object's largest, read directly or through the client:
//   the listings are held (or answer without it); a listing of another
//   object is not held. Once the stopped copy resumes, the write is
//   acknowledged and every held listing answers with the dkey.
//
// The cluster set-up is a minimal copy of replication_forward_test.cc's.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

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

struct ListingCluster : EtcdEngineCluster {
  void Start() {
    ROS2_ASSERT_OK(EtcdEngineCluster::Start(
        {.engines = 3, .storage_class = "ram", .data_size = "32MiB", .lease_ttl = std::chrono::seconds(kTtlSeconds)}));
  }
  std::unique_ptr<ObjectSession> Raw(size_t i) {
    auto s = ObjectSession::Open(engines[i]->control(), admin, "p", "rp3", transport::TransportKind::kTcp);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
};

std::span<const std::byte> Bytes(const std::vector<std::byte>& v) {
  return {v.data(), v.size()};
}

// The dkeys of `oid` (kind kDkeys) or the akeys of its `dkey` (kAkeys) as the
// target `target` lists them.
Result<std::vector<std::string>> ListOn(ObjectSession& s, uint32_t target, const ObjectId& oid, obj::ListKind kind,
                                        const std::string& dkey = {}) {
  obj::ListRequest req;
  req.header = s.Header(target);
  req.kind = kind;
  req.oid = oid;
  req.dkey = dkey;
  req.max_entries = 100;
  ROS2_ASSIGN_OR_RETURN(auto reply, s.Call(target, obj::Opcode::kList, obj::Encode(req)));
  ROS2_ASSIGN_OR_RETURN(auto decoded, obj::DecodeListReply(reply.payload));
  return decoded.keys;
}

// The largest dkey of `oid` on `target` ("" when it has none), as a list.
Result<std::vector<std::string>> MaxDkeyOn(ObjectSession& s, uint32_t target, const ObjectId& oid) {
  obj::QueryRequest req;
  req.header = s.Header(target);
  req.kind = obj::QueryKind::kMaxDkey;
  req.oid = oid;
  ROS2_ASSIGN_OR_RETURN(auto reply, s.Call(target, obj::Opcode::kQuery, obj::Encode(req)));
  ROS2_ASSIGN_OR_RETURN(auto decoded, obj::DecodeQueryReply(reply.payload));
  if (!decoded.found) return std::vector<std::string>{};
  return std::vector<std::string>{decoded.max_dkey};
}

bool Has(const std::vector<std::string>& keys, const std::string& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// A listing in a thread of its own (a held one blocks only itself), through
// a session of its own.
struct BackgroundList {
  std::string name;
  std::thread thread;
  std::atomic<bool> done{false};
  Result<std::vector<std::string>> got = Status::Internal("not listed yet");
  std::chrono::steady_clock::time_point finished;

  void Start(std::function<Result<std::vector<std::string>>()> list) {
    thread = std::thread([this, list = std::move(list)] {
      got = list();
      finished = std::chrono::steady_clock::now();
      done.store(true, std::memory_order_release);
    });
  }
  bool Done() const { return done.load(std::memory_order_acquire); }
  void Join() {
    if (thread.joinable()) thread.join();
  }
  ~BackgroundList() { Join(); }
};

// The group's targets (the leader first) of an RP_3G1 object whose stopped
// copy (the last) is on an engine that is neither the client's (`home`) nor
// the management leader.
struct Scene {
  size_t home = 0;
  ObjectId oid;
  std::vector<uint32_t> copies;
  size_t victim = 0;  // the engine of copies[2]
};

void PickScene(ListingCluster& c, ObjectSession& raw, size_t home, int mgmt_leader, Scene* s) {
  s->home = home;
  for (uint64_t lo = 1; lo < 1000; ++lo) {
    s->oid = client::Container::MakeObjectId(ObjectClass::kRP3G1, 0, lo);
    auto copies = WriteTargets(raw.map(), s->oid, "k0");
    ASSERT_TRUE(copies.ok());
    const std::string& engine = raw.engine_of((*copies)[2]);
    if (engine != c.engines[home]->engine_id() && engine != c.engines[mgmt_leader]->engine_id()) {
      s->copies = *copies;
      break;
    }
  }
  ASSERT_EQ(s->copies.size(), 3u);
  while (c.engines[s->victim]->engine_id() != raw.engine_of(s->copies[2])) ++s->victim;
}

class ReplicationListingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(c_.Start());
    auto mgmt = c_.Mgmt(0);
    ASSERT_TRUE(mgmt->CreatePool("p", 256 << 20).ok());
    ASSERT_TRUE(mgmt->CreateContainer("p", "rp3", {{"oclass", "RP_3G1"}, {"rd_fac", "2"}}).ok());
  }
  ListingCluster c_;
};

// See the file comment.
TEST_F(ReplicationListingTest, ListingsSeeNoDkeyBeforeEveryCopyHoldsIt) {
  const int mgmt_leader = c_.LeaderIndex(0);
  ASSERT_GE(mgmt_leader, 0);
  const size_t home = mgmt_leader == 0 ? 1 : 0;
  auto raw = c_.Raw(home);
  ASSERT_NE(raw, nullptr);
  Scene sc;
  ASSERT_NO_FATAL_FAILURE(PickScene(c_, *raw, home, mgmt_leader, &sc));
  client::ClientOptions o = c_.ClientOptionsFor(home);
  o.reconnect_timeout = std::chrono::seconds(30);
  o.io_timeout = std::chrono::seconds(10);
  auto cl = client::Client::Connect(o);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto pool = (*cl)->ConnectPool("p");
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto cont = (*pool)->OpenContainer("rp3");
  ASSERT_TRUE(cont.ok()) << cont.status().ToString();
  auto obj = (*cont)->OpenObject(sc.oid);
  ASSERT_TRUE(obj.ok()) << obj.status().ToString();
  const auto value = Pattern(1000, 3);
  ROS2_ASSERT_OK(obj->Put("k0", "a", Bytes(value)));
  // An object of the same group with nothing in flight: never held.
  const ObjectId other = client::Container::MakeObjectId(ObjectClass::kRP3G1, 0, 9999);

  // Sessions of their own, opened while every engine answers.
  std::vector<std::unique_ptr<ObjectSession>> sessions;
  for (int i = 0; i < 5; ++i) {
    sessions.push_back(c_.Raw(home));
    ASSERT_NE(sessions.back(), nullptr);
  }
  const uint32_t leader = sc.copies[0];
  const uint32_t c1 = sc.copies[1];
  const pid_t victim = c_.engines[sc.victim]->pid();
  ASSERT_EQ(::kill(victim, SIGSTOP), 0);
  Status written;
  std::thread writer([&] { written = obj->Put("k1", "a", Bytes(value)); });  // k1: a new dkey, the largest
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  BackgroundList lists[6];
  lists[0].name = "the leader's dkey listing";
  lists[0].Start([&] { return ListOn(*sessions[0], leader, sc.oid, obj::ListKind::kDkeys); });
  lists[1].name = "the leader's largest dkey";
  lists[1].Start([&] { return MaxDkeyOn(*sessions[1], leader, sc.oid); });
  lists[2].name = "the leader's akey listing of k1";
  lists[2].Start([&] { return ListOn(*sessions[2], leader, sc.oid, obj::ListKind::kAkeys, "k1"); });
  lists[3].name = "copy C1's dkey listing";
  lists[3].Start([&] { return ListOn(*sessions[3], c1, sc.oid, obj::ListKind::kDkeys); });
  lists[4].name = "the client's dkey listing";
  lists[4].Start([&] { return obj->ListDkeys(); });
  lists[5].name = "the leader's dkey listing of another object";
  lists[5].Start([&] { return ListOn(*sessions[4], leader, other, obj::ListKind::kDkeys); });
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  // What answered while the forward to the stopped copy hangs lacks k1
  // (the akey listing of k1 shows "a" only once k1 is on every copy).
  int held = 0;
  for (int i = 0; i < 5; ++i) {
    if (!lists[i].Done()) {
      ++held;
      continue;
    }
    EXPECT_TRUE(lists[i].got.ok() && !Has(*lists[i].got, "k1") && !Has(*lists[i].got, "a"))
        << lists[i].name << " showed what a copy did not hold yet: "
        << (lists[i].got.ok() ? (i == 2 ? "akey a of k1" : "k1") : lists[i].got.status().ToString());
  }
  const bool other_answered = lists[5].Done();
  const auto resumed = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(victim, SIGCONT), 0);
  writer.join();
  for (auto& l : lists) l.Join();
  ROS2_ASSERT_OK(written);
  std::printf("%d of 5 listings held while the forward to the stopped copy hung\n", held);
  EXPECT_TRUE(other_answered) << "a listing of an object with nothing in flight was held";
  ASSERT_TRUE(lists[5].got.ok()) << lists[5].got.status().ToString();
  EXPECT_TRUE(lists[5].got->empty());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(lists[i].got.ok()) << lists[i].name << ": " << lists[i].got.status().ToString();
    if (lists[i].finished < resumed) continue;  // answered before (checked above)
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(lists[i].finished - resumed);
    std::printf("%s answered %lld ms after the stopped copy resumed\n", lists[i].name.c_str(),
                static_cast<long long>(waited.count()));
    EXPECT_TRUE(Has(*lists[i].got, i == 2 ? "a" : "k1")) << lists[i].name << " held, then answered without k1";
    EXPECT_LT(waited.count(), 1000) << lists[i].name << " waited past the write's settling";
  }
  // Every copy lists k1 now.
  for (uint32_t t : sc.copies) {
    auto dkeys = ListOn(*raw, t, sc.oid, obj::ListKind::kDkeys);
    ASSERT_TRUE(dkeys.ok()) << "target " << t << ": " << dkeys.status().ToString();
    EXPECT_TRUE(Has(*dkeys, "k0") && Has(*dkeys, "k1")) << "target " << t;
  }
}

}  // namespace
}  // namespace ros2::testing
