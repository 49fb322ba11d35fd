// TestCluster: a real single-node ROS2 cluster for integration tests: the
// LocalCluster harness (local_cluster.h) on a fresh temporary directory, with
// the build's ros2ctl and ros2-engine, and the answers a test asserts on
// (exit code, stdout, stderr of every ros2ctl command). The harness of the
// tests of what runs on top of an engine (client, dfs, fuse, agent, fio,
// ros2ctl); the engine's own tests start ros2-engine from a YAML they write
// (EngineProcess, engine_process.h). Test-only, header-only; one thread.
// Needs the compile definitions ROS2CTL_PATH and ROS2_ENGINE_PATH (the built
// binaries).
#pragma once

// (The system and stream headers below are kept for the tests that use them
// through this header.)
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

#include "testing/local_cluster.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace ros2::testing {

class TestCluster {
 public:
  // A directory only (no engine): for ros2ctl error cases.
  static std::unique_ptr<TestCluster> MakeDirectory(LocalClusterOptions options = {}) {
    auto c = std::unique_ptr<TestCluster>(new TestCluster());
    // The directory is the data directory: private (0700), which the engine
    // requires and, started as root, takes for its own user.
    ::chmod(c->dir().c_str(), 0700);
    options.ros2ctl = ROS2CTL_PATH;
    options.engine = ROS2_ENGINE_PATH;
    c->cluster_ = std::make_unique<LocalCluster>(std::move(options), c->dir(), c->dir() + "/scratch");
    return c;
  }

  // Starts ros2-engine through `ros2ctl cluster up` (ram class unless told
  // otherwise, small shards). Returns null (with the command's output in
  // *error) when it failed.
  static std::unique_ptr<TestCluster> Start(const std::string& transport, int targets, std::string* error,
                                            const std::string& storage_class = "ram",
                                            const std::string& shard_size = "64MiB",
                                            const std::vector<std::string>& extra_up_args = {}) {
    LocalClusterOptions o;
    o.transport = transport;
    o.targets = targets;
    o.storage_class = storage_class;
    o.shard_size = shard_size;
    o.extra_up_args = extra_up_args;
    auto c = MakeDirectory(o);
    if (!c->Restart(error)) return nullptr;
    return c;
  }

  // The engine's pid (from engine.pid), 0 when unknown.
  int EnginePid() const {
    std::string s = ReadWholeFile(dir() + "/engine.pid");
    return s.empty() ? 0 : std::atoi(s.c_str());
  }
  // SIGKILLs the engine and waits until it is gone; false when there was no
  // engine or it did not die within 10 s.
  bool KillEngine() { return cluster_->KillEngine().ok(); }
  // Starts the engine again on the same directory, as the first `cluster up`
  // did (for a cluster made by Start).
  bool Restart(std::string* error) {
    Status st = cluster_->Start();
    if (!st.ok()) *error = st.ToString();
    return st.ok();
  }

  // Runs ros2ctl with --data-dir of this cluster first.
  CommandResult Ctl(const std::vector<std::string>& args) const { return cluster_->Run(args); }
  // Runs ros2ctl without --data-dir.
  CommandResult CtlBare(const std::vector<std::string>& args) const { return cluster_->RunBare(args); }

  const std::string& dir() const { return dir_.path(); }
  std::string scratch() const { return dir() + "/scratch"; }
  const std::string& control() const { return cluster_->control(); }
  const std::string& admin_secret_file() const { return cluster_->admin_secret_file(); }
  // The ros2-agent socket when the cluster was started with --agent (empty otherwise).
  const std::string& agent_socket() const { return cluster_->agent_socket(); }
  std::string AdminSecret() const {
    std::string s = ReadWholeFile(admin_secret_file());
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }
  LocalCluster& cluster() { return *cluster_; }

 private:
  TestCluster() = default;
  TempDir dir_{"r2c"};  // short: the control socket path must stay under 108 bytes
  std::unique_ptr<LocalCluster> cluster_;  // declared after dir_: down before the directory goes
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
