// `ros2-bench offload`: offload mode (the DFS client in ros2-agent, the host
// process on shared-memory rings) against direct mode (the DFS client in the
// host process), in the same run, through fio and the ROS2 external ioengine.
//
// For every transport (--transports, between the client and the engine: the
// host's libros2 in direct mode, the agent's in offload mode) the suite starts
// one single-node cluster with an agent (`ros2ctl cluster up --agent`), a pool
// and a container, and prefills each job's read file through the engine. Then,
// --rounds times, every case (op, block size, jobs) runs once in each mode,
// the two modes alternating which goes first from round to round. The two
// modes run the very same fio command; offload mode only adds
// ROS2_AGENT_SOCKET to fio's environment (the public API picks the mode from
// it). Writes go to a fresh container per run, destroyed after it.
//
// Like a host and its DPU, the host processes (fio) and the "DPU" (the agent
// and the engine) get separate CPUs when the machine has two or more:
// --host-cpus for fio, --dpu-cpus for the engine's targets and every thread of
// the engine and the agent (0 and 1 by default; --no-pin leaves them free).
//
// Per run the suite records throughput and CPU: the host's CPU is what fio's
// job processes used (fio's getrusage figures: they are the host processes
// alone), the engine's and the agent's the growth of their /proc/<pid>/stat
// times over the run. Reported per case and mode is the median of the rounds
// (spread on stderr); offload records carry the direct figure of the same case
// as baseline "direct". Beside them, mode=fio-null records fio's own CPU per I/O
// at each shape (ioengine=null), the floor under both modes' host figure.
// docs/benchmarks.md describes the suite.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bench/bench_report.h"
#include "bench/harness.h"
#include "bench/fio_bench_util.h"
#include "bench/posix_bench_util.h"

namespace ros2::bench {
namespace {

using posix::IsReadOp;
using posix::MedianOf;
using posix::RunFioArgs;

struct OffloadSuiteOptions {
  std::string dir = "/tmp";
  std::vector<std::string> transports = {"shm", "tcp"};
  std::vector<std::string> ops;  // empty with bs: the default cases below
  std::vector<uint64_t> bs;
  std::vector<int> jobs = {1, 4};
  std::vector<std::string> buffers = {"io"};  // fio's buffers: io (libros2 I/O buffers) | heap
  int rounds = 3;
  double runtime_s = 3;
  int qd = 16;
  std::string cls = "ram";
  int targets = 2;
  std::string shard_size = "2GiB";
  uint64_t read_size = uint64_t{128} << 20;    // per job's read file
  uint64_t write_total = uint64_t{2} << 30;  // per write run, split over its jobs (long enough to measure host CPU)
  std::vector<int> host_cpus = {0};
  std::vector<int> dpu_cpus = {1};
  bool no_pin = false;
  std::string ros2ctl;
  std::string engine;
  std::string fio_engine;
  std::vector<std::string> fio_engine_args;
};

OffloadSuiteOptions g_opts;

constexpr const char* kPool = "bench";
constexpr const char* kReadCont = "data";
constexpr const char* kModes[] = {"direct", "offload"};

struct CaseKey {
  std::string op;
  uint64_t bs;
  int jobs;
  std::string buffers;  // "io": Client::AllocateIoBuffer (the arena in offload mode); "heap": posix_memalign
  auto operator<=>(const CaseKey&) const = default;
};

// One run's figures. The CPU fields are totals over the run.
struct Run {
  double iops = 0;
  double mib_s = 0;
  double ios = 0;
  double bytes = 0;
  double host_cpu_s = 0;
  double engine_cpu_s = 0;
  double agent_cpu_s = 0;

  double PerIo(double cpu_s) const { return ios > 0 ? cpu_s / ios * 1e6 : 0; }
  double PerGib(double cpu_s) const { return bytes > 0 ? cpu_s / (bytes / double(1 << 30)) : 0; }
};

struct Metric {
  const char* name;
  double (*of)(const Run&);
  bool offload_only = false;
};

const Metric kMetrics[] = {
    {"iops", [](const Run& r) { return r.iops; }},
    {"mib_s", [](const Run& r) { return r.mib_s; }},
    {"host_cpu_us_per_io", [](const Run& r) { return r.PerIo(r.host_cpu_s); }},
    {"host_cpu_s_per_gib", [](const Run& r) { return r.PerGib(r.host_cpu_s); }},
    {"engine_cpu_us_per_io", [](const Run& r) { return r.PerIo(r.engine_cpu_s); }},
    {"agent_cpu_us_per_io", [](const Run& r) { return r.PerIo(r.agent_cpu_s); }, true},
};

class TransportRunner {
 public:
  TransportRunner(std::string scratch, std::string transport, LocalCluster& cluster)
      : scratch_(std::move(scratch)), transport_(std::move(transport)), cluster_(cluster) {}

