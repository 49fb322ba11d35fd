// Cross-memory attach for same-host bulk, and the token handshake that gates it.
#include "transport/cma.h"

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include <fmt/format.h>

#include "common/log.h"

namespace ros2::transport::cma {
namespace {

// sockaddr_un for an abstract name; returns the address length to pass.
socklen_t AbstractAddress(const std::string& name, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(addr->sun_path) - 1);
  std::memcpy(addr->sun_path + 1, name.data(), n);  // sun_path[0] = 0: abstract namespace
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

Status FillRandom(uint8_t* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = getrandom(out + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "transport cma: getrandom");
    }
    got += static_cast<size_t>(r);
  }
  return Status::Ok();
}

}  // namespace

std::string ListenerName(int32_t pid) {
  return fmt::format("ros2-cma.{}", pid);
}

Authority::~Authority() {
  if (listen_fd_ >= 0) {
    running_.store(false, std::memory_order_release);
    ::shutdown(listen_fd_, SHUT_RDWR);  // wakes the blocked accept
    if (thread_.joinable()) thread_.join();
    ::close(listen_fd_);
  }
}

Status Authority::Start() {
  std::lock_guard lock(mu_);
  if (started_) return start_status_;  // one attempt per process
  started_ = true;
  start_status_ = Listen();
  if (!start_status_.ok()) {
    ROS2_LOG_WARN("transport: no cma for same-host clients ({}); they use active messages", start_status_.ToString());
  }
  return start_status_;
}

// REQUIRES: mu_ held.
Status Authority::Listen() {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "transport cma: socket");
  sockaddr_un addr;
  const std::string name = ListenerName(static_cast<int32_t>(getpid()));
  const socklen_t len = AbstractAddress(name, &addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 128) != 0) {
    Status st = Status::FromErrno(errno, fmt::format("transport cma: listening on abstract socket '{}'", name));
    ::close(fd);
    return st;
  }
  listen_fd_ = fd;
  running_.store(true, std::memory_order_release);
  thread_ = std::thread([this] { Serve(); });
  return Status::Ok();
}

void Authority::Serve() {
  while (running_.load(std::memory_order_acquire)) {
    const int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (running_.load(std::memory_order_acquire)) {
        ROS2_LOG_WARN("transport cma: accept failed ({}); same-host clients fall back to active messages",
                      strerror(errno));
      }
      return;
    }
    ucred cred{};
    socklen_t cred_len = sizeof(cred);
    Token token{};
    if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0 && cred.pid > 0 &&
        FillRandom(token.data(), token.size()).ok()) {
      const auto now = std::chrono::steady_clock::now();
      bool granted = false;
      {
        std::lock_guard lock(mu_);
        std::erase_if(grants_, [&](const auto& g) { return g.second.expires <= now; });
        size_t by_process = 0, by_user = 0;
        for (const auto& [t, g] : grants_) {
          by_process += g.pid == cred.pid ? 1 : 0;
          by_user += g.uid == cred.uid ? 1 : 0;
        }
        if (by_process < per_process_ && by_user < per_user_ && grants_.size() < kMaxIssued) {
          grants_[token] = Grant{cred.pid, cred.uid, now + kTokenLifetime};
          granted = true;
        }
      }
      if (granted) {
        issued_count_.fetch_add(1, std::memory_order_relaxed);
        (void)::send(conn, token.data(), token.size(), MSG_NOSIGNAL);
      } else if (refused_count_.fetch_add(1, std::memory_order_relaxed) == 0) {
        ROS2_LOG_WARN(
            "transport cma: refused a token to pid {} (uid {}): too many unredeemed (at most {} per process, {} per "
            "user, {} in all)",
            cred.pid, cred.uid, per_process_, per_user_, kMaxIssued);
      }
    }
    ::close(conn);
  }
}

std::optional<int32_t> Authority::Redeem(const Token& token) {
  std::lock_guard lock(mu_);
  auto it = grants_.find(token);
  if (it == grants_.end()) return std::nullopt;
  const Grant g = it->second;
  grants_.erase(it);
  if (g.expires <= std::chrono::steady_clock::now()) return std::nullopt;
  return g.pid;
}

Result<Token> RequestToken(int32_t server_pid, std::chrono::milliseconds timeout) {
  const std::string name = ListenerName(server_pid);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "transport cma: socket");
  auto fail = [fd](Status st) {
    ::close(fd);
    return st;
  };
  sockaddr_un addr;
  const socklen_t len = AbstractAddress(name, &addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    const int err = errno;
    if (err == ECONNREFUSED || err == ENOENT)
      return fail(Status::NotFound(fmt::format("transport cma: pid {} does not serve '{}'", server_pid, name)));
    return fail(Status::FromErrno(err, fmt::format("transport cma: connecting to '{}'", name)));
  }
  ucred cred{};
  socklen_t cred_len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0)
    return fail(Status::FromErrno(errno, "transport cma: SO_PEERCRED"));
  if (cred.pid != server_pid) {
    return fail(Status::PermissionDenied(
        fmt::format("transport cma: '{}' is served by pid {}, not by pid {}", name, cred.pid, server_pid)));
  }
  Token token{};
  size_t got = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (got < token.size()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return fail(Status::TimedOut(fmt::format("transport cma: no token from pid {}", server_pid)));
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return fail(Status::FromErrno(errno, "transport cma: poll"));
    if (ready == 0) continue;
    const ssize_t r = ::recv(fd, token.data() + got, token.size() - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 && got == 0) {
      return fail(Status::Busy(
          fmt::format("transport cma: pid {} refused a token (this process holds too many unredeemed ones, or "
                      "the listener is full)",
                      server_pid)));
    }
    if (r <= 0) {
      return fail(Status::Disconnected(
          fmt::format("transport cma: pid {} closed the token exchange after {} bytes", server_pid, got)));
    }
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  return token;
}

Status Copy(int32_t pid, std::byte* local, uint64_t remote_addr, uint64_t len, bool to_remote) {
  uint64_t done = 0;
  while (done < len) {
    iovec l{local + done, static_cast<size_t>(len - done)};
    iovec r{reinterpret_cast<void*>(remote_addr + done), static_cast<size_t>(len - done)};
    const ssize_t n = to_remote ? ::process_vm_writev(pid, &l, 1, &r, 1, 0) : ::process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n > 0) {
      done += static_cast<uint64_t>(n);
      continue;
    }
    const int err = n == 0 ? EFAULT : errno;
    if (err == EINTR) continue;
    const std::string what = fmt::format("transport cma: {} [{:#x}, +{}) of pid {}", to_remote ? "writing" : "reading",
                                         remote_addr + done, len - done, pid);
    switch (err) {
      case ESRCH: return Status::Disconnected(what + ": the process is gone");
      case EFAULT: return Status::InvalidArgument(what + ": the range is not mapped there");
      case EPERM: return Status::PermissionDenied(what + ": refused by the kernel (ptrace access rules)");
      default: return Status::FromErrno(err, what);
    }
  }
  return Status::Ok();
}

}  // namespace ros2::transport::cma
