#include "bench/perftest_bench_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "bench/harness.h"

namespace ros2::bench {

namespace {

std::string Join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

std::string EnvPrefix(const std::vector<std::pair<std::string, std::string>>& env) {
  std::string s;
  for (const auto& [k, v] : env) s += k + "=" + v + " ";
  return s;
}

}  // namespace

Result<int> PickFreeTcpPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::FromErrno(errno, "socket for a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    close(fd);
    return Status::FromErrno(err, "bind 127.0.0.1:0");
  }
  close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

Result<PerftestResult> ParsePerftestOutput(const std::string& text) {
  // The final line is whitespace-separated numbers: iterations, typical latency,
  // average latency, overall latency, average bandwidth, overall bandwidth,
  // average message rate, overall message rate.
  std::istringstream lines(text);
  std::string line;
  std::vector<double> last;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::vector<double> values;
    std::string f;
    bool numeric = true;
    while (fields >> f) {
      char* end = nullptr;
      double v = std::strtod(f.c_str(), &end);
      if (end == f.c_str() || *end != '\0') {
        numeric = false;
        break;
      }
      values.push_back(v);
    }
    if (numeric && values.size() >= 8) last = values;
  }
  if (last.empty()) return Status::Protocol("ucx_perftest: no final result line in output");
  PerftestResult r;
  r.iterations = static_cast<uint64_t>(last[0]);
  r.lat_us_typical = last[1];
  r.lat_us_avg = last[2];
  r.bw_mib_s = last[5];
  r.msg_rate = last[7];
  return r;
}

Result<PerftestResult> RunUcxPerftest(const PerftestJob& job) {
  auto binary = FindOnPath("ucx_perftest");
  if (!binary.ok()) return Status::NotFound("ucx_perftest is not installed (package ucx-utils)");
  ROS2_ASSIGN_OR_RETURN(auto scratch, TempDir::Create("/tmp", "ros2-bench-perftest-"));
  ROS2_ASSIGN_OR_RETURN(int port, PickFreeTcpPort());

  SpawnOptions server;
  server.argv = {*binary, "-p", std::to_string(port)};
  for (const auto& e : job.extra) server.argv.push_back(e);
  server.argv.insert(server.argv.begin(), job.server_launcher.begin(), job.server_launcher.end());
  server.env = job.env;
  server.stdout_path = scratch.path() + "/server.out";
  server.stderr_path = scratch.path() + "/server.err";
  ROS2_ASSIGN_OR_RETURN(auto server_proc, ChildProcess::Spawn(server));

  SpawnOptions client;
  client.argv = {*binary, "127.0.0.1",
                 "-p",    std::to_string(port),
                 "-t",    job.test,
                 "-s",    std::to_string(job.size),
                 "-n",    std::to_string(job.iterations),
                 "-w",    std::to_string(job.warmup),
                 "-f"};
  for (const auto& e : job.extra) client.argv.push_back(e);
  client.argv.insert(client.argv.begin(), job.client_launcher.begin(), job.client_launcher.end());
  client.env = job.env;
  client.stdout_path = scratch.path() + "/client.out";
  client.stderr_path = scratch.path() + "/client.err";
  const std::string command = EnvPrefix(job.env) + Join(client.argv);

  // The server needs a moment to listen; the client retries its connection for a
  // short while on its own, but give the server a head start and retry once.
  Result<PerftestResult> parsed = Status::Internal("not run");
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300 * (attempt + 1)));
    ROS2_ASSIGN_OR_RETURN(auto client_proc, ChildProcess::Spawn(client));
    auto rc = client_proc.Wait(std::chrono::milliseconds(static_cast<int64_t>(job.timeout_s * 1000)));
    if (!rc.ok()) return rc.status().WithContext("ucx_perftest client (" + command + ")");
    ROS2_ASSIGN_OR_RETURN(std::string out, ReadFileOrError(client.stdout_path));
    if (*rc == 0) {
      parsed = ParsePerftestOutput(out);
      break;
    }
    auto err = ReadFileOrError(client.stderr_path);
    parsed = Status::IOError(fmt::format("ucx_perftest client exited with {} ({}): {}{}", *rc, command,
                                         err.ok() ? *err : "", out.substr(out.size() > 2000 ? out.size() - 2000 : 0)));
    if (out.find("connect") == std::string::npos && (err.ok() && err->find("connect") == std::string::npos)) break;
  }
  // The server exits by itself after the test; do not wait long for it.
  if (server_proc.running() && !server_proc.Wait(std::chrono::milliseconds(2000)).ok()) server_proc.Kill();
  if (!parsed.ok()) return parsed.status();
  parsed->command = command;
  return parsed;
}

}  // namespace ros2::bench
