// The control plane end to end: a real gRPC server on a Unix socket in a
// temporary directory, called through ManagementClient and SessionClient.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <grpcpp/client_context.h>

#include "common/hlc.h"
#include "control/control_channel.h"
#include "control/control_plane.h"
#include "control/control_server.h"
#include "control/management_client.h"
#include "control/session_client.h"
#include "control/session_service.h"
#include "testing/temp_dir.h"

namespace ros2::control {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) {
  return std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

EngineRegistration MakeEngine(int targets) {
  EngineRegistration reg;
  reg.engine = Uuid::Generate();
  reg.address = "host-" + reg.engine.ToString().substr(0, 8);
  for (int i = 0; i < targets; ++i) {
    reg.targets.push_back(
        TargetRegistration{static_cast<uint32_t>(i), "worker-" + std::to_string(i) + "@" + reg.address, 1ull << 30});
  }
  reg.capacity_bytes = static_cast<uint64_t>(targets) << 30;
  return reg;
}

class ControlServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    Start();
  }

  void Start() {
    ControlPlaneOptions opts;
    opts.data_dir = dir_.path() + "/engine";
    opts.pbkdf2_iterations = 1000;
    opts.capability_lifetime = std::chrono::seconds(60);
    opts.now_ms = [this] { return HybridClock::WallMillis() + skew_ms_.load(); };
    auto cp = ControlPlane::Open(opts);
    ASSERT_TRUE(cp.ok()) << cp.status().ToString();
    plane_ = std::move(*cp);
    auto server = ControlServer::Start(plane_.get(), ListenOptions{});
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    EXPECT_EQ(server_->address(), "unix:" + opts.data_dir + "/control.sock");
    auto channel = MakeControlChannel(ChannelOptions{server_->address(), "", ""});
    ASSERT_TRUE(channel.ok());
    channel_ = *channel;
    auto secret = ReadSecretFile(plane_->admin_secret_path());
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    admin_ = Credentials{"admin", *secret};
    mgmt_ = std::make_unique<ManagementClient>(channel_, admin_);
    session_ = std::make_unique<SessionClient>(channel_);
  }

  void Stop() {
    mgmt_.reset();
    session_.reset();
    channel_.reset();
    server_.reset();
    plane_.reset();
  }

  // A tenant and a Management client acting as it.
  Credentials AddTenant(const std::string& name) {
    auto secret = mgmt_->CreateTenant(name);
    EXPECT_TRUE(secret.ok()) << secret.status().ToString();
    return Credentials{name, secret.ok() ? *secret : ""};
  }

  ros2::testing::TempDir dir_;
  std::atomic<int64_t> skew_ms_{0};
  std::unique_ptr<ControlPlane> plane_;
  std::unique_ptr<ControlServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  Credentials admin_;
  std::unique_ptr<ManagementClient> mgmt_;
  std::unique_ptr<SessionClient> session_;
};

TEST_F(ControlServiceTest, PoolAndContainerLifecycle) {
  auto pool = mgmt_->CreatePool("tank", 256 << 20);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  EXPECT_EQ(pool->label(), "tank");
  auto pools = mgmt_->ListPools();
  ASSERT_TRUE(pools.ok());
  ASSERT_EQ(pools->size(), 1u);
  EXPECT_EQ((*pools)[0].uuid(), pool->uuid());
  auto queried = mgmt_->QueryPool(pool->uuid());
  ASSERT_TRUE(queried.ok());
  EXPECT_EQ(queried->size_bytes(), uint64_t{256} << 20);
  EXPECT_EQ(queried->free_bytes(), uint64_t{256} << 20);
  EXPECT_EQ(queried->used_bytes(), 0u);

  auto cont = mgmt_->CreateContainer("tank", "data", {{"chunk_size", "2MiB"}, {"encryption", "on"}});
  ASSERT_TRUE(cont.ok()) << cont.status().ToString();
  EXPECT_EQ(cont->properties().chunk_size(), uint64_t{2} << 20);
  EXPECT_TRUE(cont->properties().encryption());
  auto conts = mgmt_->ListContainers("tank");
  ASSERT_TRUE(conts.ok());
  ASSERT_EQ(conts->size(), 1u);
  auto q = mgmt_->QueryContainer("tank", cont->uuid());
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->label(), "data");
  EXPECT_EQ(mgmt_->QueryPool("tank")->container_count(), 1u);

  auto status = mgmt_->GetEngineStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->pool_count(), 1u);
  EXPECT_EQ(status->tenant_count(), 1u);
  EXPECT_FALSE(status->version().empty());

  ASSERT_TRUE(mgmt_->DestroyContainer("tank", "data").ok());
  EXPECT_EQ(mgmt_->QueryContainer("tank", "data").status().code(), Status::Code::kNotFound);
  ASSERT_TRUE(mgmt_->DestroyPool("tank").ok());
  auto after = mgmt_->ListPools();
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->empty());
}

