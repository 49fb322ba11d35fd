// The replication kill test on `ros2ctl cluster up --hosts 3 --etcd`
// (docs/replication.md): a FUSE mount of an RP_2GX container inside host 1,
// a writer there writing whole files and logging each one whose fsync and
// close returned (tests/cluster/replication_writer.py), reading acknowledged
// files back between writes; then the link of host 3 goes down (`cluster
// partition`: ip link set ... down), so its engine is cut off from the client
// and from the others with no process dying. Every acknowledged file reads
// back byte-exact, no read fails, and the longest single write or read stays
// under failure detection (2 x the lease TTL) + 1 s. A cut link sends no
// reset, so this holds only because the client closes its connections to a
// target once its pool map watch learns the target is DOWN (the calls in
// flight there are resent under the new map, not left to io_timeout).
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "testing/host_cluster.h"
#include "testing/temp_dir.h"

namespace ros2::testing {
namespace {

constexpr int kTtlSeconds = 3;  // the hosts' engines' lease TTL (ros2ctl's default)

struct WriterLog {
  std::vector<int> acked;
  std::vector<std::string> write_errors, read_errors;
  double longest_write_ms = -1, longest_read_ms = -1;
  long reads = 0;
};

WriterLog ParseWriterLog(const std::string& out) {
  WriterLog log;
  std::istringstream in(out);
  for (std::string word; in >> word;) {
    std::string rest;
    if (word == "ack") {
      int i = 0;
      in >> i;
      log.acked.push_back(i);
      continue;
    }
    std::getline(in, rest);
    if (word == "werr") log.write_errors.push_back(rest);
    if (word == "rerr") log.read_errors.push_back(rest);
    if (word == "longest_write_ms") log.longest_write_ms = std::stod(rest);
    if (word == "longest_read_ms") log.longest_read_ms = std::stod(rest);
    if (word == "reads") log.reads = std::stol(rest);
  }
  return log;
}

TEST(HostReplicationTest, LinkOfOneHostDownLosesNoAcknowledgedFile) {
  std::string why;
  if (!HostCluster::Supported(&why)) GTEST_SKIP() << why;
  if (!FindOnPath("etcd").ok() || !FindOnPath("python3").ok()) GTEST_SKIP() << "needs etcd and python3";
  TempDir dir{"r2r"};  // short: control socket paths live under it
  HostClusterOptions o;
  o.ros2ctl = ROS2CTL_PATH;
  o.engine = ROS2_ENGINE_PATH;
  o.data_dir = dir.path() + "/c";
  o.hosts = 3;
  o.targets = 1;
  o.etcd = true;
  auto up = HostCluster::Up(o);
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  HostCluster& c = **up;
  for (const std::vector<std::string>& args : {std::vector<std::string>{"pool", "create", "p", "--size", "1GiB"},
                                               {"cont", "create", "p", "rp2", "--oclass", "RP_2GX", "--rd-fac", "1"}}) {
    CommandResult r = c.Ctl(args);
    ASSERT_EQ(r.exit_code, 0) << args[0] << " " << args[1] << ": " << r.err << r.out;
  }
  // The mount in host 1 talks to host 1's engine for control.
  const std::string client_dir = dir.path() + "/client";
  std::filesystem::create_directories(client_dir);
  std::ofstream(client_dir + "/cluster.json")
      << fmt::format(R"({{"control": "unix:{}/control.sock", "admin_secret_file": "{}"}})",
                     c.host(1)["data_dir"].get<std::string>(), c.info()["admin_secret_file"].get<std::string>());
  const std::string mnt = dir.path() + "/mnt";
  std::filesystem::create_directories(mnt);
  CommandResult mounted = c.InHost(
      1, {ROS2_FUSE_BINARY, "--data-dir", client_dir, "--net-devices", c.info()["net_devices"].get<std::string>(),
          "--data-cache", "off", "--reconnect-timeout", "30", "--log-level", "info", "p", "rp2", mnt});
  ASSERT_EQ(mounted.exit_code, 0) << mounted.err << mounted.out;

  CommandResult written;
  const auto start = std::chrono::steady_clock::now();
  std::thread writer([&] {
    written = c.InHost(1, {"python3", ROS2_REPLICATION_WRITER, "write", mnt, std::to_string(2 * kTtlSeconds + 6)});
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const Status cut = c.Partition(3);
  const double cut_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  writer.join();
  ASSERT_TRUE(cut.ok()) << cut.ToString();
  ASSERT_EQ(written.exit_code, 0) << written.err;
  const WriterLog log = ParseWriterLog(written.out);
  std::printf(
      "cluster replication: host 3's link down at %.1f s under a mount over RP_2GX in host 1: %zu files "
      "acknowledged, %ld reads, longest write %.0f ms, longest read %.0f ms, %zu write errors (lease TTL %d s)\n",
      cut_s, log.acked.size(), log.reads, log.longest_write_ms, log.longest_read_ms, log.write_errors.size(),
      kTtlSeconds);
  for (const auto& e : log.write_errors) std::printf("cluster replication: write error%s\n", e.c_str());
  EXPECT_TRUE(log.read_errors.empty()) << log.read_errors.size()
                                       << " reads failed, the first:" << log.read_errors.front();
  ASSERT_FALSE(log.acked.empty()) << written.out;
  ASSERT_GE(log.longest_write_ms, 0) << written.out;
  const double bound_ms = 2000.0 * kTtlSeconds + 1000;
  EXPECT_LT(log.longest_write_ms, bound_ms);
  EXPECT_LT(log.longest_read_ms, bound_ms);

  std::vector<std::string> verify = {"python3", ROS2_REPLICATION_WRITER, "verify", mnt};
  for (int i : log.acked) verify.push_back(std::to_string(i));
  CommandResult verified = c.InHost(1, verify);
  ASSERT_EQ(verified.exit_code, 0) << verified.err;
  EXPECT_EQ(verified.out, fmt::format("verified {}\n", log.acked.size())) << "acknowledged files read back different";

  EXPECT_TRUE(c.Heal(3).ok());
  CommandResult unmounted = c.InHost(1, {"fusermount3", "-u", mnt});
  EXPECT_EQ(unmounted.exit_code, 0) << unmounted.err;
  ASSERT_TRUE(c.Down().ok());
}

}  // namespace
}  // namespace ros2::testing
