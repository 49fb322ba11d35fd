#include "host_namespaces.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace ros2::ctl {

namespace {

// Writes `text` to `fd` from a forked child (no allocation, no locks).
void WriteAll(int fd, const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    ssize_t n = ::write(fd, text, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

// Reports "error: <what>: <errno text>" on `fd` and exits (forked children only).
[[noreturn]] void FailChild(int fd, const char* what) {
  char line[256];
  std::snprintf(line, sizeof(line), "error: %s: %s\n", what, std::strerror(errno));
  WriteAll(fd, line);
  ::_exit(1);
}

// Reads `fd` to its end.
std::string ReadToEnd(int fd) {
  std::string out;
  std::array<char, 512> buf{};
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf.data(), static_cast<size_t>(n));
  }
  return out;
}

// The "pid N" and "error: ..." lines children wrote on a report pipe.
struct ChildReport {
  pid_t pid = 0;
  bool ok = false;
  std::string error;
};

ChildReport ParseReport(const std::string& text) {
  ChildReport r;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("pid ")) r.pid = static_cast<pid_t>(std::atoi(line.c_str() + 4));
    if (line == "ok") r.ok = true;
    if (line.starts_with("error: ") && r.error.empty()) r.error = line.substr(7);
  }
  return r;
}

void NoOpHandler(int) {}

// The body of a host's init: pid 1 of the host's PID namespace. Makes the
// host's own /proc, /sys and /dev/shm, reports "ok" on `report`, then reaps
// children until SIGTERM/SIGINT, when it stops every process of the host.
[[noreturn]] void RunInit(int report, const std::string& name) {
  ::setsid();
  ::prctl(PR_SET_NAME, name.substr(0, 15).c_str(), 0, 0, 0);
  ::prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) FailChild(report, "make / private");
  if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    FailChild(report, "mount /proc");
  }
  // /sys of this network namespace: UCX lists network devices there.
  ::umount2("/sys", MNT_DETACH);
  if (::mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    FailChild(report, "mount /sys");
  }
  if (::mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) {
    FailChild(report, "mount /dev/shm");
  }
  // pid 1 receives only signals it has a handler for.
  struct sigaction sa {};
  sa.sa_handler = NoOpHandler;
  ::sigemptyset(&sa.sa_mask);
  sigset_t set;
  ::sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) {
    ::sigaction(sig, &sa, nullptr);
    ::sigaddset(&set, sig);
  }
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  WriteAll(report, "ok\n");
  int null_fd = ::open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; ++fd) ::dup2(null_fd, fd);
  ::syscall(SYS_close_range, 3u, ~0u, 0u);

  bool stopping = false;
  auto stop_by = std::chrono::steady_clock::time_point::max();
  for (;;) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (stopping && (::waitpid(-1, nullptr, WNOHANG) < 0 || std::chrono::steady_clock::now() >= stop_by)) {
      ::_exit(0);  // the kernel kills what is left of the host
    }
    timespec tick{0, 100'000'000};
    siginfo_t info;
    int sig = ::sigtimedwait(&set, &info, &tick);
    if (!stopping && (sig == SIGTERM || sig == SIGINT || sig == SIGHUP)) {
      stopping = true;
      ::kill(-1, SIGTERM);
      stop_by = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    }
  }
}

