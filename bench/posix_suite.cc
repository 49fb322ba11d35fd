// `ros2-bench posix`: fio through the ROS2 external ioengine (libros2_fio.so,
// DFS over libros2) and through a ros2-fuse mount, against fio on the local
// file system, in the same run.
//
// The suite starts one single-node cluster (`ros2ctl cluster up --class nvme
// --transport shm` by default) whose data directory sits in the scratch
// directory, i.e. on the same file system as the local baseline's files. Per
// case (op, block size, jobs) it runs, back to back and --repeat times:
//   local  — fio ioengine=io_uring direct=1 on files in <scratch>/local,
//   engine — fio ioengine=external:libros2_fio.so on DFS files,
//   mount  — fio ioengine=io_uring direct=1 on files under a ros2-fuse mount
//            (skipped when the ros2-fuse binary is not built),
// all with the same rw, bs, iodepth (--qd) and numjobs (one file per job).
// Reads run --runtime seconds (time_based) over files prefilled once (fio lays
// out the local ones; the DFS ones are written through the engine and seen by
// the mount). Writes write --write-total bytes split over the jobs, capped at
// --runtime, into fresh files; on the ROS2 side into a fresh container per case
// and side (the engine keeps every version until aggregation, so a time-based
// overwrite loop would fill the shards). Records: engine vs local fio
// (baseline fio-io_uring), mount vs engine (baseline engine); the median of
// the repeats. Beside them, CPU per I/O: `cpu_us_per_io` is the engine
// process's user + system time over the fio run (engine and mount sides)
// divided by the I/Os done, `client_cpu_us_per_io` fio's own (local and engine
// sides; on the mount side ros2-fuse does the client's work). CPU time rather
// than throughput: it does not move with the VM's noise as IOPS do.
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

#include "bench/bench_report.h"
#include "bench/fio_bench_util.h"
#include "bench/harness.h"
#include "bench/posix_bench_util.h"
#include "bench/stages_bench_util.h"

