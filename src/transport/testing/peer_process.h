// PeerProcess: starts transport_test_peer as a real second process (a
// ChildProcess of the test harness, testing/subprocess.h), reads its worker
// address from a pipe, and kills it (SIGKILL) when asked or destroyed.
// Test-only (links ros2_harness); one thread.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/status.h"
#include "testing/subprocess.h"

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
    ros2::testing::SpawnOptions so;
    so.argv = {binary, transport};
    so.argv.insert(so.argv.end(), extra.begin(), extra.end());
    so.stdout_fd = fds[1];
    auto child = ros2::testing::ChildProcess::Spawn(so);
    if (!child.ok()) {
      close(fds[0]);
      close(fds[1]);
      return child.status().WithContext("test peer");
    }
    process_ = std::move(*child);
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
  pid_t pid() const { return process_.pid(); }

  void Kill() {
    process_.Kill();
    if (out_fd_ >= 0) {
      close(out_fd_);
      out_fd_ = -1;
    }
  }

 private:
  ros2::testing::ChildProcess process_;
  int out_fd_ = -1;
  std::vector<uint8_t> address_;
};

}  // namespace ros2::transport::testing
