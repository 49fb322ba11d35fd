// Capabilities and tenants on the data path, and management input errors,
// against a real ros2-engine process.
#include <gtest/gtest.h>

#include <thread>

#include "control/control_channel.h"
#include "control/management_client.h"
#include "engine_cluster.h"
#include "object_session.h"
#include "testing/engine_process.h"

namespace ros2::testing {
namespace {

using transport::TransportKind;

// Fetches d/a of `oid` with the session's own (valid) capability.
std::vector<std::byte> ReadBack(ObjectSession& s, const ObjectId& oid, size_t n) {
  auto f = s.FetchArray(oid, "d", "a", 0, n);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? f->data : std::vector<std::byte>{};
}

TEST(EngineSecurity, BadCapabilitiesAreRefusedAndChangeNothing) {
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "tcp", .targets = 1, .capability_lifetime = "3s"}));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{8} << 20));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "c1"));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "c2"));
  auto s1 = ObjectSession::Open(c.engine->control(), c.admin, "p", "c1", TransportKind::kTcp);
  auto s2 = ObjectSession::Open(c.engine->control(), c.admin, "p", "c2", TransportKind::kTcp);
  auto ro = ObjectSession::Open(c.engine->control(), c.admin, "p", "c1", TransportKind::kTcp, control::kRightRead);
  ASSERT_TRUE(s1.ok() && s2.ok() && ro.ok())
      << s1.status().ToString() << s2.status().ToString() << ro.status().ToString();
  ObjectSession& session = **s1;
  const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 0, 9);
  const auto original = Pattern(4096, 1);
  ROS2_ASSERT_OK(session.UpdateArray(oid, "d", "a", 0, original));
  const auto attempt = Pattern(4096, 2);
  const std::string good = session.capability;

  struct Case {
    const char* name;
    std::string capability;
    Status::Code expected;
    const char* needle;
  };
  std::string forged = good;
  forged.back() = static_cast<char>(forged.back() ^ 1);  // one MAC bit
  std::string tampered = good;
  tampered[10] = static_cast<char>(tampered[10] ^ 0x40);  // a body bit: the MAC no longer matches
  const Case cases[] = {
      {"missing", "", Status::Code::kUnauthenticated, "no capability"},
      {"garbage", std::string(20, 'x'), Status::Code::kInvalidArgument, ""},
      {"forged", forged, Status::Code::kUnauthenticated, ""},
      {"tampered", tampered, Status::Code::kUnauthenticated, ""},
      {"other container", (*s2)->capability, Status::Code::kPermissionDenied, ""},
      {"pool capability", session.pool().capability, Status::Code::kPermissionDenied, ""},
      {"read-only", (*ro)->capability, Status::Code::kPermissionDenied, ""},
  };
  for (const auto& tc : cases) {
    session.capability = tc.capability;
    auto r = session.UpdateArray(oid, "d", "a", 0, attempt);
    ASSERT_FALSE(r.ok()) << tc.name;
    EXPECT_EQ(r.status().code(), tc.expected) << tc.name << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find(tc.needle), std::string::npos) << tc.name << ": " << r.status().ToString();
  }
  // A read-only capability still reads.
  auto f = (*ro)->FetchArray(oid, "d", "a", 0, 4096);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->data, original);

  // Expired: the engine issues 3 s capabilities here.
  session.capability = good;
  std::this_thread::sleep_for(std::chrono::milliseconds(3300));
  auto expired = session.UpdateArray(oid, "d", "a", 0, attempt);
  ASSERT_FALSE(expired.ok());
  EXPECT_EQ(expired.status().code(), Status::Code::kUnauthenticated) << expired.status().ToString();
  EXPECT_NE(expired.status().message().find("expired"), std::string::npos) << expired.status().ToString();

  // Nothing changed: read with a fresh capability.
  auto fresh = ObjectSession::Open(c.engine->control(), c.admin, "p", "c1", TransportKind::kTcp);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(ReadBack(**fresh, oid, 4096), original);
}

