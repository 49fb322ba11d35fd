// PeerProcess: starts transport_test_peer as a real second process, reads its
// worker address from a pipe, and kills it (SIGKILL) when asked or destroyed.
// Test-only; one thread.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace ros2::transport::testing {

class PeerProcess {
 public:
  PeerProcess() = default;
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;
  ~PeerProcess() { Kill(); }

  // Starts `binary transport` and waits (up to 20 s) for its address line.
  Status Start(const std::string& binary, const std::string& transport, const std::vector<std::string>& extra = {}) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return Status::FromErrno(errno, "test peer: pipe");
    pid_ = fork();
    if (pid_ < 0) return Status::FromErrno(errno, "test peer: fork");
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      std::vector<char*> args = {const_cast<char*>(binary.c_str()), const_cast<char*>(transport.c_str())};
      for (const std::string& a : extra) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(binary.c_str(), args.data());
      _exit(127);
    }
    close(fds[1]);
    // The address is the line starting "ADDRESS "; log lines may come before it.
    std::string line;
    char c;
    pollfd p{fds[0], POLLIN, 0};
    bool found = false;
    while (!found) {
      if (poll(&p, 1, 20000) <= 0 || read(fds[0], &c, 1) != 1) break;
      if (c != '\n') {
        line += c;
      } else if (line.rfind("ADDRESS ", 0) == 0) {
        line = line.substr(8);
        found = true;
      } else {
        line.clear();
      }
    }
    out_fd_ = fds[0];  // kept open: the peer logs to stdout and must not get SIGPIPE
    if (!found) return Status::IOError("test peer: no address line from " + binary);
    address_.clear();
    for (size_t i = 0; i + 1 < line.size(); i += 2)
      address_.push_back(static_cast<uint8_t>(std::stoi(line.substr(i, 2), nullptr, 16)));
    return Status::Ok();
  }

  const std::vector<uint8_t>& address() const { return address_; }
  pid_t pid() const { return pid_; }

  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    if (out_fd_ >= 0) {
      close(out_fd_);
      out_fd_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::vector<uint8_t> address_;
};

}  // namespace ros2::transport::testing
