// The management state without gRPC: admin bootstrap, tenant secrets, pool and
// container lifecycle, ACL rules, the versioned system map and pool maps, and
// survival of all of it across a restart (reopening the store).
#include "control/catalog.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "control/container_properties.h"
#include "control/control_plane.h"
#include "control/credentials.h"
#include "testing/temp_dir.h"

namespace ros2::control {
namespace {

EngineRegistration MakeEngine(int targets, uint64_t capacity_per_target = 0) {
  EngineRegistration reg;
  reg.engine = Uuid::Generate();
  reg.address = "node-" + reg.engine.ToString().substr(0, 4);
  for (int i = 0; i < targets; ++i) {
    reg.targets.push_back(TargetRegistration{static_cast<uint32_t>(i),
                                             "ucx-address-" + std::to_string(i) + "-" + reg.engine.ToString(),
                                             capacity_per_target});
    reg.capacity_bytes += capacity_per_target;
  }
  return reg;
}

class CatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    Open();
    ASSERT_NE(plane_, nullptr);
    auto admin = plane_->tenants().Lookup(kAdminTenant);
    ASSERT_TRUE(admin.ok()) << admin.status().ToString();
    admin_ = *admin;
    ASSERT_TRUE(plane_->tenants().CreateTenant("alice", "alice-secret").ok());
    ASSERT_TRUE(plane_->tenants().CreateTenant("bob", "bob-secret").ok());
    alice_ = *plane_->tenants().Lookup("alice");
    bob_ = *plane_->tenants().Lookup("bob");
  }

  void Open() {
    ControlPlaneOptions opts;
    opts.data_dir = dir_.path() + "/engine";
    opts.pbkdf2_iterations = 1000;
    auto cp = ControlPlane::Open(opts);
    ASSERT_TRUE(cp.ok()) << cp.status().ToString();
    plane_ = std::move(*cp);
  }
  Catalog& catalog() { return plane_->catalog(); }

  ros2::testing::TempDir dir_;
  std::unique_ptr<ControlPlane> plane_;
  Principal admin_, alice_, bob_;
};

TEST_F(CatalogTest, AdminBootstrapWritesA0600SecretThatAuthenticates) {
  struct stat st {};
  ASSERT_EQ(::stat(plane_->admin_secret_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto secret = ReadSecretFile(plane_->admin_secret_path());
  ASSERT_TRUE(secret.ok()) << secret.status().ToString();
  EXPECT_EQ(secret->size(), 64u);
  auto who = plane_->tenants().Authenticate("admin", *secret);
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_TRUE(who->is_admin());
  EXPECT_EQ(who->uuid, admin_.uuid);
  auto wrong = plane_->tenants().Authenticate("admin", "not-it");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), Status::Code::kUnauthenticated);
  auto unknown = plane_->tenants().Authenticate("nobody", "x");
  EXPECT_EQ(unknown.status().code(), Status::Code::kUnauthenticated);
  // A restart does not replace the admin or its secret.
  plane_.reset();
  Open();
  auto again = ReadSecretFile(plane_->admin_secret_path());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *secret);
  EXPECT_TRUE(plane_->tenants().Authenticate("admin", *secret).ok());
}

TEST_F(CatalogTest, TenantSecretsAreStoredOnlyAsSaltedHashes) {
  auto raw = plane_->store().Get("tenant/alice");
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->find("alice-secret"), std::string::npos);
  EXPECT_TRUE(plane_->tenants().Authenticate("alice", "alice-secret").ok());
  EXPECT_TRUE(plane_->tenants().Authenticate("alice", "alice-secret").ok());  // memoised path
  EXPECT_FALSE(plane_->tenants().Authenticate("alice", "bob-secret").ok());
  EXPECT_EQ(plane_->tenants().CreateTenant("alice", "x").status().code(), Status::Code::kAlreadyExists);
  auto bad = plane_->tenants().CreateTenant("al ice", "x");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("' '"), std::string::npos) << bad.status().ToString();
  auto generated = plane_->tenants().CreateTenant("carol", "");
  ASSERT_TRUE(generated.ok());
  EXPECT_EQ(generated->size(), 64u);
  EXPECT_TRUE(plane_->tenants().Authenticate("carol", *generated).ok());
  ASSERT_TRUE(plane_->tenants().DeleteTenant("alice").ok());
  EXPECT_FALSE(plane_->tenants().Authenticate("alice", "alice-secret").ok());
  EXPECT_EQ(plane_->tenants().DeleteTenant("alice").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(plane_->tenants().DeleteTenant("admin").status().code(), Status::Code::kInvalidArgument);
}

