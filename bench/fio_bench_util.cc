#include "bench/fio_bench_util.h"

#include <chrono>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/harness.h"

namespace ros2::bench {

namespace {

// fio prints percentile keys with six decimals: "50.000000".
double PercentileUs(const nlohmann::json& lat, const char* key) {
  if (!lat.contains("percentile")) return 0;
  const auto& p = lat["percentile"];
  if (!p.contains(key)) return 0;
  return p[key].get<double>() / 1000.0;
}

void AddSide(const nlohmann::json& side, FioSide* out) {
  out->io_bytes += side.value("io_bytes", uint64_t{0});
  out->total_ios += side.value("total_ios", uint64_t{0});
  out->iops += side.value("iops", 0.0);
  out->bw_bytes += side.value("bw_bytes", 0.0);
  if (side.contains("clat_ns")) {
    out->clat_us_p50 = std::max(out->clat_us_p50, PercentileUs(side["clat_ns"], "50.000000"));
    out->clat_us_p99 = std::max(out->clat_us_p99, PercentileUs(side["clat_ns"], "99.000000"));
  }
  double lat50 = 0, lat99 = 0;
  if (side.contains("lat_ns")) {
    lat50 = PercentileUs(side["lat_ns"], "50.000000");
    lat99 = PercentileUs(side["lat_ns"], "99.000000");
    out->lat_us_mean = std::max(out->lat_us_mean, side["lat_ns"].value("mean", 0.0) / 1000.0);
  }
  out->lat_us_p50 = std::max(out->lat_us_p50, lat50 > 0 ? lat50 : out->clat_us_p50);
  out->lat_us_p99 = std::max(out->lat_us_p99, lat99 > 0 ? lat99 : out->clat_us_p99);
}

std::string Join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    s += a;
  }
  return s;
}

}  // namespace

Result<FioResult> ParseFioJson(const std::string& json_text) {
  // fio may print warnings before the JSON document even with --output.
  size_t start = json_text.find('{');
  if (start == std::string::npos) return Status::Protocol("fio: no JSON object in output");
  nlohmann::json doc = nlohmann::json::parse(json_text.begin() + static_cast<std::ptrdiff_t>(start), json_text.end(),
                                             nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::Protocol("fio: output is not valid JSON");
  if (!doc.contains("jobs") || !doc["jobs"].is_array() || doc["jobs"].empty()) {
    return Status::Protocol("fio: JSON output has no jobs");
  }
  FioResult r;
  for (const auto& job : doc["jobs"]) {
    if (job.value("error", 0) != 0) {
      return Status::IOError(
          fmt::format("fio: job {} failed with error {}", job.value("jobname", "?"), job.value("error", 0)));
    }
    if (job.contains("read")) AddSide(job["read"], &r.read);
    if (job.contains("write")) AddSide(job["write"], &r.write);
    r.usr_cpu_pct += job.value("usr_cpu", 0.0);
    r.sys_cpu_pct += job.value("sys_cpu", 0.0);
    // usr_cpu/sys_cpu are percent of job_runtime (ms, summed over grouped jobs).
    r.cpu_s += (job.value("usr_cpu", 0.0) + job.value("sys_cpu", 0.0)) / 100.0 * job.value("job_runtime", 0.0) / 1000.0;
  }
  return r;
}

Result<FioResult> RunFio(const FioJob& job) {
  if (job.filename.empty()) return Status::InvalidArgument("fio: job " + job.name + " has no filename");
  auto fio = FindOnPath("fio");
  if (!fio.ok()) return Status::NotFound("fio is not installed (not on PATH); install the fio package");
  ROS2_ASSIGN_OR_RETURN(auto scratch, TempDir::Create("/tmp", "ros2-bench-fio-"));
  const std::string out_path = scratch.path() + "/out.json";
  const std::string err_path = scratch.path() + "/stderr";

  std::vector<std::string> argv = {*fio,
                                   "--name=" + job.name,
                                   "--filename=" + job.filename,
                                   "--rw=" + job.rw,
                                   fmt::format("--bs={}", job.bs),
                                   fmt::format("--iodepth={}", job.iodepth),
                                   fmt::format("--numjobs={}", job.numjobs),
                                   fmt::format("--size={}", job.size),
                                   fmt::format("--runtime={}ms", static_cast<int64_t>(job.runtime_s * 1000)),
                                   "--time_based=1",
                                   "--ioengine=" + job.ioengine,
                                   fmt::format("--direct={}", job.direct ? 1 : 0),
                                   "--lat_percentiles=1",
                                   "--group_reporting=1",
                                   "--output-format=json",
                                   "--output=" + out_path};
  for (const auto& e : job.extra) argv.push_back(e);
  const std::string command = Join(argv);

  SpawnOptions spawn;
  spawn.argv = argv;
  spawn.stderr_path = err_path;
  ROS2_ASSIGN_OR_RETURN(auto child, ChildProcess::Spawn(spawn));
  // Layout of a missing file can take a while on a loaded VM; allow for it.
  auto limit = std::chrono::milliseconds(static_cast<int64_t>(job.runtime_s * 1000) + 300'000);
  auto rc = child.Wait(limit);
  if (!rc.ok()) return rc.status().WithContext("fio " + job.name);
  if (*rc != 0) {
    auto err = ReadFileOrError(err_path);
    auto out = ReadFileOrError(out_path);
    std::string detail = err.ok() ? *err : "";
    if (detail.empty() && out.ok()) detail = out->substr(0, 2000);
    return Status::IOError(fmt::format("fio exited with {} ({}): {}", *rc, command, detail));
  }
  ROS2_ASSIGN_OR_RETURN(std::string text, ReadFileOrError(out_path));
  auto parsed = ParseFioJson(text);
  if (!parsed.ok()) return parsed.status().WithContext(command);
  parsed->command = command;
  return parsed;
}

}  // namespace ros2::bench
