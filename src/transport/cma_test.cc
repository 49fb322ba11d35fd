// The cma token handshake and cross-memory copies, within this process and
// against a child process.
#include "transport/cma.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "testing/subprocess.h"

namespace ros2::transport::cma {
namespace {

TEST(CmaTest, TokensAreBoundToTheRequestingPidAndUsedOnce) {
  Authority authority;
  ASSERT_TRUE(authority.Start().ok());
  ASSERT_TRUE(authority.running());
  EXPECT_TRUE(authority.Start().ok());  // idempotent

  auto a = RequestToken(static_cast<int32_t>(getpid()), std::chrono::milliseconds(2000));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = RequestToken(static_cast<int32_t>(getpid()), std::chrono::milliseconds(2000));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_NE(*a, *b);
  EXPECT_EQ(authority.issued(), 2u);

  EXPECT_EQ(authority.Redeem(*a), std::optional<int32_t>(getpid()));
  EXPECT_EQ(authority.Redeem(*a), std::nullopt) << "a token redeemed twice";
  Token forged = *b;
  forged[0] ^= 1;
  EXPECT_EQ(authority.Redeem(forged), std::nullopt);
  EXPECT_EQ(authority.Redeem(*b), std::optional<int32_t>(getpid()));
}

// The pid of a child that has exited and been reaped (-1 when fork failed).
pid_t ExitedChildPid() {
  auto child = ros2::testing::ChildProcess::Fork([] { return 0; });
  if (!child.ok()) return -1;
  const pid_t pid = child->pid();
  return child->Wait(std::chrono::seconds(10)).ok() ? pid : -1;
}

TEST(CmaTest, TokenFromAChildNamesTheChild) {
  Authority authority;
  ASSERT_TRUE(authority.Start().ok());
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t parent = getpid();
  auto child = ros2::testing::ChildProcess::Fork([&] {
    auto t = RequestToken(static_cast<int32_t>(parent), std::chrono::milliseconds(2000));
    return t.ok() && write(fds[1], t->data(), t->size()) == static_cast<ssize_t>(t->size()) ? 0 : 1;
  });
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  const pid_t child_pid = child->pid();
  close(fds[1]);
  Token token{};
  ASSERT_EQ(read(fds[0], token.data(), token.size()), static_cast<ssize_t>(token.size()));
  close(fds[0]);
  auto code = child->Wait(std::chrono::seconds(10));
  ASSERT_TRUE(code.ok() && *code == 0);
  EXPECT_EQ(authority.Redeem(token), std::optional<int32_t>(child_pid));
}

TEST(CmaTest, RequestTokenChecksWhoListens) {
  // Nobody serves this pid's name (a child that has exited).
  const pid_t child = ExitedChildPid();
  ASSERT_GT(child, 0);
  auto none = RequestToken(static_cast<int32_t>(child), std::chrono::milliseconds(500));
  EXPECT_EQ(none.status().code(), Status::Code::kNotFound) << none.status().ToString();

  // A name squatted by another process (here: us, under the dead child's pid)
  // is refused by the client's SO_PEERCRED check.
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = ListenerName(static_cast<int32_t>(child));
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), offsetof(sockaddr_un, sun_path) + 1 + name.size()), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  auto squatted = RequestToken(static_cast<int32_t>(child), std::chrono::milliseconds(500));
  EXPECT_EQ(squatted.status().code(), Status::Code::kPermissionDenied) << squatted.status().ToString();
  EXPECT_NE(squatted.status().message().find(std::to_string(getpid())), std::string::npos);
  close(fd);
}

TEST(CmaTest, CopyMovesBytesAndNamesFailures) {
  std::vector<std::byte> remote(3 << 20), local(remote.size());
  for (size_t i = 0; i < remote.size(); ++i) remote[i] = static_cast<std::byte>(i * 7 + 1);
  const auto raddr = reinterpret_cast<uint64_t>(remote.data());
  ASSERT_TRUE(Copy(getpid(), local.data(), raddr, remote.size(), /*to_remote=*/false).ok());
  EXPECT_EQ(local, remote);
  std::fill(local.begin(), local.end(), std::byte{0x3c});
  ASSERT_TRUE(Copy(getpid(), local.data(), raddr + 4096, 8192, /*to_remote=*/true).ok());
  EXPECT_EQ(remote[4096], std::byte{0x3c});
  EXPECT_EQ(remote[4096 + 8191], std::byte{0x3c});
  EXPECT_NE(remote[4095], std::byte{0x3c});
  EXPECT_NE(remote[4096 + 8192], std::byte{0x3c});

  Status unmapped = Copy(getpid(), local.data(), 0x1000, 64, /*to_remote=*/false);
  EXPECT_EQ(unmapped.code(), Status::Code::kInvalidArgument) << unmapped.ToString();
  EXPECT_NE(unmapped.message().find("0x1000"), std::string::npos) << unmapped.ToString();

  const pid_t child = ExitedChildPid();
  ASSERT_GT(child, 0);
  Status gone = Copy(child, local.data(), raddr, 64, /*to_remote=*/true);
  EXPECT_EQ(gone.code(), Status::Code::kDisconnected) << gone.ToString();
}

}  // namespace
}  // namespace ros2::transport::cma