TEST_F(CatalogTest, PoolLifecycleAndBadInput) {
  auto pool = catalog().CreatePool(admin_, "tank", 64 << 20, 0);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  EXPECT_EQ(pool->label(), "tank");
  EXPECT_EQ(pool->size_bytes(), uint64_t{64} << 20);
  EXPECT_EQ(pool->free_bytes(), uint64_t{64} << 20);
  EXPECT_TRUE(Uuid::Parse(pool->uuid()).ok());

  auto by_uuid = catalog().QueryPool(admin_, pool->uuid());
  ASSERT_TRUE(by_uuid.ok());
  EXPECT_EQ(by_uuid->label(), "tank");

  auto dup = catalog().CreatePool(admin_, "tank", 64 << 20, 0);
  EXPECT_EQ(dup.status().code(), Status::Code::kAlreadyExists);
  EXPECT_NE(dup.status().message().find("'tank' already exists"), std::string::npos);

  auto small = catalog().CreatePool(admin_, "tiny", 100, 0);
  EXPECT_EQ(small.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(small.status().message().find("bad size"), std::string::npos);

  auto unknown = catalog().QueryPool(admin_, "nope");
  EXPECT_EQ(unknown.status().code(), Status::Code::kNotFound);
  EXPECT_NE(unknown.status().message().find("unknown pool 'nope'"), std::string::npos);

  auto bad_uuid = catalog().QueryPool(admin_, "zzzzzzzz-1111-2222-3333-444444444444");
  EXPECT_EQ(bad_uuid.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad_uuid.status().message().find("bad UUID"), std::string::npos);

  auto label_like_uuid = catalog().CreatePool(admin_, Uuid::Generate().ToString(), 64 << 20, 0);
  EXPECT_EQ(label_like_uuid.status().code(), Status::Code::kInvalidArgument);

  auto not_admin = catalog().CreatePool(alice_, "mine", 64 << 20, 0);
  EXPECT_EQ(not_admin.status().code(), Status::Code::kPermissionDenied);

  auto listed = catalog().ListPools(admin_);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  auto alice_list = catalog().ListPools(alice_);
  ASSERT_TRUE(alice_list.ok());
  EXPECT_TRUE(alice_list->empty());

  ASSERT_TRUE(catalog().CreateContainer(admin_, "tank", "c1", {}).ok());
  EXPECT_EQ(catalog().DestroyPool(admin_, "tank", false).code(), Status::Code::kNotEmpty);
  EXPECT_EQ(catalog().DestroyPool(alice_, "tank", true).code(), Status::Code::kPermissionDenied);
  ASSERT_TRUE(catalog().DestroyPool(admin_, "tank", true).ok());
  EXPECT_EQ(catalog().QueryPool(admin_, "tank").status().code(), Status::Code::kNotFound);
  // The label and the container records went with it.
  EXPECT_TRUE(catalog().CreatePool(admin_, "tank", 64 << 20, 0).ok());
  auto conts = catalog().ListContainers(admin_, "tank");
  ASSERT_TRUE(conts.ok());
  EXPECT_TRUE(conts->empty());
}

TEST_F(CatalogTest, ContainerPropertiesDefaultsValuesAndErrors) {
  ASSERT_TRUE(catalog().CreatePool(admin_, "p", 64 << 20, 0).ok());
  auto plain = catalog().CreateContainer(admin_, "p", "defaults", {});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->properties().object_class(), "SX");
  EXPECT_TRUE(plain->properties().checksum());
  EXPECT_EQ(plain->properties().chunk_size(), kDefaultChunkSize);
  EXPECT_FALSE(plain->properties().encryption());
  EXPECT_EQ(plain->properties().layout(), rpc::LAYOUT_POSIX);

  auto custom = catalog().CreateContainer(
      admin_, "p", "custom",
      {{"oclass", "s1"}, {"checksum", "off"}, {"chunk_size", "4MiB"}, {"encryption", "on"}, {"layout", "plain"}});
  ASSERT_TRUE(custom.ok()) << custom.status().ToString();
  EXPECT_EQ(custom->properties().object_class(), "S1");
  EXPECT_FALSE(custom->properties().checksum());
  EXPECT_EQ(custom->properties().chunk_size(), uint64_t{4} << 20);
  EXPECT_TRUE(custom->properties().encryption());
  EXPECT_EQ(custom->properties().layout(), rpc::LAYOUT_PLAIN);

  auto unknown = catalog().CreateContainer(admin_, "p", "x", {{"colour", "blue"}});
  EXPECT_EQ(unknown.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("unknown container property 'colour'"), std::string::npos);
  auto chunk = catalog().CreateContainer(admin_, "p", "x", {{"chunk_size", "1000"}});
  EXPECT_NE(chunk.status().message().find("chunk_size='1000'"), std::string::npos);
  auto layout = catalog().CreateContainer(admin_, "p", "x", {{"layout", "tree"}});
  EXPECT_NE(layout.status().message().find("layout='tree'"), std::string::npos);
  auto oclass = catalog().CreateContainer(admin_, "p", "x", {{"oclass", "EC_4P2"}});
  EXPECT_NE(oclass.status().message().find("oclass='EC_4P2'"), std::string::npos);
  auto dup = catalog().CreateContainer(admin_, "p", "custom", {});
  EXPECT_EQ(dup.status().code(), Status::Code::kAlreadyExists);
  auto missing = catalog().CreateContainer(admin_, "p", "", {});
  EXPECT_EQ(missing.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("missing container label"), std::string::npos);
  EXPECT_EQ(catalog().QueryContainer(admin_, "p", "nope").status().code(), Status::Code::kNotFound);
}

