// The engines' liveness question (peer_liveness.h) over a real gRPC server on
// a Unix socket: an answer under the cluster's key is accepted with what the
// peer said; one under another key, or naming another engine, is refused;
// a silent endpoint is an error within the deadline.
#include "control/peer_liveness.h"

#include <gtest/gtest.h>

#include <chrono>

#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include "control/control_server.h"
#include "testing/temp_dir.h"

namespace ros2::control {
namespace {

Aes256Key KeyOf(uint8_t fill) {
  Aes256Key k{};
  k.fill(fill);
  return k;
}

struct PeerServer {
  std::unique_ptr<PeerLivenessService> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;

  PeerServer(const std::string& dir, const Aes256Key& key, std::string uuid, bool joined) {
    auto mac_key = PeerLivenessKey(key);
    EXPECT_TRUE(mac_key.ok());
    service = std::make_unique<PeerLivenessService>(std::move(*mac_key), [uuid, joined](rpc::PeerLivenessBody* b) {
      b->set_engine_uuid(uuid);
      b->set_etcd_reachable(false);
      b->set_last_attempt_age_ms(42);
      b->set_lease_age_ms(2000);
      return joined;
    });
    address = "unix:" + dir + "/peer.sock";
    grpc::ServerBuilder builder;
    int port = 0;
    EXPECT_TRUE(AddControlListeningPort(&builder, {.address = address}, &port).ok());
    builder.RegisterService(service.get());
    server = builder.BuildAndStart();
    EXPECT_NE(server, nullptr);
  }
  ~PeerServer() { server->Shutdown(); }
};

PeerProber Prober(const Aes256Key& key) {
  auto mac_key = PeerLivenessKey(key);
  EXPECT_TRUE(mac_key.ok());
  return PeerProber(std::move(*mac_key), "");
}

TEST(PeerLivenessTest, AnswerUnderTheClusterKeyIsAccepted) {
  testing::TempDir dir;
  PeerServer peer(dir.path(), KeyOf(1), "engine-b", true);
  PeerProber prober = Prober(KeyOf(1));
  auto answers = prober.Ask({{"engine-b", peer.address}}, std::chrono::seconds(5));
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_TRUE(answers[0].body.ok()) << answers[0].body.status().ToString();
  EXPECT_EQ(answers[0].body->engine_uuid(), "engine-b");
  EXPECT_FALSE(answers[0].body->etcd_reachable());
  EXPECT_EQ(answers[0].body->last_attempt_age_ms(), 42u);
}

TEST(PeerLivenessTest, AnswerUnderAnotherKeyIsRefused) {
  testing::TempDir dir;
  PeerServer peer(dir.path(), KeyOf(2), "engine-b", true);
  PeerProber prober = Prober(KeyOf(1));
  auto answers = prober.Ask({{"engine-b", peer.address}}, std::chrono::seconds(5));
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_FALSE(answers[0].body.ok());
  EXPECT_EQ(answers[0].body.status().code(), Status::Code::kUnauthenticated) << answers[0].body.status().ToString();
}

TEST(PeerLivenessTest, AnswerFromAnotherEngineOrUnjoinedIsRefused) {
  testing::TempDir dir;
  {
    PeerServer peer(dir.path(), KeyOf(1), "engine-c", true);
    PeerProber prober = Prober(KeyOf(1));
    auto answers = prober.Ask({{"engine-b", peer.address}}, std::chrono::seconds(5));
    ASSERT_FALSE(answers[0].body.ok());
    EXPECT_NE(answers[0].body.status().message().find("engine-c"), std::string::npos);
  }
  testing::TempDir dir2;
  PeerServer unjoined(dir2.path(), KeyOf(1), "engine-b", false);
  PeerProber prober = Prober(KeyOf(1));
  auto answers = prober.Ask({{"engine-b", unjoined.address}}, std::chrono::seconds(5));
  ASSERT_FALSE(answers[0].body.ok());
  EXPECT_EQ(answers[0].body.status().code(), Status::Code::kDisconnected) << answers[0].body.status().ToString();
}

TEST(PeerLivenessTest, SilentEndpointFailsWithinTheDeadline) {
  testing::TempDir dir;
  PeerProber prober = Prober(KeyOf(1));
  const auto start = std::chrono::steady_clock::now();
  auto answers = prober.Ask(
      {{"engine-b", "unix:" + dir.path() + "/nobody.sock"}, {"engine-c", "unix:" + dir.path() + "/none.sock"}},
      std::chrono::milliseconds(500));
  ASSERT_EQ(answers.size(), 2u);
  for (const auto& a : answers) EXPECT_FALSE(a.body.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
}  // namespace ros2::control
