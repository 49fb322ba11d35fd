// Same-host bulk by cross-memory attach (process_vm_readv/writev), and the
// handshake that lets a server use it. A server reads or writes a client's
// memory only after the client proved which process it is through a Unix
// socket the kernel vouches for (SO_PEERCRED): a pid claimed in an address blob
// is never trusted on its own. See docs/transport.md, "Same-host bulk (cma)".
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/status.h"

namespace ros2::transport::cma {

inline constexpr size_t kTokenSize = 16;
using Token = std::array<uint8_t, kTokenSize>;

// The abstract Unix socket name (without the leading NUL) a serving process
// listens on: "ros2-cma.<pid>".
std::string ListenerName(int32_t pid);

// The server side: one per process (owned by the transport Context), started by
// the first worker that registers a request handler. A thread accepts
// connections on the abstract socket, asks the kernel for the peer's pid
// (SO_PEERCRED), and answers with a fresh random token bound to that pid; the
// client presents the token in its hello, and Redeem tells the worker which
// process it belongs to. Tokens are single-use and expire after a minute. At
// most `per_process` are outstanding for one process, `per_process` x
// kUserShare for one user (the kernel's uid of the peer, so many processes
// of one user cannot take every token) and kMaxIssued in all; a request
// beyond any is refused (closed without a token), never served by dropping
// another process's token: a process or a user that floods the listener only
// runs out of its own.
class Authority {
 public:
  static constexpr size_t kMaxIssued = 4096;
  static constexpr uint32_t kUserShare = 4;
  static constexpr std::chrono::seconds kTokenLifetime{60};

  explicit Authority(uint32_t per_process = 64) : per_process_(per_process), per_user_(per_process * kUserShare) {}
  ~Authority();
  Authority(const Authority&) = delete;
  Authority& operator=(const Authority&) = delete;

  // Binds and starts serving. One attempt per process: later calls return its
  // result. Fails (logged once; the process then serves without cma) when the
  // name is taken or sockets are unavailable.
  Status Start();
  bool running() const { return running_.load(std::memory_order_acquire); }

  // The pid `token` was issued to, forgetting the token; nullopt for a token
  // never issued, already redeemed or expired.
  std::optional<int32_t> Redeem(const Token& token);

  uint64_t issued() const { return issued_count_.load(std::memory_order_relaxed); }
  uint64_t refused() const { return refused_count_.load(std::memory_order_relaxed); }

 private:
  void Serve();
  Status Listen();

  struct Grant {
    int32_t pid = 0;
    uint32_t uid = 0;
    std::chrono::steady_clock::time_point expires;
  };
  std::mutex mu_;
  std::map<Token, Grant> grants_;
  bool started_ = false;
  Status start_status_;
  std::atomic<bool> running_{false};
  std::atomic<uint64_t> issued_count_{0};
  std::atomic<uint64_t> refused_count_{0};
  const uint32_t per_process_;
  const uint32_t per_user_;
  int listen_fd_ = -1;
  std::thread thread_;
};

// The client side: asks process `server_pid`'s listener for a token. Errors:
// NotFound when nothing listens under that name, PermissionDenied when the
// listener is another process than `server_pid`, TimedOut, or the socket error.
Result<Token> RequestToken(int32_t server_pid, std::chrono::milliseconds timeout);

// Copies `len` bytes between `local` and [remote_addr, remote_addr + len) of
// process `pid`: into the remote range when `to_remote`, out of it otherwise.
// Errors name the pid and the range: Disconnected when the process is gone,
// InvalidArgument when the range is not mapped (or not writable) there,
// PermissionDenied when the kernel refuses access (ptrace rules).
Status Copy(int32_t pid, std::byte* local, uint64_t remote_addr, uint64_t len, bool to_remote);

}  // namespace ros2::transport::cma