TEST_F(CatalogTest, AclRulesForTenants) {
  ASSERT_TRUE(catalog().CreatePool(admin_, "shared", 64 << 20, 0).ok());
  // Nobody but admin can do anything yet.
  EXPECT_EQ(catalog().AccessPool(alice_, "shared", kRightRead).status().code(), Status::Code::kPermissionDenied);
  ASSERT_TRUE(catalog().SetAcl(admin_, "shared", "", "alice", kRightRead | kRightCreate).ok());
  ASSERT_TRUE(catalog().SetAcl(admin_, "shared", "", "bob", kRightRead | kRightCreate).ok());
  auto a = catalog().CreateContainer(alice_, "shared", "alice-data", {});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->owner(), "alice");
  auto b = catalog().CreateContainer(bob_, "shared", "bob-data", {});
  ASSERT_TRUE(b.ok());

  // Alice owns hers; bob holds nothing on it.
  auto mine = catalog().AccessContainer(alice_, a->pool_uuid(), "alice-data");
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(mine->rights, kAllRights);
  auto theirs = catalog().AccessContainer(alice_, b->pool_uuid(), "bob-data");
  ASSERT_FALSE(theirs.ok());
  EXPECT_EQ(theirs.status().code(), Status::Code::kPermissionDenied);
  EXPECT_NE(theirs.status().message().find("'alice' has no access to container 'bob-data'"), std::string::npos);
  // Only the container's admins may change its ACL.
  EXPECT_EQ(catalog().SetAcl(alice_, "shared", "bob-data", "alice", kAllRights).status().code(),
            Status::Code::kPermissionDenied);
  auto acl = catalog().SetAcl(bob_, "shared", "bob-data", "alice", kRightRead);
  ASSERT_TRUE(acl.ok()) << acl.status().ToString();
  ASSERT_EQ(acl->size(), 1u);
  auto read_only = catalog().AccessContainer(alice_, b->pool_uuid(), "bob-data");
  ASSERT_TRUE(read_only.ok());
  EXPECT_EQ(read_only->rights, kRightRead);
  EXPECT_EQ(catalog().DestroyContainer(alice_, "shared", "bob-data").code(), Status::Code::kPermissionDenied);
  // Bad grants.
  EXPECT_EQ(catalog().SetAcl(bob_, "shared", "bob-data", "mallory", kRightRead).status().code(),
            Status::Code::kNotFound);
  EXPECT_EQ(catalog().SetAcl(bob_, "shared", "bob-data", "alice", 0x40).status().code(),
            Status::Code::kInvalidArgument);
  // Removing the entry takes the access away again.
  ASSERT_TRUE(catalog().SetAcl(bob_, "shared", "bob-data", "alice", 0).ok());
  EXPECT_FALSE(catalog().AccessContainer(alice_, b->pool_uuid(), "bob-data").ok());
  // Pool rights: alice may not destroy the pool, nor change its ACL.
  EXPECT_EQ(catalog().DestroyPool(alice_, "shared", true).code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(catalog().SetAcl(alice_, "shared", "", "alice", kAllRights).status().code(),
            Status::Code::kPermissionDenied);
  auto alice_pools = catalog().ListPools(alice_);
  ASSERT_TRUE(alice_pools.ok());
  EXPECT_EQ(alice_pools->size(), 1u);
}

