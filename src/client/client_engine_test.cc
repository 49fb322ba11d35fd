// libros2 end to end against a real single-node cluster (ros2-engine started
// with `ros2ctl cluster up` in a temporary directory), once over tcp and once
// over shared memory: single values and arrays (4 KiB, 1 MiB) on S1 and SX,
// punch/list/query, a batch of 1,000 asynchronous I/Os, the engine's check
// of client checksums, tenant isolation, and the C API.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "control/control_channel.h"
#include "control/session_client.h"
#include "object/obj_rpc.h"
#include "placement/placement.h"
#include "ros2/client.h"
#include "ros2/ros2.h"
#include "testing/pattern.h"
#include "testing/client_fixture.h"
#include "testing/test_cluster.h"
#include "transport/transport.h"

namespace ros2::client {
namespace {

using ros2::testing::TestCluster;

using ros2::testing::Pattern;
// One cluster per transport, shared by the tests of that transport.
class ClientEngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void TearDownTestSuite() { clusters_.Clear(); }

  void SetUp() override {
    const std::string& transport = GetParam();
    std::string error;
    cluster_ = clusters_.Get(transport, &error, {{"cont", "create", "p", "c"}});
    ASSERT_NE(cluster_, nullptr) << error;
    auto connected = ros2::testing::ConnectContainer(ros2::testing::ClientOptionsFor(*cluster_, transport), "p", "c");
    ASSERT_TRUE(connected.ok()) << connected.status().ToString();
    client_ = std::move(connected->client);
    pool_ = std::move(connected->pool);
    cont_ = std::move(connected->cont);
  }

  // A C-API client of this test's cluster over this test's transport.
  int ConnectC(ros2_client_t** c) const {
    const std::string control = cluster_->control();
    const std::string secret_file = cluster_->admin_secret_file();
    ros2_client_options_t o{};
    o.control = control.c_str();
    o.secret_file = secret_file.c_str();
    o.transport = GetParam().c_str();
    return ros2_connect(&o, c);
  }

  Object Open(ObjectClass oc, uint64_t lo) {
    auto o = cont_->OpenObject(Container::MakeObjectId(oc, 0, lo));
    EXPECT_TRUE(o.ok()) << o.status().ToString();
    return *o;
  }

