// Several hosts on one machine: `ros2ctl cluster up --hosts N` and its
// harness (src/testing/host_cluster.h). Every test starts real engines in
// their own network, IPC, PID and mount namespaces and checks what it claims
// from the kernel's and UCX's own view, and that nothing is left behind.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "testing/host_cluster.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace ros2::testing {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The inode of /proc/<pid>/ns/<kind> ("net", "ipc", "pid", "mnt"), 0 when unknown.
ino_t NamespaceOf(pid_t pid, const char* kind) {
  struct stat st {};
  return ::stat(fmt::format("/proc/{}/ns/{}", pid, kind).c_str(), &st) == 0 ? st.st_ino : 0;
}

bool ProcessGone(pid_t pid) {
  std::string stat = ReadText(fmt::format("/proc/{}/stat", pid));
  auto paren = stat.rfind(')');
  return stat.empty() || (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

// Asserts that nothing of the hosts in `hosts` (hosts.json's "hosts") and
// `bridge` is left: no namespace, no link, no process.
void ExpectNothingLeft(const nlohmann::json& hosts, const std::string& bridge) {
  EXPECT_FALSE(fs::exists("/sys/class/net/" + bridge)) << bridge;
  for (const auto& h : hosts) {
    EXPECT_FALSE(fs::exists("/run/netns/" + h["netns"].get<std::string>())) << h.dump();
    EXPECT_FALSE(fs::exists("/sys/class/net/" + h["veth"].get<std::string>())) << h.dump();
    for (const char* key : {"init_pid", "engine_pid", "etcd_pid"}) {
      const pid_t pid = h.value(key, 0);
      if (pid > 0) {
        EXPECT_TRUE(ProcessGone(pid)) << key << " " << pid << " still runs";
      }
    }
  }
}

bool IsSharedMemoryLane(const std::string& lane) {
  const std::string tl = lane.substr(0, lane.find('/'));
  return tl == "posix" || tl == "sysv" || tl == "cma" || tl == "self" || tl == "xpmem" || tl == "knem";
}

class HostClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!HostCluster::Supported(&why)) GTEST_SKIP() << why;
  }
  HostClusterOptions Options(int hosts) {
    HostClusterOptions o;
    o.ros2ctl = ROS2CTL_PATH;
    o.engine = ROS2_ENGINE_PATH;
    o.data_dir = dir_.path() + "/c";
    o.hosts = hosts;
    o.targets = 1;
    return o;
  }
  TempDir dir_{"r2h"};  // short: control socket paths live under it
};

