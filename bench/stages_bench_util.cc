#include "bench/stages_bench_util.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "metrics/scrape.h"

namespace ros2::bench {

Result<std::string> EngineMetricsEndpoint(const std::string& ready_file) {
  std::ifstream in(ready_file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("metrics=")) return line.substr(8);
  }
  return Status::NotFound(fmt::format("{}: no metrics= line (is the engine's metrics endpoint on?)", ready_file));
}

Result<StageSnapshot> ScrapeStages(const std::string& endpoint) {
  ROS2_ASSIGN_OR_RETURN(std::string body, metrics::HttpGet(endpoint, "/metrics"));
  ROS2_ASSIGN_OR_RETURN(auto samples, metrics::ParseExposition(body));
  StageSnapshot snap;
  snap.at = std::chrono::steady_clock::now();
  bool any = false;
  for (const auto& s : samples) {
    if (s.name == "ros2_engine_device_inflight_seconds_total") {
      snap.device_inflight_seconds += s.value;
      continue;
    }
    const bool seconds = s.name == "ros2_engine_io_stage_seconds_total";
    if (!seconds && s.name != "ros2_engine_io_stage_reads_total") continue;
    for (size_t i = 0; i < io_stages::kStages; ++i) {
      if (s.Label("stage") != io_stages::kStageNames[i]) continue;
      (seconds ? snap.seconds : snap.reads)[i] += s.value;
      any = true;
    }
  }
  if (!any) {
    return Status::NotSupported(
        fmt::format("{}: no ros2_engine_io_stage_* counters (start the engine with ROS2_ENGINE_IO_STAGES=1)", endpoint));
  }
  return snap;
}

std::string FormatStages(const StageSnapshot& before, const StageSnapshot& after, int client_in_flight,
                         double io_seconds) {
  std::ostringstream out;
  for (size_t i = 0; i < io_stages::kStages; ++i) {
    const double reads = after.reads[i] - before.reads[i];
    const double us = reads > 0 ? (after.seconds[i] - before.seconds[i]) * 1e6 / reads : 0;
    out << fmt::format("  stage {:<7} {:9.1f} us  ({:.0f} reads)\n", io_stages::kStageNames[i], us, reads);
  }
  const double wall =
      io_seconds > 0 ? io_seconds : std::chrono::duration<double>(after.at - before.at).count();
  const double depth = wall > 0 ? (after.device_inflight_seconds - before.device_inflight_seconds) / wall : 0;
  const size_t total = io_stages::kTotal;
  const double in_engine = wall > 0 ? (after.seconds[total] - before.seconds[total]) / wall : 0;
  out << fmt::format("  device in flight {:.1f} (mean over {:.1f} s) against the client's {}\n", depth, wall,
                     client_in_flight);
  out << fmt::format("  client's {} reads: {:.1f} in the engine ({:.1f} at the device), {:.1f} outside it\n",
                     client_in_flight, in_engine, depth, client_in_flight - in_engine);
  return out.str();
}

std::string FormatClientStages(const std::string& file) {
  std::ifstream in(file);
  std::string word;
  double ios = 0, library = 0, waiting = 0, requests = 0, messages = 0, reaps = 0, waits = 0, sleeps = 0;
  double value = 0;
  while (in >> word >> value) {
    if (word == "ios") ios += value;
    if (word == "library_ns") library += value;
    if (word == "waiting_ns") waiting += value;
    if (word == "requests") requests += value;
    if (word == "messages") messages += value;
    if (word == "reaps") reaps += value;
    if (word == "waits") waits += value;
    if (word == "sleeps") sleeps += value;
  }
  if (ios <= 0) return "";
  std::string out = fmt::format("  client: submit to callback {:.1f} us, callback to fio {:.1f} us ({:.0f} I/Os)\n",
                                library / ios / 1e3, waiting / ios / 1e3, ios);
  if (messages > 0) {
    out += fmt::format("  client: {:.0f} requests in {:.0f} messages ({:.2f} a message)\n", requests, messages,
                       requests / messages);
  }
  if (reaps > 0) {
    out += fmt::format(
        "  client: {:.0f} reaps, {:.2f} a read; {:.2f} of them waited for a reply; {:.3f} sleeps (wake-ups) a read\n",
        reaps, reaps / ios, waits / reaps, sleeps / ios);
  }
  return out;
}

