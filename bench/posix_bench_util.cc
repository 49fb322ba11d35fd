#include "bench/posix_bench_util.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bench/harness.h"

namespace ros2::bench::posix {

Result<FioResult> RunFioArgs(const std::vector<std::string>& args, const std::string& scratch, double limit_s,
                             const std::vector<std::pair<std::string, std::string>>& env) {
  auto fio = FindOnPath("fio");
  if (!fio.ok()) return Status::NotFound("fio is not installed (not on PATH); install the fio package");
  const std::string out_path = scratch + "/fio.json";
  const std::string err_path = scratch + "/fio.err";
  SpawnOptions so;
  so.argv = {*fio};
  so.argv.insert(so.argv.end(), args.begin(), args.end());
  so.argv.push_back("--output-format=json");
  so.argv.push_back("--output=" + out_path);
  so.stdout_path = scratch + "/fio.out";
  so.stderr_path = err_path;
  so.env = env;
  const std::string command = fmt::format("{}", fmt::join(so.argv, " "));
  ROS2_ASSIGN_OR_RETURN(auto child, ChildProcess::Spawn(so));
  auto rc = child.Wait(std::chrono::milliseconds(static_cast<int64_t>(limit_s * 1000)));
  if (!rc.ok()) return rc.status().WithContext(command);
  if (*rc != 0) {
    auto err = ReadFileOrError(err_path);
    return Status::IOError(fmt::format("fio exited with {} ({}): {}", *rc, command, err.ok() ? *err : ""));
  }
  ROS2_ASSIGN_OR_RETURN(std::string text, ReadFileOrError(out_path));
  auto parsed = ParseFioJson(text);
  if (!parsed.ok()) return parsed.status().WithContext(command);
  parsed->command = command;
  return parsed;
}

bool IsReadOp(const std::string& op) {
  return op == "read" || op == "randread";
}

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<std::string> FioCaseArgs(const std::string& op, uint64_t bs, int qd, int jobs, double runtime_s,
                                     uint64_t read_size, uint64_t write_total) {
  std::vector<std::string> a = {fmt::format("--name={}", IsReadOp(op) ? "r" : "w"),
                                "--rw=" + op,
                                fmt::format("--bs={}", bs),
                                fmt::format("--iodepth={}", qd),
                                fmt::format("--numjobs={}", jobs),
                                "--group_reporting=1",
                                fmt::format("--runtime={}ms", static_cast<int64_t>(runtime_s * 1000))};
  if (IsReadOp(op)) {
    a.push_back(fmt::format("--size={}", read_size));
    a.push_back("--time_based=1");
  } else {
    a.push_back(fmt::format("--size={}", write_total / static_cast<uint64_t>(jobs) / bs * bs));
  }
  return a;
}

std::string PoolSizeFor(const std::string& s, int targets) {
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits])) != 0) ++digits;
  if (digits == 0) return s;
  return std::to_string(std::stoull(s.substr(0, digits)) * static_cast<uint64_t>(targets)) + s.substr(digits);
}

Status CreateWarmContainer(const LocalCluster& cluster, const std::string& pool, const std::string& name,
                           std::vector<std::string> engine_args, const std::string& scratch) {
  ROS2_RETURN_IF_ERROR(cluster.Ctl({"cont", "create", pool, name}).status());
  engine_args.insert(engine_args.end(),
                     {"--name=warm", "--rw=write", "--bs=1m", "--size=16m", "--iodepth=16", "--filename=/warm"});
  auto r = RunFioArgs(engine_args, scratch, 600);
  if (!r.ok()) return r.status().WithContext("warming container " + name);
  return Status::Ok();
}

void DestroyContainerLogged(const LocalCluster& cluster, const std::string& pool, const std::string& name) {
  if (auto d = cluster.Ctl({"cont", "destroy", pool, name}); !d.ok())
    std::fprintf(stderr, "bench: %s\n", d.status().ToString().c_str());
}

Status PrefillReadFiles(std::vector<std::string> engine_args, int qd, int jobs, uint64_t size,
                        const std::string& scratch) {
  engine_args.insert(engine_args.end(), {"--name=r", "--rw=write", "--bs=1m", fmt::format("--iodepth={}", qd),
                                         fmt::format("--numjobs={}", jobs), fmt::format("--size={}", size),
                                         "--group_reporting=1"});
  ROS2_ASSIGN_OR_RETURN(auto r, RunFioArgs(engine_args, scratch, 900));
  const uint64_t expected = size * static_cast<uint64_t>(jobs);
  if (r.write.io_bytes != expected) {
    return Status::Internal(fmt::format("bench: prefill wrote {} of {} bytes", r.write.io_bytes, expected));
  }
  std::fprintf(stderr, "bench: DFS read files prefilled: %d x %llu MiB at %.0f MiB/s\n", jobs,
               static_cast<unsigned long long>(size >> 20), r.write.bw_bytes / (1 << 20));
  return Status::Ok();
}

}  // namespace ros2::bench::posix
