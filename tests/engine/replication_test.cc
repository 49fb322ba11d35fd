// Replicated objects across real engines (docs/replication.md), label
// `replication`: one etcd member and three ros2-engine processes sharing
// their management state in it (as in cluster_etcd_test), and libros2
// clients on the data plane.
//
// - RP_2GX and RP_3G1 containers written before and after one engine's
//   kill -9: every acknowledged write (and a DFS file) reads back
//   byte-exact; the longest write stall across the kill is printed and
//   bounded. After a second engine's kill, every RP_3G1 write still reads
//   back and new ones are acknowledged.
// - A container's redundancy factor refuses a class that survives fewer
//   engine losses, naming both.
// - A bit flipped in one replica's extent file is detected by the client's
//   checksum, the read is served from another replica, and the failover is
//   counted.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "client/replicated_update.h"
#include "metrics/scrape.h"
#include "ros2/client.h"
#include "ros2/dfs.h"
#include "testing/etcd_cluster.h"
#include "testing/pattern.h"
#include "testing/status_assert.h"

namespace ros2::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTtlSeconds = 3;

// A libros2 client of engine i that waits out an engine's loss.
Result<std::unique_ptr<client::Client>> ConnectClient(const EtcdEngineCluster& c, size_t i) {
  client::ClientOptions o = c.ClientOptionsFor(i);
  o.reconnect_timeout = std::chrono::seconds(30);
  o.io_timeout = std::chrono::seconds(10);
  return client::Client::Connect(o);
}

// Three engines of `targets` targets each; extents in a data file (the
// bit-flip test edits it).
EtcdEngineClusterOptions ReplicatedClusterOptions(uint32_t targets) {
  return {.engines = 3,
          .targets = targets,
          .storage_class = "nvme",
          .data_size = "32MiB",
          .lease_ttl = std::chrono::seconds(kTtlSeconds)};
}

struct Written {
  client::Object* object;
  std::string dkey;
  uint64_t seed;
};

std::span<const std::byte> Bytes(const std::vector<std::byte>& v) {
  return {v.data(), v.size()};
}