  std::vector<std::string> EngineArgs(const std::string& cont) const {
    std::vector<std::string> a = {"--ioengine=external:" + g_opts.fio_engine, "--data_dir=" + cluster_.data_dir(),
                                  std::string("--pool=") + kPool, "--cont=" + cont, "--transport=" + transport_,
                                  // fio lstat()s --directory on the local file system: DFS paths go in the name.
                                  "--filename_format=/bench/$jobname.$jobnum.$filenum"};
    if (!g_opts.no_pin) a.push_back(fmt::format("--cpus_allowed={}", fmt::join(g_opts.host_cpus, ",")));
    a.insert(a.end(), g_opts.fio_engine_args.begin(), g_opts.fio_engine_args.end());
    return a;
  }

  std::vector<std::string> JobArgs(const CaseKey& k) const {
    auto a = posix::FioCaseArgs(k.op, k.bs, g_opts.qd, k.jobs, g_opts.runtime_s, g_opts.read_size, g_opts.write_total);
    // Making the bytes to write is application work, not I/O, and would hide
    // the client stack's CPU in both modes: fio writes zeroed buffers (no
    // random fill of every buffer at start, no re-scrambling per write).
    if (!IsReadOp(k.op)) a.insert(a.end(), {"--zero_buffers=1", "--scramble_buffers=0"});
    return a;
  }

  // fio's own CPU per I/O at this shape (ioengine=null: no I/O at all), the
  // floor under either mode's host CPU.
  Result<double> FioFloorUsPerIo(const CaseKey& k) const {
    std::vector<std::string> args = {"--ioengine=null", fmt::format("--size={}", g_opts.read_size)};
    if (!g_opts.no_pin) args.push_back(fmt::format("--cpus_allowed={}", fmt::join(g_opts.host_cpus, ",")));
    auto job = JobArgs(k);
    job.erase(std::remove_if(job.begin(), job.end(), [](const std::string& a) { return a.starts_with("--size="); }),
              job.end());
    args.insert(args.end(), job.begin(), job.end());
    args.push_back("--time_based=1");
    ROS2_ASSIGN_OR_RETURN(auto r, RunFioArgs(args, scratch_, g_opts.runtime_s + 60));
    const FioSide& side = IsReadOp(k.op) ? r.read : r.write;
    if (side.total_ios == 0) return Status::Internal("offload bench: fio's null engine did no I/O");
    return r.cpu_s / static_cast<double>(side.total_ios) * 1e6;
  }

  Status Prefill(int max_jobs) {
    return posix::PrefillReadFiles(EngineArgs(kReadCont), g_opts.qd, max_jobs, g_opts.read_size, scratch_);
  }