namespace ros2::bench {
namespace {

using posix::IsReadOp;
using posix::MedianOf;
using posix::RunFioArgs;

struct PosixSuiteOptions {
  std::string dir = "/tmp";
  std::vector<std::string> ops = {"write", "read", "randwrite", "randread"};
  std::vector<uint64_t> bs = {uint64_t{1} << 20, 4096};
  std::vector<int> jobs = {1, 2, 4};
  std::vector<std::string> modes = {"local", "engine", "mount"};
  int qd = 16;
  double runtime_s = 3;
  uint64_t read_size = uint64_t{128} << 20;    // per job's read file
  uint64_t write_total = uint64_t{512} << 20;  // per write case, split over its jobs
  int repeat = 1;
  std::string cls = "nvme";
  std::string transport = "shm";
  int targets = 2;
  std::string shard_size = "1GiB";  // per container and target; the pool gets targets x this
  std::string ros2ctl;
  std::string engine;
  std::string fio_engine;  // libros2_fio.so
  std::string fuse;        // ros2-fuse
  std::vector<std::string> fuse_args;
  std::vector<std::string> fio_engine_args;  // e.g. --spin_us=50
  bool stages = false;  // time the engine's read stages (ROS2_ENGINE_IO_STAGES=1) and print them per engine run
  std::vector<int> target_cpus;  // engine target_cpus (empty: unpinned)
  std::string fio_cpus;          // fio --cpus_allowed of every side (empty: unpinned)
};

PosixSuiteOptions g_opts;

constexpr const char* kPool = "bench";
constexpr const char* kReadCont = "data";

struct CaseKey {
  std::string op;
  uint64_t bs;
  int jobs;
  auto operator<=>(const CaseKey&) const = default;
};

struct Figures {
  double mib_s = 0;
  double iops = 0;
  double lat_us_p50 = 0;
  double cpu_us_per_io = 0;         // the engine's (0: not measured)
  double client_cpu_us_per_io = 0;  // fio's (0: not measured)
};

// fio arguments shared by every mode of one case.
std::vector<std::string> JobArgs(const CaseKey& k) {
  auto a = posix::FioCaseArgs(k.op, k.bs, g_opts.qd, k.jobs, g_opts.runtime_s, g_opts.read_size, g_opts.write_total);
  a.push_back("--lat_percentiles=1");
  if (!g_opts.fio_cpus.empty()) a.push_back("--cpus_allowed=" + g_opts.fio_cpus);
  return a;
}

std::vector<std::string> EngineArgs(const LocalCluster& cluster, const std::string& cont) {
  std::vector<std::string> a = {"--ioengine=external:" + g_opts.fio_engine, "--data_dir=" + cluster.data_dir(),
                                std::string("--pool=") + kPool, "--cont=" + cont, "--transport=" + g_opts.transport,
                                // fio lstat()s --directory on the local file system: DFS paths go in the name format.
                                "--filename_format=/bench/$jobname.$jobnum.$filenum"};
  a.insert(a.end(), g_opts.fio_engine_args.begin(), g_opts.fio_engine_args.end());
  return a;
}

std::vector<std::string> KernelArgs(const std::string& directory) {
  return {"--ioengine=io_uring", "--direct=1", "--directory=" + directory};
}

Figures FiguresOf(const FioResult& r, const std::string& op) {
  const FioSide& s = IsReadOp(op) ? r.read : r.write;
  return Figures{s.bw_bytes / (1 << 20), s.iops, s.lat_us_p50};
}

uint64_t TotalIos(const FioResult& r) {
  return r.read.total_ios + r.write.total_ios;
}

Figures MedianOf(const std::vector<Figures>& runs) {
  std::vector<double> mib, iops, lat, cpu, client;
  for (const auto& f : runs) {
    mib.push_back(f.mib_s);
    iops.push_back(f.iops);
    lat.push_back(f.lat_us_p50);
    cpu.push_back(f.cpu_us_per_io);
    client.push_back(f.client_cpu_us_per_io);
  }
  return Figures{MedianOf(mib), MedianOf(iops), MedianOf(lat), MedianOf(cpu), MedianOf(client)};
}

// The engine process's CPU seconds since Start (0 when its pid or /proc entry
// cannot be read: the figure is then left out).
class EngineCpu {
 public:
  static std::optional<EngineCpu> Start(const LocalCluster& cluster) {
    auto pid = cluster.engine_pid();
    if (!pid.ok()) return std::nullopt;
    auto cpu = ProcessCpuSeconds(*pid);
    if (!cpu.ok()) return std::nullopt;
    return EngineCpu(*pid, *cpu);
  }
  double SecondsSinceStart() const {
    auto cpu = ProcessCpuSeconds(pid_);
    return cpu.ok() ? *cpu - start_ : 0;
  }

 private:
  EngineCpu(pid_t pid, double start) : pid_(pid), start_(start) {}
  pid_t pid_;
  double start_;
};

// Runs one case's modes once each, interleaved; appends to `out[mode]`.
class CaseRunner {
 public:
  CaseRunner(const std::string& scratch, LocalCluster& cluster, const FuseMount* read_mount)
      : scratch_(scratch), cluster_(cluster), read_mount_(read_mount) {}

