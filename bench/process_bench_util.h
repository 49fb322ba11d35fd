// Child processes and scratch directories for benchmark suites that run external
// baselines (fio, ucx_perftest) or a peer process of their own.
//
// ChildProcess owns one spawned process: it is started with posix_spawn, its
// stdout and stderr go to files the caller names, and the destructor kills
// (SIGKILL) and reaps it if it is still running, so an early return never leaves
// a stray process behind. ScratchDir owns a fresh directory and removes it with
// everything in it on destruction. Both are used from the suite's main thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace ros2::bench {

struct SpawnOptions {
  std::vector<std::string> argv;                         // argv[0] is looked up on PATH when it has no '/'
  std::vector<std::pair<std::string, std::string>> env;  // added to (or replacing in) this process's environment
  std::string stdout_path;                               // empty: /dev/null
  std::string stderr_path;                               // empty: /dev/null
};

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ChildProcess(ChildProcess&& other) noexcept : pid_(std::exchange(other.pid_, -1)) {}
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ~ChildProcess() { Kill(); }

  static Result<ChildProcess> Spawn(const SpawnOptions& options);

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // Waits up to `timeout` for the process to exit. Returns its exit code (128 + n
  // when killed by signal n), or TimedOut (the process keeps running).
  Result<int> Wait(std::chrono::milliseconds timeout);
  // Sends `sig` to a running process (no-op otherwise).
  void Signal(int sig) const;
  // SIGKILL and reap; no-op if not running.
  void Kill();

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
};

class ScratchDir {
 public:
  // Creates a fresh directory "<parent>/<prefix>XXXXXX".
  static Result<ScratchDir> Create(const std::string& parent, const std::string& prefix);
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ScratchDir(ScratchDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  ScratchDir& operator=(ScratchDir&&) = delete;
  ~ScratchDir();
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// The whole content of a (small) file, e.g. a child's captured output.
Result<std::string> ReadWholeFile(const std::string& path);

// The absolute path of `name` on PATH, or NotFound.
Result<std::string> FindOnPath(const std::string& name);

// Cumulative user + system CPU seconds of process `pid` from /proc/<pid>/stat.
Result<double> ProcessCpuSeconds(pid_t pid);

// Restricts every thread of process `pid` (and so the threads they start) to
// `cpus` (sched_setaffinity on each /proc/<pid>/task entry).
Status PinProcess(pid_t pid, const std::vector<int>& cpus);

}  // namespace ros2::bench