  // One fio run of case `k` in `mode`, with the CPU of the engine and agent over it.
  Result<Run> RunOnce(const CaseKey& k, const std::string& mode) {
    std::optional<std::string> cont;
    if (!IsReadOp(k.op)) {
      ROS2_ASSIGN_OR_RETURN(cont, FreshContainer());
    }
    std::vector<std::string> args = EngineArgs(cont ? *cont : std::string(kReadCont));
    auto job = JobArgs(k);
    args.insert(args.end(), job.begin(), job.end());
    // Heap buffers: direct mode hands them to the transport as they are (cma or
    // a bounce by size); offload mode copies each I/O through an arena buffer.
    if (k.buffers == "heap") args.push_back("--io_buffers=0");
    std::vector<std::pair<std::string, std::string>> env;
    if (mode == "offload") env.emplace_back("ROS2_AGENT_SOCKET", cluster_.agent_socket());
    ROS2_ASSIGN_OR_RETURN(pid_t engine, cluster_.engine_pid());
    ROS2_ASSIGN_OR_RETURN(pid_t agent, cluster_.agent_pid());
    ROS2_ASSIGN_OR_RETURN(double engine0, ProcessCpuSeconds(engine));
    ROS2_ASSIGN_OR_RETURN(double agent0, ProcessCpuSeconds(agent));
    auto r = RunFioArgs(args, scratch_, g_opts.runtime_s + 600, env);
    ROS2_ASSIGN_OR_RETURN(double engine1, ProcessCpuSeconds(engine));
    ROS2_ASSIGN_OR_RETURN(double agent1, ProcessCpuSeconds(agent));
    if (cont) DestroyContainer(*cont);
    if (!r.ok()) return r.status().WithContext(fmt::format("mode={} transport={}", mode, transport_));
    const FioSide& side = IsReadOp(k.op) ? r->read : r->write;
    if (side.total_ios == 0) return Status::Internal(fmt::format("offload bench: {} run of {} did no I/O", mode, k.op));
    Run run;
    run.iops = side.iops;
    run.mib_s = side.bw_bytes / (1 << 20);
    run.ios = static_cast<double>(side.total_ios);
    run.bytes = static_cast<double>(side.io_bytes);
    run.host_cpu_s = r->cpu_s;
    run.engine_cpu_s = engine1 - engine0;
    run.agent_cpu_s = agent1 - agent0;
    return run;
  }

 private:
  // A new container whose shards already exist on every target.
  Result<std::string> FreshContainer() {
    const std::string name = fmt::format("w{}", seq_++);
    ROS2_RETURN_IF_ERROR(posix::CreateWarmContainer(cluster_, kPool, name, EngineArgs(name), scratch_));
    return name;
  }
  void DestroyContainer(const std::string& name) { posix::DestroyContainerLogged(cluster_, kPool, name); }