  Status RunOnce(const CaseKey& k, std::map<std::string, std::vector<Figures>>& out) {
    const double limit = g_opts.runtime_s + 600;
    for (const auto& mode : g_opts.modes) {
      if (mode == "mount" && g_opts.fuse.empty()) continue;
      std::vector<std::string> args = JobArgs(k);
      Result<FioResult> r = Status::Cancelled("not run");
      std::optional<EngineCpu> engine_cpu;
      auto start_engine_cpu = [&] { engine_cpu = EngineCpu::Start(cluster_); };
      const auto machine_before = SampleMachineCpu();
      if (mode == "local") {
        const std::string dir = scratch_ + (IsReadOp(k.op) ? "/local-read" : "/local-write");
        std::filesystem::create_directories(dir);
        auto kernel = KernelArgs(dir);
        args.insert(args.begin(), kernel.begin(), kernel.end());
        r = RunFioArgs(args, scratch_, limit);
        if (!IsReadOp(k.op)) std::filesystem::remove_all(dir);
      } else if (mode == "engine") {
        std::optional<std::string> cont;
        if (!IsReadOp(k.op)) {
          auto made = FreshContainer();
          if (!made.ok()) return made.status();
          cont = *made;
        }
        auto engine = EngineArgs(cluster_, cont ? *cont : std::string(kReadCont));
        args.insert(args.begin(), engine.begin(), engine.end());
        std::optional<StageSnapshot> stages_before;
        std::map<pid_t, ThreadSched> targets_before;
        const auto engine_pid = cluster_.engine_pid();
        if (g_opts.stages) {
          auto s = ScrapeStagesOfCluster();
          if (!s.ok()) return s.status();
          stages_before = *s;
          if (engine_pid.ok()) targets_before = SampleThreads(*engine_pid, "ros2-target-");
          std::filesystem::remove(ClientStagesFile());
        }
        start_engine_cpu();
        r = RunFioArgs(args, scratch_, limit);
        if (stages_before && r.ok()) {
          auto after = ScrapeStagesOfCluster();
          if (!after.ok()) return after.status();
          const double io_seconds = IsReadOp(k.op) ? g_opts.runtime_s : 0;
          const auto targets_after =
              engine_pid.ok() ? SampleThreads(*engine_pid, "ros2-target-") : std::map<pid_t, ThreadSched>{};
          std::fprintf(
              stderr, "posix bench:   engine read stages, mean per read:\n%s%s",
              (FormatStages(*stages_before, *after, g_opts.qd * k.jobs, io_seconds) +
               FormatClientStages(ClientStagesFile()))
                  .c_str(),
              FormatThreads(
                  targets_before, targets_after,
                  io_seconds > 0 ? io_seconds : std::chrono::duration<double>(after->at - stages_before->at).count())
                  .c_str());
        }
        if (cont) DestroyContainer(*cont);
      } else if (mode == "mount") {
        if (IsReadOp(k.op)) {
          auto kernel = KernelArgs(read_mount_->mountpoint() + "/bench");
          args.insert(args.begin(), kernel.begin(), kernel.end());
          start_engine_cpu();
          r = RunFioArgs(args, scratch_, limit);
        } else {
          auto cont = FreshContainer();
          if (!cont.ok()) return cont.status();
          {
            auto mount =
                FuseMount::Start(g_opts.fuse, cluster_.data_dir(), g_opts.transport, kPool, *cont,
                                 scratch_ + "/mnt-" + *cont, scratch_ + "/fuse-" + *cont + ".log", g_opts.fuse_args);
            if (!mount.ok()) {
              DestroyContainer(*cont);
              return mount.status();
            }
            std::filesystem::create_directories((*mount)->mountpoint() + "/bench");
            auto kernel = KernelArgs((*mount)->mountpoint() + "/bench");
            args.insert(args.begin(), kernel.begin(), kernel.end());
            start_engine_cpu();
            r = RunFioArgs(args, scratch_, limit);
          }
          DestroyContainer(*cont);
        }
      } else {
        return Status::InvalidArgument("posix bench: unknown mode " + mode + " (local, engine, mount)");
      }
      if (!r.ok()) return r.status().WithContext(fmt::format("mode={} op={} bs={} jobs={}", mode, k.op, k.bs, k.jobs));
      Figures f = FiguresOf(*r, k.op);
      const uint64_t ios = TotalIos(*r);
      if (engine_cpu && ios > 0) f.cpu_us_per_io = engine_cpu->SecondsSinceStart() * 1e6 / static_cast<double>(ios);
      if (mode != "mount" && ios > 0) f.client_cpu_us_per_io = r->cpu_s * 1e6 / static_cast<double>(ios);
      std::fprintf(stderr, "posix bench:   %-6s %10.0f IOPS %9.1f MiB/s  engine %6.2f us/io  client %6.2f us/io\n",
                   mode.c_str(), f.iops, f.mib_s, f.cpu_us_per_io, f.client_cpu_us_per_io);
      PrintMachineCpu(k, mode, f, machine_before, static_cast<double>(ios), out);
      out[mode].push_back(f);
    }
    return Status::Ok();
  }

