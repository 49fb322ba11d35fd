// EtcdStore against real etcd members started by the test: batches are one
// Txn (all or nothing, compares guard them), scans see exactly their prefix in
// the store's namespace, a dead member is skipped, and with etcd wholly down
// calls fail naming etcd and work again, with no new client, once it returns.
#include "control/etcd_store.h"

#include <gtest/gtest.h>

#include "testing/etcd_process.h"

namespace ros2::control {
namespace {

std::unique_ptr<EtcdStore> OpenStore(const ros2::testing::EtcdTestCluster& etcd, const std::string& ns) {
  auto endpoints = ParseEtcdEndpoints(etcd.StoreUrl());
  EXPECT_TRUE(endpoints.ok()) << endpoints.status().ToString();
  auto client = EtcdClient::Connect(*endpoints, {.call_timeout = std::chrono::milliseconds(1000)});
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return std::make_unique<EtcdStore>(std::shared_ptr<EtcdClient>(std::move(*client)), ns);
}

TEST(EtcdEndpointsTest, ParsesListAndRejectsBadText) {
  auto eps = ParseEtcdEndpoints("etcd://127.0.0.1:2379,h2:4001");
  ASSERT_TRUE(eps.ok()) << eps.status().ToString();
  EXPECT_EQ(*eps, (std::vector<std::string>{"127.0.0.1:2379", "h2:4001"}));
  auto bad = ParseEtcdEndpoints("http://127.0.0.1:2379");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("etcd://"), std::string::npos);
  auto noport = ParseEtcdEndpoints("etcd://a:1,b");
  ASSERT_FALSE(noport.ok());
  EXPECT_NE(noport.status().message().find("'b'"), std::string::npos) << noport.status().ToString();
  EXPECT_EQ(PrefixEnd("pool/"), "pool0");
}

TEST(EtcdStoreTest, BatchesAreOneTxnGuardedByCompares) {
  auto etcd = ros2::testing::EtcdTestCluster::Start(1);
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  auto store = OpenStore(**etcd, "t1/");
  auto other = OpenStore(**etcd, "t2/");
  EXPECT_TRUE(store->shared());

  StoreBatch b;
  b.Require("pool-label/x", std::nullopt);
  b.Put("pool/a", "1");
  b.Put("pool/b", "2");
  b.Put("pool-label/x", "a");
  b.Put("tenant/t", "3");
  ASSERT_TRUE(store->Write(b).ok());
  // The same create again: the label exists, nothing of the batch is applied.
  StoreBatch again;
  again.Require("pool-label/x", std::nullopt);
  again.Put("pool/z", "9");
  Status st = store->Write(again);
  EXPECT_EQ(st.code(), Status::Code::kBusy) << st.ToString();
  EXPECT_TRUE(store->Get("pool/z").status().IsNotFound());

  StoreBatch d;
  d.Require("pool-label/x", "a");
  d.Delete("pool/b");
  d.Delete("pool/a");
  d.Put("pool/a", "5");  // deleted and put in one batch: the put wins
  d.Put("pool/c", "4");
  ASSERT_TRUE(store->Write(d).ok()) << "a key both deleted and put must not make etcd refuse the Txn";
  auto rows = store->Scan("pool/");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0], (std::pair<std::string, std::string>{"pool/a", "5"}));
  EXPECT_EQ((*rows)[1], (std::pair<std::string, std::string>{"pool/c", "4"}));
  auto missing = store->Get("pool/b");
  ASSERT_TRUE(missing.status().IsNotFound());
  EXPECT_NE(missing.status().message().find("pool/b"), std::string::npos);
  // Another namespace sees none of it.
  auto none = other->Scan("");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  // The keys really are in etcd, under the namespace.
  auto listed = (*etcd)->Etcdctl({"get", "--prefix", "--keys-only", "t1/pool/"});
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_NE(listed->find("t1/pool/a"), std::string::npos) << *listed;
}

TEST(EtcdStoreTest, EtcdDownFailsNamingEtcdAndRecovers) {
  auto etcd = ros2::testing::EtcdTestCluster::Start(1);
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  auto store = OpenStore(**etcd, "ros2/");
  ASSERT_TRUE(store->Put("tenant/a", "1").ok());
  (*etcd)->Kill(0);
  Status down = store->Put("tenant/b", "2");
  ASSERT_FALSE(down.ok());
  EXPECT_NE(down.message().find("etcd"), std::string::npos) << down.ToString();
  EXPECT_FALSE(store->Get("tenant/a").ok());
  ASSERT_TRUE((*etcd)->Restart(0).ok());
  Status back = Status::IOError("never tried");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!back.ok() && std::chrono::steady_clock::now() < deadline) {
    back = store->Put("tenant/b", "2");
    if (!back.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(back.ok()) << back.ToString();
  auto a = store->Get("tenant/a");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(*a, "1");
}

TEST(EtcdStoreTest, ThreeMembersServeWithOneKilled) {
  auto etcd = ros2::testing::EtcdTestCluster::Start(3);
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  auto store = OpenStore(**etcd, "ros2/");
  ASSERT_TRUE(store->Put("pool/a", "1").ok());
  (*etcd)->Kill(0);  // the member the client talks to first
  Status st = Status::IOError("never tried");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 50 && !st.ok(); ++i) {
    st = store->Put("pool/b", "2");
    if (!st.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::printf(
      "etcd: write served %lld ms after a member was killed\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count()));
  auto rows = store->Scan("pool/");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->size(), 2u);
}

}  // namespace
}  // namespace ros2::control
