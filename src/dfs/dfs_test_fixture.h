// The fixture of the DFS end-to-end tests (dfs_test.cc, dfs_namespace_test.cc):
// one cluster per transport name (a TestCluster with pool "p"; an
// "offload-<transport>" one also runs ros2-agent), one container per test,
// connected (ros2::testing::ConnectContainer) and mounted. Test code only.
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ros2/client.h"
#include "ros2/dfs.h"
#include "testing/client_fixture.h"
#include "testing/pattern.h"
#include "testing/test_cluster.h"

namespace ros2::dfs {

using ros2::testing::Pattern;
using ros2::testing::TestCluster;

inline std::span<const std::byte> Bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// One cluster per transport (2 targets), one container per test.
class DfsFixture : public ::testing::TestWithParam<std::string> {
 protected:
  static void TearDownTestSuite() { clusters_.Clear(); }

  void SetUp() override {
    const std::string& transport = GetParam();
    std::string error;
    cluster_ = clusters_.Get(transport, &error);
    ASSERT_NE(cluster_, nullptr) << error;
    const std::string label = fmt::format("c{}", next_container_++);
    label_ = label;
    auto cont = cluster_->Ctl({"cont", "create", "p", label});
    ASSERT_EQ(cont.exit_code, 0) << cont.err;
    auto connected = ros2::testing::ConnectContainer(ros2::testing::ClientOptionsFor(*cluster_, transport), "p", label);
    ASSERT_TRUE(connected.ok()) << connected.status().ToString();
    client_ = std::move(connected->client);
    pool_ = std::move(connected->pool);
    cont_ = std::move(connected->cont);
    fs_ = MountOrDie({});
  }

  void TearDown() override {
    fs_.reset();
    cont_.reset();
    pool_.reset();
    client_.reset();
  }

  // The file system runs in ros2-agent (offload mode).
  bool Offload() const { return GetParam().starts_with("offload-"); }

  std::unique_ptr<Filesystem> MountOrDie(MountOptions options) {
    auto fs = Filesystem::Mount(*cont_, options);
    EXPECT_TRUE(fs.ok()) << fs.status().ToString();
    return fs.ok() ? std::move(*fs) : nullptr;
  }

  Entry CreateFile(const Entry& dir, std::string_view name, std::string_view content = {}) {
    auto f = fs_->Open(dir, name, O_CREAT | O_RDWR, 0644);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    if (!content.empty()) {
      auto n = fs_->Write(*f, 0, Bytes(content));
      EXPECT_TRUE(n.ok()) << n.status().ToString();
    }
    return *f;
  }

  std::string ReadAll(const Entry& f, size_t max = 1 << 20) {
    std::vector<std::byte> buf(max);
    auto n = fs_->Read(f, 0, buf);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return std::string(reinterpret_cast<const char*>(buf.data()), n.ok() ? *n : 0);
  }

  static inline ros2::testing::SharedClusters clusters_;
  static inline int next_container_ = 0;
  TestCluster* cluster_ = nullptr;
  std::string label_;  // the test's container
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<client::Pool> pool_;
  std::unique_ptr<client::Container> cont_;
  std::unique_ptr<Filesystem> fs_;
};

}  // namespace ros2::dfs
