// Starting, stopping and killing ros2-engine processes for tests.
#include "testing/engine_process.h"

#include <fcntl.h>
#include <signal.h>
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
#include <vector>

#include <fmt/format.h>

#include "common/privileges.h"

namespace ros2::testing {

Result<std::string> WriteTestClusterKey(const std::string& dir) {
  const std::string key_dir = dir + "/keys";
  if (::mkdir(key_dir.c_str(), 0700) != 0)
    return Status::IOError(fmt::format("mkdir {}: {}", key_dir, std::strerror(errno)));
  const std::string key_file = key_dir + "/cluster.key";
  {
    std::ofstream out(key_file);
    out << "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
    if (!out) return Status::IOError("cannot write " + key_file);
  }
  if (::chmod(key_file.c_str(), 0600) != 0)
    return Status::IOError(fmt::format("chmod {}: {}", key_file, std::strerror(errno)));
  ROS2_RETURN_IF_ERROR(GiveToServiceUser(key_dir));
  return key_file;
}

Status GiveToServiceUser(const std::string& path) {
  if (::geteuid() != 0) return Status::Ok();
  ROS2_ASSIGN_OR_RETURN(ServiceUser user, LookUpServiceUser(ProcessConfig{}, "the test's engine"));
  std::vector<std::string> paths = {path};
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(path, ec)) paths.push_back(e.path().string());
  }
  for (const auto& p : paths) {
    if (::lchown(p.c_str(), user.uid, user.gid) != 0) return Status::FromErrno(errno, "chown " + p);
  }
  return Status::Ok();
}

Result<std::unique_ptr<EngineProcess>> EngineProcess::Start(const EngineOptions& options) {
  std::unique_ptr<EngineProcess> p(new EngineProcess(options));
  const std::string& dir = options.data_dir;
  std::error_code mkdir_error;
  std::filesystem::create_directories(std::filesystem::path(dir).parent_path(), mkdir_error);
  ::mkdir(dir.c_str(), 0700);  // an existing one keeps its mode
  const std::string config_path = dir + "/engine.yaml";
  {
    std::ofstream y(config_path, std::ios::trunc);
    y << "data_dir: " << dir << "\n";
    y << "targets: " << options.targets << "\n";
    if (!options.target_cpus.empty()) y << "target_cpus: " << options.target_cpus << "\n";
    // ROS2_ENGINE_TEST_LOG_LEVEL (e.g. debug) raises the engines' log level
    // when a test needs their reasons; LogTail() shows them.
    const char* level = std::getenv("ROS2_ENGINE_TEST_LOG_LEVEL");
    y << "log_level: " << (level != nullptr && *level != '\0' ? level : "info") << "\n";
    y << "shutdown_grace: " << options.shutdown_grace << "\n";
    y << "vos: { class: " << options.storage_class << ", data_size: " << options.data_size << " }\n";
    // "ofi-<kind>": the libfabric provider with that kind.
    if (options.transport.rfind("ofi-", 0) == 0) {
      y << "transport: { provider: ofi, kind: " << options.transport.substr(4);
    } else {
      y << "transport: { kind: " << options.transport;
    }
    if (!options.keepalive.empty()) y << ", keepalive: " << options.keepalive;
    if (!options.transport_extra.empty()) y << ", " << options.transport_extra;
    y << " }\n";
    if (!options.limits.empty()) y << "limits: " << options.limits << "\n";
    if (!options.metrics_listen.empty()) y << "metrics: { listen: \"" << options.metrics_listen << "\" }\n";
    if (!options.process.empty()) y << "process: " << options.process << "\n";
    if (!options.rebuild.empty()) y << "rebuild: " << options.rebuild << "\n";
    y << "control:\n";
    if (!options.join.empty()) {
      y << "  join: \"" << options.join << "\"\n";
      y << "  join_secret_file: " << options.join_secret_file << "\n";
    }
    if (!options.capability_lifetime.empty()) y << "  capability_lifetime: " << options.capability_lifetime << "\n";
    if (!options.sync_interval.empty()) y << "  sync_interval: " << options.sync_interval << "\n";
    y << "  address: test-host\n";
    for (const auto& line : options.control_extra) y << "  " << line << "\n";
  }
  const std::string ready = dir + "/engine.ready";
  std::error_code ec;
  std::filesystem::remove(ready, ec);

  SpawnOptions so;
  so.argv = {ROS2_ENGINE_PATH, "--config", config_path};
  // ROS2_ENGINE_TEST_GDB=<gdb command file> runs the engine under gdb (debugging aid).
  if (const char* gdb = std::getenv("ROS2_ENGINE_TEST_GDB"); gdb != nullptr && *gdb != '\0') {
    so.argv.insert(so.argv.begin(), {"gdb", "-q", "-batch", "-x", gdb, "--args"});
  }
  so.stdout_path = so.stderr_path = dir + "/engine.log";
  so.append = true;
  ROS2_ASSIGN_OR_RETURN(p->process_, ChildProcess::Spawn(so));

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto code = p->process_.Wait(std::chrono::milliseconds(0)); code.ok()) {
      return Status::IOError(fmt::format("ros2-engine exited during start-up (exit {}):\n{}", *code, p->LogTail()));
    }
    std::ifstream in(ready);
    if (in) {
      std::string line;
      while (std::getline(in, line)) {
        if (line.starts_with("control=")) p->control_ = line.substr(8);
        if (line.starts_with("engine=")) p->engine_id_ = line.substr(7);
        if (line.starts_with("tcp=")) p->tcp_ = line.substr(4);
        if (line.starts_with("metrics=")) p->metrics_ = line.substr(8);
      }
      if (!p->control_.empty()) return p;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::TimedOut(fmt::format("ros2-engine not ready after 30 s:\n{}", p->LogTail()));
}

EngineProcess::~EngineProcess() {
  Kill();
}

Result<int> EngineProcess::Terminate() {
  if (!process_.running()) return Status::InvalidArgument("engine not running");
  process_.Signal(SIGTERM);
  auto code = process_.Wait(std::chrono::seconds(20));
  if (!code.ok() && code.status().code() == Status::Code::kTimedOut) {
    return Status::TimedOut(fmt::format("ros2-engine {} ignored SIGTERM for 20 s", process_.pid()));
  }
  return code;
}

void EngineProcess::Kill() {
  process_.Kill();
}

Status EngineProcess::CheckNotDied() {
  if (!process_.running()) return died_;
  const pid_t pid = process_.pid();
  auto code = process_.Wait(std::chrono::milliseconds(0));
  if (!code.ok()) return Status::Ok();  // still running
  died_ = Status::IOError(fmt::format("ros2-engine pid {} ({}) exited on its own (exit {}); its log ends:\n{}", pid,
                                      options_.data_dir, *code, LogTail()));
  return died_;
}

std::string EngineProcess::LogTail() const {
  std::ifstream in(options_.data_dir + "/engine.log");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string all = ss.str();
  return all.size() > 4000 ? all.substr(all.size() - 4000) : all;
}

}  // namespace ros2::testing
