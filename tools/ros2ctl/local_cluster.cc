#include "local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/config.h"
#include "control/certificates.h"
#include "control/control_channel.h"
#include "control/management_client.h"
#include "ctl_context.h"

namespace fs = std::filesystem;

namespace ros2::ctl {

namespace {

std::string PathIn(const std::string& dir, const char* name) {
  return (fs::path(dir) / name).string();
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `path` through a fresh `path`.tmp. The directory belongs to the
// engine's user once the engine ran (docs/security.md, "Privileges"), and
// ros2ctl runs as root: the temporary file is created anew (O_EXCL,
// O_NOFOLLOW), so a link planted there cannot make root write elsewhere.
Status WriteFile(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) return Status::FromErrno(errno, "remove " + tmp);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(errno, "cannot write " + tmp);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status st = Status::FromErrno(errno, "cannot write " + tmp);
      ::close(fd);
      return st;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return Status::FromErrno(errno, "cannot write " + tmp);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::IOError(fmt::format("rename {} to {}: {}", tmp, path, ec.message()));
  return Status::Ok();
}

// The last `lines` lines of a log file, indented, for error messages.
std::string LogTail(const std::string& path, size_t lines = 15) {
  auto text = ReadFile(path);
  if (!text.ok() || text->empty()) return "(engine.log is empty)";
  std::vector<std::string> all;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) all.push_back(line);
  size_t from = all.size() > lines ? all.size() - lines : 0;
  std::string out;
  for (size_t i = from; i < all.size(); ++i) out += "\n    " + all[i];
  return out;
}

bool IsExecutable(const std::string& path) {
  return !path.empty() && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

Result<std::string> FindEngineBinary(const std::string& requested) {
  if (!requested.empty()) {
    if (IsExecutable(requested)) return requested;
    return Status::NotFound(fmt::format("engine binary {} is not an executable file", requested));
  }
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("ROS2_ENGINE")) candidates.emplace_back(env);
#ifdef ROS2_ENGINE_BUILD_PATH
  candidates.emplace_back(ROS2_ENGINE_BUILD_PATH);
#endif
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back((self.parent_path() / "ros2-engine").string());
    candidates.push_back((self.parent_path().parent_path().parent_path() / "src/engine/ros2-engine").string());
  }
  if (const char* path = std::getenv("PATH")) {
    std::istringstream in(path);
    for (std::string dir; std::getline(in, dir, ':');) {
      if (!dir.empty()) candidates.push_back(dir + "/ros2-engine");
    }
  }
  for (const auto& c : candidates) {
    if (IsExecutable(c)) return c;
  }
  return Status::NotFound(
      "cannot find the ros2-engine binary: pass --engine PATH or set ROS2_ENGINE (looked in the build tree, next "
      "to ros2ctl and on PATH)");
}

namespace {

Result<std::string> FindAgentBinary(const std::string& requested) {
  if (!requested.empty()) {
    if (IsExecutable(requested)) return requested;
    return Status::NotFound(fmt::format("agent binary {} is not an executable file", requested));
  }
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("ROS2_AGENT")) candidates.emplace_back(env);
#ifdef ROS2_AGENT_BUILD_PATH
  candidates.emplace_back(ROS2_AGENT_BUILD_PATH);
#endif
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back((self.parent_path() / "ros2-agent").string());
    candidates.push_back((self.parent_path().parent_path().parent_path() / "src/agent/ros2-agent").string());
  }
  if (const char* path = std::getenv("PATH")) {
    std::istringstream in(path);
    for (std::string dir; std::getline(in, dir, ':');) {
      if (!dir.empty()) candidates.push_back(dir + "/ros2-agent");
    }
  }
  for (const auto& c : candidates) {
    if (IsExecutable(c)) return c;
  }
  return Status::NotFound(
      "cannot find the ros2-agent binary: pass --agent-binary PATH or set ROS2_AGENT (looked in the build tree, "
      "next to ros2ctl and on PATH)");
}