 private:
  // The machine's CPU over the run (busy, other processes', interrupts per
  // I/O) and, for a 4 KiB random read after this round's local run, the CPU
  // arithmetic of the engine run against local fio (docs/engine.md).
  static void PrintMachineCpu(const CaseKey& k, const std::string& mode, const Figures& f,
                              const Result<MachineCpu>& before, double ios,
                              const std::map<std::string, std::vector<Figures>>& out) {
    const auto after = SampleMachineCpu();
    if (!before.ok() || !after.ok() || ios <= 0) return;
    const double own_s = (f.cpu_us_per_io + f.client_cpu_us_per_io) * ios / 1e6;
    const RunCpu run = CpuOfRun(*before, *after, own_s, ios);
    std::string per_cpu;
    for (double b : run.per_cpu_busy) per_cpu += fmt::format("{}{:.2f}", per_cpu.empty() ? "" : " / ", b);
    std::fprintf(stderr,
                 "posix bench:   %-6s machine: %.2f of %d CPUs busy (%s), %.2f by other processes; "
                 "irq+softirq %.2f us/io\n",
                 mode.c_str(), run.busy_cpus, run.cpus, per_cpu.c_str(), run.other_cpus, run.irq_us_per_io);
    auto local = out.find("local");
    if (mode != "engine" || k.bs != 4096 || k.op != "randread" || local == out.end() || local->second.empty()) return;
    const Figures& l = local->second.back();
    std::fputs(
        FormatCpuArithmetic(f.cpu_us_per_io, f.client_cpu_us_per_io, l.client_cpu_us_per_io, l.iops, run).c_str(),
        stderr);
  }

  // Where the fio engine's queues write their own timings (ROS2_FIO_STAGES).
  std::string ClientStagesFile() const { return scratch_ + "/fio-stages.txt"; }

  Result<StageSnapshot> ScrapeStagesOfCluster() {
    ROS2_ASSIGN_OR_RETURN(std::string endpoint, EngineMetricsEndpoint(cluster_.data_dir() + "/engine.ready"));
    return ScrapeStages(endpoint);
  }

  // A new container whose shards already exist on every target: a target
  // creates a container's shard (and zero-fills its data file) on the first
  // request, which must not land inside a timed write case. 16 chunks written
  // untimed through the engine reach both targets.
  Result<std::string> FreshContainer() {
    const std::string name = fmt::format("w{}", seq_++);
    ROS2_RETURN_IF_ERROR(posix::CreateWarmContainer(cluster_, kPool, name, EngineArgs(cluster_, name), scratch_));
    return name;
  }
  void DestroyContainer(const std::string& name) { posix::DestroyContainerLogged(cluster_, kPool, name); }

