// libros2 parts that need no server: argument validation, checksum handling,
// pool map conversion, the event queue without I/O, and the C API's handle
// checks (those are written in C: c_api_checks.c).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "client/client_internal.h"
#include "client/io_checksum.h"
#include "client/resend.h"
#include "ros2/client.h"
#include "ros2/ros2.h"
#include "testing/pattern.h"

extern "C" {
// c_api_checks.c: each returns 0 when every check held, else the line of the first failure.
int ros2_c_check_null_handles(void);
int ros2_c_check_connect_arguments(void);
int ros2_c_check_strerror(void);
}

namespace ros2::client {
namespace {

// Options of a client whose control plane is not there: what the tests of
// the client's own state need (nothing is ever sent).
ClientOptions OfflineOptions() {
  ClientOptions o;
  o.control = "unix:/nonexistent/control.sock";
  o.secret = "s";
  o.transport = "tcp";
  return o;
}

using ros2::testing::Pattern;

// --- checksums ---

TEST(ClientChecksumTest, UpdateChecksumsAreChunked) {
  auto data = Pattern(10000, 1);
  obj::Checksums c = ChecksumsForUpdate(ChecksumType::kCrc32c, 4096, data);
  EXPECT_EQ(c.type, ChecksumType::kCrc32c);
  EXPECT_EQ(c.chunk_size, 4096u);
  ASSERT_EQ(c.values.size(), 3u);  // 4096 + 4096 + 1808
  EXPECT_EQ(c.values[2], Crc32c(data.data() + 8192, 1808));
  EXPECT_TRUE(obj::ValidateChecksums(c, data.size(), "test").ok());

  obj::Checksums none = ChecksumsForUpdate(ChecksumType::kNone, 4096, data);
  EXPECT_EQ(none.type, ChecksumType::kNone);
  EXPECT_TRUE(none.values.empty());
  EXPECT_TRUE(ChecksumsForUpdate(ChecksumType::kCrc32c, 4096, {}).values.empty());
}

TEST(ClientChecksumTest, VerifyAcceptsIntactData) {
  auto data = Pattern(8192, 2);
  obj::Checksums c = ChecksumsForUpdate(ChecksumType::kCrc64, 1024, data);
  EXPECT_TRUE(VerifyFetched(true, c, data, "fetch").ok());
}

TEST(ClientChecksumTest, VerifyRefusesAFlippedBitAsCorruption) {
  auto data = Pattern(8192, 3);
  obj::Checksums c = ChecksumsForUpdate(ChecksumType::kCrc32c, 4096, data);
  data[5000] ^= std::byte{0x10};
  Status st = VerifyFetched(true, c, data, "fetch oid=1.2 dkey='d'");
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("oid=1.2"), std::string::npos) << st.message();
}

TEST(ClientChecksumTest, VerifyRefusesMissingOrMisshapenChecksums) {
  auto data = Pattern(4096, 4);
  Status missing = VerifyFetched(true, obj::Checksums{}, data, "fetch");
  EXPECT_EQ(missing.code(), Status::Code::kProtocol) << missing.ToString();
  EXPECT_NE(missing.message().find("without checksums"), std::string::npos);

  obj::Checksums short_list = ChecksumsForUpdate(ChecksumType::kCrc32c, 1024, data);
  short_list.values.pop_back();
  EXPECT_EQ(VerifyFetched(true, short_list, data, "fetch").code(), Status::Code::kProtocol);
  // Disabled checking still refuses a malformed shape but accepts absent checksums.
  EXPECT_EQ(VerifyFetched(false, short_list, data, "fetch").code(), Status::Code::kProtocol);
  EXPECT_TRUE(VerifyFetched(false, obj::Checksums{}, data, "fetch").ok());
  // Nothing to verify: an empty value needs no checksums.
  EXPECT_TRUE(VerifyFetched(true, obj::Checksums{}, {}, "fetch").ok());
}

// --- options, classes, descriptions ---

TEST(ClientOptionsTest, ConnectValidatesOptionsBeforeAnyNetworkCall) {
  ClientOptions o;
  auto r = Client::Connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument());
  EXPECT_NE(r.status().message().find("control endpoint"), std::string::npos);

  o.control = "unix:/nonexistent/control.sock";
  r = Client::Connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no secret"), std::string::npos) << r.status().ToString();

  o.secret_file = "/nonexistent/secret";
  r = Client::Connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/secret"), std::string::npos) << r.status().ToString();

