// Processes for tests and benchmarks: the one way they start a program, run a
// command to completion, fork a child that runs a function, and read what a
// process left behind.
//
// ChildProcess owns one spawned process (posix_spawn): its stdout and stderr
// go to files the caller names (/dev/null when not named), and the destructor
// kills (SIGKILL) and reaps it if it still runs, so an early return never
// leaves a stray process behind. RunCommand runs a program to completion with
// a bound on its time and captures its exit code and output; RunInChild forks
// the calling process and runs a function in the child (a check as another
// user, a crash at a chosen point). Part of the harness library
// (ros2_harness, docs/testing.md), shared by tests and ros2-bench; no
// GoogleTest. Used from one thread (the test's or the suite's main thread).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace ros2::testing {

struct SpawnOptions {
  std::vector<std::string> argv;                         // argv[0] is looked up on PATH when it has no '/'
  std::vector<std::pair<std::string, std::string>> env;  // added to (or replacing in) this process's environment
  bool env_only = false;                                 // the child's environment is `env` alone
  std::string stdout_path;                               // empty: /dev/null
  std::string stderr_path;                               // empty: /dev/null; the same path as stdout: one log
  bool append = false;                                   // append to the output files instead of truncating them
  bool own_process_group = false;                        // signals go to the group (whatever it starts too)
  bool inherit_output = false;                           // stdout and stderr stay this process's (paths ignored)
  // >= 0: the child's stdout (e.g. a pipe's write end; stdout_path ignored), and
  // stderr stays this process's unless stderr_path names a file.
  int stdout_fd = -1;
};

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ChildProcess(ChildProcess&& other) noexcept
      : pid_(std::exchange(other.pid_, -1)), group_(std::exchange(other.group_, false)) {}
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ~ChildProcess() { Kill(); }

  static Result<ChildProcess> Spawn(const SpawnOptions& options);
  // Forks the calling process; the child runs `fn` and exits with its result
  // (& 0xff) without running destructors or atexit handlers.
  static Result<ChildProcess> Fork(const std::function<int()>& fn);

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // Waits up to `timeout` for the process to exit. Returns its exit code (128 + n
  // when killed by signal n), or TimedOut (the process keeps running).
  Result<int> Wait(std::chrono::milliseconds timeout);
  // Sends `sig` to a running process, or its group (no-op otherwise).
  void Signal(int sig) const;
  // SIGTERM, waits up to `grace`, then SIGKILL; the exit code (128 + signal),
  // -1 when it was not running.
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // SIGKILL and reap; no-op if not running.
  void Kill();

 private:
  ChildProcess(pid_t pid, bool group) : pid_(pid), group_(group) {}
  pid_t pid_ = -1;
  bool group_ = false;
};

// A command run to completion: exit code (128 + signal; -1 when it could not
// start or was killed at its time limit) and captured output.
struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  // stdout parsed as JSON (discarded value when it is not JSON).
  nlohmann::json Json() const { return nlohmann::json::parse(out, nullptr, false); }
};

// Runs `argv` (argv[0] a path, or a name on PATH) to completion; stdout and
// stderr are captured through files in `scratch_dir`; killed after `timeout`,
// with every process it started (it runs in its own process group).
CommandResult RunCommand(const std::vector<std::string>& argv, const std::string& scratch_dir,
                         std::chrono::seconds timeout = std::chrono::seconds(300),
                         const std::vector<std::pair<std::string, std::string>>& env = {});
// /bin/sh -c `script`, stdout and stderr together in `out`.
CommandResult RunShell(const std::string& script, const std::string& scratch_dir,
                       std::chrono::seconds timeout = std::chrono::seconds(180));

// ChildProcess::Fork(fn) and its exit code (128 + signal when the child was
// killed, -1 when the fork failed).
int RunInChild(const std::function<int()>& fn);

// The whole content of a file, e.g. a child's captured output; IOError when it
// cannot be opened.
Result<std::string> ReadFileOrError(const std::string& path);
// The same, empty when the file cannot be read.
std::string ReadWholeFile(const std::string& path);

// The absolute path of `name` on PATH, or NotFound.
Result<std::string> FindOnPath(const std::string& name);

// True once `pid` has exited: gone, or a zombie waiting for its reaper.
bool ProcessExited(pid_t pid);

// The pid a pid file names when that process runs; NotFound otherwise.
Result<pid_t> RunningPidFromFile(const std::string& path);

// Cumulative user + system CPU seconds of process `pid` from /proc/<pid>/stat.
Result<double> ProcessCpuSeconds(pid_t pid);

// Restricts every thread of process `pid` (and so the threads they start) to
// `cpus` (sched_setaffinity on each /proc/<pid>/task entry).
Status PinProcess(pid_t pid, const std::vector<int>& cpus);

}  // namespace ros2::testing
