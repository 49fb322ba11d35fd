#include "host_network.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace ros2::ctl {

namespace {

// Runs `argv` (argv[0] looked up on PATH); returns its exit code and stderr.
Result<std::pair<int, std::string>> RunCapturingStderr(const std::vector<std::string>& argv) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    return Status::FromErrno(err, "fork " + argv[0]);
  }
  if (pid == 0) {
    int null_fd = ::open("/dev/null", O_RDWR);
    ::dup2(null_fd, STDIN_FILENO);
    ::dup2(null_fd, STDOUT_FILENO);
    ::dup2(pipefd[1], STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  std::string err;
  std::array<char, 512> buf{};
  for (;;) {
    ssize_t n = ::read(pipefd[0], buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    err.append(buf.data(), static_cast<size_t>(n));
  }
  ::close(pipefd[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), err);
}

bool LinkExists(const std::string& dev) {
  std::error_code ec;
  return std::filesystem::exists("/sys/class/net/" + dev, ec);
}

bool NetnsExists(const std::string& netns) {
  std::error_code ec;
  return std::filesystem::exists("/run/netns/" + netns, ec);
}

}  // namespace

std::string BridgeName(const std::string& id) {
  return "r2" + id + "br";
}

HostNames HostNamesFor(const std::string& id, int index) {
  return {.netns = fmt::format("ros2-{}-h{}", id, index),
          .veth = fmt::format("r2{}h{}", id, index),
          .address = fmt::format("10.213.0.{}", index),
          .hostname = fmt::format("host{}", index)};
}

std::string NewClusterId() {
  std::random_device rd;
  return fmt::format("{:05x}", rd() & 0xfffff);
}

Status CheckIpTool() {
  auto run = RunCapturingStderr({"ip", "-V"});
  if (!run.ok() || run->first == 127) {
    return Status::NotFound("cluster up --hosts: the `ip` command (iproute2) is not on PATH; install iproute2");
  }
  return Status::Ok();
}

Status RunIp(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  ROS2_ASSIGN_OR_RETURN(auto run, RunCapturingStderr(argv));
  if (run.first == 0) return Status::Ok();
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  return Status::IOError(fmt::format("`{}` failed (exit {}): {}", cmd, run.first, run.second));
}

Status CreateBridge(const std::string& bridge) {
  ROS2_RETURN_IF_ERROR(RunIp({"link", "add", bridge, "type", "bridge"}));
  return RunIp({"link", "set", bridge, "up"});
}

Status CreateHostNetwork(const std::string& bridge, const HostNames& host) {
  ROS2_RETURN_IF_ERROR(RunIp({"netns", "add", host.netns}));
  ROS2_RETURN_IF_ERROR(
      RunIp({"link", "add", host.veth, "type", "veth", "peer", "name", kHostDevice, "netns", host.netns}));
  ROS2_RETURN_IF_ERROR(RunIp({"link", "set", host.veth, "master", bridge, "up"}));
  ROS2_RETURN_IF_ERROR(RunIp({"-n", host.netns, "addr", "add", host.address + "/24", "dev", kHostDevice}));
  ROS2_RETURN_IF_ERROR(RunIp({"-n", host.netns, "link", "set", kHostDevice, "up"}));
  return RunIp({"-n", host.netns, "link", "set", "lo", "up"});
}

Status SetHostLink(const HostNames& host, bool up) {
  if (!LinkExists(host.veth)) {
    return Status::NotFound(
        fmt::format("the link {} of {} does not exist (is the cluster up?)", host.veth, host.hostname));
  }
  return RunIp({"link", "set", host.veth, up ? "up" : "down"});
}

Status WaitPortForwarding(const HostNames& host, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    std::ifstream state("/sys/class/net/" + host.veth + "/brport/state");
    std::ifstream oper("/sys/class/net/" + host.veth + "/operstate");
    int port_state = -1;
    std::string operstate;
    state >> port_state;
    oper >> operstate;
    if (port_state == 3 && operstate == "up") return Status::Ok();  // BR_STATE_FORWARDING
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::TimedOut(fmt::format("the bridge port {} of {} does not forward (state {}, link {})", host.veth,
                                          host.hostname, port_state, operstate));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Result<bool> HostLinkUp(const HostNames& host) {
  std::ifstream in("/sys/class/net/" + host.veth + "/flags");
  std::string text;
  if (!(in >> text)) return Status::NotFound(fmt::format("the link {} of {} does not exist", host.veth, host.hostname));
  return (std::strtoul(text.c_str(), nullptr, 16) & 0x1) != 0;  // IFF_UP
}

Status DeleteHostNetwork(const HostNames& host) {
  // Deleting one end of a veth pair deletes both.
  if (LinkExists(host.veth)) ROS2_RETURN_IF_ERROR(RunIp({"link", "del", host.veth}));
  if (NetnsExists(host.netns)) ROS2_RETURN_IF_ERROR(RunIp({"netns", "del", host.netns}));
  return Status::Ok();
}

Status DeleteBridge(const std::string& bridge) {
  if (!LinkExists(bridge)) return Status::Ok();
  return RunIp({"link", "del", bridge});
}

}  // namespace ros2::ctl