  o.secret_file.clear();
  o.secret = "s";
  o.transport = "carrier-pigeon";
  r = Client::Connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument());
  EXPECT_NE(r.status().message().find("carrier-pigeon"), std::string::npos) << r.status().ToString();

  o.transport = "tcp";
  o.spin_budget = std::chrono::seconds(2);
  r = Client::Connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument());
  EXPECT_NE(r.status().message().find("spin_budget"), std::string::npos) << r.status().ToString();

  o.spin_budget = std::chrono::microseconds(50);
  o.checksum_chunk_size = 0;
  EXPECT_TRUE(Client::Connect(o).status().IsInvalidArgument());

  o.checksum_chunk_size = 4096;
  o.reconnect_timeout = std::chrono::milliseconds(-1);
  r = Client::Connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("reconnect_timeout"), std::string::npos) << r.status().ToString();
}

TEST(ClientOptionsTest, EveryNamedObjectClassIsSupported) {
  for (const char* name : {"S1", "SX", "RP_2G1", "RP_3G1", "RP_2GX", "rp_3gx"}) {
    auto oc = ParseObjectClass(name);
    ASSERT_TRUE(oc.ok()) << name;
    EXPECT_TRUE(CheckObjectClassSupported(*oc).ok()) << name;
    EXPECT_EQ(*ParseObjectClass(ObjectClassName(*oc)), *oc) << "names round-trip: " << name;
  }
  EXPECT_TRUE(CheckObjectClassSupported(static_cast<ObjectClass>(77)).IsInvalidArgument());
  Status bad = ParseObjectClass("RP_4G1").status();
  EXPECT_TRUE(bad.IsInvalidArgument());
  EXPECT_NE(bad.message().find("RP_3GX"), std::string::npos) << "the error lists the classes: " << bad.message();
}