std::string ProcFile(pid_t pid, const char* name) {
  std::ifstream in(fmt::format("/proc/{}/{}", pid, name));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Gone, or a zombie waiting for its reaper.
bool ProcessGone(pid_t pid) {
  std::string stat = ProcFile(pid, "stat");
  auto paren = stat.rfind(')');
  return stat.empty() || (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

bool WaitGone(pid_t pid, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!ProcessGone(pid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// The namespace files of a host init, opened before a fork.
struct HostNamespaceFds {
  std::array<int, 4> fds{-1, -1, -1, -1};
  ~HostNamespaceFds() {
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
  }
};

// IPC, network and PID first; the mount namespace last (it changes what
// /proc names).
constexpr std::array<const char*, 4> kNamespaceNames = {"ipc", "net", "pid", "mnt"};

Status OpenHostNamespaces(pid_t init_pid, HostNamespaceFds* out) {
  for (size_t i = 0; i < kNamespaceNames.size(); ++i) {
    std::string path = fmt::format("/proc/{}/ns/{}", init_pid, kNamespaceNames[i]);
    out->fds[i] = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (out->fds[i] < 0) return Status::FromErrno(errno, "open " + path + " (is the host running?)");
  }
  return Status::Ok();
}

// In a forked child: enters the namespaces (reporting failures on `report`).
void EnterHostNamespaces(const HostNamespaceFds& ns, int report) {
  for (size_t i = 0; i < ns.fds.size(); ++i) {
    if (::setns(ns.fds[i], 0) != 0) FailChild(report, kNamespaceNames[i]);
  }
}

std::vector<char*> ArgvPointers(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  return args;
}

// Forks a child that enters the host's namespaces and forks again (so the
// grandchild lands in the host's PID namespace); `grandchild` runs there and
// must not return. With `wait`, the middle child waits for the grandchild
// and exits with its code; otherwise it reports the grandchild's pid and
// exits at once. Returns the middle child's exit code and the pid report.
template <typename Body>
Result<std::pair<int, ChildReport>> ForkIntoHost(pid_t init_pid, bool wait, Body grandchild) {
  HostNamespaceFds ns;
  ROS2_RETURN_IF_ERROR(OpenHostNamespaces(init_pid, &ns));
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  pid_t mid = ::fork();
  if (mid < 0) {
    int err = errno;
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    return Status::FromErrno(err, "fork");
  }
  if (mid == 0) {
    ::close(pipefd[0]);
    EnterHostNamespaces(ns, pipefd[1]);
    pid_t child = ::fork();
    if (child < 0) FailChild(pipefd[1], "fork inside the host");
    if (child == 0) grandchild(pipefd[1]);
    char line[64];
    std::snprintf(line, sizeof(line), "pid %d\n", static_cast<int>(child));
    WriteAll(pipefd[1], line);
    ::close(pipefd[1]);
    if (!wait) ::_exit(0);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  ::close(pipefd[1]);
  std::string text = ReadToEnd(pipefd[0]);
  ::close(pipefd[0]);
  int status = 0;
  while (::waitpid(mid, &status, 0) < 0 && errno == EINTR) {
  }
  ChildReport report = ParseReport(text);
  if (!report.error.empty()) return Status::IOError("entering the host's namespaces: " + report.error);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return std::make_pair(code, report);
}

}  // namespace

Result<pid_t> StartHostInit(const std::string& netns, const std::string& name) {
  const std::string path = "/run/netns/" + netns;
  int netfd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (netfd < 0) return Status::FromErrno(errno, "open " + path);
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(netfd);
    return Status::FromErrno(err, "pipe");
  }
  pid_t mid = ::fork();
  if (mid == 0) {
    ::close(pipefd[0]);
    if (::setns(netfd, CLONE_NEWNET) != 0) FailChild(pipefd[1], "enter the network namespace");
    if (::unshare(CLONE_NEWIPC | CLONE_NEWNS | CLONE_NEWPID) != 0) FailChild(pipefd[1], "unshare ipc, mount, pid");
    pid_t init = ::fork();
    if (init < 0) FailChild(pipefd[1], "fork the init");
    if (init == 0) RunInit(pipefd[1], name);
    char line[64];
    std::snprintf(line, sizeof(line), "pid %d\n", static_cast<int>(init));
    WriteAll(pipefd[1], line);
    ::_exit(0);
  }
  int fork_errno = errno;
  ::close(netfd);
  ::close(pipefd[1]);
  if (mid < 0) {
    ::close(pipefd[0]);
    return Status::FromErrno(fork_errno, "fork");
  }
  std::string text = ReadToEnd(pipefd[0]);  // until the init closed its end
  ::close(pipefd[0]);
  while (::waitpid(mid, nullptr, 0) < 0 && errno == EINTR) {
  }
  ChildReport report = ParseReport(text);
  if (!report.error.empty() || !report.ok || report.pid <= 0) {
    if (report.pid > 0) ::kill(report.pid, SIGKILL);
    return Status::IOError(fmt::format("host {}: cannot start its init: {}", name,
                                       report.error.empty() ? "it exited without a report" : report.error));
  }
  return report.pid;
}

bool IsHostInit(pid_t pid, const std::string& netns) {
  if (pid <= 0 || ProcessGone(pid)) return false;
  struct stat theirs {
  }, ours{};
  if (::stat(fmt::format("/proc/{}/ns/net", pid).c_str(), &theirs) != 0) return false;
  if (::stat(("/run/netns/" + netns).c_str(), &ours) != 0) return false;
  if (theirs.st_ino != ours.st_ino || theirs.st_dev != ours.st_dev) return false;
  // pid 1 of its own PID namespace: the last NSpid field.
  std::istringstream status(ProcFile(pid, "status"));
  for (std::string line; std::getline(status, line);) {
    if (!line.starts_with("NSpid:")) continue;
    auto last = line.find_last_of(" \t");
    return last != std::string::npos && line.substr(last + 1) == "1";
  }
  return false;
}

void StopHostInits(const std::vector<pid_t>& inits, int grace_ms) {
  for (pid_t pid : inits) ::kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  for (pid_t pid : inits) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (WaitGone(pid, std::max(left, std::chrono::milliseconds(0)))) continue;
    ::kill(pid, SIGKILL);
    WaitGone(pid, std::chrono::seconds(10));
  }
}

void KillProcessesInNetns(const std::string& netns) {
  struct stat ours {};
  if (::stat(("/run/netns/" + netns).c_str(), &ours) != 0) return;
  std::vector<pid_t> victims;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    struct stat theirs {};
    if (::stat((entry.path() / "ns/net").c_str(), &theirs) != 0) continue;
    if (theirs.st_ino == ours.st_ino && theirs.st_dev == ours.st_dev) victims.push_back(std::stoi(name));
  }
  for (pid_t pid : victims) ::kill(pid, SIGKILL);
  for (pid_t pid : victims) WaitGone(pid, std::chrono::seconds(10));
}

Result<pid_t> SpawnInHost(pid_t init_pid, const std::vector<std::string>& argv, const std::string& log_path) {
  if (argv.empty()) return Status::InvalidArgument("SpawnInHost: empty command");
  int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (log_fd < 0) return Status::FromErrno(errno, "open " + log_path);
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  auto args = ArgvPointers(argv);
  auto run = ForkIntoHost(init_pid, /*wait=*/false, [&](int report) {
    ::close(report);
    ::setsid();
    ::dup2(null_fd, STDIN_FILENO);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execv(args[0], args.data());
    char line[256];
    std::snprintf(line, sizeof(line), "ros2ctl: exec %s failed: %s\n", args[0], std::strerror(errno));
    WriteAll(STDERR_FILENO, line);
    ::_exit(127);
  });
  ::close(log_fd);
  if (null_fd >= 0) ::close(null_fd);
  if (!run.ok()) return run.status();
  if (run->second.pid <= 0) return Status::IOError("starting " + argv[0] + " inside the host: no pid reported");
  return run->second.pid;
}

Result<int> RunInHost(pid_t init_pid, const std::vector<std::string>& argv, int stdout_fd) {
  if (argv.empty()) return Status::InvalidArgument("cluster exec: no command given");
  auto args = ArgvPointers(argv);
  auto run = ForkIntoHost(init_pid, /*wait=*/true, [&](int report) {
    ::close(report);
    if (stdout_fd != STDOUT_FILENO) ::dup2(stdout_fd, STDOUT_FILENO);
    ::execvp(args[0], args.data());
    char line[256];
    std::snprintf(line, sizeof(line), "ros2ctl: cannot run %s: %s\n", args[0], std::strerror(errno));
    WriteAll(STDERR_FILENO, line);
    ::_exit(127);
  });
  if (!run.ok()) return run.status();
  return run->first;
}

}  // namespace ros2::ctl