  static inline ros2::testing::SharedClusters clusters_;
  TestCluster* cluster_ = nullptr;
  std::unique_ptr<Client> client_;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Container> cont_;
};

TEST_P(ClientEngineTest, UsesTheRequestedTransport) {
  std::string d = client_->DescribeTransport();
  if (GetParam().starts_with("ofi-")) {
    EXPECT_NE(d.find("transport=ofi"), std::string::npos) << d;
    EXPECT_NE(d.find(GetParam() == "ofi-tcp" ? "provider=tcp;ofi_rxm" : "provider=shm"), std::string::npos) << d;
    // Bulk above the inline limit moves by fi_read / fi_write over tcp;ofi_rxm.
    EXPECT_NE(d.find(GetParam() == "ofi-tcp" ? "bulk=rma" : "bulk=tagged"), std::string::npos) << d;
  } else if (GetParam() == "tcp") {
    EXPECT_NE(d.find("transport=tcp"), std::string::npos) << d;
  } else {
    EXPECT_NE(d.find("transport=shm"), std::string::npos) << d;
    EXPECT_EQ(d.find("tls=tcp"), std::string::npos) << d;
  }
  EXPECT_EQ(pool_->summary().target_count, 2u);
}

TEST_P(ClientEngineTest, SingleValuesAndArraysOnS1AndSX) {
  for (ObjectClass oc : {ObjectClass::kS1, ObjectClass::kSX}) {
    SCOPED_TRACE(std::string(ObjectClassName(oc)));
    Object obj = Open(oc, 100 + static_cast<uint64_t>(oc));
    for (int i = 0; i < 8; ++i) {
      auto v = Pattern(50 + i * 700, i);
      ASSERT_TRUE(obj.Put("single-" + std::to_string(i), "v", v).ok());
    }
    for (int i = 0; i < 8; ++i) {
      auto got = obj.Get("single-" + std::to_string(i), "v", 64);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, Pattern(50 + i * 700, i));
    }
    for (size_t size : {size_t{4096}, size_t{1} << 20}) {
      for (int i = 0; i < 3; ++i) {
        auto data = Pattern(size, size + i);
        std::string dkey = "array-" + std::to_string(size) + "-" + std::to_string(i);
        Status st = obj.Update({dkey, "data", ValueType::kArray, 0, 1, data});
        ASSERT_TRUE(st.ok()) << st.ToString();
        std::vector<std::byte> back(size);
        auto r = obj.Fetch({dkey, "data", ValueType::kArray, 0, size, 1, back});
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        EXPECT_EQ(r->size, size);
        EXPECT_TRUE(back == data) << "mismatch at " << dkey;
      }
    }
    // Records of 8 bytes at an index; a hole before them reads as zeros.
    auto recs = Pattern(64, 9);
    ASSERT_TRUE(obj.Update({"rec", "a", ValueType::kArray, 10, 8, recs}).ok());
    std::vector<std::byte> back(16 * 8);
    ASSERT_TRUE(obj.Fetch({"rec", "a", ValueType::kArray, 2, 16, 8, back}).ok());
    EXPECT_TRUE(std::all_of(back.begin(), back.begin() + 64, [](std::byte b) { return b == std::byte{0}; }));
    EXPECT_TRUE(std::equal(recs.begin(), recs.end(), back.begin() + 64));
    auto end = obj.QueryArrayEnd("rec", "a");
    ASSERT_TRUE(end.ok()) << end.status().ToString();
    ASSERT_TRUE(end->has_value());
    EXPECT_EQ(**end, 18u);

    auto dkeys = obj.ListDkeys();
    ASSERT_TRUE(dkeys.ok()) << dkeys.status().ToString();
    EXPECT_EQ(dkeys->size(), 8u + 6u + 1u);
    auto max = obj.QueryMaxDkey();
    ASSERT_TRUE(max.ok()) << max.status().ToString();
    ASSERT_TRUE(max->has_value());
    EXPECT_EQ(**max, "single-7");
    auto akeys = obj.ListAkeys("rec");
    ASSERT_TRUE(akeys.ok()) << akeys.status().ToString();
    EXPECT_EQ(*akeys, std::vector<std::string>{"a"});

    ASSERT_TRUE(obj.PunchDkey("single-0").ok());
    auto after = obj.ListDkeys();
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(std::count(after->begin(), after->end(), "single-0"), 0);
    ASSERT_TRUE(obj.PunchObject().ok());
    auto gone = obj.ListDkeys();
    ASSERT_TRUE(gone.ok());
    EXPECT_TRUE(gone->empty());
  }
  auto objects = cont_->ListObjects();
  ASSERT_TRUE(objects.ok()) << objects.status().ToString();
}