TEST(ClientOptionsTest, RedundancyFactorRefusesClassesThatSurviveFewerLosses) {
  EXPECT_EQ(FailuresTolerated(ObjectClass::kSX), 0u);
  EXPECT_EQ(FailuresTolerated(ObjectClass::kRP2GX), 1u);
  EXPECT_EQ(FailuresTolerated(ObjectClass::kRP3G1), 2u);
  EXPECT_TRUE(CheckRedundancy(ObjectClass::kSX, 0).ok());
  EXPECT_TRUE(CheckRedundancy(ObjectClass::kRP2G1, 1).ok());
  EXPECT_TRUE(CheckRedundancy(ObjectClass::kRP3GX, 2).ok());
  Status st = CheckRedundancy(ObjectClass::kRP2GX, 2);
  ASSERT_TRUE(st.IsInvalidArgument());
  EXPECT_NE(st.message().find("RP_2GX"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rd_fac=2"), std::string::npos) << st.message();
  EXPECT_TRUE(CheckRedundancy(ObjectClass::kS1, 1).IsInvalidArgument());
}

TEST(ClientOptionsTest, DescribeIoEscapesBinaryKeys) {
  ObjectId oid = Container::MakeObjectId(ObjectClass::kSX, 0, 7);
  std::string d = DescribeIo(oid, std::string("a\0b", 3), "akey");
  EXPECT_NE(d.find("oid=" + oid.ToString()), std::string::npos);
  EXPECT_NE(d.find("dkey='a\\x00b'"), std::string::npos) << d;
  EXPECT_NE(d.find("akey='akey'"), std::string::npos) << d;
}

// --- pool map conversion ---

rpc::PoolMap TwoEngineMap() {
  rpc::PoolMap m;
  m.set_pool_uuid("p");
  m.set_version(7);
  m.add_engines()->set_uuid("e-a");
  m.add_engines()->set_uuid("e-b");
  for (int e = 0; e < 2; ++e) {
    for (uint32_t i = 0; i < 2; ++i) {
      auto* t = m.add_targets();
      t->set_engine_uuid(e == 0 ? "e-a" : "e-b");
      t->set_index(i);
      t->set_state(rpc::TARGET_UP);
      t->set_worker_address("addr-" + std::to_string(e) + "-" + std::to_string(i));
    }
  }
  return m;
}

TEST(ClientMapTest, SnapshotKeepsOrderEnginesAndAddresses) {
  rpc::PoolMap m = TwoEngineMap();
  m.mutable_targets(3)->set_state(rpc::TARGET_DOWN);
  auto snap = MakeMapSnapshot(m);
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  const MapSnapshot& s = **snap;
  EXPECT_EQ(s.map.version, 7u);
  ASSERT_EQ(s.map.size(), 4u);
  EXPECT_EQ(s.map.targets[1].engine_rank, 0u);
  EXPECT_EQ(s.map.targets[2].engine_rank, 1u);
  EXPECT_EQ(s.engine_index[3], 1u);
  EXPECT_EQ(s.addresses[2], "addr-1-0");
  EXPECT_EQ(s.map.targets[3].state, TargetState::kDown);
  // Every dkey of an S1 object lands on one target; placement needs no lookup.
  ObjectId s1 = Container::MakeObjectId(ObjectClass::kS1, 0, 42);
  auto a = TargetForDkey(s.map, s1, "a");
  auto b = TargetForDkey(s.map, s1, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

TEST(ClientMapTest, SnapshotRefusesAnUpTargetWithoutAddressAndAnEmptyMap) {
  rpc::PoolMap m = TwoEngineMap();
  m.mutable_targets(1)->clear_worker_address();
  auto snap = MakeMapSnapshot(m);
  ASSERT_FALSE(snap.ok());
  EXPECT_NE(snap.status().message().find("no worker address"), std::string::npos) << snap.status().ToString();
  EXPECT_FALSE(MakeMapSnapshot(rpc::PoolMap{}).ok());
}

// --- the resend policy of one operation ---

// PrepareRecovery, what every applier of the failure policy renews before
// the next attempt: the map after a reconnect or a stale map, the capability
// after a refusal; each is fetched again on next use (here from a control
// plane that is not there, so that fails with the control plane's error).
TEST(ClientRetryTest, PrepareRecoveryRenewsWhatTheDecisionCallsFor) {
  ClientOptions o = OfflineOptions();
  o.control_timeout = std::chrono::milliseconds(200);
  o.reconnect_timeout = std::chrono::milliseconds(300);
  auto client = ClientCore::Create(o);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  control::PoolConnection conn;
  conn.session_uuid = "session";
  conn.pool.set_uuid(Uuid::Generate().ToString());
  conn.pool.set_label("p");
  auto snapshot = MakeMapSnapshot(TwoEngineMap());
  ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
  auto pool = std::make_shared<PoolCore>(*client, std::move(conn), *snapshot);
  control::ContainerHandle handle;
  handle.capability = "capability";
  auto cont = std::make_shared<ContainerCore>(pool, std::move(handle), ContainerSummary{}, Uuid::Generate(), 0);
  ASSERT_TRUE(pool->Map().ok());
  ASSERT_TRUE(cont->Capability().ok());

  PrepareRecovery(Recovery::kGiveUp, *cont);
  EXPECT_TRUE(pool->Map().ok());
  EXPECT_TRUE(cont->Capability().ok());
  PrepareRecovery(Recovery::kRetryHere, *cont);
  EXPECT_TRUE(pool->Map().ok());  // the map is kept
  auto cap = cont->Capability();
  ASSERT_FALSE(cap.ok());
  EXPECT_NE(cap.status().message().find("reopen container"), std::string::npos) << cap.status().ToString();
  for (Recovery r : {Recovery::kRefreshMap, Recovery::kReconnect}) {
    PrepareRecovery(r, *cont);
    EXPECT_TRUE(pool->map_stale());
    auto map = pool->Map();  // one attempt, no waiting: the control plane's error
    ASSERT_FALSE(map.ok());
    EXPECT_EQ(map.status().code(), Status::Code::kDisconnected) << map.status().ToString();
    EXPECT_NE(map.status().message().find("pool p"), std::string::npos) << map.status().ToString();
  }
  // Waiting is the blocking Recover's: bounded by reconnect_timeout.
  const auto t0 = std::chrono::steady_clock::now();
  Status recovered = pool->Recover();
  EXPECT_EQ(recovered.code(), Status::Code::kDisconnected) << recovered.ToString();
  EXPECT_NE(recovered.message().find("reconnect_timeout"), std::string::npos) << recovered.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(250));
  // A new map of another version or with other addresses places differently.
  rpc::PoolMap moved = TwoEngineMap();
  moved.mutable_targets(0)->set_worker_address("addr-new");
  auto other = MakeMapSnapshot(moved);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(MapChanged(**snapshot, **snapshot));
  EXPECT_TRUE(MapChanged(**snapshot, **other));
}

// What lets Object::ConnectShards skip placing and connecting: a thread's
// record of the targets it connected under one map, all of them but those
// out, and nothing dropped since.
// Client::RegisterBuffer is an owned registration, not a cache: I/O on a
// range inside it finds it until UnregisterBuffer, which ends it; a buffer
// never registered has none (its I/O registers it for the call alone).
TEST(ClientRegistrationTest, RegisteredBuffersStayUntilUnregistered) {
  auto client = ClientCore::Create(OfflineOptions());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ClientCore& core = **client;
  std::vector<std::byte> a(1 << 20), other(1 << 16);
  EXPECT_EQ(core.RegisteredRegion(a.data() + 4096, 8192), nullptr);
  ASSERT_TRUE(core.RegisterBuffer(a.data(), a.size()).ok());
  auto region = core.RegisteredRegion(a.data() + 4096, 8192);
  ASSERT_NE(region, nullptr);
  EXPECT_EQ(region->base(), a.data());
  EXPECT_EQ(core.RegisteredRegion(a.data() + a.size() - 10, 20), nullptr) << "past the registered end";
  EXPECT_EQ(core.RegisteredRegion(other.data(), other.size()), nullptr);
  EXPECT_EQ(core.context().registration_stats().live, 1u);
  region.reset();
  ASSERT_TRUE(core.UnregisterBuffer(a.data()).ok());
  EXPECT_EQ(core.RegisteredRegion(a.data(), 1), nullptr);
  EXPECT_EQ(core.context().registration_stats().live, 0u) << "unregistering left the key valid";
  const Status again = core.UnregisterBuffer(a.data());
  EXPECT_EQ(again.code(), Status::Code::kNotFound) << again.ToString();
  EXPECT_TRUE(core.RegisterBuffer(nullptr, 10).IsInvalidArgument());
}

TEST(ClientMapTest, ConnectedToAllNeedsEveryLiveTargetOfThatMapAndNoDrop) {
  auto client = ClientCore::Create(OfflineOptions());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto io = (*client)->ThisThreadIo();
  ASSERT_TRUE(io.ok()) << io.status().ToString();
  ThreadIo& t = **io;
  rpc::PoolMap m = TwoEngineMap();
  m.mutable_targets(3)->set_state(rpc::TARGET_DOWN);
  auto snap = MakeMapSnapshot(m);
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_FALSE(t.ConnectedToAll(snap->get()));
  EXPECT_FALSE(t.ConnectedToAll(nullptr));
  t.NoteConnected(*snap, 0);
  t.NoteConnected(*snap, 0);  // twice counts once
  t.NoteConnected(*snap, 1);
  EXPECT_FALSE(t.ConnectedToAll(snap->get()));  // target 2 is up and not connected
  t.NoteConnected(*snap, 2);
  EXPECT_TRUE(t.ConnectedToAll(snap->get()));  // target 3 is DOWN: not needed
  // Another map (a newer version) starts the record anew.
  m.set_version(8);
  auto newer = MakeMapSnapshot(m);
  ASSERT_TRUE(newer.ok());
  EXPECT_FALSE(t.ConnectedToAll(newer->get()));
  for (uint32_t target : {0u, 1u, 2u}) t.NoteConnected(*newer, target);
  EXPECT_TRUE(t.ConnectedToAll(newer->get()));
  EXPECT_FALSE(t.ConnectedToAll(snap->get()));
  // A dropped endpoint (a failed connection) clears the record.
  t.DropEndpoint("addr-0-0");
  EXPECT_FALSE(t.ConnectedToAll(newer->get()));
}

// --- event queue without I/O ---

TEST(ClientEventQueueTest, EmptyQueuePollsAndWaitsWithoutBlocking) {
  auto c = Client::Connect(OfflineOptions());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto eq = (*c)->CreateEventQueue();
  ASSERT_TRUE(eq.ok()) << eq.status().ToString();
  std::vector<Event> events(4);
  EXPECT_EQ((*eq)->Poll(events), 0u);
  auto start = std::chrono::steady_clock::now();
  auto n = (*eq)->Wait(events, 1, std::chrono::seconds(5));  // nothing in flight: nothing to wait for
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 0u);
  EXPECT_EQ((*eq)->WaitAny(std::chrono::seconds(5)), 0u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ((*eq)->in_flight(), 0u);
  EXPECT_NE((*c)->DescribeTransport().find("tcp"), std::string::npos) << (*c)->DescribeTransport();
  // An unreachable control endpoint is reported by the first call that needs it.
  ClientOptions quick = OfflineOptions();
  quick.control_timeout = std::chrono::milliseconds(300);
  auto c2 = Client::Connect(quick);
  ASSERT_TRUE(c2.ok());
  auto pool = (*c2)->ConnectPool("nopool");
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(pool.status().message().find("nopool"), std::string::npos) << pool.status().ToString();
  EXPECT_TRUE((*c2)->ConnectPool("").status().IsInvalidArgument());
  EXPECT_TRUE((*c2)->RegisterBuffer(nullptr, 10).IsInvalidArgument());
}

// --- the C API ---

TEST(ClientCApiTest, NullAndStaleHandlesAreRefused) {
  EXPECT_EQ(ros2_c_check_null_handles(), 0);
}
TEST(ClientCApiTest, ConnectArgumentsAreValidated) {
  EXPECT_EQ(ros2_c_check_connect_arguments(), 0);
}
TEST(ClientCApiTest, ErrorsHaveNamesAndMessages) {
  EXPECT_EQ(ros2_c_check_strerror(), 0);
}

}  // namespace
}  // namespace ros2::client
