#include "bench/process_bench_util.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

extern char** environ;

namespace ros2::bench {

namespace {

// posix_spawn file actions, destroyed on every path.
class FileActions {
 public:
  FileActions() { posix_spawn_file_actions_init(&fa_); }
  ~FileActions() { posix_spawn_file_actions_destroy(&fa_); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
  posix_spawn_file_actions_t* get() { return &fa_; }

 private:
  posix_spawn_file_actions_t fa_;
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

}  // namespace

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    Kill();
    pid_ = std::exchange(other.pid_, -1);
  }
  return *this;
}

Result<ChildProcess> ChildProcess::Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return Status::InvalidArgument("spawn: empty argv");
  std::string program = options.argv[0];
  if (program.find('/') == std::string::npos) {
    ROS2_ASSIGN_OR_RETURN(program, FindOnPath(program));
  }
  FileActions actions;
  const std::string out = options.stdout_path.empty() ? "/dev/null" : options.stdout_path;
  const std::string err = options.stderr_path.empty() ? "/dev/null" : options.stderr_path;
  posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(actions.get(), STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(actions.get(), STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);

  std::vector<std::string> env = MergedEnvironment(options.env);
  std::vector<char*> argv_ptrs;
  for (const auto& a : options.argv) argv_ptrs.push_back(const_cast<char*>(a.c_str()));
  argv_ptrs.push_back(nullptr);
  std::vector<char*> env_ptrs;
  for (auto& e : env) env_ptrs.push_back(e.data());
  env_ptrs.push_back(nullptr);

  pid_t pid = -1;
  int rc = posix_spawn(&pid, program.c_str(), actions.get(), nullptr, argv_ptrs.data(), env_ptrs.data());
  if (rc != 0) return Status::FromErrno(rc, "spawn " + program);
  return ChildProcess(pid);
}

Result<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return Status::InvalidArgument("wait: no running child");
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int wstatus = 0;
    pid_t r = waitpid(pid_, &wstatus, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
      if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
      return 255;
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
  if (pid_ > 0) ::kill(pid_, sig);
}

void ChildProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int wstatus = 0;
  while (waitpid(pid_, &wstatus, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

Result<ScratchDir> ScratchDir::Create(const std::string& parent, const std::string& prefix) {
  std::string templ = parent + "/" + prefix + "XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) return Status::FromErrno(errno, "mkdtemp " + templ);
  // Searchable by other users: the clusters made in here run as the ros2 user
  // when started as root (docs/security.md, "Privileges").
  ::chmod(templ.c_str(), 0711);
  return ScratchDir(templ);
}

ScratchDir::~ScratchDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
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

Result<double> ProcessCpuSeconds(pid_t pid) {
  ROS2_ASSIGN_OR_RETURN(std::string stat, ReadWholeFile("/proc/" + std::to_string(pid) + "/stat"));
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

}  // namespace ros2::bench