// Whole-object calls reach every shard through one fan-out per round: dkey
// lists longer than an engine's reply page (64 KiB: about 55 dkeys of the
// longest length) come back complete and once, page by page and whole, as do
// the max dkey, the array tail (blocking and through an event queue) and an
// object punch.
TEST_P(ClientEngineTest, WholeObjectCallsSpanEveryShardAndEveryPage) {
  Object obj = Open(ObjectClass::kSX, 300);
  auto eq = client_->CreateEventQueue();
  ASSERT_TRUE(eq.ok());
  constexpr int kKeys = 400;
  const std::string pad(900, 'x');  // long keys: few per reply page
  std::vector<std::string> expected;
  std::vector<std::byte> record(8, std::byte{7});
  for (int i = 0; i < kKeys; ++i) {
    expected.push_back(fmt::format("{:04d}-{}", i, pad));
    UpdateArgs u{expected.back(), "a", ValueType::kArray, static_cast<uint64_t>(i), 8, record};
    ASSERT_TRUE(obj.SubmitUpdate(**eq, u, static_cast<uint64_t>(i)).ok());
  }
  std::vector<Event> events(64);
  while ((*eq)->in_flight() > 0 || (*eq)->ready() > 0) {
    auto n = (*eq)->Wait(events, 1, std::chrono::seconds(30));
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    for (size_t i = 0; i < *n; ++i) ASSERT_TRUE(events[i].result.status.ok()) << events[i].result.status.ToString();
  }

  auto all = obj.ListDkeys();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, expected);  // sorted, each once

  std::multiset<std::string> paged;
  KeyAnchor anchor;
  int pages = 0;
  while (!anchor.eof) {
    auto page = obj.ListDkeysPage(anchor, 64);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    paged.insert(page->begin(), page->end());
    ASSERT_LT(++pages, 1000);
  }
  EXPECT_EQ(paged, std::multiset<std::string>(expected.begin(), expected.end()));

  auto max = obj.QueryMaxDkey();
  ASSERT_TRUE(max.ok()) << max.status().ToString();
  ASSERT_TRUE(max->has_value());
  EXPECT_EQ(**max, expected.back());
  auto tail = obj.QueryArrayTail("a");
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  ASSERT_TRUE(tail->has_value());
  EXPECT_EQ((*tail)->dkey, expected.back());
  EXPECT_EQ((*tail)->end, uint64_t{kKeys});
  std::optional<Result<std::optional<ArrayTail>>> async_tail;
  ASSERT_TRUE(
      obj.SubmitQueryArrayTail(**eq, "a", [&](const Result<std::optional<ArrayTail>>& r) { async_tail = r; }).ok());
  while (!async_tail && (*eq)->in_flight() > 0) (void)(*eq)->WaitAny(std::chrono::seconds(5));
  ASSERT_TRUE(async_tail.has_value());
  ASSERT_TRUE(async_tail->ok()) << async_tail->status().ToString();
  ASSERT_TRUE(async_tail->value().has_value());
  EXPECT_EQ(async_tail->value()->dkey, expected.back());

  auto objects = cont_->ListObjects();
  ASSERT_TRUE(objects.ok()) << objects.status().ToString();
  EXPECT_EQ(std::count(objects->begin(), objects->end(), obj.id()), 1);
  ASSERT_TRUE(obj.PunchObject().ok());
  auto gone = obj.ListDkeys();
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_TRUE(gone->empty());
  auto no_tail = obj.QueryArrayTail("a");
  ASSERT_TRUE(no_tail.ok()) << no_tail.status().ToString();
  EXPECT_FALSE(no_tail->has_value());
}

TEST_P(ClientEngineTest, AsyncBatchOfAThousandFromOneThread) {
  Object obj = Open(ObjectClass::kSX, 200);
  auto eq = client_->CreateEventQueue();
  ASSERT_TRUE(eq.ok());
  constexpr uint32_t kOps = 1000;
  constexpr size_t kSize = 4096;
  auto data = Pattern(kOps * kSize, 1);
  std::vector<Event> events(128);
  auto drain = [&](std::set<uint64_t>* seen) {
    while ((*eq)->in_flight() > 0 || (*eq)->ready() > 0) {
      auto n = (*eq)->Wait(events, 1, std::chrono::seconds(30));
      ASSERT_TRUE(n.ok()) << n.status().ToString();
      for (size_t i = 0; i < *n; ++i) {
        ASSERT_TRUE(events[i].result.status.ok()) << events[i].result.status.ToString();
        seen->insert(events[i].user_data);
      }
    }
  };
  for (uint32_t i = 0; i < kOps; ++i) {
    UpdateArgs u{"k" + std::to_string(i % 40),
                 "a",
                 ValueType::kArray,
                 (i / 40) * kSize,
                 1,
                 std::span<const std::byte>(data).subspan(i * kSize, kSize)};
    ASSERT_TRUE(obj.SubmitUpdate(**eq, u, i).ok());
  }
  EXPECT_GT((*eq)->in_flight() + (*eq)->ready(), 0u);
  std::set<uint64_t> written;
  drain(&written);
  EXPECT_EQ(written.size(), kOps);

  std::vector<std::byte> back(data.size());
  for (uint32_t i = 0; i < kOps; ++i) {
    FetchArgs f{"k" + std::to_string(i % 40),
                "a",
                ValueType::kArray,
                (i / 40) * kSize,
                kSize,
                1,
                std::span(back).subspan(i * kSize, kSize)};
    ASSERT_TRUE(obj.SubmitFetch(**eq, f, i).ok());
  }
  std::set<uint64_t> read;
  drain(&read);
  EXPECT_EQ(read.size(), kOps);
  EXPECT_TRUE(back == data);
}

