// What ros2-agent refuses: silent or empty hellos, an unsealed region,
// garbage submission entries (agent_test_support.h).
#include "agent/agent_test_support.h"

namespace ros2::agent::test {
namespace {

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
  auto base = [&](RingOp op) {
    SubmitEntry s{};
    s.opcode = static_cast<uint8_t>(op);
    s.mount = static_cast<uint16_t>(m->index);
    s.entry = ToWire(*f);
    return s;
  };
  std::vector<Case> cases;
  {
    SubmitEntry s = base(RingOp::kRead);
    s.buf_off = h.arena_size() - 10;
    s.buf_len = 4096;  // runs past the arena
    cases.push_back({"buffer past the arena", s, EFAULT});
    s.buf_off = ~uint64_t{0} - 5;  // wraps around
    s.buf_len = 4096;
    cases.push_back({"buffer offset wrapping", s, EFAULT});
    SubmitEntry a = base(RingOp::kStat);
    a.args_off = h.arena_size();
    a.args_len = 16;
    a.args_cap = 16;
    cases.push_back({"arguments past the arena", a, EFAULT});
    SubmitEntry big = base(RingOp::kStat);
    big.args_len = 100;
    big.args_cap = 10;  // len > cap
    cases.push_back({"argument length over its capacity", big, EFAULT});
    SubmitEntry tiny = base(RingOp::kRead);
    tiny.entry.chunk_size = 1;  // a forged chunk size: 65536 pieces
    tiny.buf_len = 65536;
    cases.push_back({"read spanning too many chunks", tiny, EINVAL});
    SubmitEntry op{};
    op.opcode = 200;
    cases.push_back({"unknown opcode", op, EOPNOTSUPP});
    SubmitEntry mount = base(RingOp::kStat);
    mount.mount = 77;
    cases.push_back({"unknown mount", mount, EBADF});
    SubmitEntry malformed = base(RingOp::kLookup);
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

}  // namespace
}  // namespace ros2::agent::test
