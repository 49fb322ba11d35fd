// Offload mode's ends: a host killed mid-I/O, the agent killed or stopped
// with sessions open, `ros2ctl cluster up --agent` (agent_test_support.h).
#include "agent/agent_test_support.h"

namespace ros2::agent::test {
namespace {

// A host process killed mid-I/O is reclaimed within about a second, and a new
// session works.
TEST_P(AgentTest, KilledHostIsReclaimed) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const std::string sock = setup_->agent->socket();
  const std::string name = fmt::format("victim-{}", GetParam());
  auto child = ros2::testing::ChildProcess::Fork([&]() -> int {
    ::close(ready[0]);
    HostOptions o;
    o.socket = sock;
    o.arena_size = 8 << 20;
    auto s = HostSession::Connect(o);
    if (!s.ok()) return 1;
    auto m = (*s)->Mount("p", "adminc");
    if (!m.ok()) return 2;
    auto f = (*s)->Open(m->index, m->root, name, O_CREAT | O_RDWR);
    if (!f.ok()) return 3;
    auto buf = (*s)->Allocate(4 << 20);
    if (!buf.ok()) return 4;
    (void)!::write(ready[1], "x", 1);
    for (uint64_t off = 0;; off += buf->size) {  // until killed
      std::vector<IoRequest> q(1);
      q[0] = {RingOp::kWrite, m->index, &*f, off % (64 << 20), buf->span(), off};
      if (!(*s)->Submit(q).ok()) return 5;
      std::vector<IoCompletion> c(1);
      (void)(*s)->Reap(c, 0, std::chrono::milliseconds(0));
    }
  });
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  const pid_t pid = child->pid();
  ::close(ready[1]);
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1) << "the child host did not start";
  ::close(ready[0]);
  auto has_pid = [&](pid_t p) {
    const nlohmann::json status = AgentStatus();
    for (const auto& sess : status["sessions"]) {
      if (sess["pid"].get<pid_t>() == p) return true;
    }
    return false;
  };
  ASSERT_TRUE(has_pid(pid)) << "child " << pid << " not in " << AgentStatus().dump() << setup_->agent->Log();
  ::usleep(100'000);  // in the middle of its writes
  child->Kill();
  const auto killed = Clock::now();
  bool present = true;
  while (present && Clock::now() - killed < std::chrono::seconds(10)) {
    present = has_pid(pid);
    if (present) ::usleep(20'000);
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed);
  EXPECT_FALSE(present);
  std::cout << "host killed mid-I/O: session reclaimed after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed).count() << " ms\n";
  // A write in flight finishes first (up to its engine round trip), then the
  // hang-up is seen within the agent's reap interval.
  EXPECT_LT(took.count(), 2000) << "reclaimed after " << took.count() << " ms";
  EXPECT_NE(setup_->agent->Log().find(fmt::format("(pid {} uid 0 tenant admin) reclaimed", pid)), std::string::npos)
      << setup_->agent->Log();

  auto s = Connect();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto m = (*s)->Mount("p", "adminc");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto f = (*s)->Lookup(m->index, m->root, name);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE((*s)->Stat(m->index, *f).ok());
}

// The agent killed: a waiting call and later calls fail with Disconnected
// naming the socket, promptly, not at their timeout.
TEST_P(AgentTest, KilledAgentFailsCallsClearly) {
  std::string error;
  auto agent = AgentProcess::Start(setup_->dir, "doomed", setup_->agent_config, &error);
  ASSERT_NE(agent, nullptr) << error;
  HostOptions o;
  o.socket = agent->socket();
  o.arena_size = 1 << 20;
  o.timeout = std::chrono::seconds(60);
  auto s = HostSession::Connect(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto m = (*s)->Mount("p", "adminc");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  // Calls in progress when the agent dies (reads in 8 MiB pieces through the arena).
  HostOptions bo = o;
  bo.arena_size = 16 << 20;
  auto bs = HostSession::Connect(bo);
  ASSERT_TRUE(bs.ok()) << bs.status().ToString();
  auto bm = (*bs)->Mount("p", "adminc");
  ASSERT_TRUE(bm.ok()) << bm.status().ToString();
  auto bf = (*bs)->Open(bm->index, bm->root, fmt::format("doomed-{}", GetParam()), O_CREAT | O_RDWR);
  ASSERT_TRUE(bf.ok()) << bf.status().ToString();
  std::vector<std::byte> payload(24 << 20);  // three pieces of the bounce buffer
  ASSERT_TRUE((*bs)->Write(bm->index, *bf, 0, payload).ok());
  Result<uint64_t> in_flight = Status::Internal("not run");
  std::atomic<bool> reading{false};
  std::thread reader([&] {
    for (;;) {  // until the agent is gone
      reading = true;
      in_flight = (*bs)->Read(bm->index, *bf, 0, payload);
      if (!in_flight.ok()) return;
    }
  });
  while (!reading) ::usleep(1000);
  ::usleep(50'000);
  agent->Kill();
  const auto killed = Clock::now();
  reader.join();
  EXPECT_LT(Clock::now() - killed, std::chrono::seconds(5));
  EXPECT_EQ(in_flight.status().code(), Status::Code::kDisconnected) << in_flight.status().ToString();
  const auto t0 = Clock::now();
  auto st = (*s)->Stat(m->index, m->root);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), Status::Code::kDisconnected) << st.status().ToString();
  EXPECT_NE(st.status().message().find(agent->socket()), std::string::npos) << st.status().ToString();
  EXPECT_LT(took.count(), 5000);
  auto again = (*s)->Mkdir(m->index, m->root, "x");
  EXPECT_EQ(again.status().code(), Status::Code::kDisconnected);
  // No agent: connecting fails clearly too.
  auto none = HostSession::Connect(o);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Status::Code::kDisconnected) << none.status().ToString();
  EXPECT_NE(none.status().message().find(agent->socket()), std::string::npos);

  // An agent started again on the socket: a new session serves the entries
  // the old one handed out (they are values; only mount indices are per session).
  auto again_agent = AgentProcess::Start(setup_->dir, "doomed", setup_->agent_config, &error);
  ASSERT_NE(again_agent, nullptr) << error;
  auto fresh = HostSession::Connect(bo);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  auto fm = (*fresh)->Mount("p", "adminc");
  ASSERT_TRUE(fm.ok()) << fm.status().ToString();
  auto attr = (*fresh)->Stat(fm->index, *bf);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_EQ(attr->size, payload.size());
}

// `ros2ctl cluster up --agent`: an agent beside the engine, serving root as
// the admin tenant; `cluster down` stops both.
TEST(AgentClusterTest, ClusterUpStartsAnAgent) {
  auto c = TestCluster::MakeDirectory();
  ASSERT_NE(c, nullptr);
  auto up = c->Ctl({"--json", "cluster", "up", "--targets", "1", "--class", "ram", "--transport", "shm", "--engine",
                    ROS2_ENGINE_PATH, "--agent", "--agent-binary", ROS2_AGENT_PATH, "--timeout", "60"});
  ASSERT_EQ(up.exit_code, 0) << up.err << up.out;
  auto j = up.Json();
  ASSERT_TRUE(j.contains("agent_socket")) << up.out;
  const std::string sock = j["agent_socket"].get<std::string>();
  const int agent_pid = j["agent_pid"].get<int>();
  EXPECT_EQ(sock, c->dir() + "/agent.sock");
  ASSERT_EQ(c->Ctl({"pool", "create", "p", "--size", "64MiB"}).exit_code, 0);
  ASSERT_EQ(c->Ctl({"cont", "create", "p", "c"}).exit_code, 0);
  {
    HostOptions o;
    o.socket = sock;
    o.arena_size = 1 << 20;
    auto s = HostSession::Connect(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ((*s)->tenant(), "admin");
    auto m = (*s)->Mount("p", "c");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto f = (*s)->Open(m->index, m->root, "hello", O_CREAT | O_RDWR);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    const auto data = Pattern(5000, 9);
    ASSERT_TRUE((*s)->Write(m->index, *f, 3, data).ok());
    std::vector<std::byte> back(data.size());
    auto n = (*s)->Read(m->index, *f, 3, back);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_EQ(back, data);
  }
  auto down = c->Ctl({"cluster", "down", "--timeout", "30", "--force"});
  EXPECT_EQ(down.exit_code, 0) << down.err;
  EXPECT_TRUE(ros2::testing::ProcessExited(agent_pid)) << "agent pid " << agent_pid << " still runs";
  EXPECT_FALSE(std::filesystem::exists(c->dir() + "/agent.pid"));
}

// SIGTERM with a session open: the agent closes it and exits 0; the host's
// next call fails with Disconnected.
TEST_P(AgentTest, AgentStopsCleanlyWithSessionsOpen) {
  std::string error;
  auto agent = AgentProcess::Start(setup_->dir, "stopping", setup_->agent_config, &error);
  ASSERT_NE(agent, nullptr) << error;
  HostOptions o;
  o.socket = agent->socket();
  o.arena_size = 1 << 20;
  auto s = HostSession::Connect(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto m = (*s)->Mount("p", "adminc");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(agent->Stop(std::chrono::seconds(10)), 0) << agent->Log();
  EXPECT_NE(agent->Log().find("reclaimed: agent stopping"), std::string::npos) << agent->Log();
  EXPECT_FALSE(std::filesystem::exists(agent->socket()));  // removed on exit
  auto st = (*s)->Stat(m->index, m->root);
  EXPECT_EQ(st.status().code(), Status::Code::kDisconnected) << st.status().ToString();
}

INSTANTIATE_TEST_SUITE_P(Transports, AgentTest, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ros2::agent::test