// WaitAny blocks until a completion callback ran (Wait only counts events),
// which is how the fio engine sleeps on the worker instead of polling.
TEST_P(ClientEngineTest, WaitAnyReturnsWhenACallbackRan) {
  Object obj = Open(ObjectClass::kSX, 201);
  auto eq = client_->CreateEventQueue();
  ASSERT_TRUE(eq.ok());
  EXPECT_EQ((*eq)->WaitAny(std::chrono::seconds(5)), 0u);  // nothing in flight
  constexpr size_t kSize = 64 * 1024;
  auto data = Pattern(kSize, 3);
  int callbacks = 0;
  Status first;
  for (int i = 0; i < 4; ++i) {
    UpdateArgs u{"k" + std::to_string(i), "a", ValueType::kArray, 0, 1, data};
    ASSERT_TRUE(obj.SubmitUpdate(**eq, u,
                                 [&](const IoResult& r) {
                                   if (callbacks++ == 0) first = r.status;
                                 })
                    .ok());
  }
  // (Submitting progresses the worker too, so a callback may already have run.)
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (callbacks < 4 && std::chrono::steady_clock::now() < deadline) {
    const int before = callbacks;
    const size_t n = (*eq)->WaitAny(std::chrono::seconds(10));
    EXPECT_GE(n, 1u);
    EXPECT_EQ(static_cast<size_t>(callbacks - before), n);
  }
  EXPECT_EQ(callbacks, 4);
  EXPECT_TRUE(first.ok()) << first.ToString();
  EXPECT_EQ((*eq)->in_flight(), 0u);
  EXPECT_EQ((*eq)->ready(), 0u);  // callbacks produce no events
}