TEST_F(ControlServiceTest, BadInputGetsClearErrorsAndGrpcCodes) {
  ASSERT_TRUE(mgmt_->CreatePool("tank", 64 << 20).ok());
  auto dup = mgmt_->CreatePool("tank", 64 << 20);
  EXPECT_EQ(dup.status().code(), Status::Code::kAlreadyExists);
  EXPECT_NE(dup.status().message().find("'tank' already exists"), std::string::npos) << dup.status().ToString();
  auto unknown = mgmt_->QueryPool("lake");
  EXPECT_EQ(unknown.status().code(), Status::Code::kNotFound);
  EXPECT_NE(unknown.status().message().find("unknown pool 'lake'"), std::string::npos);
  auto bad_size = mgmt_->CreatePool("puddle", 0);
  EXPECT_EQ(bad_size.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad_size.status().message().find("bad size"), std::string::npos);
  auto missing = mgmt_->CreatePool("", 64 << 20);
  EXPECT_NE(missing.status().message().find("missing pool label"), std::string::npos);
  auto prop = mgmt_->CreateContainer("tank", "c", {{"compression", "lz4"}});
  EXPECT_EQ(prop.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(prop.status().message().find("unknown container property 'compression'"), std::string::npos);

  // The wire carries the proper gRPC codes.
  auto raw_call = [&](const rpc::QueryPoolRequest& req, const Credentials* creds) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (creds != nullptr) AttachCredentials(&ctx, *creds);
    rpc::PoolInfo resp;
    return mgmt_->stub().QueryPool(&ctx, req, &resp);
  };
  rpc::QueryPoolRequest req;
  req.set_pool("lake");
  EXPECT_EQ(raw_call(req, &admin_).error_code(), grpc::StatusCode::NOT_FOUND);
  req.set_pool("");
  grpc::Status missing_field = raw_call(req, &admin_);
  EXPECT_EQ(missing_field.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(missing_field.error_message().find("missing pool"), std::string::npos);
  req.set_pool("0000000g-0000-0000-0000-000000000000");
  grpc::Status bad_uuid = raw_call(req, &admin_);
  EXPECT_EQ(bad_uuid.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad_uuid.error_message().find("bad UUID"), std::string::npos);
  req.set_pool("tank");
  grpc::Status no_creds = raw_call(req, nullptr);
  EXPECT_EQ(no_creds.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(no_creds.error_message().find("missing credentials"), std::string::npos);
  Credentials wrong{"admin", "guess"};
  EXPECT_EQ(raw_call(req, &wrong).error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // Engine registration: bad UUID, missing targets.
  EngineRegistration reg = MakeEngine(1);
  rpc::RegisterEngineRequest bad;
  bad.set_engine_uuid("not-a-uuid");
  bad.add_targets()->set_worker_address("x");
  grpc::ClientContext ctx;
  AttachCredentials(&ctx, admin_);
  rpc::RegisterEngineResponse resp;
  grpc::Status st = mgmt_->stub().RegisterEngine(&ctx, bad, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("engine_uuid 'not-a-uuid' is a bad UUID"), std::string::npos);
  reg.targets.clear();
  auto no_targets = mgmt_->RegisterEngine(reg);
  EXPECT_EQ(no_targets.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(no_targets.status().message().find("no targets"), std::string::npos);

  // Malformed rights and states.
  auto bad_rights = mgmt_->SetAcl("tank", "", "admin", 0x40);
  EXPECT_EQ(bad_rights.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad_rights.status().message().find("unknown bits"), std::string::npos);
  EXPECT_EQ(mgmt_->SetAcl("tank", "", "nobody", kRightRead).status().code(), Status::Code::kNotFound);
  EngineRegistration one = MakeEngine(1);
  ASSERT_TRUE(mgmt_->RegisterEngine(one).ok());
  auto bad_state = mgmt_->SetTargetState(one.engine, 0, rpc::TARGET_STATE_UNSPECIFIED);
  EXPECT_EQ(bad_state.status().code(), Status::Code::kInvalidArgument);
  // The states only rebuild sets: refused, naming them.
  for (rpc::TargetState set_by_rebuild : {rpc::TARGET_DOWNOUT, rpc::TARGET_REINT}) {
    auto refused = mgmt_->SetTargetState(one.engine, 0, set_by_rebuild);
    EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument) << refused.status().ToString();
    EXPECT_NE(refused.status().message().find(rpc::TargetState_Name(set_by_rebuild).substr(7)), std::string::npos)
        << refused.status().ToString();
  }
  auto conn = session_->Connect("tank", admin_);
  ASSERT_TRUE(conn.ok());
  auto bad_open = session_->OpenContainer(admin_, conn->session_uuid, "c", 0x80);
  EXPECT_EQ(bad_open.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(session_->OpenContainer(admin_, "", "c").status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(session_->Connect("", admin_).status().code(), Status::Code::kInvalidArgument);

  // Non-admins may not manage.
  Credentials alice = AddTenant("alice");
  ManagementClient as_alice(channel_, alice);
  auto denied = as_alice.CreatePool("mine", 64 << 20);
  EXPECT_EQ(denied.status().code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(as_alice.CreateTenant("eve").status().code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(as_alice.RegisterEngine(MakeEngine(1)).status().code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(as_alice.GetEngineStatus().status().code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(as_alice.SyncRevocations(&plane_->verifier()).status().code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(as_alice.QueryPool("tank").status().code(), Status::Code::kPermissionDenied);
  // Nothing changed.
  EXPECT_EQ(mgmt_->ListPools()->size(), 1u);
}

TEST_F(ControlServiceTest, AclEnforcementAcrossTenants) {
  Credentials a = AddTenant("tenant-a");
  Credentials b = AddTenant("tenant-b");
  ASSERT_TRUE(mgmt_->CreatePool("shared", 64 << 20).ok());
  ASSERT_TRUE(mgmt_->SetAcl("shared", "", "tenant-a", kRightRead | kRightCreate).ok());
  ASSERT_TRUE(mgmt_->SetAcl("shared", "", "tenant-b", kRightRead | kRightCreate).ok());
  ManagementClient as_b(channel_, b);
  auto b_cont = as_b.CreateContainer("shared", "b-data");
  ASSERT_TRUE(b_cont.ok()) << b_cont.status().ToString();

  auto conn_a = session_->Connect("shared", a);
  ASSERT_TRUE(conn_a.ok()) << conn_a.status().ToString();
  EXPECT_EQ(conn_a->rights, kRightRead | kRightCreate);
  auto denied = session_->OpenContainer(a, conn_a->session_uuid, "b-data");
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), Status::Code::kPermissionDenied);
  EXPECT_NE(denied.status().message().find("no access to container 'b-data'"), std::string::npos);

  // B grants A read: A reads, but cannot write.
  ASSERT_TRUE(as_b.SetAcl("shared", "b-data", "tenant-a", kRightRead).ok());
  auto rw = session_->OpenContainer(a, conn_a->session_uuid, "b-data", kRightRead | kRightWrite);
  EXPECT_EQ(rw.status().code(), Status::Code::kPermissionDenied);
  auto opened = session_->OpenContainer(a, conn_a->session_uuid, "b-data");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->rights, kRightRead);
  Uuid pool = *Uuid::Parse(conn_a->pool.uuid());
  Uuid cont = *Uuid::Parse(b_cont->uuid());
  auto read = plane_->verifier().Authorize(Bytes(opened->capability), pool, cont, kRightRead);
  EXPECT_TRUE(read.ok()) << read.status().ToString();
  auto write = plane_->verifier().Authorize(Bytes(opened->capability), pool, cont, kRightWrite);
  ASSERT_FALSE(write.ok());
  EXPECT_EQ(write.status().code(), Status::Code::kPermissionDenied);

  // B's own session: full rights as owner. A cannot use B's session.
  auto conn_b = session_->Connect("shared", b);
  ASSERT_TRUE(conn_b.ok());
  auto b_open = session_->OpenContainer(b, conn_b->session_uuid, "b-data");
  ASSERT_TRUE(b_open.ok());
  EXPECT_EQ(b_open->rights, kAllRights);
  EXPECT_EQ(session_->OpenContainer(a, conn_b->session_uuid, "b-data").status().code(), Status::Code::kNotFound);
  // A tenant without pool rights cannot connect.
  Credentials c = AddTenant("tenant-c");
  EXPECT_EQ(session_->Connect("shared", c).status().code(), Status::Code::kPermissionDenied);
}

TEST_F(ControlServiceTest, CapabilitiesExpireAreForgeryProofAndDieWithTheSession) {
  Credentials a = AddTenant("app");
  ASSERT_TRUE(mgmt_->CreatePool("p", 64 << 20).ok());
  ASSERT_TRUE(mgmt_->SetAcl("p", "", "app", kRightRead | kRightCreate).ok());
  ManagementClient as_app(channel_, a);
  auto cont = as_app.CreateContainer("p", "c");
  ASSERT_TRUE(cont.ok());
  auto conn = session_->Connect("p", a);
  ASSERT_TRUE(conn.ok());
  ASSERT_EQ(conn->capability.size(), Capability::kEncodedSize);
  auto opened = session_->OpenContainer(a, conn->session_uuid, "c", kRightRead | kRightWrite);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Uuid pool = *Uuid::Parse(conn->pool.uuid());
  Uuid c = *Uuid::Parse(cont->uuid());
  auto& verifier = plane_->verifier();
  auto good = verifier.Authorize(Bytes(opened->capability), pool, c, kRightWrite);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->tenant, plane_->tenants().Lookup("app")->uuid);
  EXPECT_TRUE(verifier.Authorize(Bytes(conn->capability), pool, Uuid(), kRightRead).ok());

  std::string forged = opened->capability;
  forged[30] = static_cast<char>(forged[30] ^ 0x04);
  auto f = verifier.Authorize(Bytes(forged), pool, c, kRightRead);
  EXPECT_EQ(f.status().code(), Status::Code::kUnauthenticated);
  EXPECT_NE(f.status().message().find("forged"), std::string::npos);

  skew_ms_ = 61'000;  // past the 60 s lifetime
  auto e = verifier.Authorize(Bytes(opened->capability), pool, c, kRightRead);
  EXPECT_EQ(e.status().code(), Status::Code::kUnauthenticated);
  EXPECT_NE(e.status().message().find("expired"), std::string::npos);
  // The session expired with its capabilities: no new ones from it.
  auto late = session_->OpenContainer(a, conn->session_uuid, "c");
  EXPECT_EQ(late.status().code(), Status::Code::kNotFound);
  EXPECT_NE(late.status().message().find("expired"), std::string::npos);
  skew_ms_ = 0;

  ASSERT_TRUE(session_->Disconnect(a, conn->session_uuid).ok());
  auto r = verifier.Authorize(Bytes(opened->capability), pool, c, kRightRead);
  EXPECT_EQ(r.status().code(), Status::Code::kUnauthenticated);
  EXPECT_NE(r.status().message().find("revoked"), std::string::npos);
  EXPECT_EQ(session_->OpenContainer(a, conn->session_uuid, "c").status().code(), Status::Code::kNotFound);
  auto bad_session = session_->OpenContainer(a, "12345", "c");
  EXPECT_EQ(bad_session.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad_session.status().message().find("bad UUID"), std::string::npos);
}

TEST_F(ControlServiceTest, StateSurvivesServiceRestart) {
  Credentials a = AddTenant("keeper");
  ASSERT_TRUE(mgmt_->CreatePool("durable", 64 << 20).ok());
  ASSERT_TRUE(mgmt_->SetAcl("durable", "", "keeper", kRightRead | kRightCreate).ok());
  ManagementClient as_keeper(channel_, a);
  ASSERT_TRUE(as_keeper.CreateContainer("durable", "c", {{"oclass", "S1"}}).ok());
  auto conn = session_->Connect("durable", a);
  ASSERT_TRUE(conn.ok());
  std::string capability = conn->capability;
  std::string session_uuid = conn->session_uuid;
  Uuid pool = *Uuid::Parse(conn->pool.uuid());

  Stop();
  Start();
  auto q = mgmt_->QueryContainer("durable", "c");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->properties().object_class(), "S1");
  EXPECT_EQ(q->owner(), "keeper");
  // The capability key persisted: capabilities issued before still verify.
  EXPECT_TRUE(plane_->verifier().Authorize(Bytes(capability), pool, Uuid(), kRightRead).ok());
  // Sessions are not persisted: the client is told to connect again.
  auto stale = session_->OpenContainer(a, session_uuid, "c");
  EXPECT_EQ(stale.status().code(), Status::Code::kNotFound);
  EXPECT_NE(stale.status().message().find("connect again"), std::string::npos);
  auto again = session_->Connect("durable", a);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(session_->OpenContainer(a, again->session_uuid, "c").ok());
}

TEST_F(ControlServiceTest, TwoEnginesRegisterAndThePoolMapListsBoth) {
  EngineRegistration e1 = MakeEngine(2);
  EngineRegistration e2 = MakeEngine(3);
  auto r1 = mgmt_->RegisterEngine(e1);
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  // Registering engines receive the shared capability key.
  ASSERT_EQ(r1->capability_key().size(), kCapabilityKeySize);
  EXPECT_EQ(0, std::memcmp(r1->capability_key().data(), plane_->capability_key().data(), kCapabilityKeySize));

  ASSERT_TRUE(mgmt_->CreatePool("wide", 1ull << 30).ok());
  auto conn = session_->Connect("wide", admin_);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  EXPECT_EQ(conn->map.version(), r1->map_version());
  EXPECT_EQ(conn->map.targets_size(), 2);

  auto r2 = mgmt_->RegisterEngine(e2);
  ASSERT_TRUE(r2.ok());
  EXPECT_GT(r2->map_version(), r1->map_version());
  auto map = session_->GetPoolMap(admin_, conn->session_uuid);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(map->version(), r2->map_version());
  ASSERT_EQ(map->targets_size(), 5);
  ASSERT_EQ(map->engines_size(), 2);
  int from_e1 = 0, from_e2 = 0;
  for (const auto& t : map->targets()) {
    EXPECT_EQ(t.state(), rpc::TARGET_UP);
    EXPECT_FALSE(t.worker_address().empty());
    if (t.engine_uuid() == e1.engine.ToString()) ++from_e1;
    if (t.engine_uuid() == e2.engine.ToString()) ++from_e2;
  }
  EXPECT_EQ(from_e1, 2);
  EXPECT_EQ(from_e2, 3);
  EXPECT_EQ(map->targets(2).worker_address(), e2.targets[0].worker_address);

  auto v = mgmt_->SetTargetState(e2.engine, 1, rpc::TARGET_DRAIN);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, r2->map_version() + 1);
  auto status = mgmt_->GetEngineStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->map_version(), *v);
  EXPECT_EQ(status->engines_size(), 2);
  EXPECT_EQ(status->targets(3).state(), rpc::TARGET_DRAIN);
  EXPECT_EQ(mgmt_->SetTargetState(e2.engine, 7, rpc::TARGET_DOWN).status().code(), Status::Code::kNotFound);

  // The second engine verifies with the key it received, and learns about
  // sessions closed on the management endpoint by syncing revocations.
  CapabilityKey key{};
  std::memcpy(key.data(), r2->capability_key().data(), key.size());
  auto remote_verifier = CapabilityVerifier::Create(key);
  ASSERT_TRUE(remote_verifier.ok());
  Uuid pool = *Uuid::Parse(conn->pool.uuid());
  EXPECT_TRUE((*remote_verifier)->Authorize(Bytes(conn->capability), pool, Uuid(), kRightRead).ok());
  ASSERT_TRUE(session_->Disconnect(admin_, conn->session_uuid).ok());
  auto synced = mgmt_->SyncRevocations(remote_verifier->get());
  ASSERT_TRUE(synced.ok()) << synced.status().ToString();
  EXPECT_EQ(*synced, 1u);
  auto refused = (*remote_verifier)->Authorize(Bytes(conn->capability), pool, Uuid(), kRightRead);
  EXPECT_EQ(refused.status().code(), Status::Code::kUnauthenticated);
  EXPECT_NE(refused.status().message().find("revoked"), std::string::npos);
}

TEST_F(ControlServiceTest, ConcurrentCreatesRaceCleanly) {
  ASSERT_TRUE(mgmt_->CreatePool("busy", 64 << 20).ok());
  std::atomic<int> created{0}, duplicates{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      ManagementClient client(channel_, admin_);
      for (int i = 0; i < 10; ++i) {
        auto r = client.CreateContainer("busy", "c" + std::to_string(i));
        if (r.ok()) {
          created.fetch_add(1);
        } else if (r.status().code() == Status::Code::kAlreadyExists) {
          duplicates.fetch_add(1);
        } else {
          other.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(created.load(), 10);
  EXPECT_EQ(duplicates.load(), 30);
  EXPECT_EQ(other.load(), 0);
  auto conts = mgmt_->ListContainers("busy");
  ASSERT_TRUE(conts.ok());
  EXPECT_EQ(conts->size(), 10u);
}

TEST(ControlListenTest, TlsNeedsBothCertificateAndKey) {
  grpc::ServerBuilder builder;
  ListenOptions opts;
  opts.address = "127.0.0.1:0";
  opts.tls_cert_path = "/nonexistent/cert.pem";
  Status st = AddControlListeningPort(&builder, opts, nullptr);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  opts.tls_key_path = "/nonexistent/key.pem";
  st = AddControlListeningPort(&builder, opts, nullptr);
  EXPECT_EQ(st.code(), Status::Code::kNotFound);
  EXPECT_NE(st.message().find("/nonexistent/cert.pem"), std::string::npos);
}

}  // namespace
}  // namespace ros2::control

namespace ros2::control {
namespace {

size_t ThreadsOfThisProcess() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// Pool-map watches run on gRPC's callback API: as many open watches as one
// tenant may hold cost no thread each, a map change reaches every one of
// them, one watch over the tenant's limit is refused naming the limits, and a
// closed watch gives its place back.
TEST_F(ControlServiceTest, PoolMapWatchesPerTenantAreCapped) {
  ASSERT_TRUE(mgmt_->CreatePool("watched", 64 << 20).ok());
  auto stub = rpc::Session::NewStub(channel_);
  struct Watch {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<rpc::PoolMapUpdate>> reader;
    uint64_t version = 0;
  };
  auto open = [&](Watch& w) {
    AttachCredentials(&w.ctx, admin_);
    rpc::WatchPoolMapRequest req;
    req.set_pool("watched");
    w.reader = stub->WatchPoolMap(&w.ctx, req);
    rpc::PoolMapUpdate first;
    bool ok = w.reader->Read(&first);  // the first map comes at once to an admitted watch
    w.version = first.map().version();
    return ok;
  };
  {  // one watch first: the server's and the channel's threads exist from then on
    Watch warm;
    ASSERT_TRUE(open(warm));
    warm.ctx.TryCancel();
    (void)warm.reader->Finish();
  }
  const size_t threads_before = ThreadsOfThisProcess();
  std::vector<std::unique_ptr<Watch>> watches;
  for (uint32_t i = 0; i < SessionService::kMaxWatchesPerTenant; ++i) {
    watches.push_back(std::make_unique<Watch>());
    ASSERT_TRUE(open(*watches.back())) << "watch " << i;
  }
  const size_t threads_open = ThreadsOfThisProcess();
  std::printf("threads: %zu before, %zu with %u watches open\n", threads_before, threads_open,
              SessionService::kMaxWatchesPerTenant);
  EXPECT_LT(threads_open, threads_before + SessionService::kMaxWatchesPerTenant / 8)
      << "open watches hold threads";

  Watch over;
  EXPECT_FALSE(open(over));
  grpc::Status refused = over.reader->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_NE(refused.error_message().find(fmt::format("limits {} a tenant, {} in all",
                                                     SessionService::kMaxWatchesPerTenant,
                                                     SessionService::kMaxWatches)),
            std::string::npos)
      << refused.error_message();

  // A new engine changes the map: every open watch gets the new version.
  auto version = mgmt_->RegisterEngine(MakeEngine(1));
  ASSERT_TRUE(version.ok()) << version.status().ToString();
  for (auto& w : watches) {
    rpc::PoolMapUpdate next;
    ASSERT_TRUE(w->reader->Read(&next));
    EXPECT_GT(next.map().version(), w->version);
  }

  watches.back()->ctx.TryCancel();
  (void)watches.back()->reader->Finish();
  watches.pop_back();
  bool admitted = false;
  for (int attempt = 0; attempt < 50 && !admitted; ++attempt) {  // the server sees the cancel shortly
    Watch again;
    admitted = open(again);
    again.ctx.TryCancel();
    (void)again.reader->Finish();
    if (!admitted) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(admitted) << "a closed watch did not give its place back";
  for (auto& w : watches) w->ctx.TryCancel();
  for (auto& w : watches) (void)w->reader->Finish();
}

// A watch ends with the tenant's error once it loses its read right, and
// with OK when the engine stops serving (its clients move elsewhere).
TEST_F(ControlServiceTest, PoolMapWatchEndsOnLostRightAndOnStop) {
  ASSERT_TRUE(mgmt_->CreatePool("shared", 64 << 20).ok());
  Credentials bob = AddTenant("bob");
  ASSERT_TRUE(mgmt_->SetAcl("shared", "", "bob", kRightRead).ok());
  auto stub = rpc::Session::NewStub(channel_);
  grpc::ClientContext bob_ctx;
  AttachCredentials(&bob_ctx, bob);
  rpc::WatchPoolMapRequest req;
  req.set_pool("shared");
  auto bob_reader = stub->WatchPoolMap(&bob_ctx, req);
  rpc::PoolMapUpdate update;
  ASSERT_TRUE(bob_reader->Read(&update));
  grpc::ClientContext admin_ctx;
  AttachCredentials(&admin_ctx, admin_);
  auto admin_reader = stub->WatchPoolMap(&admin_ctx, req);
  ASSERT_TRUE(admin_reader->Read(&update));

  ASSERT_TRUE(mgmt_->SetAcl("shared", "", "bob", 0).ok());
  ASSERT_TRUE(mgmt_->RegisterEngine(MakeEngine(1)).ok());  // a new map: rights are checked again
  EXPECT_FALSE(bob_reader->Read(&update));
  grpc::Status bob_end = bob_reader->Finish();
  EXPECT_EQ(bob_end.error_code(), grpc::StatusCode::PERMISSION_DENIED) << bob_end.error_message();
  ASSERT_TRUE(admin_reader->Read(&update));  // the admin's watch goes on

  const auto stopping = std::chrono::steady_clock::now();
  plane_->system_map().StopWaiters();
  EXPECT_FALSE(admin_reader->Read(&update));
  EXPECT_TRUE(admin_reader->Finish().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(1));
}

}  // namespace
}  // namespace ros2::control