// Whether `pid` is a live process started with `--config <config>` (that
// file, however the path is spelled): how the process of a pid file is told
// from an unrelated one that reused its pid, whatever its binary is called.
bool ProcessRunsConfig(int pid, const std::string& config) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  auto cmdline = ReadFile(fmt::format("/proc/{}/cmdline", pid));
  if (!cmdline.ok()) return false;
  // Arguments are NUL-terminated; a zombie's command line is empty (no
  // --config): it no longer runs.
  std::vector<std::string_view> args;
  for (std::string_view rest = *cmdline; !rest.empty();) {
    const size_t end = std::min(rest.find('\0'), rest.size());
    args.push_back(rest.substr(0, end));
    rest.remove_prefix(std::min(end + 1, rest.size()));
  }
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] != "--config") continue;
    std::error_code ec;
    const fs::path theirs(args[i + 1]);
    if (fs::equivalent(theirs, config, ec)) return true;
    if (!ec) return false;  // two different files
    // One of them is gone: compare the paths.
    return fs::weakly_canonical(theirs, ec) == fs::weakly_canonical(config, ec);
  }
  return false;
}

int ReadPid(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return 0;
  try {
    return std::stoi(*text);
  } catch (...) {
    return 0;
  }
}

// Stops the agent of `data_dir` when one runs (SIGTERM, SIGKILL after `timeout`).
void StopAgent(const std::string& data_dir, std::chrono::seconds timeout) {
  const std::string pid_file = PathIn(data_dir, "agent.pid");
  const std::string config = PathIn(data_dir, "agent.yaml");
  int pid = ReadPid(pid_file);
  if (ProcessRunsConfig(pid, config)) {
    ::kill(pid, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (ProcessRunsConfig(pid, config)) {
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(pid, SIGKILL);
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      }
      ::waitpid(pid, nullptr, WNOHANG);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::error_code ec;
  fs::remove(pid_file, ec);
}

bool ProcessIsEngineOf(int pid, const std::string& data_dir) {
  return ProcessRunsConfig(pid, PathIn(data_dir, "engine.yaml"));
}

int ReadPidFile(const std::string& data_dir) {
  return ReadPid(PathIn(data_dir, "engine.pid"));
}

// Starts the engine in a new session with stdout/stderr appended to the log.
// (ros2-agent is started the same way.)
Result<int> SpawnEngine(const std::string& binary, const std::string& config, const std::string& log) {
  // O_NOFOLLOW: the log's directory may belong to the engine's user.
  int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (log_fd < 0) return Status::FromErrno(errno, "open " + log);
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    ::close(log_fd);
    return Status::FromErrno(errno, "open /dev/null");
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(log_fd);
    ::close(null_fd);
    return Status::FromErrno(err, "fork for " + binary);
  }
  if (pid == 0) {
    ::setsid();
    ::dup2(null_fd, STDIN_FILENO);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execl(binary.c_str(), binary.c_str(), "--config", config.c_str(), static_cast<char*>(nullptr));
    std::string msg = fmt::format("ros2ctl: exec {} failed: {}\n", binary, std::strerror(errno));
    (void)!::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(127);
  }
  ::close(log_fd);
  ::close(null_fd);
  return static_cast<int>(pid);
}

// Polls the management service until every target of the engine is
// registered and up, the engine exits, or the deadline passes.
Status WaitReady(const ClusterInfo& info, int pid, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  Status last = Status::TimedOut("no answer yet");
  std::unique_ptr<control::ManagementClient> mgmt;
  while (std::chrono::steady_clock::now() < deadline) {
    int wstatus = 0;
    pid_t r = ::waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) {
      std::string how = WIFEXITED(wstatus) ? fmt::format("exited with status {}", WEXITSTATUS(wstatus))
                                           : fmt::format("was killed by signal {}", WTERMSIG(wstatus));
      return Status::IOError(fmt::format("ros2-engine {} before it was ready; the end of {}:{}", how, info.log_file,
                                         LogTail(info.log_file)));
    }
    // The channel is made once the engine listens: a channel that first met a
    // missing socket keeps failing for seconds after the socket appears.
    const bool listening = !info.control.starts_with("unix:") || fs::exists(info.control.substr(5));
    if (!mgmt && listening && fs::exists(info.admin_secret_file)) {
      auto secret = control::ReadSecretFile(info.admin_secret_file);
      auto channel = control::MakeControlChannel({.address = info.control});
      if (secret.ok() && channel.ok()) {
        mgmt = std::make_unique<control::ManagementClient>(*channel, control::Credentials{"admin", *secret},
                                                           std::chrono::seconds(2));
      }
    }
    if (mgmt) {
      auto status = mgmt->GetEngineStatus();
      if (status.ok()) {
        uint32_t up = 0;
        for (const auto& t : status->targets()) up += t.state() == rpc::TARGET_UP ? 1 : 0;
        if (up >= info.targets) return Status::Ok();
        last = Status::Busy(fmt::format("{} of {} targets up", up, info.targets));
      } else {
        last = status.status();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::TimedOut(fmt::format("ros2-engine was not ready within {} s (last: {}); the end of {}:{}",
                                      timeout.count(), last.ToString(), info.log_file, LogTail(info.log_file)));
}

}  // namespace

nlohmann::json ClusterInfo::ToJson() const {
  nlohmann::json j = {{"data_dir", data_dir}, {"control", control},      {"admin_secret_file", admin_secret_file},
                      {"log_file", log_file}, {"engine", engine_binary}, {"pid", pid},
                      {"targets", targets},   {"class", storage_class},  {"transport", transport}};
  if (!agent_socket.empty()) {
    j["agent_socket"] = agent_socket;
    j["agent_pid"] = agent_pid;
    j["agent_log"] = agent_log;
  }
  if (!listen.empty()) {
    j["listen"] = listen;
    j["tls_ca"] = tls_ca;
  }
  return j;
}

// The metrics section of the generated engine.yaml and agent.yaml.
std::string MetricsYaml(const ClusterUpOptions& o) {
  return o.metrics == "off" || o.metrics.empty() ? std::string() : fmt::format("metrics:\n  listen: {}\n", o.metrics);
}

std::string EngineConfigYaml(const ClusterUpOptions& o) {
  // The engine's configuration reference is docs/engine.md (src/engine/engine_config.h).
  return fmt::format(
      "# Generated by `ros2ctl cluster up`; edit, then `ros2ctl cluster down` and start the\n"
      "# engine again with `ros2-engine --config <this file>` to keep the changes.\n"
      "data_dir: {dir}\n"
      "log_level: info\n"
      "targets: {targets}\n"
      "{cpus}"
      "vos:\n"
      "  class: {cls}\n"
      "transport:\n"
      "  provider: {provider}\n"
      "  kind: {transport}\n"
      "  net_devices: lo\n"
      "{metrics}"
      "control:\n"
      "  socket: unix:{dir}/control.sock\n"
      "{listen}",
      fmt::arg("dir", o.data_dir), fmt::arg("transport", o.transport), fmt::arg("provider", o.provider),
      fmt::arg("targets", o.targets),
      fmt::arg("cls", o.storage_class), fmt::arg("metrics", MetricsYaml(o)),
      fmt::arg("listen", o.listen.empty()
                             ? std::string()
                             : fmt::format("  listen: {}\n  tls_cert: {}/tls/{}\n  tls_key: {}/tls/{}\n", o.listen,
                                           o.data_dir, control::kEngineCertFile, o.data_dir, control::kEngineKeyFile)),
      fmt::arg("cpus", o.target_cpus.empty() ? std::string()
                                             : fmt::format("target_cpus: [{}]\n", fmt::join(o.target_cpus, ", "))));
}

std::string AgentConfigYaml(const ClusterUpOptions& o) {
  const uid_t me = ::getuid();
  return fmt::format(
      "# Generated by `ros2ctl cluster up --agent` (docs/agent.md).\n"
      "socket: {dir}/agent.sock\n"
      "socket_mode: \"0600\"\n"
      "control: unix:{dir}/control.sock\n"
      "transport: {transport}\n"
      "provider: {provider}\n"
      "net_devices: lo\n"
      "log_level: info\n"
      "{metrics}"
      "tenants:\n"
      "  - {{ name: admin, secret_file: {dir}/admin.secret, uids: [{uids}] }}\n",
      fmt::arg("dir", o.data_dir), fmt::arg("transport", o.transport), fmt::arg("provider", o.provider),
      fmt::arg("metrics", MetricsYaml(o)),
      fmt::arg("uids", me == 0 ? std::string("0") : fmt::format("0, {}", me)));
}

int RunningEnginePid(const std::string& data_dir) {
  int pid = ReadPidFile(data_dir);
  return ProcessIsEngineOf(pid, data_dir) ? pid : 0;
}

namespace {

// Writes DIR/agent.yaml, starts ros2-agent and waits for its ready line.
Status StartAgent(const ClusterUpOptions& o, ClusterInfo* info) {
  ROS2_ASSIGN_OR_RETURN(std::string binary, FindAgentBinary(o.agent_binary));
  const std::string config = PathIn(o.data_dir, "agent.yaml");
  info->agent_socket = PathIn(o.data_dir, "agent.sock");
  info->agent_log = PathIn(o.data_dir, "agent.log");
  if (info->agent_socket.size() >= 108) {
    return Status::InvalidArgument(
        fmt::format("the agent socket path {} is too long for a Unix socket; use a "
                    "shorter --data-dir",
                    info->agent_socket));
  }
  ROS2_RETURN_IF_ERROR(WriteFile(config, AgentConfigYaml(o)));
  const auto log_start = fs::exists(info->agent_log) ? fs::file_size(info->agent_log) : 0;
  ROS2_ASSIGN_OR_RETURN(info->agent_pid, SpawnEngine(binary, config, info->agent_log));
  ROS2_RETURN_IF_ERROR(WriteFile(PathIn(o.data_dir, "agent.pid"), std::to_string(info->agent_pid) + "\n"));
  auto deadline = std::chrono::steady_clock::now() + o.ready_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int wstatus = 0;
    if (::waitpid(info->agent_pid, &wstatus, WNOHANG) == info->agent_pid) {
      return Status::IOError(fmt::format("ros2-agent exited before it was ready; the end of {}:{}", info->agent_log,
                                         LogTail(info->agent_log)));
    }
    auto text = ReadFile(info->agent_log);
    if (text.ok() && text->size() > log_start && text->find("ros2-agent ready", log_start) != std::string::npos) {
      return Status::Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::TimedOut(fmt::format("ros2-agent was not ready within {} s; the end of {}:{}", o.ready_timeout.count(),
                                      info->agent_log, LogTail(info->agent_log)));
}

}  // namespace

Result<ClusterInfo> ClusterUp(const ClusterUpOptions& options) {
  if (options.data_dir.empty()) return Status::InvalidArgument("cluster up: --data-dir is required");
  if (options.targets == 0 || options.targets > 64) {
    return Status::InvalidArgument(fmt::format("cluster up: --targets {} (expected 1 to 64)", options.targets));
  }
  if (options.storage_class != "nvme" && options.storage_class != "ram") {
    return Status::InvalidArgument(
        fmt::format("cluster up: --class '{}' (expected nvme or ram)", options.storage_class));
  }
  if (options.provider != "ucx" && options.provider != "ofi") {
    return Status::InvalidArgument(fmt::format("cluster up: --provider '{}' (expected ucx or ofi)", options.provider));
  }
  if (options.transport != "tcp" && options.transport != "shm" && options.transport != "auto") {
    return Status::InvalidArgument(
        fmt::format("cluster up: --transport '{}' (expected tcp, shm or auto)", options.transport));
  }

  std::error_code ec;
  // The engine refuses a data directory other users may enter: a new one is
  // made 0700 (an existing one is left as it is; the engine names the fix).
  if (!fs::exists(options.data_dir, ec)) {
    fs::create_directories(fs::path(options.data_dir).parent_path(), ec);
    ec.clear();
    if (::mkdir(options.data_dir.c_str(), 0700) != 0 && errno != EEXIST) {
      ec = std::error_code(errno, std::generic_category());
    }
  }
  if (ec) return Status::IOError(fmt::format("cluster up: create {}: {}", options.data_dir, ec.message()));
  ClusterUpOptions o = options;
  o.data_dir = fs::absolute(options.data_dir).lexically_normal().string();
  if (!o.data_dir.empty() && o.data_dir.back() == '/') o.data_dir.pop_back();

  if (int pid = RunningEnginePid(o.data_dir)) {
    return Status::AlreadyExists(
        fmt::format("cluster up: an engine (pid {}) is already running in {}; stop it with `ros2ctl cluster down "
                    "--data-dir {}`",
                    pid, o.data_dir, o.data_dir));
  }
  ROS2_ASSIGN_OR_RETURN(std::string binary, FindEngineBinary(o.engine_binary));

  ClusterInfo info;
  info.data_dir = o.data_dir;
  info.control = "unix:" + PathIn(o.data_dir, "control.sock");
  info.admin_secret_file = PathIn(o.data_dir, "admin.secret");
  info.log_file = PathIn(o.data_dir, "engine.log");
  info.engine_binary = binary;
  info.targets = o.targets;
  info.storage_class = o.storage_class;
  info.transport = o.transport;
  if (info.control.size() - 5 >= 108) {
    return Status::InvalidArgument(
        fmt::format("cluster up: the control socket path {} is too long for a Unix socket "
                    "(limit 107 bytes); use a shorter --data-dir",
                    info.control.substr(5)));
  }

  if (!o.listen.empty()) {
    // TLS for the TCP listener, with certificates made here when missing.
    const auto colon = o.listen.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return Status::InvalidArgument(fmt::format("cluster up: --listen '{}' (expected host:port)", o.listen));
    }
    std::string host = o.listen.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    std::vector<std::string> names;
    if (host != "0.0.0.0" && host != "::") names.push_back(host);
    char hostname[256] = {};
    if (::gethostname(hostname, sizeof(hostname) - 1) == 0 && hostname[0] != '\0') names.emplace_back(hostname);
    ROS2_RETURN_IF_ERROR(control::EnsureClusterCertificates(PathIn(o.data_dir, "tls"), names)
                             .WithContext("cluster up: TLS certificates"));
    info.listen = o.listen;
    info.tls_ca = PathIn(o.data_dir, "tls/ca.crt");
  }
  std::string config = PathIn(o.data_dir, "engine.yaml");
  ROS2_RETURN_IF_ERROR(WriteFile(config, EngineConfigYaml(o)));
  ROS2_ASSIGN_OR_RETURN(info.pid, SpawnEngine(binary, config, info.log_file));
  ROS2_RETURN_IF_ERROR(WriteFile(PathIn(o.data_dir, "engine.pid"), std::to_string(info.pid) + "\n"));

  Status ready = WaitReady(info, info.pid, o.ready_timeout);
  if (!ready.ok()) {
    ::kill(info.pid, SIGKILL);
    ::waitpid(info.pid, nullptr, 0);
    fs::remove(PathIn(o.data_dir, "engine.pid"), ec);
    return ready.WithContext("cluster up");
  }
  if (!info.listen.empty()) {
    // The bound address (port 0 asks for any free port) from the ready file.
    if (auto ready = ReadFile(PathIn(o.data_dir, "engine.ready")); ready.ok()) {
      std::istringstream in(*ready);
      for (std::string line; std::getline(in, line);) {
        if (line.starts_with("tcp=")) info.listen = line.substr(4);
      }
    }
  }
  if (o.agent) {
    Status started = StartAgent(o, &info);
    if (!started.ok()) {
      StopAgent(o.data_dir, std::chrono::seconds(5));
      ::kill(info.pid, SIGTERM);
      ::waitpid(info.pid, nullptr, 0);
      fs::remove(PathIn(o.data_dir, "engine.pid"), ec);
      return started.WithContext("cluster up --agent");
    }
  }
  ROS2_RETURN_IF_ERROR(WriteFile(PathIn(o.data_dir, kClusterFileName), info.ToJson().dump(2) + "\n"));
  return info;
}

Result<bool> ClusterDown(const std::string& data_dir, std::chrono::seconds timeout, bool force) {
  if (data_dir.empty()) return Status::InvalidArgument("cluster down: --data-dir is required");
  StopAgent(data_dir, timeout);
  std::error_code ec;
  int pid = RunningEnginePid(data_dir);
  if (pid == 0) {
    fs::remove(PathIn(data_dir, "engine.pid"), ec);
    return false;
  }
  if (::kill(pid, SIGTERM) != 0) return Status::FromErrno(errno, fmt::format("cluster down: SIGTERM to pid {}", pid));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (ProcessIsEngineOf(pid, data_dir)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      if (!force) {
        return Status::TimedOut(
            fmt::format("cluster down: ros2-engine (pid {}) still runs {} s after SIGTERM; see {} "
                        "or retry with --force",
                        pid, timeout.count(), PathIn(data_dir, "engine.log")));
      }
      ::kill(pid, SIGKILL);
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      force = false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  fs::remove(PathIn(data_dir, "engine.pid"), ec);
  return true;
}

}  // namespace ros2::ctl
