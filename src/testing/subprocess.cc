#include "testing/subprocess.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

extern char** environ;

namespace ros2::testing {
namespace {

// posix_spawn file actions and attributes, destroyed on every path.
class SpawnSetup {
 public:
  SpawnSetup() {
    posix_spawn_file_actions_init(&fa_);
    posix_spawnattr_init(&attr_);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&fa_);
    posix_spawnattr_destroy(&attr_);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
  posix_spawn_file_actions_t* actions() { return &fa_; }
  posix_spawnattr_t* attr() { return &attr_; }

 private:
  posix_spawn_file_actions_t fa_;
  posix_spawnattr_t attr_;
};

std::vector<std::string> MergedEnvironment(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    bool overridden = false;
    for (const auto& [k, v] : extra) {
      if (entry.size() > k.size() && entry.substr(0, k.size()) == k && entry[k.size()] == '=') overridden = true;
    }
    if (!overridden) out.emplace_back(entry);
  }
  for (const auto& [k, v] : extra) out.push_back(k + "=" + v);
  return out;
}

int ExitCode(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return 255;
}

}  // namespace

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    Kill();
    pid_ = std::exchange(other.pid_, -1);
    group_ = std::exchange(other.group_, false);
  }
  return *this;
}

Result<ChildProcess> ChildProcess::Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return Status::InvalidArgument("spawn: empty argv");
  std::string program = options.argv[0];
  if (program.find('/') == std::string::npos) {
    ROS2_ASSIGN_OR_RETURN(program, FindOnPath(program));
  }
  SpawnSetup setup;
  const std::string out = options.stdout_path.empty() ? "/dev/null" : options.stdout_path;
  const std::string err = options.stderr_path.empty() ? "/dev/null" : options.stderr_path;
  const int mode = O_WRONLY | O_CREAT | (options.append ? O_APPEND : O_TRUNC);
  posix_spawn_file_actions_addopen(setup.actions(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (options.inherit_output) {
    // stdout and stderr stay ours
  } else if (options.stdout_fd >= 0) {
    posix_spawn_file_actions_adddup2(setup.actions(), options.stdout_fd, STDOUT_FILENO);
    if (!options.stderr_path.empty()) {
      posix_spawn_file_actions_addopen(setup.actions(), STDERR_FILENO, err.c_str(), mode, 0644);
    }  // else stderr stays ours
  } else if (!options.stderr_path.empty() && err == out) {
    posix_spawn_file_actions_addopen(setup.actions(), STDOUT_FILENO, out.c_str(), mode, 0644);
    posix_spawn_file_actions_adddup2(setup.actions(), STDOUT_FILENO, STDERR_FILENO);
  } else {
    posix_spawn_file_actions_addopen(setup.actions(), STDOUT_FILENO, out.c_str(), mode, 0644);
    posix_spawn_file_actions_addopen(setup.actions(), STDERR_FILENO, err.c_str(), mode, 0644);
  }
  if (options.own_process_group) {
    posix_spawnattr_setflags(setup.attr(), POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(setup.attr(), 0);
  }

  std::vector<std::string> env;
  if (options.env_only) {
    for (const auto& [k, v] : options.env) env.push_back(k + "=" + v);
  } else {
    env = MergedEnvironment(options.env);
  }
  std::vector<char*> argv_ptrs;
  for (const auto& a : options.argv) argv_ptrs.push_back(const_cast<char*>(a.c_str()));
  argv_ptrs.push_back(nullptr);
  std::vector<char*> env_ptrs;
  for (auto& e : env) env_ptrs.push_back(e.data());
  env_ptrs.push_back(nullptr);

  pid_t pid = -1;
  int rc = posix_spawn(&pid, program.c_str(), setup.actions(), setup.attr(), argv_ptrs.data(), env_ptrs.data());
  if (rc != 0) return Status::FromErrno(rc, "spawn " + program);
  return ChildProcess(pid, options.own_process_group);
}

Result<ChildProcess> ChildProcess::Fork(const std::function<int()>& fn) {
  const pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno(errno, "fork");
  if (pid == 0) ::_exit(fn() & 0xff);
  return ChildProcess(pid, false);
}

Result<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return Status::InvalidArgument("wait: no running child");
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int wstatus = 0;
    pid_t r = waitpid(pid_, &wstatus, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return ExitCode(wstatus);
    }
    if (r < 0 && errno != EINTR) {
      int err = errno;
      pid_ = -1;
      return Status::FromErrno(err, "waitpid");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::TimedOut("child " + std::to_string(pid_) + " still running after " +
                              std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void ChildProcess::Signal(int sig) const {
  if (pid_ > 0) ::kill(group_ ? -pid_ : pid_, sig);
}

int ChildProcess::Stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return -1;
  Signal(SIGTERM);
  auto code = Wait(grace);
  if (code.ok()) return *code;
  Signal(SIGKILL);
  code = Wait(std::chrono::seconds(30));
  return code.ok() ? *code : -1;
}

void ChildProcess::Kill() {
  if (pid_ <= 0) return;
  Signal(SIGKILL);
  int wstatus = 0;
  while (waitpid(pid_, &wstatus, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

CommandResult RunCommand(const std::vector<std::string>& argv, const std::string& scratch_dir,
                         std::chrono::seconds timeout, const std::vector<std::pair<std::string, std::string>>& env) {
  static std::atomic<int> counter{0};
  const std::string base = fmt::format("{}/cmd-{}-{}", scratch_dir, ::getpid(), ++counter);
  SpawnOptions so;
  so.argv = argv;
  so.env = env;
  so.stdout_path = base + ".out";
  so.stderr_path = base + ".err";
  // Killed at its time limit with whatever it started: a bench's peer or
  // busy-polling floor process left behind would spin on through the tests
  // that follow.
  so.own_process_group = true;
  CommandResult r;
  auto child = ChildProcess::Spawn(so);
  if (!child.ok()) {
    r.err = child.status().ToString();
    return r;
  }
  auto code = child->Wait(timeout);
  if (code.ok()) r.exit_code = *code;  // a timeout: killed by the destructor, -1
  r.out = ReadWholeFile(so.stdout_path);
  r.err = ReadWholeFile(so.stderr_path);
  if (!code.ok()) r.err += "\n" + code.status().ToString();
  std::error_code ec;
  std::filesystem::remove(so.stdout_path, ec);
  std::filesystem::remove(so.stderr_path, ec);
  return r;
}

CommandResult RunShell(const std::string& script, const std::string& scratch_dir, std::chrono::seconds timeout) {
  CommandResult r = RunCommand({"/bin/sh", "-c", script}, scratch_dir, timeout);
  r.out += r.err;  // one log, as a shell user sees it
  return r;
}

int RunInChild(const std::function<int()>& fn) {
  auto child = ChildProcess::Fork(fn);
  if (!child.ok()) return -1;
  auto code = child->Wait(std::chrono::hours(24));
  return code.ok() ? *code : -1;
}

Result<std::string> ReadFileOrError(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ReadWholeFile(const std::string& path) {
  auto text = ReadFileOrError(path);
  return text.ok() ? std::move(*text) : std::string();
}

Result<std::string> FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (end > start && access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return Status::NotFound(name + " not found on PATH");
}

bool ProcessExited(pid_t pid) {
  std::string stat = ReadWholeFile("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  return stat.empty() || (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

Result<pid_t> RunningPidFromFile(const std::string& path) {
  ROS2_ASSIGN_OR_RETURN(std::string text, ReadFileOrError(path));
  const long pid = std::strtol(text.c_str(), nullptr, 10);
  if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) != 0) {
    return Status::NotFound(fmt::format("no running process for pid file {} ('{}')", path, text));
  }
  return static_cast<pid_t>(pid);
}

Result<double> ProcessCpuSeconds(pid_t pid) {
  ROS2_ASSIGN_OR_RETURN(std::string stat, ReadFileOrError("/proc/" + std::to_string(pid) + "/stat"));
  // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return Status::Protocol("malformed /proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && (fields >> field); ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  long ticks = sysconf(_SC_CLK_TCK);
  return static_cast<double>(utime + stime) / static_cast<double>(ticks > 0 ? ticks : 100);
}

Status PinProcess(pid_t pid, const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  std::error_code ec;
  int pinned = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    const pid_t tid = static_cast<pid_t>(std::strtol(task.path().filename().c_str(), nullptr, 10));
    if (tid > 0 && ::sched_setaffinity(tid, sizeof set, &set) == 0) ++pinned;
  }
  if (ec || pinned == 0)
    return Status::IOError(fmt::format("cannot pin process {} to CPUs {}", pid, fmt::join(cpus, ",")));
  return Status::Ok();
}

}  // namespace ros2::testing
