#include "bench/fi_pingpong_bench_util.h"

#include <chrono>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "bench/harness.h"
#include "bench/perftest_bench_util.h"

namespace ros2::bench {

Result<FiPingpongResult> ParseFiPingpongOutput(const std::string& text) {
  // bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec
  // 4k      1k      =1k      7.8m        3.24s      2.53    1619.37       0.00
  std::istringstream in(text);
  std::string line;
  bool header = false;
  while (std::getline(in, line)) {
    if (line.rfind("bytes", 0) == 0 && line.find("usec/xfer") != std::string::npos) {
      header = true;
      continue;
    }
    if (!header || line.empty()) continue;
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.size() != 8) return Status::Protocol(fmt::format("fi_pingpong: result line with {} fields: {}", f.size(), line));
    FiPingpongResult r;
    try {
      r.bw_mib_s = std::stod(f[5]) * 1e6 / (1 << 20);
      r.rtt_us = 2 * std::stod(f[6]);
    } catch (const std::exception&) {
      return Status::Protocol("fi_pingpong: unparsable result line: " + line);
    }
    const std::string sent = f[1];
    const double scale = sent.ends_with("k") ? 1e3 : sent.ends_with("m") ? 1e6 : 1;
    try {
      r.iterations = static_cast<uint64_t>(std::stod(sent) * scale);
    } catch (const std::exception&) {
      r.iterations = 0;
    }
    return r;
  }
  return Status::Protocol("fi_pingpong: no result line in output");
}

Result<FiPingpongResult> RunFiPingpong(const FiPingpongJob& job) {
  auto binary = FindOnPath("fi_pingpong");
  if (!binary.ok()) return Status::NotFound("fi_pingpong is not installed (package libfabric-bin)");
  ROS2_ASSIGN_OR_RETURN(auto scratch, TempDir::Create("/tmp", "ros2-bench-fi-pingpong-"));
  ROS2_ASSIGN_OR_RETURN(int port, PickFreeTcpPort());
  std::vector<std::string> common = {"-p", job.provider, "-e", "rdm", "-I", std::to_string(job.iterations),
                                     "-S", std::to_string(job.size)};
  if (!job.domain.empty()) {
    common.push_back("-d");
    common.push_back(job.domain);
  }
  SpawnOptions server;
  server.argv = job.server_launcher;
  server.argv.push_back(*binary);
  server.argv.insert(server.argv.end(), common.begin(), common.end());
  server.argv.insert(server.argv.end(), {"-B", std::to_string(port)});
  server.stdout_path = scratch.path() + "/server.out";
  server.stderr_path = scratch.path() + "/server.err";
  ROS2_ASSIGN_OR_RETURN(auto server_proc, ChildProcess::Spawn(server));

  SpawnOptions client;
  client.argv = job.client_launcher;
  client.argv.push_back(*binary);
  client.argv.insert(client.argv.end(), common.begin(), common.end());
  client.argv.insert(client.argv.end(), {"-P", std::to_string(port), "127.0.0.1"});
  client.stdout_path = scratch.path() + "/client.out";
  client.stderr_path = scratch.path() + "/client.err";
  std::string command;
  for (const auto& a : client.argv) command += (command.empty() ? "" : " ") + (a.find(';') != std::string::npos ? "'" + a + "'" : a);

  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the server's listen
  ROS2_ASSIGN_OR_RETURN(auto client_proc, ChildProcess::Spawn(client));
  auto rc = client_proc.Wait(std::chrono::milliseconds(static_cast<int64_t>(job.timeout_s * 1000)));
  if (!rc.ok()) {
    client_proc.Kill();
    server_proc.Kill();
    return rc.status().WithContext("fi_pingpong client (" + command + ")");
  }
  if (server_proc.running() && !server_proc.Wait(std::chrono::milliseconds(2000)).ok()) server_proc.Kill();
  ROS2_ASSIGN_OR_RETURN(std::string out, ReadFileOrError(client.stdout_path));
  if (*rc != 0) {
    auto err = ReadFileOrError(client.stderr_path);
    return Status::IOError(fmt::format("fi_pingpong client exited with {} ({}): {}{}", *rc, command,
                                       err.ok() ? *err : "", out.substr(out.size() > 2000 ? out.size() - 2000 : 0)));
  }
  ROS2_ASSIGN_OR_RETURN(FiPingpongResult r, ParseFiPingpongOutput(out));
  r.command = command;
  return r;
}

}  // namespace ros2::bench
