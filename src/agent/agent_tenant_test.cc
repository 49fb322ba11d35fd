// Offload mode: the caller's uid names its tenant, per-tenant QoS, and a
// tenant's ros2ctl with the agent's socket only (agent_test_support.h).
#include "agent/agent_test_support.h"

namespace ros2::agent::test {
namespace {

// Two host processes under different uids map to different tenants; the
// second cannot mount the first's container, and an unmapped uid gets no session.
TEST_P(AgentTest, TenantsAreTheCallersUid) {
  const std::string sock = setup_->agent->socket();
  auto [code, out] = RunChild(kBobUid, [&](std::string* out) {
    HostOptions o;
    o.socket = sock;
    o.arena_size = 1 << 20;
    auto s = HostSession::Connect(o);
    if (!s.ok()) return *out = "connect: " + s.status().ToString(), 1;
    if ((*s)->tenant() != "bob") return *out = "tenant " + (*s)->tenant(), 2;
    auto theirs = (*s)->Mount("p", "adminc");
    if (theirs.ok()) return *out = "mounted admin's container", 3;
    if (theirs.status().code() != Status::Code::kPermissionDenied) return *out = theirs.status().ToString(), 4;
    auto mine = (*s)->Mount("p", "bobc");
    if (!mine.ok()) return *out = "own container: " + mine.status().ToString(), 5;
    auto f = (*s)->Open(mine->index, mine->root, "bobs", O_CREAT | O_RDWR, 0600);
    if (!f.ok()) return *out = "open: " + f.status().ToString(), 6;
    auto st = (*s)->Stat(mine->index, *f);
    if (!st.ok() || st->uid != kBobUid) return *out = "owner is not the caller's uid", 7;
    *out = theirs.status().ToString();
    return 0;
  });
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("adminc"), std::string::npos) << out;

  auto [code2, out2] = RunChild(kNobodyUid, [&](std::string* out) {
    HostOptions o;
    o.socket = sock;
    o.arena_size = 1 << 20;
    auto s = HostSession::Connect(o);
    if (s.ok()) return *out = "an unmapped uid got a session", 1;
    *out = s.status().ToString();
    return s.status().code() == Status::Code::kPermissionDenied ? 0 : 2;
  });
  EXPECT_EQ(code2, 0) << out2;
  EXPECT_NE(out2.find(std::to_string(kNobodyUid)), std::string::npos) << out2;

