#include "fuse/mount_options.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing/temp_dir.h"

namespace ros2::fuse {
namespace {

class MountOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directory(dir_ + "/mnt"); }

  Result<MountConfig> Parse(std::vector<std::string> args, std::string* help = nullptr) {
    std::string ignored;
    args.insert(args.begin(), "ros2-fuse");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return ParseCommandLine(static_cast<int>(argv.size()), argv.data(), help != nullptr ? help : &ignored);
  }

  ros2::testing::TempDir tmp_{"r2fuse-opt"};
  const std::string dir_ = tmp_.path();
};

TEST_F(MountOptionsTest, DefaultsAreDocumented) {
  auto c = Parse({"p1", "c1", dir_ + "/mnt/"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->pool, "p1");
  EXPECT_EQ(c->container, "c1");
  EXPECT_EQ(c->mountpoint, dir_ + "/mnt");  // absolute, no trailing slash
  EXPECT_DOUBLE_EQ(c->cache.attr_timeout_s, 1.0);
  EXPECT_DOUBLE_EQ(c->cache.entry_timeout_s, 1.0);
  EXPECT_DOUBLE_EQ(c->cache.negative_timeout_s, 0.0);
  EXPECT_TRUE(c->cache.data_cache);
  EXPECT_FALSE(c->cache.writeback_cache);
  EXPECT_FALSE(c->foreground);
  EXPECT_EQ(c->transport, "auto");
  EXPECT_EQ(c->max_threads, DefaultMaxThreads());
  EXPECT_GE(c->max_threads, 8u);
  EXPECT_LE(c->max_threads, 64u);
}

TEST_F(MountOptionsTest, CachingAndThreadOptions) {
  auto c = Parse({"-f", "--attr-timeout", "5", "--entry-timeout", "0.5", "--negative-timeout", "2", "--data-cache",
                  "off", "--max-threads", "3", "--transport", "shm", "p", "c", dir_ + "/mnt"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->foreground);
  EXPECT_DOUBLE_EQ(c->cache.attr_timeout_s, 5);
  EXPECT_DOUBLE_EQ(c->cache.entry_timeout_s, 0.5);
  EXPECT_DOUBLE_EQ(c->cache.negative_timeout_s, 2);
  EXPECT_FALSE(c->cache.data_cache);
  EXPECT_EQ(c->max_threads, 3u);
  EXPECT_EQ(c->transport, "shm");
}

TEST_F(MountOptionsTest, BadUsageIsRefusedWithTheReason) {
  auto missing = Parse({"p", "c"});
  EXPECT_TRUE(missing.status().IsInvalidArgument());
  auto transport = Parse({"--transport", "carrier-pigeon", "p", "c", dir_ + "/mnt"});
  EXPECT_TRUE(transport.status().IsInvalidArgument());
  EXPECT_NE(transport.status().message().find("carrier-pigeon"), std::string::npos);
  auto negative = Parse({"--attr-timeout", "-1", "p", "c", dir_ + "/mnt"});
  EXPECT_TRUE(negative.status().IsInvalidArgument());
  auto writeback = Parse({"--data-cache", "off", "--writeback-cache", "p", "c", dir_ + "/mnt"});
  EXPECT_TRUE(writeback.status().IsInvalidArgument());
  auto not_dir = Parse({"p", "c", dir_ + "/nope"});
  EXPECT_TRUE(not_dir.status().IsInvalidArgument());
  EXPECT_NE(not_dir.status().message().find("nope"), std::string::npos);
  std::string help;
  auto h = Parse({"--help"}, &help);
  EXPECT_FALSE(h.ok());
  EXPECT_NE(help.find("--data-cache"), std::string::npos);
}

TEST_F(MountOptionsTest, DataDirGivesControlAndAdminSecret) {
  {
    std::ofstream out(dir_ + "/cluster.json");
    out << R"({"control": "unix:/x/control.sock", "admin_secret_file": "/x/admin.secret"})";
  }
  auto c = Parse({"-d", dir_, "p", "c", dir_ + "/mnt"});
  ASSERT_TRUE(c.ok());
  auto o = ResolveClientOptions(*c);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->control, "unix:/x/control.sock");
  EXPECT_EQ(o->secret_file, "/x/admin.secret");
  EXPECT_EQ(o->tenant, "admin");
  EXPECT_EQ(o->reconnect_timeout, std::chrono::seconds(60));
  auto patient = Parse({"-d", dir_, "--reconnect-timeout", "2.5", "p", "c", dir_ + "/mnt"});
  ASSERT_TRUE(patient.ok());
  EXPECT_EQ(ResolveClientOptions(*patient)->reconnect_timeout, std::chrono::milliseconds(2500));
  EXPECT_TRUE(Parse({"--reconnect-timeout", "-1", "p", "c", dir_ + "/mnt"}).status().IsInvalidArgument());

  // Explicit options win; another tenant gets no admin secret.
  auto c2 = Parse({"-d", dir_, "--control", "/y/control.sock", "--tenant", "bob", "p", "c", dir_ + "/mnt"});
  ASSERT_TRUE(c2.ok());
  auto o2 = ResolveClientOptions(*c2);
  EXPECT_TRUE(o2.status().IsInvalidArgument());
  EXPECT_NE(o2.status().message().find("bob"), std::string::npos);

  auto c3 = Parse({"-d", dir_ + "/mnt", "p", "c", dir_ + "/mnt"});
  ASSERT_TRUE(c3.ok());
  EXPECT_TRUE(ResolveClientOptions(*c3).status().IsNotFound());
}

TEST_F(MountOptionsTest, MountArgumentsNameTheContainer) {
  auto c = Parse({"--allow-other", "p1", "c1", dir_ + "/mnt"});
  ASSERT_TRUE(c.ok());
  auto args = FuseMountArguments(*c);
  ASSERT_EQ(args.size(), 3u);
  EXPECT_EQ(args[1], "-o");
  EXPECT_NE(args[2].find("fsname=ros2:p1/c1"), std::string::npos);
  EXPECT_NE(args[2].find("default_permissions"), std::string::npos);
  EXPECT_NE(args[2].find("allow_other"), std::string::npos);
}

}  // namespace
}  // namespace ros2::fuse