TEST(ReplicationTest, KillOneEngineLosesNoAcknowledgedWrite) {
  EtcdEngineCluster c;
  ROS2_ASSERT_OK(c.Start(ReplicatedClusterOptions(2)));
  auto mgmt = c.Mgmt(0);
  ASSERT_TRUE(mgmt->CreatePool("p", 512 << 20).ok());
  auto rp2 = mgmt->CreateContainer("p", "rp2", {{"oclass", "RP_2GX"}, {"rd_fac", "1"}});
  ASSERT_TRUE(rp2.ok()) << rp2.status().ToString();
  EXPECT_EQ(rp2->properties().rd_fac(), 1u);
  ASSERT_TRUE(mgmt->CreateContainer("p", "rp3", {{"oclass", "RP_3G1"}, {"rd_fac", "2"}}).ok());
  // A default class that survives fewer losses than rd_fac asks: refused, naming both.
  auto weak = mgmt->CreateContainer("p", "weak", {{"oclass", "RP_2G1"}, {"rd_fac", "2"}});
  ASSERT_FALSE(weak.ok());
  EXPECT_NE(weak.status().message().find("RP_2G1"), std::string::npos) << weak.status().ToString();
  EXPECT_NE(weak.status().message().find("rd_fac=2"), std::string::npos) << weak.status().ToString();

  const int leader = c.LeaderIndex(0);
  ASSERT_GE(leader, 0);
  // The client talks to the control plane of an engine that stays; the
  // victim is neither that engine nor the leader (management failover is
  // cluster_etcd_test's).
  const size_t home = leader == 0 ? 1 : 0;
  size_t victim = 0;
  while (victim == home || static_cast<int>(victim) == leader) ++victim;

  auto cl = ConnectClient(c, home);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto pool = (*cl)->ConnectPool("p");
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto cont2 = (*pool)->OpenContainer("rp2");
  auto cont3 = (*pool)->OpenContainer("rp3");
  ASSERT_TRUE(cont2.ok() && cont3.ok());
  EXPECT_EQ((*cont2)->summary().rd_fac, 1u);
  // Opening an object whose class survives fewer losses than rd_fac: refused.
  auto s1 = (*cont2)->OpenObject(client::Container::MakeObjectId(ObjectClass::kS1, 0, 1));
  ASSERT_FALSE(s1.ok());
  EXPECT_TRUE(s1.status().IsInvalidArgument());
  EXPECT_NE(s1.status().message().find("S1"), std::string::npos) << s1.status().ToString();
  EXPECT_NE(s1.status().message().find("rd_fac=1"), std::string::npos) << s1.status().ToString();

  std::vector<std::unique_ptr<client::Object>> objects;
  for (uint64_t i = 0; i < 3; ++i) {
    auto o2 = (*cont2)->OpenObject(client::Container::MakeObjectId(ObjectClass::kRP2GX, 0, 100 + i));
    auto o3 = (*cont3)->OpenObject(client::Container::MakeObjectId(ObjectClass::kRP3G1, 0, 200 + i));
    ASSERT_TRUE(o2.ok() && o3.ok());
    objects.push_back(std::make_unique<client::Object>(std::move(*o2)));
    objects.push_back(std::make_unique<client::Object>(std::move(*o3)));
  }
  // Values above the engine's data threshold (extents) and below (RocksDB).
  std::vector<Written> acked;
  auto write_round = [&](int from, int to, long long* longest_ms) {
    for (int i = from; i < to; ++i) {
      client::Object* o = objects[i % objects.size()].get();
      const std::string dkey = "k" + std::to_string(i);
      const size_t size = i % 3 == 0 ? 1000 : 12 * 1024;
      const auto start = Clock::now();
      Status st = o->Put(dkey, "a", Bytes(Pattern(size, 1000 + i)));
      const long long ms = MsSince(start);
      ASSERT_TRUE(st.ok()) << "write " << i << ": " << st.ToString();
      if (longest_ms != nullptr) *longest_ms = std::max(*longest_ms, ms);
      acked.push_back({o, dkey, static_cast<uint64_t>(1000 + i)});
    }
  };
  ASSERT_NO_FATAL_FAILURE(write_round(0, 60, nullptr));
  // DFS on the RP_2GX container: directories and files take its class.
  auto fs = dfs::Filesystem::Mount(**cont2);
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  auto dir = (*fs)->Mkdir((*fs)->Root(), "d");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(dir->oid.object_class(), ObjectClass::kRP2GX);
  auto file = (*fs)->Open(*dir, "f", O_CREAT | O_RDWR);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->oid.object_class(), ObjectClass::kRP2GX);
  const auto file_data = Pattern(3 << 20, 77);  // three 1 MiB chunks (dkeys), over the groups
  auto wrote = (*fs)->Write(*file, 0, Bytes(file_data));
  ASSERT_TRUE(wrote.ok()) << wrote.status().ToString();

  const auto killed = Clock::now();
  c.Kill(victim);
  long long longest_ms = 0;
  ASSERT_NO_FATAL_FAILURE(write_round(60, 120, &longest_ms));
  std::printf(
      "replication: engine kill -9 -> 60 writes on RP_2GX/RP_3G1 acknowledged after %lld ms, "
      "longest write stall %lld ms (lease TTL %d s)\n",
      MsSince(killed), longest_ms, kTtlSeconds);
  // Failure detection (at most 2 x TTL) plus map refreshes and resends.
  EXPECT_LT(longest_ms, 4 * kTtlSeconds * 1000);

  for (size_t i = 0; i < acked.size(); ++i) {
    const Written& w = acked[i];
    const size_t size = i % 3 == 0 ? 1000 : 12 * 1024;
    auto got = w.object->Get(w.dkey, "a", 16 * 1024);
    ASSERT_TRUE(got.ok()) << "read " << w.dkey << ": " << got.status().ToString();
    ASSERT_EQ(*got, Pattern(size, w.seed)) << "acknowledged write " << w.dkey << " read back different";
  }
  std::vector<std::byte> file_back(file_data.size());
  auto read = (*fs)->Read(*file, 0, file_back);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, file_data.size());
  EXPECT_TRUE(file_back == file_data) << "the DFS file written before the kill reads back different";
  // A punch reaches every live copy: the key is gone whichever copy answers.
  ROS2_ASSERT_OK(acked[1].object->PunchDkey(acked[1].dkey));
  auto punched = acked[1].object->Get(acked[1].dkey, "a");
  ASSERT_TRUE(punched.ok()) << punched.status().ToString();
  EXPECT_TRUE(punched->empty());

  // RP_3 survives a second engine's loss (the leader's, when it was not the
  // client's: a survivor takes over): every RP_3G1 write still reads back, and
  // new ones are acknowledged on what is left.
  size_t second = 0;
  while (second == home || second == victim) ++second;
  const auto killed2 = Clock::now();
  c.Kill(second);
  size_t rp3_read = 0;
  for (size_t i = 0; i < acked.size(); ++i) {
    if (i % objects.size() % 2 == 0 || i == 1) continue;  // RP_2GX objects; the punched key
    const size_t size = i % 3 == 0 ? 1000 : 12 * 1024;
    auto got = acked[i].object->Get(acked[i].dkey, "a", 16 * 1024);
    ASSERT_TRUE(got.ok()) << "read " << acked[i].dkey << " after two kills: " << got.status().ToString();
    ASSERT_EQ(*got, Pattern(size, acked[i].seed)) << acked[i].dkey << " after two kills";
    ++rp3_read;
  }
  ROS2_ASSERT_OK(objects[1]->Put("after-two", "a", Bytes(Pattern(5000, 9))));
  auto after = objects[1]->Get("after-two", "a", 8192);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(*after, Pattern(5000, 9));
  std::printf("replication: second engine kill -9 -> %zu RP_3G1 values read back, a new write acknowledged, %lld ms\n",
              rp3_read, MsSince(killed2));
}