  // Bob's last session is gone: so is the agent's client (transport context) for bob.
  bool bob_client = true;
  for (auto until = Clock::now() + std::chrono::seconds(3); bob_client && Clock::now() < until;) {
    const nlohmann::json status = AgentStatus();
    bob_client = false;
    for (const auto& t : status["tenant_clients"]) bob_client = bob_client || t.get<std::string>() == "bob";
    if (bob_client) ::usleep(20'000);
  }
  EXPECT_FALSE(bob_client);
  EXPECT_NE(setup_->agent->Log().find("tenant bob: last session closed, client dropped"), std::string::npos);
}

// Per-tenant QoS (docs/agent.md, "QoS"): on an agent of its own where bob is
// limited to 50 MiB/s, bob (a child under bob's uid) reads as fast as it can
// while admin, unlimited, reads beside it; each tenant's rate is the agent's
// own accounting (bytes served, from the status) over wall time. Then bob's
// limit is raised live with `ros2ctl agent qos` and its rate follows.
TEST_P(AgentTest, TenantQosLimitsBandwidthAndChangesLive) {
  TestCluster& c = *setup_->cluster;
  std::string error;
  auto agent =
      AgentProcess::Start(setup_->dir, "qos-" + GetParam(),
                          fmt::format("control: {}\ntransport: {}\nspin: 20us\nio_timeout: 20s\ntenants:\n"
                                      "  - {{ name: admin, secret_file: {}, uids: [0] }}\n"
                                      "  - {{ name: bob, secret_file: {}, uids: [{}], qos: {{ bandwidth: "
                                      "50MiB }} }}\n",
                                      c.control(), GetParam(), c.admin_secret_file(), c.dir() + "/bob.secret", kBobUid),
                          &error);
  ASSERT_NE(agent, nullptr) << error;
  const std::string sock = agent->socket();
  constexpr uint64_t kMiB = 1 << 20;
  constexpr uint64_t kFile = 4 * kMiB;
  auto served = [&](const std::string& tenant) -> uint64_t {
    auto st = QueryAgentStatus(sock, std::chrono::seconds(5));
    if (!st.ok()) return 0;
    const nlohmann::json status = nlohmann::json::parse(*st);
    for (const auto& t : status["qos"]) {
      if (t["tenant"] == tenant) return t["bytes_served"].get<uint64_t>();
    }
    return 0;
  };
  // Reads a file of kFile bytes (written first) in 1 MiB pieces until
  // `until`, kDepth reads in flight: the agent's bucket, not one read's
  // latency on a loaded machine, decides the rate.
  constexpr size_t kDepth = 3;
  auto reader = [kFile, kMiB, kDepth](HostSession& h, const std::string& cont, const std::string& name,
                                      Clock::time_point until) -> std::string {
    auto m = h.Mount("p", cont);
    if (!m.ok()) return "mount: " + m.status().ToString();
    auto f = h.Open(m->index, m->root, name, O_CREAT | O_RDWR, 0600);
    if (!f.ok()) return "open: " + f.status().ToString();
    std::vector<ArenaBuffer> bufs;
    for (size_t i = 0; i < kDepth; ++i) {
      auto buf = h.Allocate(kMiB);
      if (!buf.ok()) return "allocate: " + buf.status().ToString();
      std::memset(buf->data, 7, kMiB);
      bufs.push_back(*buf);
    }
    for (uint64_t off = 0; off < kFile; off += kMiB) {
      auto w = h.Write(m->index, *f, off, std::span<const std::byte>(bufs[0].data, kMiB));
      if (!w.ok()) return "write: " + w.status().ToString();
    }
    uint64_t off = 0;
    auto submit = [&](size_t slot) {
      IoRequest r{RingOp::kRead, m->index, &*f, off, bufs[slot].span(), slot};
      off = (off + kMiB) % kFile;
      return h.Submit({&r, 1});
    };
    for (size_t i = 0; i < kDepth; ++i) {
      if (Status st = submit(i); !st.ok()) return "submit: " + st.ToString();
    }
    std::array<IoCompletion, kDepth> done;
    while (h.batch_in_flight() > 0) {
      auto n = h.Reap(done, 1, std::chrono::seconds(30));
      if (!n.ok()) return "reap: " + n.status().ToString();
      for (size_t i = 0; i < *n; ++i) {
        if (!done[i].status.ok() || done[i].size != kMiB) return "read: " + done[i].status.ToString();
        if (Clock::now() >= until) continue;
        if (Status st = submit(done[i].user_data); !st.ok()) return "submit: " + st.ToString();
      }
    }
    return "";
  };
  const auto start = Clock::now();
  const auto bob_until = start + std::chrono::milliseconds(6500);
  std::pair<int, std::string> bob;
  std::thread bob_thread([&] {
    bob = RunChild(kBobUid, [&](std::string* out) {
      HostOptions o;
      o.socket = sock;
      o.arena_size = 8 * kMiB;
      auto s = HostSession::Connect(o);
      if (!s.ok()) return *out = "connect: " + s.status().ToString(), 1;
      *out = reader(**s, "bobc", "qos-bob", bob_until);
      return out->empty() ? 0 : 2;
    });
  });
  std::string admin_error;
  const auto admin_until = start + std::chrono::milliseconds(3200);
  std::thread admin_thread([&] {
    HostOptions o;
    o.socket = sock;
    o.arena_size = 8 * kMiB;
    auto s = HostSession::Connect(o);
    admin_error = s.ok() ? reader(**s, "adminc", "qos-admin", admin_until) : "connect: " + s.status().ToString();
  });

  // Phase 1: both read (the first second is warm-up: mounts and the files' writes).
  auto measure = [&](Clock::time_point from, Clock::time_point to, double* bob_rate, double* admin_rate) {
    std::this_thread::sleep_until(from);
    const uint64_t b0 = served("bob"), a0 = served("admin");
    const auto t0 = Clock::now();
    std::this_thread::sleep_until(to);
    const uint64_t b1 = served("bob"), a1 = served("admin");
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    *bob_rate = static_cast<double>(b1 - b0) / secs / kMiB;
    if (admin_rate != nullptr) *admin_rate = static_cast<double>(a1 - a0) / secs / kMiB;
  };
  double bob1 = 0, admin1 = 0, bob2 = 0;
  measure(start + std::chrono::milliseconds(1000), start + std::chrono::milliseconds(3000), &bob1, &admin1);
  admin_thread.join();
  // Phase 2: bob's limit doubled live.
  auto set = c.Ctl({"--json", "agent", "qos", "--socket", sock, "--tenant", "bob", "--bandwidth", "100MiB"});
  EXPECT_EQ(set.exit_code, 0) << set.err << set.out;
  measure(start + std::chrono::milliseconds(3800), start + std::chrono::milliseconds(6000), &bob2, nullptr);
  bob_thread.join();
  EXPECT_EQ(bob.first, 0) << bob.second;
  EXPECT_EQ(admin_error, "");
  std::printf("qos: bob %.1f MiB/s (limit 50) beside admin %.1f MiB/s (unlimited); bob %.1f MiB/s (limit 100)\n", bob1,
              admin1, bob2);
  EXPECT_NEAR(bob1, 50.0, 50.0 * 0.2) << "bob (limited to 50 MiB/s) read " << bob1 << " MiB/s";
  EXPECT_GT(admin1, 2 * bob1) << "admin (unlimited) read " << admin1 << " MiB/s beside bob's " << bob1;
  EXPECT_NEAR(bob2, 100.0, 100.0 * 0.25) << "bob (raised to 100 MiB/s) read " << bob2 << " MiB/s";

  // The command shows the limits and what was served.
  auto show = c.Ctl({"--json", "agent", "qos", "--socket", sock});
  ASSERT_EQ(show.exit_code, 0) << show.err << show.out;
  bool seen = false;
  for (const auto& t : show.Json()) {
    if (t["tenant"] != "bob") continue;
    seen = true;
    EXPECT_EQ(t["bandwidth"].get<uint64_t>(), 100 * kMiB);
    EXPECT_EQ(t["iops"].get<uint64_t>(), 0u);
    EXPECT_GE(t["bytes_served"].get<uint64_t>(), kFile);
  }
  EXPECT_TRUE(seen) << show.out;
  auto unknown = c.Ctl({"agent", "qos", "--socket", sock, "--tenant", "carol", "--bandwidth", "1MiB"});
  EXPECT_EQ(unknown.exit_code, 1) << unknown.err << unknown.out;
  EXPECT_NE(unknown.err.find("no tenant 'carol'"), std::string::npos) << unknown.err;
  // Only root or the agent's user may change limits.
  auto [code, out] = RunChild(kBobUid, [&](std::string* out) {
    auto r = AgentQos(sock, R"({"tenant":"bob","bandwidth":0})", std::chrono::seconds(5));
    *out = r.ok() ? "bob lifted its own limit" : r.status().ToString();
    return !r.ok() && r.status().code() == Status::Code::kPermissionDenied ? 0 : 1;
  });
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(agent->Stop(std::chrono::seconds(10)), 0) << agent->Log();
}

// `ros2ctl fs` in offload mode needs the agent's socket and nothing else: a
// tenant's process under its own uid, with no data dir, control endpoint or
// secret it could read, makes a directory, puts a file and reads it back;
// the entries are the caller's. Without the socket the same command cannot
// reach the cluster.
TEST_P(AgentTest, CtlFsNeedsOnlyTheAgentSocket) {
  const std::string scratch = setup_->cluster->dir() + "/bob-ctl-" + GetParam();
  std::filesystem::create_directories(scratch);
  ::chmod(scratch.c_str(), 0777);
  const std::string local = scratch + "/in.txt";
  std::ofstream(local) << "written by bob through the agent\n";
  ::chmod(local.c_str(), 0644);
  const std::string dir = "/ctl-" + GetParam();
  const std::string sock = setup_->agent->socket();
  auto [code, out] = RunChild(kBobUid, [&](std::string* out) {
    for (const char* var : {"ROS2_DATA_DIR", "ROS2_CONTROL", "ROS2_TENANT", "ROS2_SECRET_FILE"}) ::unsetenv(var);
    auto ctl = [&](std::vector<std::string> args) {
      args.insert(args.begin(), ROS2CTL_PATH);
      return ros2::testing::RunCommand(args, scratch);
    };
    auto refused = ctl({"fs", "ls", "p", "bobc", "/"});
    if (refused.exit_code == 0) return *out = "fs ls without the socket succeeded: " + refused.out, 1;
    ::setenv("ROS2_AGENT_SOCKET", sock.c_str(), 1);
    for (std::vector<std::string> args : {std::vector<std::string>{"fs", "mkdir", "p", "bobc", dir},
                                          {"fs", "put", "p", "bobc", local, dir + "/f.txt"}}) {
      auto r = ctl(args);
      if (r.exit_code != 0) return *out = args[1] + ": " + r.err + r.out, 2;
    }
    auto cat = ctl({"fs", "cat", "p", "bobc", dir + "/f.txt"});
    if (cat.exit_code != 0 || cat.out != "written by bob through the agent\n") {
      return *out = "cat: " + cat.err + "|" + cat.out, 3;
    }
    return 0;
  });
  ASSERT_EQ(code, 0) << out;
  // The entries belong to bob's uid, as the agent saw it on the socket.
  auto s = Connect();
  ROS2_ASSERT_OK(s);
  auto m = (*s)->Mount("p", "bobc");
  ROS2_ASSERT_OK(m);
  auto f = (*s)->LookupPath(m->index, dir + "/f.txt");
  ROS2_ASSERT_OK(f);
  EXPECT_EQ(f->uid, kBobUid);
}

}  // namespace
}  // namespace ros2::agent::test