  std::string scratch_;
  std::string transport_;
  LocalCluster& cluster_;
  int seq_ = 0;
};

// fio's null engine (mode fio-null) has no buffers of ours: its case names none.
std::string CaseDesc(const CaseKey& k, const std::string& transport, const std::string& mode) {
  std::vector<std::pair<std::string, std::string>> kv = {{"op", k.op},
                                                         {"bs", std::to_string(k.bs)},
                                                         {"qd", std::to_string(g_opts.qd)},
                                                         {"jobs", std::to_string(k.jobs)},
                                                         {"transport", transport},
                                                         {"class", g_opts.cls}};
  if (mode != "fio-null") kv.emplace_back("buffers", k.buffers);
  kv.emplace_back("mode", mode);
  return CaseString(kv);
}

// The key of a case's fio floor: one per shape, whatever the buffers.
CaseKey FloorKey(const CaseKey& k) {
  return {k.op, k.bs, k.jobs, ""};
}

// The cases: --ops x --bs when either is given, else the shapes (4 KiB
// random reads, 1 MiB reads and writes), each at every --jobs value and with
// every kind of --buffers.
std::vector<CaseKey> Cases() {
  std::vector<std::pair<std::string, uint64_t>> shapes;
  if (g_opts.ops.empty() && g_opts.bs.empty()) {
    shapes = {{"randread", 4096}, {"read", uint64_t{1} << 20}, {"write", uint64_t{1} << 20}};
  } else {
    const std::vector<std::string> ops =
        g_opts.ops.empty() ? std::vector<std::string>{"randread", "read", "write"} : g_opts.ops;
    const std::vector<uint64_t> bs = g_opts.bs.empty() ? std::vector<uint64_t>{4096, uint64_t{1} << 20} : g_opts.bs;
    for (uint64_t b : bs)
      for (const auto& op : ops) shapes.emplace_back(op, b);
  }
  std::vector<CaseKey> cases;
  for (const auto& [op, b] : shapes)
    for (int j : g_opts.jobs)
      for (const auto& buffers : g_opts.buffers) cases.push_back({op, b, j, buffers});
  return cases;
}

using Runs = std::map<std::string, std::vector<Run>>;  // per mode, one per round

void Report(Reporter& rep, const std::string& transport, const CaseKey& k, const Runs& runs) {
  for (const Metric& m : kMetrics) {
    std::map<std::string, double> med;
    for (const auto& [mode, v] : runs) {
      std::vector<double> xs;
      for (const Run& r : v) xs.push_back(m.of(r));
      med[mode] = MedianOf(xs);
    }
    if (!m.offload_only && med.contains("direct")) {
      rep.Add(Record{"offload", CaseDesc(k, transport, "direct"), m.name, med["direct"], std::nullopt, std::nullopt});
    }
    if (med.contains("offload")) {
      Record r{"offload", CaseDesc(k, transport, "offload"), m.name, med["offload"], std::nullopt, std::nullopt};
      if (!m.offload_only && med.contains("direct")) {
        r.baseline = "direct";
        r.baseline_value = med["direct"];
      }
      rep.Add(std::move(r));
    }
  }
}

// Median ratio offload/direct of metric `m` and its spread over the rounds.
struct Ratio {
  double median = 0, lo = 0, hi = 0;
};

Ratio RatioOf(const Runs& runs, double (*of)(const Run&)) {
  Ratio out;
  auto d = runs.find("direct");
  auto o = runs.find("offload");
  if (d == runs.end() || o == runs.end()) return out;
  std::vector<double> ratios;
  for (size_t i = 0; i < std::min(d->second.size(), o->second.size()); ++i) {
    const double base = of(d->second[i]);
    if (base > 0) ratios.push_back(of(o->second[i]) / base);
  }
  if (ratios.empty()) return out;
  out.median = MedianOf(ratios);
  out.lo = *std::min_element(ratios.begin(), ratios.end());
  out.hi = *std::max_element(ratios.begin(), ratios.end());
  return out;
}

// A case as the stderr lines name it: "shm  randread  bs=4096     jobs=1 io  ".
std::string CaseLabel(const std::string& transport, const CaseKey& k) {
  return fmt::format("{:<4} {:<9} bs={:<8} jobs={} {:<4}", transport, k.op, k.bs, k.jobs, k.buffers);
}

void Summarize(const std::string& transport, const CaseKey& k, const Runs& runs, double fio_floor_us) {
  const std::string label = CaseLabel(transport, k);
  auto line = [&](const char* what, double (*of)(const Run&), const char* target) {
    Ratio r = RatioOf(runs, of);
    std::fprintf(stderr, "  %s  %-22s offload/direct %.2f (rounds %.2f..%.2f)  %s\n", label.c_str(), what, r.median,
                 r.lo, r.hi, target);
  };
  const bool small = k.bs <= 4096;
  line("throughput", [](const Run& r) { return r.mib_s; }, small ? "(target >= 0.7)" : "(target >= 0.8)");
  line("host cpu per i/o", [](const Run& r) { return r.PerIo(r.host_cpu_s); },
       small ? "(target <= 0.25)" : "(target <= 0.1)");
  std::vector<double> d, o;
  if (auto it = runs.find("direct"); it != runs.end())
    for (const Run& r : it->second) d.push_back(r.PerIo(r.host_cpu_s));
  if (auto it = runs.find("offload"); it != runs.end())
    for (const Run& r : it->second) o.push_back(r.PerIo(r.host_cpu_s));
  std::fprintf(stderr, "  %s  host cpu us/io: direct %.1f, offload %.1f, fio itself %.1f\n", label.c_str(),
               MedianOf(d), MedianOf(o), fio_floor_us);
}

void PrintRun(const std::string& transport, const CaseKey& k, const std::string& mode, const Run& r) {
  std::fprintf(stderr, "offload bench: %s %-7s %9.0f IOPS %8.1f MiB/s  cpu us/io: host %.1f engine %.1f agent %.1f\n",
               CaseLabel(transport, k).c_str(), mode.c_str(), r.iops, r.mib_s, r.PerIo(r.host_cpu_s),
               r.PerIo(r.engine_cpu_s), r.PerIo(r.agent_cpu_s));
}

int RunOffloadSuite(Reporter& rep) {
  if (g_opts.ros2ctl.empty()) g_opts.ros2ctl = BuildTreeBinaryPath("tools/ros2ctl/ros2ctl");
  if (g_opts.engine.empty()) {
    const std::string e = BuildTreeBinaryPath("src/engine/ros2-engine");
    if (access(e.c_str(), X_OK) == 0) g_opts.engine = e;
  }
  if (g_opts.fio_engine.empty()) g_opts.fio_engine = BuildTreeBinaryPath("src/fio/libros2_fio.so");
  if (access(g_opts.ros2ctl.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "offload bench: ros2ctl not found at '%s' (use --ros2ctl)\n", g_opts.ros2ctl.c_str());
    return 2;
  }
  if (access(g_opts.fio_engine.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "offload bench: fio engine not found at '%s' (build target ros2_fio, or use --fio-engine)\n",
                 g_opts.fio_engine.c_str());
    return 2;
  }
  for (const auto& op : g_opts.ops) {
    if (op != "read" && op != "randread" && op != "write" && op != "randwrite") {
      std::fprintf(stderr, "offload bench: unknown --ops value '%s' (read, randread, write, randwrite)\n", op.c_str());
      return 2;
    }
  }
  for (const auto& b : g_opts.buffers) {
    if (b != "io" && b != "heap") {
      std::fprintf(stderr, "offload bench: unknown --buffers value '%s' (io, heap)\n", b.c_str());
      return 2;
    }
  }
  for (const auto& t : g_opts.transports) {
    if (t != "shm" && t != "tcp") {
      std::fprintf(stderr, "offload bench: unknown --transports value '%s' (shm, tcp)\n", t.c_str());
      return 2;
    }
  }
  if (g_opts.jobs.empty() || g_opts.buffers.empty() || g_opts.qd < 1 || g_opts.rounds < 1 || g_opts.runtime_s <= 0) {
    std::fprintf(stderr,
                 "offload bench: need --jobs and --buffers values, --qd >= 1, --rounds >= 1 and --runtime > 0\n");
    return 2;
  }
  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (!g_opts.no_pin) {
    for (int c : g_opts.host_cpus)
      if (c < 0 || c >= ncpu) g_opts.no_pin = true;
    for (int c : g_opts.dpu_cpus)
      if (c < 0 || c >= ncpu) g_opts.no_pin = true;
    if (g_opts.no_pin) std::fprintf(stderr, "offload bench: %ld CPUs; host and DPU CPUs not pinned\n", ncpu);
  }
  auto scratch = TempDir::Create(g_opts.dir, "ros2-bench-offload-");
  if (!scratch.ok()) {
    std::fprintf(stderr, "offload bench: %s\n", scratch.status().ToString().c_str());
    return 1;
  }
  const std::vector<CaseKey> cases = Cases();
  const int max_jobs = *std::max_element(g_opts.jobs.begin(), g_opts.jobs.end());
  const bool any_read = std::any_of(cases.begin(), cases.end(), [](const CaseKey& k) { return IsReadOp(k.op); });
  std::fprintf(stderr, "offload bench: %zu cases x 2 modes x %d rounds per transport, %.1fs each, %s class\n",
               cases.size(), g_opts.rounds, g_opts.runtime_s, g_opts.cls.c_str());
  int rc = 0;
  for (const auto& transport : g_opts.transports) {
    const std::string dir = scratch->path() + "/" + transport;
    std::filesystem::create_directories(dir);
    auto cluster = LocalCluster::Up(dir, {.ros2ctl = g_opts.ros2ctl,
                                          .engine = g_opts.engine,
                                          .storage_class = g_opts.cls,
                                          .transport = transport,
                                          .targets = g_opts.targets,
                                          .shard_size = g_opts.shard_size,
                                          .target_cpus = g_opts.no_pin ? std::vector<int>{} : g_opts.dpu_cpus,
                                          .agent = true});
    Status st = cluster.status();
    if (st.ok() && !g_opts.no_pin) {
      for (auto pid : {(*cluster)->engine_pid(), (*cluster)->agent_pid()}) {
        st = pid.ok() ? PinProcess(*pid, g_opts.dpu_cpus) : pid.status();
        if (!st.ok()) break;
      }
    }
    if (st.ok()) st = (*cluster)->Ctl({"pool", "create", kPool, "--size", posix::PoolSizeFor(g_opts.shard_size, g_opts.targets)}).status();
    if (st.ok()) st = (*cluster)->Ctl({"cont", "create", kPool, kReadCont}).status();
    TransportRunner runner(dir, transport, **cluster);
    if (st.ok() && any_read) st = runner.Prefill(max_jobs);
    if (!st.ok()) {
      std::fprintf(stderr, "offload bench: %s setup: %s\n", transport.c_str(), st.ToString().c_str());
      rc = 1;
      continue;
    }
    std::map<CaseKey, Runs> all;
    std::map<CaseKey, double> floors;
    for (int round = 0; round < g_opts.rounds && st.ok(); ++round) {
      for (const CaseKey& k : cases) {
        for (int m = 0; m < 2; ++m) {
          const std::string mode = kModes[(m + round) % 2];  // alternate which mode goes first
          auto run = runner.RunOnce(k, mode);
          if (!run.ok()) {
            st = run.status();
            break;
          }
          PrintRun(transport, k, mode, *run);
          all[k][mode].push_back(*run);
        }
        if (!st.ok()) break;
      }
    }
    if (!st.ok()) {
      std::fprintf(stderr, "offload bench: %s: %s\n", transport.c_str(), st.ToString().c_str());
      rc = 1;
      continue;
    }
    for (const auto& [k, runs] : all) {
      Report(rep, transport, k, runs);
      const CaseKey shape = FloorKey(k);
      if (!floors.contains(shape)) {
        auto floor = runner.FioFloorUsPerIo(k);
        if (!floor.ok()) {
          std::fprintf(stderr, "offload bench: fio null engine: %s\n", floor.status().ToString().c_str());
          continue;
        }
        rep.Add(Record{"offload", CaseDesc(shape, transport, "fio-null"), "host_cpu_us_per_io", *floor, std::nullopt,
                       std::nullopt});
        floors[shape] = *floor;
      }
    }
    std::fprintf(stderr, "offload bench: %s, median of %d rounds:\n", transport.c_str(), g_opts.rounds);
    for (const auto& [k, runs] : all) {
      auto floor = floors.find(FloorKey(k));
      Summarize(transport, k, runs, floor != floors.end() ? floor->second : 0);
    }
  }
  return rc;
}

const bool registered = RegisterSuite(Suite{
    "offload",
    "fio through the ROS2 ioengine in offload mode (the client in ros2-agent) vs direct mode, same run",
    [](CLI::App& app) {
      app.add_option("--dir", g_opts.dir, "parent of the scratch dir (cluster data)");
      app.add_option("--transports", g_opts.transports, "client-engine transports: shm tcp")->delimiter(',');
      app.add_option("--ops", g_opts.ops, "ops: read randread write randwrite (with --bs: every pair)")
          ->delimiter(',');
      app.add_option("--bs", g_opts.bs, "block sizes in bytes (default cases: 4 KiB randread, 1 MiB read and write)")
          ->delimiter(',');
      app.add_option("--jobs", g_opts.jobs, "fio numjobs values (one file per job)")->delimiter(',');
      app.add_option("--buffers", g_opts.buffers,
                     "fio's buffers: io (libros2 I/O buffers: arena memory in offload mode, zero-copy) and/or heap "
                     "(ordinary memory: offload mode copies each I/O through the arena)")
          ->delimiter(',');
      app.add_option("--rounds", g_opts.rounds, "alternating rounds (the median is reported)");
      app.add_option("--runtime", g_opts.runtime_s, "seconds per run (cap for writes)");
      app.add_option("--qd", g_opts.qd, "fio iodepth");
      app.add_option("--class", g_opts.cls, "storage class of the cluster: ram nvme");
      app.add_option("--targets", g_opts.targets, "engine targets");
      app.add_option("--shard-size", g_opts.shard_size, "extent capacity of each container shard (cluster up)");
      app.add_option("--read-size", g_opts.read_size, "bytes of each job's read file");
      app.add_option("--write-total", g_opts.write_total, "bytes each write run writes, split over its jobs");
      app.add_option("--host-cpus", g_opts.host_cpus, "CPUs of the host processes (fio)")->delimiter(',');
      app.add_option("--dpu-cpus", g_opts.dpu_cpus, "CPUs of the engine and the agent")->delimiter(',');
      app.add_flag("--no-pin", g_opts.no_pin, "leave every process on every CPU");
      app.add_option("--ros2ctl", g_opts.ros2ctl, "ros2ctl binary (default: the build tree's)");
      app.add_option("--engine", g_opts.engine, "ros2-engine binary (default: the build tree's)");
      app.add_option("--fio-engine", g_opts.fio_engine, "libros2_fio.so (default: the build tree's)");
      app.add_option("--fio-engine-arg", g_opts.fio_engine_args,
                     "extra option of the ros2 fio engine in both modes, e.g. --fio-engine-arg=--spin_us=0");
    },
    RunOffloadSuite,
});

}  // namespace
}  // namespace ros2::bench