// The engine verifies the client's checksums before it stores: an update whose
// checksums do not match its data is refused and nothing is stored.
TEST_P(ClientEngineTest, EngineRefusesAnUpdateWhoseChecksumsDoNotMatch) {
  ObjectId oid = Container::MakeObjectId(ObjectClass::kS1, 0, 300);
  auto channel = control::MakeControlChannel({.address = cluster_->control()});
  ASSERT_TRUE(channel.ok());
  control::SessionClient session(*channel);
  control::Credentials admin{"admin", cluster_->AdminSecret()};
  auto conn = session.Connect("p", admin);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  auto handle = session.OpenContainer(admin, conn->session_uuid, "c");
  ASSERT_TRUE(handle.ok()) << handle.status().ToString();
  PoolMap map;
  for (const auto& t : conn->map.targets()) map.targets.push_back({0, t.index(), TargetState::kUp});
  auto target = TargetForDkey(map, oid, "d");
  ASSERT_TRUE(target.ok());

  transport::TransportOptions to;
  const bool ofi = GetParam().starts_with("ofi-");
  to.provider = ofi ? transport::Provider::kOfi : transport::Provider::kUcx;
  to.kind = *transport::ParseTransportKind(ofi ? GetParam().substr(4) : GetParam());
  auto ctx = transport::Context::Create(to);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  auto worker = (*ctx)->CreateWorker("csum-test");
  ASSERT_TRUE(worker.ok());
  const std::string& address = conn->map.targets(static_cast<int>(*target)).worker_address();
  auto ep = (*worker)->Connect(std::span(reinterpret_cast<const uint8_t*>(address.data()), address.size()));
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  // The engine takes the session's capabilities only on a connection that
  // proved the session's key, as libros2 does before its first request.
  transport::SessionCredential cred;
  cred.id = Uuid::Parse(conn->session_uuid)->bytes();
  ASSERT_EQ(conn->session_key.size(), cred.key.size());
  std::memcpy(cred.key.data(), conn->session_key.data(), cred.key.size());
  auto authenticated = (*ep)->AuthenticateSession(cred);
  ASSERT_TRUE(authenticated.ok()) << authenticated.ToString();

  auto data = Pattern(8192, 3);
  obj::UpdateRequest req;
  req.header.pool = *Uuid::Parse(conn->pool.uuid());
  req.header.container = *Uuid::Parse(handle->container.uuid());
  req.header.target = conn->map.targets(static_cast<int>(*target)).index();
  req.header.map_version = conn->map.version();
  req.oid = oid;
  req.dkey = "d";
  req.akey = "a";
  req.type = obj::ValueType::kArray;
  req.length = data.size();
  req.csum.type = ChecksumType::kCrc32c;
  req.csum.chunk_size = 4096;
  req.csum.values = ComputeChunkChecksums(ChecksumType::kCrc32c, data, 4096);
  req.csum.values[1] ^= 1;  // wrong for the second chunk
  auto payload = obj::Encode(req);
  transport::CallOptions co;
  co.capability = std::span(reinterpret_cast<const uint8_t*>(handle->capability.data()), handle->capability.size());
  co.bulk_out = data;
  auto reply = (*ep)->CallSync(static_cast<uint16_t>(obj::Opcode::kUpdate), payload, co);
  ASSERT_FALSE(reply.ok());
  EXPECT_TRUE(reply.status().IsCorruption()) << reply.status().ToString();
  (*ep)->Close();
  ep->reset();
  worker->reset();

  // Nothing was stored: libros2 reads an empty extent (zeros), verified.
  Object obj = Open(ObjectClass::kS1, 300);
  std::vector<std::byte> back(8192, std::byte{0x55});
  auto r = obj.Fetch({"d", "a", ValueType::kArray, 0, 8192, 1, back});
  if (r.ok()) {
    EXPECT_TRUE(std::all_of(back.begin(), back.end(), [](std::byte b) { return b == std::byte{0}; }));
  } else {
    EXPECT_TRUE(r.status().IsNotFound()) << r.status().ToString();
  }
}

TEST_P(ClientEngineTest, TenantCannotReadAnotherTenantsContainer) {
  std::string tag = GetParam();
  std::string secret_file = cluster_->scratch() + "/bob-" + tag + ".secret";
  auto add = cluster_->Ctl({"tenant", "add", "bob-" + tag, "--secret-out", secret_file});
  ASSERT_EQ(add.exit_code, 0) << add.err;
  // Bob may use the pool (read) but has no right on container c.
  auto acl = cluster_->Ctl({"acl", "set", "p", "--tenant", "bob-" + tag, "--rights", "r"});
  ASSERT_EQ(acl.exit_code, 0) << acl.err;
  Object admin_obj = Open(ObjectClass::kS1, 400);
  ASSERT_TRUE(admin_obj.Put("secret", "a", Pattern(32, 4)).ok());

  ClientOptions o;
  o.control = cluster_->control();
  o.tenant = "bob-" + tag;
  o.secret_file = secret_file;
  o.transport = GetParam();
  auto bob = Client::Connect(o);
  ASSERT_TRUE(bob.ok()) << bob.status().ToString();
  auto pool = (*bob)->ConnectPool("p");
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto cont = (*pool)->OpenContainer("c");
  ASSERT_FALSE(cont.ok());
  EXPECT_EQ(cont.status().code(), Status::Code::kPermissionDenied) << cont.status().ToString();

  // A wrong secret is refused before anything else.
  ClientOptions wrong = o;
  wrong.secret_file.clear();
  wrong.secret = "not-bobs-secret";
  auto eve = Client::Connect(wrong);
  ASSERT_TRUE(eve.ok());
  auto eve_pool = (*eve)->ConnectPool("p");
  ASSERT_FALSE(eve_pool.ok());
  EXPECT_EQ(eve_pool.status().code(), Status::Code::kUnauthenticated) << eve_pool.status().ToString();
}

