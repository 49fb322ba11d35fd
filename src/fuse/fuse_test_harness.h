// Test harness of the ros2-fuse integration tests: shell commands with a
// bound on their run time, and FuseMount, one ros2-fuse process serving a
// mount point of a TestCluster's container p1/c1 (started in the foreground,
// always unmounted by its destructor). Header-only; for tests.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mountinfo.h"
#include "testing/test_cluster.h"

namespace ros2::fuse {

using HarnessClock = std::chrono::steady_clock;

// Starts /bin/sh -c `script` with stdout and stderr appended to `log`.
inline pid_t SpawnShell(const std::string& script, const std::string& log) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) ::_exit(126);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// The exit code of `pid` (128 + signal), or -1 when it did not end within `timeout`.
inline int WaitExit(pid_t pid, std::chrono::seconds timeout) {
  auto deadline = HarnessClock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return -2;
    if (HarnessClock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Runs a shell script to completion (bounded); returns its exit code and output.
inline ros2::testing::CommandResult Sh(const std::string& script, const std::string& scratch,
                                       std::chrono::seconds timeout = std::chrono::seconds(180)) {
  static std::atomic<int> counter{0};
  std::string log = scratch + "/sh-" + std::to_string(++counter) + ".log";
  pid_t pid = SpawnShell(script, log);
  ros2::testing::CommandResult r;
  r.exit_code = WaitExit(pid, timeout);
  if (r.exit_code == -1) {
    ::kill(pid, SIGKILL);
    WaitExit(pid, std::chrono::seconds(10));
  }
  r.out = ros2::testing::ReadWholeFile(log);
  return r;
}

inline bool IsMounted(const std::string& path) {
  return MountedFsType(path).has_value();
}

// One ros2-fuse process serving a mount point.
class FuseMount {
 public:
  // Starts `ros2-fuse -f ... POOL CONT DIR` and waits until DIR is a mount;
  // `env` (optional, "NAME=value") is exported to it.
  static std::unique_ptr<FuseMount> Start(const ros2::testing::TestCluster& cluster, const std::string& dir,
                                          const std::vector<std::string>& options, std::string* error,
                                          const std::string& env = "") {
    std::filesystem::create_directories(dir);
    auto m = std::unique_ptr<FuseMount>(new FuseMount());
    m->path_ = dir;
    m->log_ = dir + ".log";
    std::string cmd = std::string("exec ") + ROS2_FUSE_PATH + " -f --data-dir " + cluster.dir() + " --log-level info";
    for (const auto& o : options) cmd += " " + o;
    cmd += " p1 c1 " + dir;
    if (!env.empty()) cmd = "export " + env + "; " + cmd;
    m->pid_ = SpawnShell(cmd, m->log_);
    auto deadline = HarnessClock::now() + std::chrono::seconds(60);
    while (!IsMounted(dir)) {
      int status = 0;
      if (::waitpid(m->pid_, &status, WNOHANG) == m->pid_) {
        m->pid_ = -1;
        *error = "ros2-fuse exited before mounting: " + ros2::testing::ReadWholeFile(m->log_);
        return nullptr;
      }
      if (HarnessClock::now() > deadline) {
        *error = "ros2-fuse did not mount within 60 s: " + ros2::testing::ReadWholeFile(m->log_);
        return nullptr;  // the destructor kills it
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return m;
  }

  ~FuseMount() { Stop(); }

  // Unmounts the way a user would and waits for the process to end; escalates
  // (SIGTERM, umount -l, SIGKILL) so that nothing stays mounted. Returns the
  // daemon's exit code (-1 when it had to be killed).
  int Stop() {
    if (pid_ < 0) return exit_code_;
    std::string scratch = std::filesystem::path(path_).parent_path().string();
    if (IsMounted(path_)) Sh("fusermount3 -u " + path_, scratch, std::chrono::seconds(30));
    exit_code_ = WaitExit(pid_, std::chrono::seconds(30));
    if (exit_code_ == -1) {
      ::kill(pid_, SIGTERM);
      if (WaitExit(pid_, std::chrono::seconds(10)) == -1) {
        ::kill(pid_, SIGKILL);
        WaitExit(pid_, std::chrono::seconds(10));
      }
    }
    if (IsMounted(path_)) Sh("umount -l " + path_, scratch, std::chrono::seconds(30));
    pid_ = -1;
    return exit_code_;
  }

  // Sends `sig` to the daemon and returns its exit code (-1: still running after 30 s).
  int SignalAndWait(int sig) {
    if (pid_ < 0) return exit_code_;
    ::kill(pid_, sig);
    exit_code_ = WaitExit(pid_, std::chrono::seconds(30));
    if (exit_code_ != -1) pid_ = -1;
    return exit_code_;
  }

  const std::string& path() const { return path_; }
  std::string log() const { return ros2::testing::ReadWholeFile(log_); }

 private:
  FuseMount() = default;
  pid_t pid_ = -1;
  int exit_code_ = -1;
  std::string path_;
  std::string log_;
};

// A single-node nvme cluster (two targets, 2 GiB shards; TestCluster::Start
// with `extra_up_args`, e.g. "--agent") with pool p1 (3 GiB) and container c1;
// null with the failure in *error.
inline std::unique_ptr<ros2::testing::TestCluster> StartNvmeClusterWithContainer(
    std::string* error, const std::vector<std::string>& extra_up_args = {}) {
  auto cluster = ros2::testing::TestCluster::Start("auto", 2, error, "nvme", "2GiB", extra_up_args);
  if (!cluster) return nullptr;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"pool", "create", "p1", "--size", "3GiB"}, {"cont", "create", "p1", "c1"}}) {
    auto r = cluster->Ctl(args);
    if (r.exit_code != 0) {
      *error = args[0] + " " + args[1] + ": " + r.err + r.out;
      return nullptr;
    }
  }
  return cluster;
}

}  // namespace ros2::fuse