TEST_F(CatalogTest, SystemMapVersionsAndPoolMaps) {
  EngineRegistration a = MakeEngine(2, 1ull << 30);
  EngineRegistration b = MakeEngine(3, 1ull << 30);
  auto v1 = plane_->RegisterLocalEngine(a);
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  ASSERT_TRUE(catalog().CreatePool(admin_, "all", 64 << 20, 0).ok());
  ASSERT_TRUE(catalog().CreatePool(admin_, "two", 64 << 20, 2).ok());
  auto v2 = plane_->RegisterLocalEngine(b);
  ASSERT_TRUE(v2.ok());
  EXPECT_GT(*v2, *v1);

  auto all = catalog().AccessPool(admin_, "all", kRightRead);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->map.version(), *v2);
  ASSERT_EQ(all->map.targets_size(), 5);
  EXPECT_EQ(all->map.engines_size(), 2);
  EXPECT_EQ(all->map.targets(0).engine_uuid(), a.engine.ToString());
  EXPECT_EQ(all->map.targets(4).engine_uuid(), b.engine.ToString());
  EXPECT_EQ(all->map.targets(4).worker_address(), b.targets[2].worker_address);
  EXPECT_EQ(all->map.targets(2).state(), rpc::TARGET_UP);

  auto two = catalog().AccessPool(admin_, "two", kRightRead);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->map.targets_size(), 2);
  EXPECT_EQ(two->map.engines_size(), 1);

  auto v3 = plane_->system_map().SetTargetState(b.engine, 1, rpc::TARGET_DOWN);
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ(*v3, *v2 + 1);
  auto map = catalog().PoolMapFor(all->info.uuid());
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->targets(3).state(), rpc::TARGET_DOWN);

  // A restarted engine re-registers with new addresses in place: all UP again.
  a.targets[0].worker_address = "new-address";
  auto v4 = plane_->RegisterLocalEngine(a);
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(*v4, *v3 + 1);
  map = catalog().PoolMapFor(all->info.uuid());
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->targets(0).worker_address(), "new-address");
  EXPECT_EQ(map->targets(2).engine_uuid(), b.engine.ToString());

  EXPECT_EQ(plane_->system_map().SetTargetState(Uuid::Generate(), 0, rpc::TARGET_DOWN).status().code(),
            Status::Code::kNotFound);
  EXPECT_EQ(plane_->system_map().SetTargetState(a.engine, 9, rpc::TARGET_DOWN).status().code(),
            Status::Code::kNotFound);
  EngineRegistration dup = MakeEngine(2);
  dup.targets[1].index = 0;
  EXPECT_EQ(plane_->RegisterLocalEngine(dup).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(catalog().CreatePool(admin_, "many", 64 << 20, 99).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(catalog().CreatePool(admin_, "huge", 1ull << 40, 0).status().code(), Status::Code::kNoSpace);
}

// docs/replication.md, "Target states": a DOWN target whose engine registers
// again comes back REINT, back from DOWN, while another engine's target took
// writes meanwhile; UP when none could (every other target out too).
TEST_F(CatalogTest, ADownTargetBackWhileOthersTookWritesCatchesUpFirst) {
  EngineRegistration a = MakeEngine(2, 1ull << 30);
  EngineRegistration b = MakeEngine(2, 1ull << 30);
  ASSERT_TRUE(plane_->RegisterLocalEngine(a).ok());
  ASSERT_TRUE(plane_->RegisterLocalEngine(b).ok());
  SystemMap& sys = plane_->system_map();
  auto state_of = [&](const EngineRegistration& e, uint32_t index) {
    const rpc::PoolMap map = sys.Snapshot();
    for (const auto& t : map.targets()) {
      if (t.engine_uuid() == e.engine.ToString() && t.index() == index) return std::pair(t.state(), t.back_from_down());
    }
    return std::pair(rpc::TARGET_STATE_UNSPECIFIED, false);
  };
  ASSERT_TRUE(sys.SetTargetState(b.engine, 1, rpc::TARGET_DOWN).ok());
  b.targets[1].worker_address = "restarted";
  ASSERT_TRUE(plane_->RegisterLocalEngine(b).ok());
  EXPECT_EQ(state_of(b, 1), std::pair(rpc::TARGET_REINT, true)) << "it missed the writes a's targets took";
  EXPECT_EQ(state_of(b, 0), std::pair(rpc::TARGET_UP, false));
  // Registering again keeps it catching up; an administrator's UP is refused.
  ASSERT_TRUE(plane_->RegisterLocalEngine(b).ok());
  EXPECT_EQ(state_of(b, 1), std::pair(rpc::TARGET_REINT, true));
  auto up = sys.SetTargetState(b.engine, 1, rpc::TARGET_UP);
  EXPECT_EQ(up.status().code(), Status::Code::kBusy) << up.status().ToString();
  EXPECT_NE(up.status().message().find("REINT"), std::string::npos) << up.status().ToString();
  EXPECT_EQ(sys.SetTargetState(b.engine, 1, rpc::TARGET_DRAIN).status().code(), Status::Code::kBusy);
  // Caught up: UP, the mark gone.
  auto settled = sys.SettleTargets({{b.engine.ToString(), 1, rpc::TARGET_REINT, rpc::TARGET_UP}}, StoreBatch());
  ASSERT_TRUE(settled.ok()) << settled.status().ToString();
  EXPECT_EQ(state_of(b, 1), std::pair(rpc::TARGET_UP, false));

  // A cold start: both engines DOWN in the map. The first back took no write
  // without the other: UP. The second missed what the first took since: REINT.
  ASSERT_TRUE(sys.SetEngineState(a.engine, rpc::TARGET_DOWN, StoreBatch()).ok());
  ASSERT_TRUE(sys.SetEngineState(b.engine, rpc::TARGET_DOWN, StoreBatch()).ok());
  ASSERT_TRUE(plane_->RegisterLocalEngine(a).ok());
  EXPECT_EQ(state_of(a, 0), std::pair(rpc::TARGET_UP, false));
  EXPECT_EQ(state_of(a, 1), std::pair(rpc::TARGET_UP, false));
  ASSERT_TRUE(plane_->RegisterLocalEngine(b).ok());
  EXPECT_EQ(state_of(b, 0), std::pair(rpc::TARGET_REINT, true));
  // DOWN again: the mark goes with the state.
  ASSERT_TRUE(sys.SetEngineState(b.engine, rpc::TARGET_DOWN, StoreBatch()).ok());
  EXPECT_EQ(state_of(b, 0), std::pair(rpc::TARGET_DOWN, false));
}

TEST_F(CatalogTest, StateSurvivesRestart) {
  EngineRegistration engine = MakeEngine(2);
  ASSERT_TRUE(plane_->RegisterLocalEngine(engine).ok());
  auto pool = catalog().CreatePool(admin_, "persist", 64 << 20, 0);
  ASSERT_TRUE(pool.ok());
  ASSERT_TRUE(catalog().SetAcl(admin_, "persist", "", "alice", kRightRead | kRightCreate).ok());
  ASSERT_TRUE(catalog().CreateContainer(alice_, "persist", "c", {{"layout", "plain"}}).ok());
  uint64_t version = plane_->system_map().version();
  Capability cap{alice_.uuid, *Uuid::Parse(pool->uuid()), Uuid(), Uuid::Generate(),
                 kRightRead,  plane_->NowMs() + 60'000};
  auto blob = plane_->signer().Sign(cap);
  ASSERT_TRUE(blob.ok());
  CapabilityKey key = plane_->capability_key();

  plane_.reset();
  Open();
  EXPECT_EQ(plane_->capability_key(), key);
  auto verified = plane_->verifier().Verify(std::span(reinterpret_cast<const uint8_t*>(blob->data()), blob->size()));
  EXPECT_TRUE(verified.ok()) << verified.status().ToString();
  EXPECT_TRUE(plane_->tenants().Authenticate("alice", "alice-secret").ok());
  EXPECT_EQ(plane_->system_map().version(), version);
  auto c = catalog().AccessContainer(alice_, pool->uuid(), "c");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->info.properties().layout(), rpc::LAYOUT_PLAIN);
  auto access = catalog().AccessPool(alice_, "persist", kRightRead);
  ASSERT_TRUE(access.ok());
  EXPECT_EQ(access->map.targets_size(), 2);
  EXPECT_EQ(access->info.container_count(), 1u);
}

TEST_F(CatalogTest, RevocationSurvivesRestart) {
  auto pool = catalog().CreatePool(admin_, "rv", 64 << 20, 0);
  ASSERT_TRUE(pool.ok());
  Uuid pool_uuid = *Uuid::Parse(pool->uuid());
  auto opened = plane_->sessions().Open(alice_, pool_uuid, plane_->NowMs() + 60'000);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  SessionRecord s = *opened;
  Capability cap{alice_.uuid, pool_uuid, Uuid(), s.session, kRightRead, s.expiry_ms};
  auto blob = plane_->signer().Sign(cap);
  ASSERT_TRUE(blob.ok());
  auto bytes = std::span(reinterpret_cast<const uint8_t*>(blob->data()), blob->size());
  ASSERT_TRUE(plane_->verifier().Verify(bytes).ok());
  EXPECT_EQ(plane_->sessions().Close(s.session.ToString(), bob_).code(), Status::Code::kNotFound);
  ASSERT_TRUE(plane_->sessions().Close(s.session.ToString(), alice_).ok());
  EXPECT_EQ(plane_->verifier().Verify(bytes).status().code(), Status::Code::kUnauthenticated);
  plane_.reset();
  Open();
  auto after = plane_->verifier().Verify(bytes);
  ASSERT_FALSE(after.ok());
  EXPECT_NE(after.status().message().find("revoked"), std::string::npos) << after.status().ToString();
}

}  // namespace
}  // namespace ros2::control