// I/O buffers (shared segments): over shm the engine reads a fetch straight
// into the client's buffer and copies an update out of it; over tcp they are
// ordinary memory. Byte-exact at aligned and unaligned offsets, holes read as
// zeros even over stale bytes, single values too, and the C API's face of it.
TEST_P(ClientEngineTest, IoBuffersAreReadAndWrittenInPlace) {
  auto bad = client_->AllocateIoBuffer(0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument) << bad.status().ToString();
  auto buf = client_->AllocateIoBuffer((4u << 20) + 1);
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  ASSERT_EQ(buf->size(), (4u << 20) + 4096);  // whole pages
  std::span<std::byte> mem = buf->span();
  EXPECT_TRUE(std::all_of(mem.begin(), mem.end(), [](std::byte b) { return b == std::byte{0}; }));
  for (ObjectClass oc : {ObjectClass::kS1, ObjectClass::kSX}) {
    Object obj = Open(oc, 700 + static_cast<uint64_t>(oc));
    for (uint64_t offset : {uint64_t{0}, uint64_t{123}}) {
      SCOPED_TRACE(fmt::format("{} offset {}", ObjectClassName(oc), offset));
      const uint64_t size = (1u << 20) + 777;
      auto data = Pattern(size, offset + 1);
      std::span<std::byte> out = mem.subspan(offset, size);
      std::copy(data.begin(), data.end(), out.begin());
      ASSERT_TRUE(obj.Update({"d", "a", ValueType::kArray, 0, 1, out}).ok());
      // Read it back into the second half of the buffer over stale bytes, with
      // a 4 KiB hole after the data that must come back as zeros.
      std::span<std::byte> in = mem.subspan((2u << 20) + offset, size + 4096);
      std::fill(in.begin(), in.end(), std::byte{0xEE});
      auto r = obj.Fetch({"d", "a", ValueType::kArray, 0, size + 4096, 1, in});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_TRUE(std::equal(data.begin(), data.end(), in.begin()));
      EXPECT_TRUE(std::all_of(in.begin() + static_cast<std::ptrdiff_t>(size), in.end(),
                              [](std::byte b) { return b == std::byte{0}; }));
    }
    std::span<std::byte> value = mem.subspan(4096, 10000);
    auto v = Pattern(value.size(), 77);
    std::copy(v.begin(), v.end(), value.begin());
    ASSERT_TRUE(obj.Update({"s", "v", ValueType::kSingle, 0, 1, value}).ok());
    std::span<std::byte> got = mem.subspan(3u << 20, 16384);
    std::fill(got.begin(), got.end(), std::byte{0xEE});
    auto r = obj.Fetch({"s", "v", ValueType::kSingle, 0, 0, 1, got});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->size, v.size());
    EXPECT_TRUE(std::equal(v.begin(), v.end(), got.begin()));
  }
  // The C API: allocate, use for a read, free; bad arguments are refused.
  ros2_client_t* c = nullptr;
  ASSERT_EQ(ConnectC(&c), 0) << ros2_last_error();
  ros2_io_buffer_t* cb = nullptr;
  EXPECT_EQ(ros2_io_buffer_alloc(c, 0, &cb), -EINVAL);
  EXPECT_EQ(ros2_io_buffer_alloc(nullptr, 4096, &cb), -EINVAL);
  ASSERT_EQ(ros2_io_buffer_alloc(c, 1u << 20, &cb), 0) << ros2_last_error();
  ASSERT_NE(ros2_io_buffer_data(cb), nullptr);
  EXPECT_EQ(ros2_io_buffer_size(cb), 1u << 20);
  EXPECT_EQ(ros2_io_buffer_data(nullptr), nullptr);
  ros2_pool_t* p = nullptr;
  ros2_cont_t* k = nullptr;
  ros2_obj_t* obj = nullptr;
  ASSERT_EQ(ros2_pool_connect(c, "p", &p), 0) << ros2_last_error();
  ASSERT_EQ(ros2_cont_open(p, "c", &k), 0) << ros2_last_error();
  ASSERT_EQ(ros2_obj_open(k, ROS2_OC_S1, 0, 701, &obj), 0) << ros2_last_error();
  auto expect = Pattern((1u << 20) + 777, 124);  // the last array written above (offset 123) through the C++ API
  ASSERT_EQ(ros2_obj_read_array(obj, "d", "a", 0, 1u << 20, 1, ros2_io_buffer_data(cb), 1u << 20), 0)
      << ros2_last_error();
  EXPECT_EQ(std::memcmp(ros2_io_buffer_data(cb), expect.data(), 1u << 20), 0);
  ros2_obj_close(obj);
  ros2_cont_close(k);
  ros2_pool_close(p);
  ros2_io_buffer_free(cb);
  ros2_client_close(c);
}