  std::string scratch_;
  LocalCluster& cluster_;
  const FuseMount* read_mount_;
  int seq_ = 0;
};

std::string CaseDesc(const CaseKey& k, const std::string& mode) {
  return CaseString({{"op", k.op},
                     {"bs", std::to_string(k.bs)},
                     {"qd", std::to_string(g_opts.qd)},
                     {"jobs", std::to_string(k.jobs)},
                     {"mode", mode},
                     {"transport", g_opts.transport},
                     {"class", g_opts.cls}});
}

void Report(Reporter& rep, const CaseKey& k, const std::map<std::string, Figures>& f) {
  auto add = [&](const std::string& mode, const char* metric, double Figures::*field,
                 const std::optional<std::string>& base_mode, const char* base_name) {
    auto it = f.find(mode);
    if (it == f.end()) return;
    Record r{"posix", CaseDesc(k, mode), metric, it->second.*field, std::nullopt, std::nullopt};
    if (base_mode) {
      if (auto b = f.find(*base_mode); b != f.end()) {
        r.baseline = base_name;
        r.baseline_value = b->second.*field;
      }
    }
    rep.Add(std::move(r));
  };
  for (const auto& [metric, field] : {std::pair{"mib_s", &Figures::mib_s}, std::pair{"iops", &Figures::iops},
                                      std::pair{"lat_us_p50", &Figures::lat_us_p50}}) {
    add("local", metric, field, std::nullopt, "");
    add("engine", metric, field, std::string("local"), "fio-io_uring");
    add("mount", metric, field, std::string("engine"), "engine");
  }
  // CPU per I/O, where measured: the engine's on the ROS2 sides, fio's beside it.
  auto add_cpu = [&](const std::string& mode, const char* metric, double Figures::*field,
                     const std::optional<std::string>& base_mode, const char* base_name) {
    if (auto it = f.find(mode); it != f.end() && it->second.*field > 0) add(mode, metric, field, base_mode, base_name);
  };
  add_cpu("engine", "cpu_us_per_io", &Figures::cpu_us_per_io, std::nullopt, "");
  add_cpu("mount", "cpu_us_per_io", &Figures::cpu_us_per_io, std::string("engine"), "engine");
  add_cpu("local", "client_cpu_us_per_io", &Figures::client_cpu_us_per_io, std::nullopt, "");
  add_cpu("engine", "client_cpu_us_per_io", &Figures::client_cpu_us_per_io, std::string("local"), "fio-io_uring");
}

void SummarizeTargets(const std::map<CaseKey, std::map<std::string, Figures>>& all) {
  auto ratio = [&](const CaseKey& k, const char* mode, const char* base, double Figures::*field) -> double {
    auto it = all.find(k);
    if (it == all.end() || !it->second.contains(mode) || !it->second.contains(base)) return -1;
    const double b = it->second.at(base).*field;
    return b > 0 ? it->second.at(mode).*field / b : -1;
  };
  std::fprintf(stderr, "posix bench: targets (ratio, target):\n");
  // A ratio whose two sides did not both run (--modes, --fuse none) is left out.
  auto line = [](const char* what, const CaseKey& k, const char* size, double value, const char* goal) {
    if (value >= 0)
      std::fprintf(stderr, "  %s %-9s %s jobs=%d: %.2f (%s)\n", what, k.op.c_str(), size, k.jobs, value, goal);
  };
  for (const auto& [k, f] : all) {
    if (k.bs == (uint64_t{1} << 20) && (k.op == "read" || k.op == "write")) {
      line("engine/local", k, "1MiB", ratio(k, "engine", "local", &Figures::mib_s), ">= 0.8");
      line("mount/engine", k, "1MiB", ratio(k, "mount", "engine", &Figures::mib_s), ">= 0.5");
    }
    if (k.bs == 4096 && k.op == "randread" && k.jobs == 4) {
      line("engine/local", k, "4KiB", ratio(k, "engine", "local", &Figures::iops), ">= 0.5");
    }
    if (k.bs == 4096 && k.op == "randread" && f.contains("engine") && f.at("engine").cpu_us_per_io > 0) {
      std::fprintf(stderr, "  engine cpu_us_per_io randread 4KiB jobs=%d: %.2f (<= 10)\n", k.jobs,
                   f.at("engine").cpu_us_per_io);
    }
  }
}

std::string LoadAverage() {
  auto text = ReadFileOrError("/proc/loadavg");
  if (!text.ok()) return "?";
  std::string t = *text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t;
}

int RunPosixSuite(Reporter& rep) {
  if (g_opts.ros2ctl.empty()) g_opts.ros2ctl = BuildTreeBinaryPath("tools/ros2ctl/ros2ctl");
  if (g_opts.engine.empty()) {
    const std::string e = BuildTreeBinaryPath("src/engine/ros2-engine");
    if (access(e.c_str(), X_OK) == 0) g_opts.engine = e;
  }
  if (g_opts.fio_engine.empty()) g_opts.fio_engine = BuildTreeBinaryPath("src/fio/libros2_fio.so");
  if (g_opts.fuse.empty()) {
    const std::string f = BuildTreeBinaryPath("src/fuse/ros2-fuse");
    if (access(f.c_str(), X_OK) == 0) g_opts.fuse = f;
  }
  if (g_opts.fuse == "none") g_opts.fuse.clear();
  if (access(g_opts.ros2ctl.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "posix bench: ros2ctl not found at '%s' (use --ros2ctl)\n", g_opts.ros2ctl.c_str());
    return 2;
  }
  if (access(g_opts.fio_engine.c_str(), R_OK) != 0) {
    std::fprintf(stderr,
                 "posix bench: fio engine not found at '%s' (build target ros2_fio after "
                 "scripts/fetch-fio-source.sh, or use --fio-engine)\n",
                 g_opts.fio_engine.c_str());
    return 2;
  }
  if (g_opts.jobs.empty() || g_opts.qd < 1 || g_opts.repeat < 1) {
    std::fprintf(stderr, "posix bench: need at least one --jobs value, --qd >= 1 and --repeat >= 1\n");
    return 2;
  }
  if (g_opts.fuse.empty()) std::fprintf(stderr, "posix bench: no ros2-fuse binary: the mount mode is skipped\n");
  auto scratch = TempDir::Create(g_opts.dir, "ros2-bench-posix-");
  if (!scratch.ok()) {
    std::fprintf(stderr, "posix bench: %s\n", scratch.status().ToString().c_str());
    return 1;
  }
  const std::string& dir = scratch->path();
  // The engine (started by ros2ctl, which passes its environment on) times
  // its reads' stages; the endpoint ros2ctl turns on by default serves them.
  if (g_opts.stages) {
    ::setenv("ROS2_ENGINE_IO_STAGES", "1", 1);
    ::setenv("ROS2_FIO_STAGES", (dir + "/fio-stages.txt").c_str(), 1);  // CaseRunner::ClientStagesFile
  }
  std::fprintf(stderr, "posix bench: dir %s, %s over %s, qd %d, runtime %.1fs, repeat %d, load average %s\n",
               dir.c_str(), g_opts.cls.c_str(), g_opts.transport.c_str(), g_opts.qd, g_opts.runtime_s, g_opts.repeat,
               LoadAverage().c_str());
  if (auto wake = ProbeWakeUps(2000); wake.ok()) std::fputs(FormatWakeProbe(*wake).c_str(), stderr);
  auto cluster = LocalCluster::Up(dir, {.ros2ctl = g_opts.ros2ctl,
                                        .engine = g_opts.engine,
                                        .storage_class = g_opts.cls,
                                        .transport = g_opts.transport,
                                        .targets = g_opts.targets,
                                        .shard_size = g_opts.shard_size,
                                        .target_cpus = g_opts.target_cpus});
  if (!cluster.ok()) {
    std::fprintf(stderr, "posix bench: %s\n", cluster.status().ToString().c_str());
    return 1;
  }
  const int max_jobs = *std::max_element(g_opts.jobs.begin(), g_opts.jobs.end());
  const bool any_read = std::any_of(g_opts.ops.begin(), g_opts.ops.end(), IsReadOp);
  Status st = (*cluster)
                  ->Ctl({"pool", "create", kPool, "--size", posix::PoolSizeFor(g_opts.shard_size, g_opts.targets)})
                  .status();
  if (st.ok()) st = (*cluster)->Ctl({"cont", "create", kPool, kReadCont}).status();
  if (st.ok() && any_read)
    st = posix::PrefillReadFiles(EngineArgs(**cluster, kReadCont), g_opts.qd, max_jobs, g_opts.read_size, dir);
  // The read files' mount serves the mount mode only (--modes engine over
  // ofi-tcp, which ros2-fuse does not offer, needs none).
  const bool mount_mode = std::find(g_opts.modes.begin(), g_opts.modes.end(), "mount") != g_opts.modes.end();
  std::unique_ptr<FuseMount> read_mount;
  if (st.ok() && any_read && mount_mode && !g_opts.fuse.empty()) {
    auto m = FuseMount::Start(g_opts.fuse, (*cluster)->data_dir(), g_opts.transport, kPool, kReadCont,
                              dir + "/mnt-data", dir + "/fuse-data.log", g_opts.fuse_args);
    if (m.ok())
      read_mount = std::move(*m);
    else
      st = m.status();
  }
  if (!st.ok()) {
    std::fprintf(stderr, "posix bench: setup: %s\n", st.ToString().c_str());
    return 1;
  }
  CaseRunner runner(dir, **cluster, read_mount.get());
  std::map<CaseKey, std::map<std::string, Figures>> all;
  int rc = 0;
  for (uint64_t bs : g_opts.bs) {
    for (const auto& op : g_opts.ops) {
      for (int jobs : g_opts.jobs) {
        const CaseKey k{op, bs, jobs};
        std::fprintf(stderr, "posix bench: op=%s bs=%llu jobs=%d (load %s)\n", op.c_str(),
                     static_cast<unsigned long long>(bs), jobs, LoadAverage().c_str());
        std::map<std::string, std::vector<Figures>> runs;
        Status s = Status::Ok();
        for (int i = 0; i < g_opts.repeat && s.ok(); ++i) s = runner.RunOnce(k, runs);
        if (!s.ok()) {
          std::fprintf(stderr, "posix bench: %s\n", s.ToString().c_str());
          rc = 1;
          continue;
        }
        std::map<std::string, Figures> medians;
        for (const auto& [mode, v] : runs) medians[mode] = MedianOf(v);
        Report(rep, k, medians);
        all[k] = std::move(medians);
      }
    }
  }
  read_mount.reset();
  std::fprintf(stderr, "posix bench: load average at the end %s\n", LoadAverage().c_str());
  SummarizeTargets(all);
  return rc;
}

const bool registered = RegisterSuite(Suite{
    "posix",
    "fio through the ROS2 external ioengine and a ros2-fuse mount vs fio io_uring on the local file system, same run",
    [](CLI::App& app) {
      app.add_option("--dir", g_opts.dir, "parent of the scratch dir (cluster data and local fio files)");
      app.add_option("--ops", g_opts.ops, "ops: write read randwrite randread")->delimiter(',');
      app.add_option("--bs", g_opts.bs, "block sizes in bytes")->delimiter(',');
      app.add_option("--jobs", g_opts.jobs, "fio numjobs values (one file per job)")->delimiter(',');
      app.add_option("--modes", g_opts.modes, "sides to run: local engine mount")->delimiter(',');
      app.add_option("--qd", g_opts.qd, "fio iodepth of every side");
      app.add_option("--runtime", g_opts.runtime_s, "seconds per read case and side (cap for writes)");
      app.add_option("--read-size", g_opts.read_size, "bytes of each job's read file");
      app.add_option("--write-total", g_opts.write_total, "bytes each write case writes, split over its jobs");
      app.add_option("--repeat", g_opts.repeat, "runs of each case (the median is reported)");
      app.add_option("--class", g_opts.cls, "storage class of the cluster: nvme ram");
      app.add_option("--transport", g_opts.transport,
                     "transport of the cluster and clients: shm tcp, or ofi-shm ofi-tcp (libfabric; modes local and "
                     "engine only)");
      app.add_option("--targets", g_opts.targets, "engine targets");
      app.add_option("--target-cpus", g_opts.target_cpus,
                     "CPUs the engine's targets are pinned to (target i on the i-th)");
      app.add_option("--fio-cpus", g_opts.fio_cpus,
                     "fio --cpus_allowed of every side, e.g. 0 (same for local and engine)");
      app.add_option("--shard-size", g_opts.shard_size, "extent capacity of each container shard (cluster up)");
      app.add_option("--ros2ctl", g_opts.ros2ctl, "ros2ctl binary (default: the build tree's)");
      app.add_option("--engine", g_opts.engine, "ros2-engine binary (default: the build tree's)");
      app.add_option("--fio-engine", g_opts.fio_engine, "libros2_fio.so (default: the build tree's)");
      app.add_option("--fuse", g_opts.fuse, "ros2-fuse binary (default: the build tree's; 'none' skips the mount)");
      app.add_option("--fuse-arg", g_opts.fuse_args, "extra ros2-fuse argument (repeatable)");
      app.add_flag("--stages", g_opts.stages,
                   "time the engine's read stages (ROS2_ENGINE_IO_STAGES=1) and print one line per stage after "
                   "each engine run");
      app.add_option("--fio-engine-arg", g_opts.fio_engine_args,
                     "extra option of the ros2 fio engine, e.g. --fio-engine-arg=--spin_us=50 (repeatable)");
    },
    RunPosixSuite,
});

}  // namespace
}  // namespace ros2::bench