// Every regular file under `root` whose bytes contain `marker`, with the
// marker's offset.
std::vector<std::pair<std::string, off_t>> FilesHolding(const std::string& root, const std::vector<std::byte>& marker) {
  std::vector<std::pair<std::string, off_t>> found;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto pos = bytes.find(std::string_view(reinterpret_cast<const char*>(marker.data()), marker.size()));
    if (pos != std::string::npos) found.emplace_back(entry.path().string(), static_cast<off_t>(pos));
  }
  return found;
}

// Flips bit 0 of the byte at `offset` of `path` (twice restores it).
void FlipBit(const std::string& path, off_t offset) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  unsigned char b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, offset), 1);
  b ^= 1;
  ASSERT_EQ(::pwrite(fd, &b, 1, offset), 1);
  ASSERT_EQ(::fsync(fd), 0);
  ::close(fd);
}

TEST(ReplicationTest, BitFlipInOneReplicaIsServedFromAnother) {
  EtcdEngineCluster c;
  EtcdEngineClusterOptions options = ReplicatedClusterOptions(1);
  options.metrics = true;  // each engine's checksum_errors
  ROS2_ASSERT_OK(c.Start(options));
  auto mgmt = c.Mgmt(0);
  ASSERT_TRUE(mgmt->CreatePool("p", 256 << 20).ok());
  ASSERT_TRUE(mgmt->CreateContainer("p", "rp3", {{"oclass", "RP_3G1"}}).ok());
  auto cl = ConnectClient(c, 0);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  auto pool = (*cl)->ConnectPool("p");
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto cont = (*pool)->OpenContainer("rp3");
  ASSERT_TRUE(cont.ok()) << cont.status().ToString();
  auto obj = (*cont)->OpenObject(client::Container::MakeObjectId(ObjectClass::kRP3G1, 0, 7));
  ASSERT_TRUE(obj.ok());
  const auto value = Pattern(64 * 1024, 4242);
  ROS2_ASSERT_OK(obj->Put("d", "a", Bytes(value)));

  // One extent file per engine holds the value.
  const std::vector<std::byte> marker(value.begin() + 8192, value.begin() + 8192 + 64);
  std::vector<std::pair<std::string, off_t>> copies;
  for (size_t i = 0; i < c.engines.size(); ++i) {
    const std::string& dir = c.data_dir(i);
    auto found = FilesHolding(dir, marker);
    ASSERT_EQ(found.size(), 1u) << "engine data directory " << dir;
    copies.push_back(found.front());
  }
  // Corrupt each copy in turn: every read returns the value; the reads that
  // met the corrupt copy were served by another and counted.
  const uint64_t before = client::ReplicaChecksumFailovers();
  for (const auto& [path, offset] : copies) {
    ASSERT_NO_FATAL_FAILURE(FlipBit(path, offset));
    auto got = obj->Get("d", "a", value.size());
    ASSERT_TRUE(got.ok()) << "with " << path << " corrupt: " << got.status().ToString();
    EXPECT_EQ(*got, value) << "with " << path << " corrupt";
    ASSERT_NO_FATAL_FAILURE(FlipBit(path, offset));
  }
  const uint64_t failovers = client::ReplicaChecksumFailovers() - before;
  std::printf("replication: 3 reads with one of 3 copies corrupt in turn, %llu served by another copy\n",
              static_cast<unsigned long long>(failovers));
  EXPECT_GE(failovers, 1u) << "the copy that reads go to first was corrupted once: that read must fail over";
  // The engine that held the corrupt copy reported it too.
  double detected = 0;
  for (size_t i = 0; i < c.engines.size(); ++i) {
    auto n = metrics::ScrapeSum(c.engines[i]->metrics(), "ros2_engine_checksum_errors_total");
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    detected += *n;
  }
  EXPECT_GE(detected, static_cast<double>(failovers)) << "every failover met a copy its engine found corrupt";
}

}  // namespace
}  // namespace ros2::testing