TEST(EngineSecurity, TenantCannotReadAnotherTenantsContainer) {
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "tcp", .targets = 1}));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("shared", uint64_t{8} << 20));
  auto secret_a = c.mgmt->CreateTenant("tenant-a");
  auto secret_b = c.mgmt->CreateTenant("tenant-b");
  ASSERT_TRUE(secret_a.ok() && secret_b.ok());
  const control::Credentials a{"tenant-a", *secret_a}, b{"tenant-b", *secret_b};
  ROS2_ASSERT_OK(c.mgmt->SetAcl("shared", "", "tenant-a", control::kRightRead));
  ROS2_ASSERT_OK(c.mgmt->SetAcl("shared", "", "tenant-b", control::kRightRead));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("shared", "box-a"));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("shared", "box-b"));
  ROS2_ASSERT_OK(c.mgmt->SetAcl("shared", "box-a", "tenant-a", control::kRightRead | control::kRightWrite));
  ROS2_ASSERT_OK(c.mgmt->SetAcl("shared", "box-b", "tenant-b", control::kRightRead | control::kRightWrite));

  auto sb = ObjectSession::Open(c.engine->control(), b, "shared", "box-b", TransportKind::kTcp);
  ASSERT_TRUE(sb.ok()) << sb.status().ToString();
  const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 0, 4);
  ROS2_ASSERT_OK((*sb)->UpdateArray(oid, "d", "a", 0, Pattern(4096, 4)));

  // The control plane refuses to open B's container for A ...
  auto denied = ObjectSession::Open(c.engine->control(), a, "shared", "box-b", TransportKind::kTcp);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), Status::Code::kPermissionDenied) << denied.status().ToString();

  // ... and the engine refuses A's own capability aimed at B's container.
  auto sa = ObjectSession::Open(c.engine->control(), a, "shared", "box-a", TransportKind::kTcp);
  ASSERT_TRUE(sa.ok()) << sa.status().ToString();
  obj::FetchRequest f{(*sb)->Header(0), oid, "d", "a", obj::ValueType::kArray, 0, 4096, 1};
  std::vector<std::byte> buf(4096);
  auto r = (*sa)->Call(0, obj::Opcode::kFetch, obj::Encode(f), {}, buf);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kPermissionDenied) << r.status().ToString();
  EXPECT_EQ(buf, std::vector<std::byte>(4096)) << "data leaked into the refused fetch's buffer";
}

TEST(EngineSecurity, BadManagementInputGivesClearErrors) {
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "tcp", .targets = 1}));
  auto unknown = c.mgmt->QueryPool("no-such-pool");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), Status::Code::kNotFound) << unknown.status().ToString();
  EXPECT_NE(unknown.status().message().find("no-such-pool"), std::string::npos) << unknown.status().ToString();

  auto zero = c.mgmt->CreatePool("empty", 0);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), Status::Code::kInvalidArgument) << zero.status().ToString();

  ROS2_ASSERT_OK(c.mgmt->CreatePool("dup", uint64_t{8} << 20));
  auto dup = c.mgmt->CreatePool("dup", uint64_t{8} << 20);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), Status::Code::kAlreadyExists) << dup.status().ToString();

  auto no_pool_cont = c.mgmt->CreateContainer("no-such-pool", "c");
  EXPECT_EQ(no_pool_cont.status().code(), Status::Code::kNotFound) << no_pool_cont.status().ToString();

  // A destroyed container's capability opens nothing on the engine.
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("dup", "gone"));
  auto s = ObjectSession::Open(c.engine->control(), c.admin, "dup", "gone", TransportKind::kTcp);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ROS2_ASSERT_OK(
      (*s)->UpdateArray(ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 0, 1), "d", "a", 0, Pattern(100, 1)));
  ROS2_ASSERT_OK(c.mgmt->DestroyContainer("dup", "gone"));
  auto after = (*s)->FetchArray(ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 0, 1), "d", "a", 0, 100);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), Status::Code::kNotFound) << after.status().ToString();
}

}  // namespace
}  // namespace ros2::testing