namespace ros2::control {
namespace {

// An engine that refuses pools named "refused" and reports 5 MiB used.
class RecordingHooks : public EngineHooks {
 public:
  Status OnPoolCreate(const rpc::PoolInfo& pool, const rpc::PoolMap& map) override {
    if (pool.label() == "refused") return Status::NoSpace("the engine has no room");
    created_targets = map.targets_size();
    ++pools_created;
    return Status::Ok();
  }
  Status OnPoolDestroy(const Uuid& /*pool*/) override {
    ++pools_destroyed;
    return Status::Ok();
  }
  Status OnContainerCreate(const rpc::ContainerInfo& /*container*/) override {
    ++containers_created;
    return Status::Ok();
  }
  Status OnContainerDestroy(const Uuid& /*pool*/, const Uuid& /*container*/) override {
    ++containers_destroyed;
    return Status::Ok();
  }
  uint64_t PoolUsedBytes(const Uuid& /*pool*/) override { return 5 << 20; }

  int pools_created = 0, pools_destroyed = 0, containers_created = 0, containers_destroyed = 0;
  int created_targets = -1;
};

TEST(CatalogHooksTest, EngineHooksSeeLifecycleAndReportUsage) {
  ros2::testing::TempDir dir;
  RecordingHooks hooks;
  ControlPlaneOptions opts;
  opts.data_dir = dir.path() + "/engine";
  opts.pbkdf2_iterations = 1000;
  opts.hooks = &hooks;
  auto plane = ControlPlane::Open(opts);
  ASSERT_TRUE(plane.ok()) << plane.status().ToString();
  Catalog& catalog = (*plane)->catalog();
  Principal admin = *(*plane)->tenants().Lookup(kAdminTenant);
  ASSERT_TRUE((*plane)->RegisterLocalEngine(MakeEngine(3)).ok());

  auto refused = catalog.CreatePool(admin, "refused", 64 << 20, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kNoSpace);
  EXPECT_NE(refused.status().message().find("create pool 'refused': the engine has no room"), std::string::npos);
  EXPECT_EQ(catalog.QueryPool(admin, "refused").status().code(), Status::Code::kNotFound);

  auto pool = catalog.CreatePool(admin, "p", 64 << 20, 0);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(hooks.pools_created, 1);
  EXPECT_EQ(hooks.created_targets, 3);
  auto q = catalog.QueryPool(admin, "p");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->used_bytes(), uint64_t{5} << 20);
  EXPECT_EQ(q->free_bytes(), uint64_t{59} << 20);
  ASSERT_TRUE(catalog.CreateContainer(admin, "p", "c", {}).ok());
  ASSERT_TRUE(catalog.DestroyContainer(admin, "p", "c").ok());
  ASSERT_TRUE(catalog.DestroyPool(admin, "p", false).ok());
  EXPECT_EQ(hooks.containers_created, 1);
  EXPECT_EQ(hooks.containers_destroyed, 1);
  EXPECT_EQ(hooks.pools_destroyed, 1);
}

TEST_F(CatalogTest, CloseRevokesUntilEveryExtendBeforeItAndExtendAfterItFails) {
  auto pool = catalog().CreatePool(admin_, "race", 64 << 20, 0);
  ASSERT_TRUE(pool.ok());
  const Uuid pool_uuid = *Uuid::Parse(pool->uuid());
  const uint64_t now = plane_->NowMs();
  auto s = plane_->sessions().Open(alice_, pool_uuid, now + 1000);
  ASSERT_TRUE(s.ok());
  const std::string id = s->session.ToString();
  // An OpenContainer reserved a later expiry before the Disconnect ...
  ASSERT_TRUE(plane_->sessions().Extend(id, alice_, now + 60'000).ok());
  ASSERT_TRUE(plane_->sessions().Close(id, alice_).ok());
  // ... so the revocation lasts as long as that capability.
  auto revoked = plane_->sessions().ListRevocations(now + 2000);
  ASSERT_TRUE(revoked.ok());
  ASSERT_EQ(revoked->size(), 1u);
  EXPECT_EQ(revoked->front().session, s->session);
  EXPECT_EQ(revoked->front().until_ms, now + 60'000);
  // One after the Disconnect issues nothing.
  EXPECT_EQ(plane_->sessions().Extend(id, alice_, now + 90'000).status().code(), Status::Code::kNotFound);
}

TEST_F(CatalogTest, TenantCutOffRefusesOlderCapabilitiesAndSurvivesRestart) {
  auto pool = catalog().CreatePool(admin_, "cut", 64 << 20, 0);
  ASSERT_TRUE(pool.ok());
  const Uuid pool_uuid = *Uuid::Parse(pool->uuid());
  const uint64_t now = plane_->NowMs();
  auto sign = [&](uint64_t expiry) {
    Capability cap{alice_.uuid, pool_uuid, Uuid(), Uuid::Generate(), kRightRead, expiry};
    return *plane_->signer().Sign(cap);
  };
  auto verify = [&](const std::string& blob) {
    return plane_->verifier().Verify(std::span(reinterpret_cast<const uint8_t*>(blob.data()), blob.size()));
  };
  const std::string old_cap = sign(now + 30'000);
  ASSERT_TRUE(verify(old_cap).ok());
  const uint64_t cutoff = plane_->RevocationCutoff();
  ASSERT_TRUE(plane_->sessions().RevokeTenant(alice_.uuid, pool_uuid, cutoff, false).ok());
  EXPECT_EQ(verify(old_cap).status().code(), Status::Code::kUnauthenticated);
  EXPECT_EQ(plane_->verifier().MinExpiryFor(alice_.uuid), cutoff + 1);
  auto window = plane_->BeginIssue(alice_);
  ASSERT_TRUE(window.ok());
  EXPECT_TRUE(verify(sign(plane_->ExpiryFor(*window))).ok()) << "a capability issued after the cut-off is refused";
  // Bob is not concerned; the cut-off survives a restart.
  Capability bobs{bob_.uuid, pool_uuid, Uuid(), Uuid::Generate(), kRightRead, now + 30'000};
  std::string bob_blob = *plane_->signer().Sign(bobs);
  EXPECT_TRUE(verify(bob_blob).ok());
  plane_.reset();
  Open();
  EXPECT_EQ(verify(old_cap).status().code(), Status::Code::kUnauthenticated);
  // A deleted tenant cannot start issuing any more.
  ASSERT_TRUE(plane_->tenants().DeleteTenant("alice").ok());
  EXPECT_EQ(plane_->BeginIssue(alice_).status().code(), Status::Code::kUnauthenticated);
}

TEST_F(CatalogTest, AclEntriesMatchTheTenantUuidNotTheName) {
  auto pool = catalog().CreatePool(admin_, "named", 64 << 20, 0);
  ASSERT_TRUE(pool.ok());
  Catalog::AclChange change;
  ASSERT_TRUE(catalog().SetAcl(admin_, "named", "", "alice", kRightRead, &change).ok());
  EXPECT_EQ(change.tenant, alice_.uuid);
  EXPECT_EQ(change.before, 0);
  EXPECT_EQ(change.after, kRightRead);
  EXPECT_TRUE(catalog().QueryPool(alice_, "named").ok());
  ASSERT_TRUE(plane_->tenants().DeleteTenant("alice").ok());
  ASSERT_TRUE(plane_->tenants().CreateTenant("alice", "new-secret").ok());
  const Principal reborn = *plane_->tenants().Lookup("alice");
  ASSERT_NE(reborn.uuid, alice_.uuid);
  EXPECT_EQ(catalog().QueryPool(reborn, "named").status().code(), Status::Code::kPermissionDenied);
  auto pools = catalog().ListPools(reborn);
  ASSERT_TRUE(pools.ok());
  EXPECT_TRUE(pools->empty());
}

TEST_F(CatalogTest, GuessingLocksTheNameButNotARememberedSecret) {
  ASSERT_TRUE(plane_->tenants().Authenticate("alice", "alice-secret").ok());  // remembered
  Status last;
  for (int i = 0; i < 6; ++i) last = plane_->tenants().Authenticate("alice", "guess").status();
  EXPECT_EQ(last.code(), Status::Code::kUnauthenticated);
  EXPECT_NE(last.message().find("locked"), std::string::npos) << last.ToString();
  EXPECT_TRUE(plane_->tenants().Authenticate("alice", "alice-secret").ok());
  // Unknown names are locked the same way.
  for (int i = 0; i < 6; ++i) last = plane_->tenants().Authenticate("nobody", "guess").status();
  EXPECT_NE(last.message().find("locked"), std::string::npos) << last.ToString();
}

}  // namespace
}  // namespace ros2::control
