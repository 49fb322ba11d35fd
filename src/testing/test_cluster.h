// TestCluster: a real single-node ROS2 cluster for integration tests, started
// the way users start one, with `ros2ctl cluster up` in a fresh temporary
// directory, and stopped with `ros2ctl cluster down` (then the directory is
// removed). Also runs ros2ctl commands and captures their exit code, stdout
// and stderr. The harness of the tests of what runs on top of an engine
// (client, dfs, fuse, agent, fio, ros2ctl); the engine's own tests start
// ros2-engine from a YAML they write (EngineProcess, engine_process.h).
// Test-only, header-only; one thread. Needs the compile definitions
// ROS2CTL_PATH and ROS2_ENGINE_PATH (the built binaries).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "testing/temp_dir.h"

namespace ros2::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  // stdout parsed as JSON (discarded value when it is not JSON).
  nlohmann::json Json() const { return nlohmann::json::parse(out, nullptr, false); }
};

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `argv` (argv[0] is the binary), stdout/stderr captured through files in
// `scratch_dir`.
inline CommandResult RunProcess(const std::vector<std::string>& argv, const std::string& scratch_dir) {
  CommandResult r;
  std::string out_path = scratch_dir + "/cmd.out", err_path = scratch_dir + "/cmd.err";
  pid_t pid = ::fork();
  if (pid == 0) {
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0) ::_exit(126);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  if (pid > 0 && ::waitpid(pid, &status, 0) == pid) {
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  r.out = ReadWholeFile(out_path);
  r.err = ReadWholeFile(err_path);
  return r;
}

// True once `pid` has exited: gone, or a zombie waiting for its reaper.
inline bool ProcessExited(int pid) {
  std::string stat = ReadWholeFile("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  return stat.empty() || (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

class TestCluster {
 public:
  // A directory only (no engine): for ros2ctl error cases.
  static std::unique_ptr<TestCluster> MakeDirectory() {
    auto c = std::unique_ptr<TestCluster>(new TestCluster());
    // The directory is the data directory: private (0700), which the engine
    // requires and, started as root, takes for its own user.
    ::chmod(c->dir().c_str(), 0700);
    std::filesystem::create_directories(c->scratch());
    return c;
  }

  // Starts ros2-engine through `ros2ctl cluster up` (ram class unless told
  // otherwise, small shards). Returns null (with the command's output in
  // *error) when it failed.
  static std::unique_ptr<TestCluster> Start(const std::string& transport, int targets, std::string* error,
                                            const std::string& storage_class = "ram",
                                            const std::string& shard_size = "64MiB",
                                            const std::vector<std::string>& extra_up_args = {}) {
    auto c = MakeDirectory();
    c->up_args_ = {"--json",
                   "cluster",
                   "up",
                   "--targets",
                   std::to_string(targets),
                   "--class",
                   storage_class,
                   "--transport",
                   transport,
                   "--shard-size",
                   shard_size,
                   "--engine",
                   ROS2_ENGINE_PATH,
                   "--timeout",
                   "60"};
    c->up_args_.insert(c->up_args_.end(), extra_up_args.begin(), extra_up_args.end());
    if (!c->Up(error)) return nullptr;
    return c;
  }

  // The engine's pid (from engine.pid), 0 when unknown.
  int EnginePid() const {
    std::string s = ReadWholeFile(dir() + "/engine.pid");
    return s.empty() ? 0 : std::atoi(s.c_str());
  }

  // SIGKILLs the engine (no shutdown of any kind) and waits until it is gone
  // (it is not our child: `ros2ctl cluster up` started it). False when there
  // was no engine or it did not die within 10 s.
  bool KillEngine() {
    int pid = EnginePid();
    if (pid <= 0 || ::kill(pid, SIGKILL) != 0) return false;
    for (int i = 0; i < 1000; ++i) {
      if (ProcessExited(pid)) {
        running_ = false;
        return true;
      }
      ::usleep(10'000);
    }
    return false;
  }

  // Starts the engine again on the same directory, as the first `cluster up`
  // did (for a cluster made by Start).
  bool Restart(std::string* error) { return Up(error); }

  ~TestCluster() {
    if (running_) Ctl({"cluster", "down", "--timeout", "30", "--force"});
  }

  // Runs ros2ctl with --data-dir of this cluster first.
  CommandResult Ctl(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {ROS2CTL_PATH, "--data-dir", dir()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, scratch());
  }
  // Runs ros2ctl without --data-dir.
  CommandResult CtlBare(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {ROS2CTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, scratch());
  }

  const std::string& dir() const { return dir_.path(); }
  std::string scratch() const { return dir() + "/scratch"; }
  const std::string& control() const { return control_; }
  const std::string& admin_secret_file() const { return admin_secret_file_; }
  // The ros2-agent socket when the cluster was started with --agent (empty otherwise).
  const std::string& agent_socket() const { return agent_socket_; }
  std::string AdminSecret() const {
    std::string s = ReadWholeFile(admin_secret_file_);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }

 private:
  TestCluster() = default;
  TempDir dir_{"r2c"};  // short: the control socket path must stay under 108 bytes
  std::string control_;
  std::string admin_secret_file_;
  std::string agent_socket_;
  std::vector<std::string> up_args_;
  bool running_ = false;

  bool Up(std::string* error) {
    CommandResult up = Ctl(up_args_);
    auto j = up.Json();
    if (up.exit_code != 0 || j.is_discarded() || !j.contains("control")) {
      *error = "cluster up failed (exit " + std::to_string(up.exit_code) + "): " + up.err + up.out;
      return false;
    }
    control_ = j["control"].get<std::string>();
    admin_secret_file_ = j["admin_secret_file"].get<std::string>();
    if (j.contains("agent_socket")) agent_socket_ = j["agent_socket"].get<std::string>();
    running_ = true;
    return true;
  }
};

// One cluster per transport, shared by the tests of a suite: started on first
// use with 2 targets and pool "p" (128 MiB), then `setup` (ros2ctl arguments,
// e.g. a container to create). Clear() from TearDownTestSuite. A transport
// named "offload-<transport>" starts a ros2-agent beside the engine (clients
// then connect through TestCluster::agent_socket()).
class SharedClusters {
 public:
  // The cluster for `transport`, or null with the failing command's output in *error.
  TestCluster* Get(const std::string& transport, std::string* error,
                   const std::vector<std::vector<std::string>>& setup = {}) {
    auto& slot = clusters_[transport];
    if (slot) return slot.get();
    const bool offload = transport.starts_with("offload-");
    auto c = offload ? TestCluster::Start(transport.substr(8), 2, error, "ram", "64MiB", {"--agent"})
                     : TestCluster::Start(transport, 2, error);
    if (!c) return nullptr;
    std::vector<std::vector<std::string>> commands = {{"pool", "create", "p", "--size", "128MiB"}};
    commands.insert(commands.end(), setup.begin(), setup.end());
    for (const auto& args : commands) {
      CommandResult r = c->Ctl(args);
      if (r.exit_code != 0) {
        *error = "ros2ctl " + args[0] + " " + args[1] + " failed: " + r.err;
        return nullptr;
      }
    }
    slot = std::move(c);
    return slot.get();
  }
  void Clear() { clusters_.clear(); }

 private:
  std::map<std::string, std::unique_ptr<TestCluster>> clusters_;
};

}  // namespace ros2::testing
