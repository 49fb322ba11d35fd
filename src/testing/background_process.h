// BackgroundProcess: a helper program a test runs beside itself (a Prometheus
// server, a workload, a tmux server), its stdout and stderr in a log file;
// stopped with SIGTERM (SIGKILL after a grace) by Stop() or the destructor.
// For ros2-engine use EngineProcess or TestCluster; for a command that runs to
// completion, RunCommand (subprocess.h). A ChildProcess in its own process
// group underneath. Test thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "testing/subprocess.h"

namespace ros2::testing {

class BackgroundProcess {
 public:
  // Starts argv[0] (a path) with `argv`; `env` entries ("NAME=value") are added
  // to the test's environment. The process's output goes to `log_path`.
  static Result<std::unique_ptr<BackgroundProcess>> Start(const std::vector<std::string>& argv,
                                                          const std::string& log_path,
                                                          const std::vector<std::string>& env = {});
  ~BackgroundProcess();  // Stop()
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  // SIGTERM, waits up to `grace`, then SIGKILL; returns the exit code (128 +
  // signal when killed by one), -1 when it was stopped already.
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // Whether it still runs (false once it exited, whether reaped or not).
  bool Running();
  pid_t pid() const { return process_.pid(); }
  std::string Log() const;

 private:
  BackgroundProcess() = default;
  ChildProcess process_;
  int exit_code_ = -1;
  std::string log_path_;
};

}  // namespace ros2::testing
