// A FUSE mount over a replicated container across one engine's kill -9
// (docs/replication.md), label `replication`: one etcd member and three
// ros2-engine processes sharing it (EtcdEngineCluster), a ros2-fuse mount of
// an RP_2GX container (page cache off: every read reaches an engine), a
// writer writing whole files through the mount and logging each one whose
// fsync and close returned 0, and a reader reading logged files back all the
// time. One engine (neither the mount's control engine nor the management
// leader) gets SIGKILL under them. Every acknowledged file reads back
// byte-exact afterwards, no read ever fails, and the longest single call
// (open, write, fsync, close or read) stays under failure detection + 1 s.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "testing/etcd_cluster.h"
#include "testing/fuse_mount.h"
#include "testing/pattern.h"
#include "testing/status_assert.h"

namespace ros2::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTtlSeconds = 3;
constexpr size_t kFileSize = 192 * 1024;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Writes `data` to a new file `path` (open, write, fsync, close); the longest
// call's duration in *longest_ms. An error names the call.
std::string WriteFile(const std::string& path, const std::vector<std::byte>& data, double* longest_ms) {
  auto t = Clock::now();
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  *longest_ms = std::max(*longest_ms, MsSince(t));
  if (fd < 0) return fmt::format("open: {}", std::strerror(errno));
  t = Clock::now();
  const ssize_t n = ::write(fd, data.data(), data.size());
  *longest_ms = std::max(*longest_ms, MsSince(t));
  t = Clock::now();
  const int synced = ::fsync(fd);
  *longest_ms = std::max(*longest_ms, MsSince(t));
  t = Clock::now();
  const int closed = ::close(fd);
  *longest_ms = std::max(*longest_ms, MsSince(t));
  if (n != static_cast<ssize_t>(data.size())) return fmt::format("write returned {}: {}", n, std::strerror(errno));
  if (synced != 0) return fmt::format("fsync: {}", std::strerror(errno));
  if (closed != 0) return fmt::format("close: {}", std::strerror(errno));
  return "";
}

// The whole of `path`, or an error message in *error.
std::vector<std::byte> ReadFile(const std::string& path, std::string* error) {
  std::vector<std::byte> out(kFileSize + 1);
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    *error = fmt::format("open {}: {}", path, std::strerror(errno));
    return {};
  }
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0) {
      *error = fmt::format("read {}: {}", path, std::strerror(errno));
      break;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

TEST(ReplicationMountTest, KillOneEngineUnderAMountLosesNoAcknowledgedFile) {
  EtcdEngineCluster c;
  ROS2_ASSERT_OK(
      c.Start({.storage_class = "nvme", .data_size = "64MiB", .lease_ttl = std::chrono::seconds(kTtlSeconds)}));
  auto mgmt = c.Mgmt(0);
  ASSERT_TRUE(mgmt->CreatePool("p", 512 << 20).ok());
  auto cont = mgmt->CreateContainer("p", "rp2", {{"oclass", "RP_2GX"}, {"rd_fac", "1"}});
  ASSERT_TRUE(cont.ok()) << cont.status().ToString();
  const int leader = c.LeaderIndex(0);
  ASSERT_GE(leader, 0);
  const size_t home = leader == 0 ? 1 : 0;
  size_t victim = 0;
  while (victim == home || static_cast<int>(victim) == leader) ++victim;

  // The mount finds its control engine and secret in a cluster.json of its own.
  const std::string client_dir = c.dir.path() + "/client";
  std::filesystem::create_directories(client_dir);
  std::ofstream(client_dir + "/cluster.json")
      << fmt::format(R"({{"control": "{}", "admin_secret_file": "{}"}})", c.engines[home]->control(),
                     c.engines[0]->admin_secret_file());
  FuseMountOptions mo;
  mo.binary = ROS2_FUSE_BINARY;
  mo.data_dir = client_dir;
  mo.pool = "p";
  mo.cont = "rp2";
  mo.mountpoint = c.dir.path() + "/mnt";
  mo.args = {"--transport", "tcp", "--data-cache", "off", "--reconnect-timeout", "30", "--log-level", "info"};
  auto mount = FuseMount::Start(mo);
  ASSERT_TRUE(mount.ok()) << mount.status().ToString();
  const std::string root = (*mount)->path();

  std::mutex mu;
  std::vector<int> acked;  // files whose fsync and close returned 0
  std::vector<std::string> write_errors, read_errors;
  double write_longest_ms = 0, read_longest_ms = 0;
  size_t reads = 0;
  std::atomic<bool> stop{false};
  std::atomic<int> acked_after_kill{-1};
  std::jthread writer([&] {
    for (int i = 0; !stop.load(); ++i) {
      const std::string error =
          WriteFile(fmt::format("{}/f{}", root, i), Pattern(kFileSize, static_cast<uint64_t>(i)), &write_longest_ms);
      std::lock_guard lock(mu);
      if (!error.empty()) {
        write_errors.push_back(fmt::format("f{}: {}", i, error));
        continue;
      }
      acked.push_back(i);
      if (acked_after_kill.load() >= 0) acked_after_kill.fetch_add(1);
    }
  });
  std::jthread reader([&] {
    for (size_t k = 0; !stop.load(); ++k) {
      int file = -1;
      {
        std::lock_guard lock(mu);
        if (!acked.empty()) file = acked[k % acked.size()];
      }
      if (file < 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      std::string error;
      const auto t = Clock::now();
      const auto got = ReadFile(fmt::format("{}/f{}", root, file), &error);
      read_longest_ms = std::max(read_longest_ms, MsSince(t));
      ++reads;
      if (error.empty() && got != Pattern(kFileSize, static_cast<uint64_t>(file))) {
        error = fmt::format("f{} read back different ({} bytes)", file, got.size());
      }
      if (!error.empty()) read_errors.push_back(error);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const auto killed = Clock::now();
  acked_after_kill.store(0);
  c.Kill(victim);
  std::this_thread::sleep_for(std::chrono::seconds(2 * kTtlSeconds + 2));
  stop.store(true);
  writer.join();
  reader.join();
  std::printf(
      "replication: mount over RP_2GX, engine kill -9: %zu files acknowledged (%d after the kill), %zu reads, "
      "longest write call %.0f ms, longest read %.0f ms, %zu write errors (lease TTL %d s, %.1f s run after the "
      "kill)\n",
      acked.size(), acked_after_kill.load(), reads, write_longest_ms, read_longest_ms, write_errors.size(), kTtlSeconds,
      MsSince(killed) / 1000);
  for (const auto& e : write_errors) std::printf("replication: write error %s\n", e.c_str());

  EXPECT_TRUE(read_errors.empty()) << read_errors.size() << " reads failed, the first: " << read_errors.front();
  EXPECT_GT(acked_after_kill.load(), 0) << "no file was acknowledged after the kill";
  const double bound_ms = 2000.0 * kTtlSeconds + 1000;
  EXPECT_LT(write_longest_ms, bound_ms);
  EXPECT_LT(read_longest_ms, bound_ms);
  for (int file : acked) {
    std::string error;
    const auto got = ReadFile(fmt::format("{}/f{}", root, file), &error);
    ASSERT_TRUE(error.empty()) << error;
    ASSERT_TRUE(got == Pattern(kFileSize, static_cast<uint64_t>(file)))
        << "acknowledged file f" << file << " read back different";
  }
  EXPECT_EQ((*mount)->Stop(), 0) << (*mount)->log().substr(0, 4000);
}

}  // namespace
}  // namespace ros2::testing