std::map<pid_t, ThreadSched> SampleThreads(pid_t pid, const std::string& prefix) {
  std::map<pid_t, ThreadSched> out;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(fmt::format("/proc/{}/task", pid), ec)) {
    std::ifstream comm(task.path() / "comm");
    std::ifstream stat(task.path() / "schedstat");
    ThreadSched t;
    if (!std::getline(comm, t.name) || !t.name.starts_with(prefix)) continue;
    if (!(stat >> t.run_ns >> t.wait_ns >> t.waits)) continue;
    out[static_cast<pid_t>(std::stol(task.path().filename().string()))] = t;
  }
  return out;
}

std::string FormatThreads(const std::map<pid_t, ThreadSched>& before, const std::map<pid_t, ThreadSched>& after,
                          double wall) {
  std::ostringstream out;
  if (wall <= 0) return "";
  for (const auto& [tid, a] : after) {
    auto b = before.find(tid);
    if (b == before.end()) continue;
    const double run = a.run_ns - b->second.run_ns;
    const double wait = a.wait_ns - b->second.wait_ns;
    const double waits = a.waits - b->second.waits;
    out << fmt::format("  thread {:<15} ran {:4.1f}%, waited for a CPU {:4.1f}% ({:.1f} us a wait)\n", a.name,
                       run / wall / 1e7, wait / wall / 1e7, waits > 0 ? wait / waits / 1e3 : 0);
  }
  return out.str();
}

Result<MachineCpu> SampleMachineCpu() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu") {
    return Status::IOError("/proc/stat: no cpu line");
  }
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  MachineCpu m;
  m.busy_s = (user + nice + system + irq + softirq + steal) / tick;
  m.irq_s = (irq + softirq) / tick;
  m.cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  m.at = std::chrono::steady_clock::now();
  return m;
}

RunCpu CpuOfRun(const MachineCpu& before, const MachineCpu& after, double own_s, double ios) {
  RunCpu r;
  r.cpus = after.cpus;
  r.wall_s = std::chrono::duration<double>(after.at - before.at).count();
  if (r.wall_s <= 0) return r;
  r.busy_cpus = (after.busy_s - before.busy_s) / r.wall_s;
  r.other_cpus = std::max(0.0, r.busy_cpus - own_s / r.wall_s);
  if (ios > 0) r.irq_us_per_io = (after.irq_s - before.irq_s) * 1e6 / ios;
  return r;
}

std::string FormatCpuArithmetic(double engine_us, double client_us, double local_us, double local_iops,
                                const RunCpu& engine_run) {
  const double sum = engine_us + client_us;
  if (sum <= 0 || local_iops <= 0 || engine_run.cpus <= 0) return "";
  const double idle_ceiling = engine_run.cpus * 1e6 / sum;
  const double left = std::max(0.0, engine_run.cpus - engine_run.other_cpus);
  const double left_ceiling = left * 1e6 / sum;
  return fmt::format(
      "  cpu arithmetic: engine {:.1f} + client {:.1f} = {:.1f} us a read ({:.1f}x local fio's {:.1f}); "
      "{} idle CPUs allow {:.1f} K IOPS ({:.2f} x local's {:.1f} K); the other load left {:.2f} CPUs: "
      "{:.1f} K ({:.2f} x local)\n",
      engine_us, client_us, sum, local_us > 0 ? sum / local_us : 0.0, local_us, engine_run.cpus,
      idle_ceiling / 1e3, idle_ceiling / local_iops, local_iops / 1e3, left, left_ceiling / 1e3,
      left_ceiling / local_iops);
}

}  // namespace ros2::bench
