// Offload mode end to end: a real engine (`ros2ctl cluster up`), a real
// ros2-agent process, and host sessions through ros2_host in this process
// and in forked children (other uids, killed mid-I/O). Over shm and over tcp
// between the agent and the engine.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "agent/host_session.h"
#include "agent/wire.h"
#include "dfs/file_crypto.h"
#include "testing/engine_process.h"
#include "testing/test_cluster.h"
#include "testing/pattern.h"

namespace ros2::agent {
namespace {

using ros2::testing::Pattern;
using ros2::testing::ReadWholeFile;
using ros2::testing::TestCluster;
using Clock = std::chrono::steady_clock;

constexpr uid_t kBobUid = 4242;
constexpr uid_t kNobodyUid = 4343;

// A ros2-agent child process with its config, socket and log in `dir`.
class AgentProcess {
 public:
  static std::unique_ptr<AgentProcess> Start(const std::string& dir, const std::string& name, const std::string& config,
                                             std::string* error) {
    auto a = std::unique_ptr<AgentProcess>(new AgentProcess());
    a->socket_ = dir + "/" + name + ".sock";
    a->log_ = dir + "/" + name + ".log";
    const std::string config_path = dir + "/" + name + ".yaml";
    std::ofstream(config_path) << "socket: " << a->socket_ << "\n" << config;
    ::unlink(a->log_.c_str());  // a restart must not see the last run's ready line
    a->pid_ = ::fork();
    if (a->pid_ == 0) {
      int fd = ::open(a->log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::execl(ROS2_AGENT_PATH, ROS2_AGENT_PATH, "--config", config_path.c_str(), "--log-level", "info", nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 3000; ++i) {
      if (a->Log().find("ros2-agent ready") != std::string::npos) return a;
      int status = 0;
      if (::waitpid(a->pid_, &status, WNOHANG) == a->pid_) {
        a->pid_ = -1;
        break;
      }
      ::usleep(10'000);
    }
    *error = "ros2-agent did not start: " + a->Log();
    return nullptr;
  }
  ~AgentProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      for (int i = 0; i < 1000 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i) ::usleep(10'000);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
  }
  // SIGTERM; the exit status (or -1 when it did not exit within `timeout`).
  int Stop(std::chrono::seconds timeout) {
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (auto until = Clock::now() + timeout; Clock::now() < until;) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      ::usleep(10'000);
    }
    return -1;
  }
  void Kill() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  std::string Log() const { return ReadWholeFile(log_); }
  const std::string& socket() const { return socket_; }

 private:
  AgentProcess() = default;
  pid_t pid_ = -1;
  std::string socket_;
  std::string log_;
};

// One cluster and agent per transport, shared by the tests.
struct AgentSetup {
  std::unique_ptr<TestCluster> cluster;
  std::string dir;  // world-traversable: other uids reach the agent socket in it
  std::string bob_secret;
  std::unique_ptr<AgentProcess> agent;
  std::string agent_config;
};

class AgentTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void TearDownTestSuite() { setups_.clear(); }

  void SetUp() override {
    auto& s = setups_[GetParam()];
    if (!s) {
      auto setup = std::make_unique<AgentSetup>();
      std::string error;
      setup->cluster = TestCluster::Start(GetParam(), 2, &error);
      ASSERT_NE(setup->cluster, nullptr) << error;
      TestCluster& c = *setup->cluster;
      for (std::vector<std::string> args : {std::vector<std::string>{"pool", "create", "p", "--size", "256MiB"},
                                            {"cont", "create", "p", "adminc"},
                                            {"cont", "create", "p", "bobc"},
                                            {"tenant", "add", "bob", "--secret-out", c.dir() + "/bob.secret"},
                                            {"acl", "set", "p", "--tenant", "bob", "--rights", "r"},
                                            {"acl", "set", "p", "bobc", "--tenant", "bob", "--rights", "rw"},
                                            {"key", "create", "--out", c.dir() + "/admin.key"},
                                            {"cont", "create", "p", "secretc", "-p", "encryption=aes-256-gcm"},
                                            {"cont", "create", "p", "secret2", "-p", "encryption=aes-256-gcm"}}) {
        auto r = c.Ctl(args);
        ASSERT_EQ(r.exit_code, 0) << args[0] << " " << args[1] << ": " << r.err << r.out;
      }
      setup->dir = c.dir() + "/agent";
      std::filesystem::create_directories(setup->dir);
      ::chmod(c.dir().c_str(), 0755);
      ::chmod(setup->dir.c_str(), 0755);
      // Started as root, the agent runs as the ros2 user: its socket's
      // directory and the tenants' files are that user's.
      for (const std::string& path : {setup->dir, c.dir() + "/bob.secret", c.dir() + "/admin.key"}) {
        ROS2_ASSERT_OK(ros2::testing::GiveToServiceUser(path));
      }
      setup->agent_config = fmt::format(
          "control: {}\ntransport: {}\nspin: 20us\nio_timeout: 20s\ntenants:\n"
          "  - {{ name: admin, secret_file: {}, uids: [0], container_keys: {{ secretc: {} }} }}\n"
          "  - {{ name: bob, secret_file: {}, uids: [{}] }}\n",
          c.control(), GetParam(), c.admin_secret_file(), c.dir() + "/admin.key", c.dir() + "/bob.secret", kBobUid);
      setup->agent = AgentProcess::Start(setup->dir, "agent", setup->agent_config, &error);
      ASSERT_NE(setup->agent, nullptr) << error;
      s = std::move(setup);
    }
    setup_ = s.get();
  }

  Result<std::unique_ptr<HostSession>> Connect(uint64_t arena = uint64_t{32} << 20) {
    HostOptions o;
    o.socket = setup_->agent->socket();
    o.arena_size = arena;
    o.ring_entries = 64;
    o.timeout = std::chrono::seconds(30);
    return HostSession::Connect(o);
  }

  nlohmann::json AgentStatus() {
    auto s = QueryAgentStatus(setup_->agent->socket(), std::chrono::seconds(5));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? nlohmann::json::parse(*s) : nlohmann::json();
  }

  static inline std::map<std::string, std::unique_ptr<AgentSetup>> setups_;
  AgentSetup* setup_ = nullptr;
};

// A child process: runs `body` (returns an exit code and writes a line to
// `out`), after switching to `uid` when nonzero. The parent gets the code and
// the line.
std::pair<int, std::string> RunChild(uid_t uid, const std::function<int(std::string*)>& body) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return {-1, "pipe"};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipefd[0]);
    std::string out;
    int code = 0;
    if (uid != 0 && (::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0)) {
      out = "setresuid failed";
      code = 99;
    } else {
      code = body(&out);
    }
    (void)!::write(pipefd[1], out.data(), out.size());
    ::_exit(code);
  }
  ::close(pipefd[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipefd[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

TEST_P(AgentTest, NamespaceAndDataRoundTrip) {
  auto s = Connect();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  HostSession& h = **s;
  EXPECT_EQ(h.tenant(), "admin");
  dfs::MountOptions mo;
  mo.chunk_size = 64 * 1024;  // small chunks: the I/O below crosses many
  auto m = h.Mount("p", "adminc", mo);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const uint32_t mi = m->index;
  const dfs::Entry root = m->root;
  EXPECT_TRUE(root.is_dir());

  const std::string dname = fmt::format("d-{}", GetParam());
  auto dir = h.Mkdir(mi, root, dname, 0750);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(h.Mkdir(mi, root, dname).status().code(), Status::Code::kAlreadyExists);
  bool created = false;
  auto f = h.Open(mi, *dir, "data.bin", O_CREAT | O_RDWR, 0640, &created);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(created);
  EXPECT_EQ(f->chunk_size, 64u * 1024);

  // Odd offsets and sizes across chunk boundaries: from an ordinary buffer
  // (copied through the arena) and from an arena buffer (zero-copy).
  const auto a = Pattern(200'001, 1);
  auto w1 = h.Write(mi, *f, 12'345, a);
  ASSERT_TRUE(w1.ok()) << w1.status().ToString();
  EXPECT_EQ(*w1, a.size());
  auto abuf = h.Allocate(131'071);
  ASSERT_TRUE(abuf.ok());
  const auto b = Pattern(131'071, 2);
  std::memcpy(abuf->data, b.data(), b.size());
  auto w2 = h.Write(mi, *f, 300'007, std::span<const std::byte>(abuf->data, b.size()));
  ASSERT_TRUE(w2.ok()) << w2.status().ToString();

  std::vector<std::byte> expect(300'007 + b.size());
  std::memcpy(expect.data() + 12'345, a.data(), a.size());
  std::memcpy(expect.data() + 300'007, b.data(), b.size());
  auto st = h.Stat(mi, *f);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->size, expect.size());
  EXPECT_TRUE(S_ISREG(st->mode));

  std::vector<std::byte> back(expect.size() + 1000);
  auto r1 = h.Read(mi, *f, 0, back);  // past the end: short
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  ASSERT_EQ(*r1, expect.size());
  EXPECT_TRUE(std::memcmp(back.data(), expect.data(), expect.size()) == 0);
  auto rb = h.Allocate(99'999);
  ASSERT_TRUE(rb.ok());
  auto r2 = h.Read(mi, *f, 65'535, std::span<std::byte>(rb->data, 99'999));
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  ASSERT_EQ(*r2, 99'999u);
  EXPECT_TRUE(std::memcmp(rb->data, expect.data() + 65'535, 99'999) == 0);

  // Many reads in flight through the batch API, completions in any order.
  std::vector<IoRequest> reqs;
  auto batch = h.Allocate(32 * 4096);
  ASSERT_TRUE(batch.ok());
  for (uint64_t i = 0; i < 32; ++i) {
    IoRequest q;
    q.kind = IoKind::kRead;
    q.mount = mi;
    q.file = &*f;
    q.offset = i * 13'001;
    q.buffer = std::span<std::byte>(batch->data + i * 4096, 4096);
    q.user_data = 1000 + i;
    reqs.push_back(q);
  }
  ASSERT_TRUE(h.Submit(reqs).ok());
  std::vector<IoCompletion> done(32);
  size_t got = 0;
  while (got < 32) {
    auto n = h.Reap(std::span<IoCompletion>(done).subspan(got), 1, std::chrono::seconds(30));
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    got += *n;
  }
  std::set<uint64_t> seen;
  for (const auto& c : done) {
    ASSERT_TRUE(c.status.ok()) << c.status.ToString();
    uint64_t i = c.user_data - 1000;
    seen.insert(i);
    EXPECT_EQ(c.size, 4096u);
    EXPECT_TRUE(std::memcmp(batch->data + i * 4096, expect.data() + i * 13'001, 4096) == 0) << i;
  }
  EXPECT_EQ(seen.size(), 32u);
  EXPECT_EQ(h.batch_in_flight(), 0u);
  // The agent had several of them in flight at once.
  size_t max_in_flight = 0;
  bool shared_segment = false;
  const nlohmann::json status = AgentStatus();
  for (const auto& sess : status["sessions"]) {
    if (sess["id"].get<uint64_t>() == h.id()) {
      max_in_flight = sess["max_in_flight"].get<size_t>();
      shared_segment = sess["shared_segment"].get<bool>();
    }
  }
  EXPECT_GE(max_in_flight, 16u) << status.dump();  // a batch is in flight before any of it completes
  // The region is a shared segment: the engine moves bulk to and from the arena itself.
  EXPECT_TRUE(shared_segment) << status.dump();
  // Reaping without waiting (timeout 0) still collects what has come.
  ASSERT_TRUE(h.Submit(std::span<const IoRequest>(reqs.data(), 1)).ok());
  size_t reaped = 0;
  for (auto until = Clock::now() + std::chrono::seconds(10); reaped == 0 && Clock::now() < until;) {
    auto n = h.Reap(std::span<IoCompletion>(done).first(1), 1, std::chrono::milliseconds(0));
    if (n.ok()) reaped = *n;
  }
  EXPECT_EQ(reaped, 1u);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status.ToString();

  // Names: rename, readdir, lookup, symlink, setattr, truncate, unlink, rmdir.
  ASSERT_TRUE(h.Rename(mi, *dir, "data.bin", *dir, "moved.bin").ok());
  EXPECT_EQ(h.Lookup(mi, *dir, "data.bin").status().code(), Status::Code::kNotFound);
  auto moved = h.LookupWithAttr(mi, *dir, "moved.bin");
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->second.size, expect.size());
  auto link = h.Symlink(mi, *dir, "ln", "moved.bin");
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  auto target = h.Readlink(mi, *link);
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  EXPECT_EQ(*target, "moved.bin");
  ASSERT_TRUE(h.Mkdir(mi, *dir, "sub").ok());
  std::set<std::string> names;
  dfs::DirAnchor anchor;
  while (!anchor.eof) {
    auto page = h.Readdir(mi, *dir, anchor, 2);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const auto& d : *page) names.insert(d.name);
  }
  EXPECT_EQ(names, (std::set<std::string>{"moved.bin", "ln", "sub"}));
  auto by_path = h.LookupPath(mi, "/" + dname + "/sub");
  ASSERT_TRUE(by_path.ok()) << by_path.status().ToString();
  EXPECT_TRUE(by_path->is_dir());
  dfs::SetAttrArgs sa;
  sa.mask = dfs::kSetMode;
  sa.mode = 0600;
  auto attr = h.SetAttr(mi, moved->first, sa);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_EQ(attr->mode & 07777, 0600u);
  ASSERT_TRUE(h.Truncate(mi, moved->first, 10).ok());
  EXPECT_EQ(h.Stat(mi, moved->first)->size, 10u);
  EXPECT_TRUE(h.Sync(mi, moved->first).ok());
  auto sfs = h.Statfs(mi);
  ASSERT_TRUE(sfs.ok()) << sfs.status().ToString();
  EXPECT_GT(sfs->blocks, 0u);
  EXPECT_EQ(h.Rmdir(mi, *dir, "moved.bin").code(), Status::Code::kNotDirectory);
  Status not_empty = h.Rmdir(mi, root, dname);
  EXPECT_EQ(not_empty.code(), Status::Code::kNotEmpty) << not_empty.ToString();
  EXPECT_NE(not_empty.message().find(dname), std::string::npos) << not_empty.ToString();  // the agent's message
  ASSERT_TRUE(h.Unlink(mi, *dir, "moved.bin").ok());
  ASSERT_TRUE(h.Unlink(mi, *dir, "ln").ok());
  ASSERT_TRUE(h.Rmdir(mi, *dir, "sub").ok());
  ASSERT_TRUE(h.Rmdir(mi, root, dname).ok());
  EXPECT_EQ(h.Lookup(mi, root, dname).status().code(), Status::Code::kNotFound);
  // Mount options travel: files of a second mount get its object class.
  dfs::MountOptions s1;
  s1.file_class = ObjectClass::kS1;
  auto m2 = h.Mount("p", "adminc", s1);
  ASSERT_TRUE(m2.ok()) << m2.status().ToString();
  EXPECT_NE(m2->index, mi);
  auto f1 = h.Open(m2->index, m2->root, fmt::format("s1-{}", GetParam()), O_CREAT | O_RDWR);
  ASSERT_TRUE(f1.ok()) << f1.status().ToString();
  EXPECT_EQ(f1->oid.object_class(), ObjectClass::kS1);
  EXPECT_TRUE(h.Unlink(m2->index, m2->root, f1->name).ok());
  EXPECT_TRUE(h.Unmount(m2->index).ok());
  h.Free(*abuf);
  h.Free(*rb);
  h.Free(*batch);
  EXPECT_TRUE(h.Unmount(mi).ok());
  EXPECT_EQ(h.Stat(mi, root).status().code(), Status::Code::kInvalidArgument);  // the mount is gone
}

// One session used by several threads at once (one polls, the others are
// handed their completions), and I/O larger than one entry may span (the
// library splits it).
TEST_P(AgentTest, ConcurrentCallersAndLargeIo) {
  auto s = Connect(uint64_t{40} << 20);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  HostSession& h = **s;
  dfs::MountOptions mo;
  mo.chunk_size = 4096;
  auto m = h.Mount("p", "adminc", mo);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::string dname = fmt::format("conc-{}", GetParam());
  auto dir = h.Mkdir(m->index, m->root, dname);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();

  // 17 MiB at 4 KiB chunks: more than kMaxChunksPerIo chunks in one call.
  const uint64_t big_size = (kMaxChunksPerIo + 256) * 4096 + 123;
  auto big = h.Allocate(big_size);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  const auto pattern = Pattern(big_size, 77);
  std::memcpy(big->data, pattern.data(), big_size);
  auto f = h.Open(m->index, *dir, "big", O_CREAT | O_RDWR);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto w = h.Write(m->index, *f, 5, std::span<const std::byte>(big->data, big_size));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(*w, big_size);
  std::memset(big->data, 0, big_size);
  auto r = h.Read(m->index, *f, 5, std::span<std::byte>(big->data, big_size));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, big_size);
  EXPECT_TRUE(std::memcmp(big->data, pattern.data(), big_size) == 0);
  h.Free(*big);

  std::atomic<int> failures{0};
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto file = h.Open(m->index, *dir, fmt::format("t{}", t), O_CREAT | O_RDWR);
      if (!file.ok()) {
        errors[t] = file.status().ToString();
        ++failures;
        return;
      }
      for (int i = 0; i < 25; ++i) {
        const auto data = Pattern(10'000 + i, t * 100 + i);
        const uint64_t off = static_cast<uint64_t>(i) * 777;
        auto put = h.Write(m->index, *file, off, data);
        std::vector<std::byte> back(data.size());
        auto got = h.Read(m->index, *file, off, back);
        if (!put.ok() || !got.ok() || back != data) {
          errors[t] = fmt::format("iteration {}: {} / {}", i, put.status().ToString(), got.status().ToString());
          ++failures;
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << errors[0] << errors[1] << errors[2] << errors[3];
}

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

// A connection that never says hello holds up nobody, and a hello without
// the descriptors is refused with the reason.
TEST_P(AgentTest, SilentAndEmptyHellosAreRefused) {
  auto connect_raw = [&] {
    int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, setup_->agent->socket().c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    return fd;
  };
  int silent = connect_raw();
  const auto t0 = Clock::now();
  auto s = Connect(1 << 20);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));

  int empty = connect_raw();
  HelloMessage hello{kHelloMagic, kProtocolVersion, static_cast<uint16_t>(MessageType::kHello), 0};
  ASSERT_EQ(::send(empty, &hello, sizeof hello, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof hello));
  char buf[4096];
  ssize_t n = ::recv(empty, buf, sizeof buf, 0);
  ASSERT_GE(n, static_cast<ssize_t>(sizeof(HelloReply)));
  HelloReply r;
  std::memcpy(&r, buf, sizeof r);
  EXPECT_EQ(r.code, static_cast<uint16_t>(Status::Code::kProtocol));
  std::string text(buf + sizeof r, static_cast<size_t>(n) - sizeof r);
  EXPECT_NE(text.find("2 descriptors"), std::string::npos) << text;
  ::close(empty);

  // The silent one is closed by the agent after its hello timeout.
  pollfd p{silent, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 5000), 1);
  EXPECT_EQ(::recv(silent, buf, sizeof buf, MSG_DONTWAIT), 0);
  ::close(silent);
}

// A hello whose memfd can shrink (no F_SEAL_SHRINK) is refused, with the reason.
TEST_P(AgentTest, UnsealedRegionIsRefused) {
  RingGeometry g = ComputeGeometry(4, 8, 4096);
  int memfd = ::memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  ASSERT_EQ(::ftruncate(memfd, static_cast<off_t>(g.total_size)), 0);
  int e1 = ::eventfd(0, EFD_CLOEXEC);
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, setup_->agent->socket().c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  HelloMessage hello{kHelloMagic, kProtocolVersion, static_cast<uint16_t>(MessageType::kHello), 0};
  iovec iov{&hello, sizeof hello};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 2)]{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * 2);
  int fds[2] = {memfd, e1};
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  ASSERT_EQ(::sendmsg(fd, &msg, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof hello));
  char buf[4096];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  ASSERT_GE(n, static_cast<ssize_t>(sizeof(HelloReply)));
  HelloReply r;
  std::memcpy(&r, buf, sizeof r);
  EXPECT_EQ(r.code, static_cast<uint16_t>(Status::Code::kInvalidArgument));
  std::string text(buf + sizeof r, static_cast<size_t>(n) - sizeof r);
  EXPECT_NE(text.find("F_SEAL_SHRINK"), std::string::npos) << text;
  for (int f : {fd, memfd, e1}) ::close(f);
}

// Garbage submissions get error completions; a ring index moved backwards
// closes that session only.
TEST_P(AgentTest, GarbageEntriesAreRefused) {
  auto good = Connect();
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  auto gm = (*good)->Mount("p", "adminc");
  ASSERT_TRUE(gm.ok()) << gm.status().ToString();

  auto bad = Connect(1 << 20);
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  HostSession& h = **bad;
  auto m = h.Mount("p", "adminc");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto f = h.Open(m->index, m->root, fmt::format("garbage-{}", GetParam()), O_CREAT | O_RDWR);
  ASSERT_TRUE(f.ok()) << f.status().ToString();

  struct Case {
    const char* what;
    SubmitEntry sqe;
    int errno_expected;
  };
  auto base = [&](Opcode op) {
    SubmitEntry s{};
    s.opcode = static_cast<uint8_t>(op);
    s.mount = static_cast<uint16_t>(m->index);
    s.entry = ToWire(*f);
    return s;
  };
  std::vector<Case> cases;
  {
    SubmitEntry s = base(Opcode::kRead);
    s.buf_off = h.arena_size() - 10;
    s.buf_len = 4096;  // runs past the arena
    cases.push_back({"buffer past the arena", s, EFAULT});
    s.buf_off = ~uint64_t{0} - 5;  // wraps around
    s.buf_len = 4096;
    cases.push_back({"buffer offset wrapping", s, EFAULT});
    SubmitEntry a = base(Opcode::kStat);
    a.args_off = h.arena_size();
    a.args_len = 16;
    a.args_cap = 16;
    cases.push_back({"arguments past the arena", a, EFAULT});
    SubmitEntry big = base(Opcode::kStat);
    big.args_len = 100;
    big.args_cap = 10;  // len > cap
    cases.push_back({"argument length over its capacity", big, EFAULT});
    SubmitEntry tiny = base(Opcode::kRead);
    tiny.entry.chunk_size = 1;  // a forged chunk size: 65536 pieces
    tiny.buf_len = 65536;
    cases.push_back({"read spanning too many chunks", tiny, EINVAL});
    SubmitEntry op{};
    op.opcode = 200;
    cases.push_back({"unknown opcode", op, EOPNOTSUPP});
    SubmitEntry mount = base(Opcode::kStat);
    mount.mount = 77;
    cases.push_back({"unknown mount", mount, EBADF});
    SubmitEntry malformed = base(Opcode::kLookup);
    auto args = h.Allocate(64);
    ASSERT_TRUE(args.ok());
    uint32_t huge = 1u << 30;
    std::memcpy(args->data, &huge, 4);  // a name length far past the block
    malformed.args_off = args->offset;
    malformed.args_len = 8;
    malformed.args_cap = 64;
    cases.push_back({"malformed arguments", malformed, EINVAL});
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    cases[i].sqe.user_data = 500 + i;
    ASSERT_TRUE(h.SubmitRaw(cases[i].sqe).ok()) << cases[i].what;
  }
  std::vector<IoCompletion> out(cases.size());
  size_t got = 0;
  while (got < cases.size()) {
    auto n = h.Reap(std::span<IoCompletion>(out).subspan(got), 1, std::chrono::seconds(30));
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    got += *n;
  }
  for (const auto& c : out) {
    const Case& k = cases[c.user_data - 500];
    EXPECT_FALSE(c.status.ok()) << k.what;
    EXPECT_EQ(c.error, k.errno_expected) << k.what << ": " << c.status.ToString();
    EXPECT_FALSE(c.status.message().empty()) << k.what;
  }
  // The session still works after refused entries.
  ASSERT_TRUE(h.Stat(m->index, *f).ok());

  // A submission tail moved backwards: the agent closes this session (the
  // reason in its log), and the host's next call fails clearly.
  h.ForceSubmissionTail(0);
  std::string log;
  for (int i = 0; i < 500; ++i) {
    log = setup_->agent->Log();
    if (log.find("behind the head") != std::string::npos) break;
    ::usleep(10'000);
  }
  EXPECT_NE(log.find("behind the head"), std::string::npos) << log;
  auto after = h.Stat(m->index, *f);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), Status::Code::kDisconnected) << after.status().ToString();
  EXPECT_NE(after.status().message().find(setup_->agent->socket()), std::string::npos);
  EXPECT_NE(after.status().message().find("closed the session"), std::string::npos) << after.status().ToString();

  // The other session is unaffected.
  EXPECT_TRUE((*good)->Stat(gm->index, gm->root).ok());
}

// A host process killed mid-I/O is reclaimed within about a second, and a new
// session works.
TEST_P(AgentTest, KilledHostIsReclaimed) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const std::string sock = setup_->agent->socket();
  const std::string name = fmt::format("victim-{}", GetParam());
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    HostOptions o;
    o.socket = sock;
    o.arena_size = 8 << 20;
    auto s = HostSession::Connect(o);
    if (!s.ok()) ::_exit(1);
    auto m = (*s)->Mount("p", "adminc");
    if (!m.ok()) ::_exit(2);
    auto f = (*s)->Open(m->index, m->root, name, O_CREAT | O_RDWR);
    if (!f.ok()) ::_exit(3);
    auto buf = (*s)->Allocate(4 << 20);
    if (!buf.ok()) ::_exit(4);
    (void)!::write(ready[1], "x", 1);
    for (uint64_t off = 0;; off += buf->size) {  // until killed
      std::vector<IoRequest> q(1);
      q[0] = {IoKind::kWrite, m->index, &*f, off % (64 << 20), buf->span(), off};
      if (!(*s)->Submit(q).ok()) ::_exit(5);
      std::vector<IoCompletion> c(1);
      (void)(*s)->Reap(c, 0, std::chrono::milliseconds(0));
    }
  }
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
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
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

// Inline encryption at the agent: it mounts an encrypted container with the
// key it holds (the host sends none), the engine stores the shared block
// format, a direct-mode client with the key reads the same plaintext and one
// without it is refused; a container the agent holds no key for is refused
// with the reason.
TEST_P(AgentTest, EncryptedContainerWithTheAgentsKey) {
  auto s = Connect();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  HostSession& h = **s;
  auto m = h.Mount("p", "secretc");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::string name = "enc-" + GetParam();
  auto f = h.Open(m->index, m->root, name, O_CREAT | O_RDWR, 0600);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const auto data = Pattern(3 * 4096 + 123, 7);
  ASSERT_TRUE(h.Write(m->index, *f, 1000, data).ok());
  const auto patch = Pattern(10, 8);
  ASSERT_TRUE(h.Write(m->index, *f, 5000, patch).ok());  // inside a block: read-modify-write at the agent
  std::vector<std::byte> want(1000 + data.size());
  std::copy(data.begin(), data.end(), want.begin() + 1000);
  std::copy(patch.begin(), patch.end(), want.begin() + 5000);
  std::vector<std::byte> got(want.size() + 10);
  auto n = h.Read(m->index, *f, 0, got);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, want.size());
  got.resize(*n);
  EXPECT_EQ(got, want);

  // Direct mode, beside the agent.
  client::ClientOptions o;
  o.control = setup_->cluster->control();
  o.secret_file = setup_->cluster->admin_secret_file();
  o.transport = GetParam();
  auto direct = client::Client::Connect(o);
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  auto pool = (*direct)->ConnectPool("p");
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto cont = (*pool)->OpenContainer("secretc");
  ASSERT_TRUE(cont.ok()) << cont.status().ToString();
  EXPECT_EQ(dfs::Filesystem::Mount(**cont, {}).status().code(), Status::Code::kPermissionDenied);
  dfs::MountOptions keyed;
  keyed.encryption_key_file = setup_->cluster->dir() + "/admin.key";
  auto fs = dfs::Filesystem::Mount(**cont, keyed);
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  auto df = (*fs)->Lookup((*fs)->Root(), name);
  ASSERT_TRUE(df.ok()) << df.status().ToString();
  std::vector<std::byte> back(want.size());
  auto dn = (*fs)->Read(*df, 0, back);
  ASSERT_TRUE(dn.ok()) << dn.status().ToString();
  EXPECT_EQ(back, want);
  // What the engine stores for the file is not the plaintext.
  auto raw = (*cont)->OpenObject(df->oid);
  ASSERT_TRUE(raw.ok());
  auto dkeys = raw->ListDkeys();
  ASSERT_TRUE(dkeys.ok()) << dkeys.status().ToString();
  ASSERT_FALSE(dkeys->empty());
  for (const std::string& dkey : *dkeys) {
    auto akeys = raw->ListAkeys(dkey);
    ASSERT_TRUE(akeys.ok()) << akeys.status().ToString();
    for (const std::string& akey : *akeys) {
      client::FetchArgs fa;
      fa.dkey = dkey;
      fa.akey = akey;
      fa.kind = ValueType::kArray;
      fa.record_size = dfs::kBlockRecordSize;  // the encrypted-file records (dfs/file_crypto.h)
      fa.count = 16;
      std::vector<std::byte> stored(fa.count * fa.record_size);
      fa.buffer = stored;
      auto fetched = raw->Fetch(fa);
      ASSERT_TRUE(fetched.ok()) << fetched.status().ToString();
      EXPECT_EQ(std::search(stored.begin(), stored.end(), data.begin(), data.begin() + 64), stored.end())
          << "plaintext found under dkey " << dkey.size() << " bytes, akey " << akey;
    }
  }

  // A container the agent holds no key for.
  auto none = h.Mount("p", "secret2");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Status::Code::kPermissionDenied) << none.status().ToString();
  EXPECT_NE(none.status().message().find("key"), std::string::npos) << none.status().ToString();
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

// Per-tenant QoS (docs/agent.md, "QoS"): on an agent of its own where bob is
// limited to 50 MiB/s, bob (a child under bob's uid) reads as fast as it can
// while admin, unlimited, reads beside it; each tenant's rate is the agent's
// own accounting (bytes served, from the status) over wall time. Then bob's
// limit is raised live with `ros2ctl agent qos` and its rate follows.
TEST_P(AgentTest, TenantQosLimitsBandwidthAndChangesLive) {
  TestCluster& c = *setup_->cluster;
  std::string error;
  auto agent = AgentProcess::Start(setup_->dir, "qos-" + GetParam(),
                                   fmt::format("control: {}\ntransport: {}\nspin: 20us\nio_timeout: 20s\ntenants:\n"
                                               "  - {{ name: admin, secret_file: {}, uids: [0] }}\n"
                                               "  - {{ name: bob, secret_file: {}, uids: [{}], qos: {{ bandwidth: "
                                               "50MiB }} }}\n",
                                               c.control(), GetParam(), c.admin_secret_file(), c.dir() + "/bob.secret",
                                               kBobUid),
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
      IoRequest r{IoKind::kRead, m->index, &*f, off, bufs[slot].span(), slot};
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

INSTANTIATE_TEST_SUITE_P(Transports, AgentTest, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ros2::agent