// The demo: a client in host 1 writes and reads through the engines of
// hosts 1, 2 and 3; UCX itself chose tcp to the other hosts and shared memory
// to the engine of its own host.
TEST_F(HostClusterTest, DemoAcrossHostsTcpBetweenHostsShmInside) {
  auto up = HostCluster::Up(Options(3));
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  HostCluster& c = **up;

  // Three hosts: each engine in its own network, IPC, PID and mount namespace,
  // none of them the test's.
  for (const char* kind : {"net", "ipc", "pid", "mnt"}) {
    std::set<ino_t> seen = {NamespaceOf(::getpid(), kind)};
    for (int h = 1; h <= 3; ++h) {
      const ino_t ns = NamespaceOf(c.engine_pid(h), kind);
      ASSERT_NE(ns, 0u) << kind;
      EXPECT_TRUE(seen.insert(ns).second) << "host " << h << " shares its " << kind << " namespace";
    }
  }
  CommandResult status = c.Ctl({"--json", "cluster", "status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(status.Json()["engine_status"]["engines"].size(), 3u) << status.out;

  CommandResult demo =
      c.InHost(1, {c.ros2ctl(), "--json", "--data-dir", c.data_dir(), "cluster", "demo", "--mib", "2"});
  ASSERT_EQ(demo.exit_code, 0) << demo.err << demo.out;
  auto j = demo.Json();
  ASSERT_TRUE(j.is_object()) << demo.out;
  EXPECT_TRUE(j["ok"].get<bool>());
  std::set<std::string> hosts_reached;
  for (const auto& conn : j["connections"]) {
    if (!conn["connected"].get<bool>()) continue;
    const std::string host = conn["host"];
    hosts_reached.insert(host);
    const auto lanes = conn["lanes"].get<std::vector<std::string>>();
    ASSERT_FALSE(lanes.empty()) << conn.dump();
    if (host == "host1") {
      EXPECT_TRUE(conn["same_host"].get<bool>()) << conn.dump();
      EXPECT_TRUE(IsSharedMemoryLane(conn["transport"])) << conn.dump();
      for (const auto& lane : lanes) EXPECT_TRUE(IsSharedMemoryLane(lane)) << conn.dump();
    } else {
      EXPECT_FALSE(conn["same_host"].get<bool>()) << conn.dump();
      EXPECT_EQ(conn["transport"].get<std::string>(), "tcp/veth0") << conn.dump();
      for (const auto& lane : lanes) EXPECT_TRUE(lane.starts_with("tcp/")) << conn.dump();
    }
  }
  EXPECT_EQ(hosts_reached, (std::set<std::string>{"host1", "host2", "host3"})) << demo.out;

  const nlohmann::json hosts = c.info()["hosts"];
  const std::string bridge = c.info()["bridge"];
  ASSERT_TRUE(c.Down().ok());
  ExpectNothingLeft(hosts, bridge);
}

// A partition cuts a host off: host 2 reaches host 1's TLS control endpoint,
// not while its link is down, and again once healed.
TEST_F(HostClusterTest, PartitionAndHeal) {
  auto up = HostCluster::Up(Options(2));
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  HostCluster& c = **up;
  const std::string host2_dir = c.host(2)["data_dir"];
  const std::vector<std::string> list_pools = {c.ros2ctl(),
                                               "--control",
                                               c.info()["listen"].get<std::string>(),
                                               "--tls-ca",
                                               host2_dir + "/tls/ca.crt",
                                               "--secret-file",
                                               c.info()["admin_secret_file"].get<std::string>(),
                                               "--rpc-timeout",
                                               "2",
                                               "pool",
                                               "list"};
  CommandResult before = c.InHost(2, list_pools);
  EXPECT_EQ(before.exit_code, 0) << before.err;

  ASSERT_TRUE(c.Partition(2).ok());
  auto status = c.Ctl({"--json", "cluster", "status"}).Json();
  EXPECT_FALSE(status["hosts"][1]["link_up"].get<bool>()) << status.dump();
  EXPECT_TRUE(status["hosts"][0]["link_up"].get<bool>()) << status.dump();
  CommandResult cut = c.InHost(2, list_pools);
  EXPECT_NE(cut.exit_code, 0) << cut.out;

  ASSERT_TRUE(c.Heal(2).ok());
  CommandResult healed = c.InHost(2, list_pools);
  EXPECT_EQ(healed.exit_code, 0) << healed.err;
}

// A start that fails once the hosts exist (an engine that exits at once)
// removes every namespace, link and process it made.
TEST_F(HostClusterTest, FailedStartLeavesNothing) {
  HostClusterOptions o = Options(2);
  o.engine = "/bin/false";
  o.timeout_s = 20;
  auto up = HostCluster::Up(o);
  ASSERT_FALSE(up.ok());
  const std::string error = up.status().ToString();
  EXPECT_NE(error.find("engine of host1 exited"), std::string::npos) << error;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(error, m, std::regex("cluster ([0-9a-f]{5})"))) << error;
  const std::string id = m[1];
  EXPECT_FALSE(fs::exists(o.data_dir + "/hosts.json"));
  nlohmann::json hosts = nlohmann::json::array();
  for (int i = 1; i <= 2; ++i) {
    hosts.push_back({{"netns", fmt::format("ros2-{}-h{}", id, i)}, {"veth", fmt::format("r2{}h{}", id, i)}});
  }
  ExpectNothingLeft(hosts, "r2" + id + "br");
}

// `cluster down` after `cluster up` was killed half-way (SIGKILL once a host
// exists) removes what the state file names.
TEST_F(HostClusterTest, DownAfterInterruptedStart) {
  HostClusterOptions o = Options(2);
  fs::create_directories(o.data_dir);
  SpawnOptions up;
  up.argv = {ROS2CTL_PATH, "--data-dir", o.data_dir, "cluster", "up", "--hosts", "2", "--targets", "1", "--class", "ram",
             "--engine", ROS2_ENGINE_PATH};
  up.inherit_output = true;
  auto child = ChildProcess::Spawn(up);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  nlohmann::json state;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    state = nlohmann::json::parse(ReadText(o.data_dir + "/hosts.json"), nullptr, false);
    if (state.is_object() && !state["hosts"].empty() && state["hosts"][0].value("init_pid", 0) > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  child->Kill();
  state = nlohmann::json::parse(ReadText(o.data_dir + "/hosts.json"), nullptr, false);
  ASSERT_TRUE(state.is_object() && state["hosts"][0].value("init_pid", 0) > 0) << state.dump();
  EXPECT_TRUE(fs::exists("/run/netns/" + state["hosts"][0]["netns"].get<std::string>()));

  CommandResult down = RunCommand({ROS2CTL_PATH, "--data-dir", o.data_dir, "cluster", "down"}, o.data_dir);
  EXPECT_EQ(down.exit_code, 0) << down.err;
  ExpectNothingLeft(state["hosts"], state["bridge"]);
  EXPECT_FALSE(fs::exists(o.data_dir + "/hosts.json"));
}

bool OnPath(const std::string& name) { return FindOnPath(name).ok(); }

// --etcd: one etcd member in each of 3 hosts, one cluster; with host 3 cut
// off, the other two keep a quorum and commit, host 3 cannot; healed, it has
// what was committed meanwhile.
TEST_F(HostClusterTest, EtcdMembersKeepQuorumUnderPartition) {
  if (!OnPath("etcd") || !OnPath("etcdctl")) GTEST_SKIP() << "needs etcd and etcdctl (etcd-server, etcd-client)";
  HostClusterOptions o = Options(3);
  o.etcd = true;
  auto up = HostCluster::Up(o);
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  HostCluster& c = **up;
  const std::string etcd = c.info()["etcd"];
  ASSERT_TRUE(etcd.starts_with("etcd://")) << etcd;
  std::string endpoints;
  for (int h = 1; h <= 3; ++h) endpoints += fmt::format("{}http://{}:2379", h > 1 ? "," : "", c.address(h));
  CommandResult health = c.InHost(2, {"etcdctl", "--endpoints", endpoints, "endpoint", "health"});
  EXPECT_EQ(health.exit_code, 0) << health.err << health.out;

  ASSERT_TRUE(c.Partition(3).ok());
  // If host 3 led, hosts 1 and 2 first elect a leader among themselves.
  CommandResult majority;
  for (int attempt = 0; attempt < 5 && majority.exit_code != 0; ++attempt) {
    majority = c.InHost(1, {"etcdctl", "--command-timeout=4s", "put", "k", "committed"});
  }
  EXPECT_EQ(majority.exit_code, 0) << majority.err;
  CommandResult minority = c.InHost(3, {"etcdctl", "--command-timeout=2s", "put", "k2", "lost"});
  EXPECT_NE(minority.exit_code, 0) << minority.out;

  ASSERT_TRUE(c.Heal(3).ok());
  std::string value;
  for (int attempt = 0; attempt < 10 && value != "committed\n"; ++attempt) {
    value = c.InHost(3, {"etcdctl", "--command-timeout=3s", "get", "k", "--print-value-only"}).out;
  }
  EXPECT_EQ(value, "committed\n");

  const nlohmann::json hosts = c.info()["hosts"];
  const std::string bridge = c.info()["bridge"];
  for (int h = 1; h <= 3; ++h) EXPECT_GT(c.host(h)["etcd_pid"].get<int>(), 0);
  ASSERT_TRUE(c.Down().ok());
  ExpectNothingLeft(hosts, bridge);
}

// The wall-clock ms after `marker` in the first line of `log` that contains
// both `marker` and `must` ("... wall ms 1234 ..."); -1 when there is none.
long long WallMsAfter(const std::string& log, const std::string& must, const std::string& marker) {
  std::istringstream in(ReadText(log));
  for (std::string line; std::getline(in, line);) {
    if (line.find(must) == std::string::npos) continue;
    const size_t at = line.find(marker);
    if (at == std::string::npos) continue;
    return std::atoll(line.c_str() + at + marker.size());
  }
  return -1;
}

long long WallMsNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// --etcd: every engine keeps the management state in the hosts' etcd members
// and serves management itself; the demo runs across the hosts. Then host 2's
// link goes down: its engine stops acknowledging writes (it cannot renew its
// lease, and cannot hear from the other engines) before the others mark it
// DOWN. Both times come from the engines' logs, on this machine's one clock.
TEST_F(HostClusterTest, EtcdEnginesDemoAndPartitionFencesBeforeDown) {
  if (!OnPath("etcd")) GTEST_SKIP() << "needs etcd (etcd-server)";
  HostClusterOptions o = Options(3);
  o.etcd = true;
  auto up = HostCluster::Up(o);
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  HostCluster& c = **up;
  auto status = c.Ctl({"--json", "cluster", "status"}).Json();
  const auto& es = status["engine_status"];
  EXPECT_NE(es.value("store", "").find("etcd"), std::string::npos) << status.dump();
  EXPECT_FALSE(es.value("leader", "").empty()) << status.dump();
  std::string host2_uuid;
  for (const auto& e : es["engines"]) {
    if (e.value("address", "") == "host2") host2_uuid = e.value("uuid", "");
  }
  ASSERT_FALSE(host2_uuid.empty()) << status.dump();
  // Every engine serves management: each host's own control socket answers.
  for (int h = 1; h <= 3; ++h) {
    const std::string socket = "unix:" + c.host(h)["data_dir"].get<std::string>() + "/control.sock";
    CommandResult pools = RunCommand({c.ros2ctl(), "--control", socket, "--secret-file",
                                      c.info()["admin_secret_file"].get<std::string>(), "pool", "list"},
                                     c.data_dir());
    EXPECT_EQ(pools.exit_code, 0) << "host " << h << ": " << pools.err;
  }

  CommandResult demo =
      c.InHost(1, {c.ros2ctl(), "--json", "--data-dir", c.data_dir(), "cluster", "demo", "--mib", "2"});
  ASSERT_EQ(demo.exit_code, 0) << demo.err << demo.out;
  auto j = demo.Json();
  ASSERT_TRUE(j.is_object()) << demo.out;
  EXPECT_TRUE(j["ok"].get<bool>());
  std::set<std::string> hosts_reached;
  for (const auto& conn : j["connections"]) {
    if (conn["connected"].get<bool>()) hosts_reached.insert(conn["host"].get<std::string>());
  }
  EXPECT_EQ(hosts_reached, (std::set<std::string>{"host1", "host2", "host3"})) << demo.out;

  const long long cut = WallMsNow();
  ASSERT_TRUE(c.Partition(2).ok());
  const std::string log2 = c.host(2)["data_dir"].get<std::string>() + "/engine.log";
  long long fenced = -1, down = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline && (fenced < 0 || down < 0)) {
    if (fenced < 0) fenced = WallMsAfter(log2, "FENCED", "refusing writes since wall ms ");
    for (int h : {1, 3}) {
      const std::string log = c.host(h)["data_dir"].get<std::string>() + "/engine.log";
      if (down < 0) down = WallMsAfter(log, host2_uuid + ": lease expired; its targets are DOWN", "at wall ms ");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::printf("cluster: host 2 partitioned -> its engine refuses writes after %lld ms, marked DOWN after %lld ms\n",
              fenced < 0 ? -1 : fenced - cut, down < 0 ? -1 : down - cut);
  ASSERT_GE(fenced, 0) << "host 2's engine never logged FENCED: " << ReadText(log2).substr(0, 4000);
  ASSERT_GE(down, 0) << "the others never marked host 2 DOWN";
  EXPECT_LT(fenced, down) << "host 2 acknowledged writes after the cluster counted it dead";
  EXPECT_LT(down - cut, 4 * 3000);

  ASSERT_TRUE(c.Heal(2).ok());
  const nlohmann::json hosts = c.info()["hosts"];
  const std::string bridge = c.info()["bridge"];
  ASSERT_TRUE(c.Down().ok());
  ExpectNothingLeft(hosts, bridge);
}

}  // namespace
}  // namespace ros2::testing
