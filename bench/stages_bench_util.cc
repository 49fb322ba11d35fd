#include "bench/stages_bench_util.h"

#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_report.h"
#include "metrics/scrape.h"
#include "transport/transport.h"

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
    return Status::NotSupported(fmt::format(
        "{}: no ros2_engine_io_stage_* counters (start the engine with ROS2_ENGINE_IO_STAGES=1)", endpoint));
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
  const double wall = io_seconds > 0 ? io_seconds : std::chrono::duration<double>(after.at - before.at).count();
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

namespace {

// One /proc/stat "cpu" or "cpuN" line: its name and its busy and interrupt
// ticks (busy: user, nice, system, irq, softirq, steal; iowait counts as idle).
struct CpuLine {
  std::string name;
  double busy = 0;
  double irq = 0;
};
std::optional<CpuLine> ParseCpuLine(const std::string& line) {
  std::istringstream fields(line);
  CpuLine c;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(fields >> c.name >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal)) return std::nullopt;
  c.busy = user + nice + system + irq + softirq + steal;
  c.irq = irq + softirq;
  return c;
}

}  // namespace

Result<MachineCpu> SampleMachineCpu() {
  std::ifstream in("/proc/stat");
  std::string line;
  std::optional<CpuLine> all;
  if (!std::getline(in, line) || !(all = ParseCpuLine(line)) || all->name != "cpu") {
    return Status::IOError("/proc/stat: no cpu line");
  }
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  MachineCpu m;
  m.busy_s = all->busy / tick;
  m.irq_s = all->irq / tick;
  while (std::getline(in, line) && line.starts_with("cpu")) {
    if (auto one = ParseCpuLine(line)) m.per_cpu_busy_s.push_back(one->busy / tick);
  }
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
  if (before.per_cpu_busy_s.size() == after.per_cpu_busy_s.size()) {
    for (size_t i = 0; i < after.per_cpu_busy_s.size(); ++i) {
      r.per_cpu_busy.push_back((after.per_cpu_busy_s[i] - before.per_cpu_busy_s[i]) / r.wall_s);
    }
  }
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
      engine_us, client_us, sum, local_us > 0 ? sum / local_us : 0.0, local_us, engine_run.cpus, idle_ceiling / 1e3,
      idle_ceiling / local_iops, local_iops / 1e3, left, left_ceiling / 1e3, left_ceiling / local_iops);
}

namespace {

bool Pass(int fd) {
  const uint64_t one = 1;
  return ::write(fd, &one, sizeof(one)) == sizeof(one);
}

bool Take(int fd) {
  uint64_t v = 0;
  return ::read(fd, &v, sizeof(v)) == sizeof(v);
}

// `rounds` round trips from this thread to a responder thread; the responder
// is pinned to `responder_cpu` and this thread to `own_cpu` when both are >= 0.
Result<std::pair<double, double>> RoundTrips(int rounds, int own_cpu, int responder_cpu) {
  const int ping = ::eventfd(0, EFD_CLOEXEC);
  const int pong = ::eventfd(0, EFD_CLOEXEC);
  if (ping < 0 || pong < 0) {
    if (ping >= 0) ::close(ping);
    if (pong >= 0) ::close(pong);
    return Status::IOError("wake probe: eventfd failed");
  }
  std::atomic<int> responder_at{-1};
  std::thread responder([&] {
    if (responder_cpu >= 0) (void)transport::PinCurrentThreadToCpu(responder_cpu);
    for (int i = 0; i < rounds; ++i) {
      if (!Take(ping)) break;
      responder_at.store(::sched_getcpu(), std::memory_order_relaxed);
      if (!Pass(pong)) break;
    }
  });
  const std::vector<int> own_cpus = transport::CurrentThreadCpus();
  if (own_cpu >= 0) (void)transport::PinCurrentThreadToCpu(own_cpu);
  std::vector<double> rtt;
  rtt.reserve(static_cast<size_t>(rounds));
  int same = 0;
  for (int i = 0; i < rounds; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!Pass(ping) || !Take(pong)) break;
    rtt.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (responder_at.load(std::memory_order_relaxed) == ::sched_getcpu()) ++same;
  }
  if (static_cast<int>(rtt.size()) < rounds) Pass(ping);  // let a waiting responder out
  responder.join();
  if (own_cpu >= 0 && !own_cpus.empty()) (void)transport::SetCurrentThreadCpus(own_cpus);
  ::close(ping);
  ::close(pong);
  if (rtt.empty()) return Status::IOError("wake probe: the event fds failed");
  const double share = static_cast<double>(same) / static_cast<double>(rtt.size());
  return std::make_pair(Percentile(std::move(rtt), 50), share);
}

}  // namespace

Result<WakeProbe> ProbeWakeUps(int rounds) {
  if (rounds <= 0) return Status::InvalidArgument("wake probe: rounds must be positive");
  WakeProbe p;
  p.rounds = rounds;
  ROS2_ASSIGN_OR_RETURN(auto free, RoundTrips(rounds, -1, -1));
  p.free_rtt_us = free.first;
  p.same_cpu_share = free.second;
  const std::vector<int> cpus = transport::CurrentThreadCpus();
  if (cpus.size() >= 2) {
    ROS2_ASSIGN_OR_RETURN(auto split, RoundTrips(rounds, cpus[0], cpus[1]));
    p.split_rtt_us = split.first;
  }
  return p;
}

std::string FormatWakeProbe(const WakeProbe& p) {
  std::string out = fmt::format(
      "posix bench: wake-ups: {:.0f}% of a blocked thread's wake-ups ran on its waker's CPU; round trip {:.1f} us "
      "where the scheduler put the threads",
      p.same_cpu_share * 100, p.free_rtt_us);
  if (p.split_rtt_us > 0) out += fmt::format(", {:.1f} us across two CPUs", p.split_rtt_us);
  return out + fmt::format(" (median of {})\n", p.rounds);
}

}  // namespace ros2::bench