TEST_P(ClientEngineTest, CApiRoundTripWithEventQueue) {
  ros2_client_t* c = nullptr;
  ros2_pool_t* p = nullptr;
  ros2_cont_t* k = nullptr;
  ros2_obj_t* obj = nullptr;
  ASSERT_EQ(ConnectC(&c), 0) << ros2_last_error();
  ASSERT_EQ(ros2_pool_connect(c, "p", &p), 0) << ros2_last_error();
  ASSERT_EQ(ros2_cont_open(p, "c", &k), 0) << ros2_last_error();
  ASSERT_LT(ros2_obj_open(k, 77, 0, 1, &obj), 0);
  EXPECT_NE(std::string(ros2_last_error()).find("unknown object class"), std::string::npos) << ros2_last_error();
  ASSERT_EQ(ros2_obj_open(k, ROS2_OC_SX, 0, 500, &obj), 0) << ros2_last_error();

  ASSERT_EQ(ros2_obj_put(obj, "d", "a", "hello", 5), 0) << ros2_last_error();
  char buf[16] = {};
  size_t size = 0;
  ASSERT_EQ(ros2_obj_get(obj, "d", "a", buf, sizeof(buf), &size), 0) << ros2_last_error();
  EXPECT_EQ(size, 5u);
  EXPECT_EQ(std::string(buf, 5), "hello");

  ros2_eq_t* eq = nullptr;
  ASSERT_EQ(ros2_eq_create(c, &eq), 0);
  auto data = Pattern(64 * 1024, 5);
  std::vector<std::byte> back(data.size());
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_EQ(ros2_obj_write_array_async(obj, eq, "arr", "x", i * 16384, 1, data.data() + i * 16384, 16384, i), 0)
        << ros2_last_error();
  }
  ros2_event_t ev[8];
  size_t done = 0;
  while (done < 4) {
    int n = ros2_eq_wait(eq, ev, 8, 1, 30000);
    ASSERT_GT(n, 0) << ros2_last_error();
    for (int i = 0; i < n; ++i) EXPECT_EQ(ev[i].rc, 0) << ev[i].message;
    done += static_cast<size_t>(n);
  }
  ASSERT_EQ(ros2_obj_read_array(obj, "arr", "x", 0, data.size(), 1, back.data(), back.size()), 0) << ros2_last_error();
  EXPECT_TRUE(back == data);
  uint64_t end = 0;
  ASSERT_EQ(ros2_obj_array_end(obj, "arr", "x", &end), 0) << ros2_last_error();
  EXPECT_EQ(end, data.size());

  ros2_eq_destroy(eq);
  ros2_obj_close(obj);
  ros2_cont_close(k);
  ros2_pool_close(p);
  ros2_client_close(c);
}

// ofi-tcp: the engine and the client on libfabric's tcp;ofi_rxm.
INSTANTIATE_TEST_SUITE_P(Transports, ClientEngineTest, ::testing::Values("tcp", "shm", "ofi-tcp", "ofi-shm"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace ros2::client
