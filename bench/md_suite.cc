// `ros2-bench md`: metadata rates like mdtest — create, stat, readdir and
// unlink of empty files by N job processes — through DFS (each job an
// in-process libros2 client), through a ros2-fuse mount (plain POSIX calls)
// and on the local file system (the same POSIX calls; the same-run baseline).
//
// The suite starts one single-node cluster (`ros2ctl cluster up`, nvme class,
// shm transport, durable commits as always), makes pool "md" with containers
// "dfs" and "fuse", mounts "fuse" with ros2-fuse when that binary exists, and
// then for every directory mode (unique: a directory per job; shared: one for
// all), job count and repetition runs the local, DFS and FUSE cases back to
// back. Mode offload (not run unless --modes names it) is the DFS case with
// ROS2_AGENT_SOCKET set, so the jobs' DFS calls run in the cluster's
// ros2-agent (the cluster is then started with --agent); it is reported
// against local and against dfs. A case spawns its jobs as processes of this binary (`md --worker`),
// which meet at a ProcessBarrier before each phase and write their per-phase
// timings to a file; the phase rate is the total operations over the span from
// the first job's start to the last job's end. With --repeat the median run is
// reported. docs/benchmarks.md describes the suite.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_report.h"
#include "bench/md_barrier.h"
#include "bench/harness.h"
#include "bench/md_workload.h"

namespace ros2::bench {
namespace {

struct MdOptions {
  std::string dir = "/tmp";
  std::vector<int> jobs = {1, 2, 4};
  uint64_t files = 2000;  // per job
  std::vector<std::string> modes = {"local", "dfs", "fuse"};
  std::vector<std::string> dir_modes = {"unique", "shared"};
  int repeat = 1;
  LocalClusterOptions cluster;
  std::string fuse_binary;
  int case_timeout_s = 600;

  // Worker side (one job process).
  bool worker = false;
  int job = 0;
  std::string ns_kind;  // "posix" or "dfs"
  std::string path;     // posix: a directory; dfs: a path in the container
  std::string barrier;
  std::string result;
  std::string data_dir;
  std::string pool;
  std::string container;
};

MdOptions g_md;

// --- worker ------------------------------------------------------------------

int RunWorker() {
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "md worker %d: %s\n", g_md.job, st.ToString().c_str());
    return 1;
  };
  auto barrier = ProcessBarrier::Attach(g_md.barrier);
  if (!barrier.ok()) return fail(barrier.status());
  Result<std::unique_ptr<MdNamespace>> ns = Status::InvalidArgument("unknown namespace kind " + g_md.ns_kind);
  if (g_md.ns_kind == "posix") {
    ns = OpenPosixNamespace(g_md.path);
  } else if (g_md.ns_kind == "dfs") {
    ns = OpenDfsNamespace(MdDfsTarget{g_md.data_dir, g_md.pool, g_md.container, g_md.cluster.transport, g_md.path});
  }
  if (!ns.ok()) return fail(ns.status());
  auto phases = RunMdJob(**ns, MdJobSpec{g_md.job, g_md.files}, *barrier);
  if (!phases.ok()) return fail(phases.status());
  if (Status st = (*ns)->RemoveDirectory(); !st.ok()) return fail(st);
  std::ofstream out(g_md.result, std::ios::trunc);
  out << MdPhasesToJson(*phases).dump();
  out.close();
  if (!out) return fail(Status::IOError("cannot write " + g_md.result));
  return 0;
}

// --- one case ----------------------------------------------------------------

struct PhaseFigures {
  double ops_s = 0;
  double lat_p50 = 0;
  double lat_p99 = 0;
  double seconds = 0;
};
using CaseFigures = std::map<std::string, PhaseFigures>;  // phase -> figures

struct CaseSpec {
  std::string mode;      // local | dfs | offload | fuse
  std::string dir_mode;  // unique | shared
  int jobs = 1;
  int run = 0;
};

// Where job `j` works: its own directory or the case's shared one.
std::string JobDirectory(const std::string& case_root, const CaseSpec& c, int j) {
  return c.dir_mode == "shared" ? case_root + "/shared" : fmt::format("{}/job{}", case_root, j);
}

Result<CaseFigures> RunCase(const std::string& scratch, const CaseSpec& c, const std::string& root,
                            const std::string& data_dir) {
  const std::string tag = fmt::format("{}-{}-j{}-r{}", c.mode, c.dir_mode, c.jobs, c.run);
  const std::string case_root = root + "/" + tag;
  const std::string work = scratch + "/jobs-" + tag;
  std::error_code ec;
  std::filesystem::create_directories(work, ec);
  if (ec) return Status::IOError(fmt::format("md: mkdir {}: {}", work, ec.message()));
  ROS2_ASSIGN_OR_RETURN(ProcessBarrier barrier,
                        ProcessBarrier::Create(work + "/barrier", static_cast<unsigned>(c.jobs)));
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  std::vector<ChildProcess> children;
  for (int j = 0; j < c.jobs; ++j) {
    SpawnOptions so;
    so.argv = {self,
               "md",
               "--worker",
               "--job",
               std::to_string(j),
               "--files",
               std::to_string(g_md.files),
               "--ns",
               c.mode == "dfs" || c.mode == "offload" ? "dfs" : "posix",
               "--path",
               JobDirectory(case_root, c, j),
               "--barrier",
               work + "/barrier",
               "--result",
               fmt::format("{}/job{}.json", work, j)};
    if (c.mode == "dfs" || c.mode == "offload") {
      so.argv.insert(so.argv.end(),
                     {"--data-dir", data_dir, "--pool", "md", "--cont", "dfs", "--transport", g_md.cluster.transport});
    }
    // Offload mode: the same DFS calls, run by the cluster's ros2-agent.
    if (c.mode == "offload") so.env.emplace_back("ROS2_AGENT_SOCKET", data_dir + "/agent.sock");
    so.stdout_path = fmt::format("{}/job{}.out", work, j);
    so.stderr_path = fmt::format("{}/job{}.err", work, j);
    ROS2_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(so));
    children.push_back(std::move(child));
  }
  // Wait for every job; the first failure kills the rest (they would wait at
  // the barrier forever).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(g_md.case_timeout_s);
  size_t done = 0;
  while (done < children.size()) {
    for (size_t j = 0; j < children.size(); ++j) {
      if (!children[j].running()) continue;
      auto rc = children[j].Wait(std::chrono::milliseconds(20));
      if (!rc.ok()) continue;
      ++done;
      if (*rc != 0) {
        auto err = ReadFileOrError(fmt::format("{}/job{}.err", work, j));
        return Status::Internal(
            fmt::format("md {}: job {} exited {}: {}", tag, j, *rc, err.ok() ? *err : std::string("(no stderr)")));
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::TimedOut(fmt::format("md {}: jobs still running after {} s", tag, g_md.case_timeout_s));
    }
  }
  // Aggregate: total ops over [first start, last end] per phase.
  std::map<std::string, std::vector<MdPhaseResult>> by_phase;
  for (int j = 0; j < c.jobs; ++j) {
    const std::string path = fmt::format("{}/job{}.json", work, j);
    ROS2_ASSIGN_OR_RETURN(std::string text, ReadFileOrError(path));
    auto parsed = nlohmann::json::parse(text, nullptr, false);
    if (parsed.is_discarded()) return Status::Protocol("md: " + path + " is not JSON");
    ROS2_ASSIGN_OR_RETURN(auto phases, MdPhasesFromJson(parsed));
    for (auto& p : phases) by_phase[p.name].push_back(std::move(p));
  }
  CaseFigures figures;
  for (const auto& [name, results] : by_phase) {
    int64_t start = results[0].start_ns, end = results[0].end_ns;
    uint64_t ops = 0;
    std::vector<double> lat;
    for (const auto& r : results) {
      start = std::min(start, r.start_ns);
      end = std::max(end, r.end_ns);
      ops += r.ops;
      lat.insert(lat.end(), r.lat_us.begin(), r.lat_us.end());
    }
    PhaseFigures f;
    f.seconds = static_cast<double>(end - start) / 1e9;
    f.ops_s = f.seconds > 0 ? static_cast<double>(ops) / f.seconds : 0;
    f.lat_p50 = Percentile(lat, 50);
    f.lat_p99 = Percentile(lat, 99);
    figures[name] = f;
  }
  std::filesystem::remove_all(work, ec);
  return figures;
}

std::string LoadAverage() {
  auto s = ReadFileOrError("/proc/loadavg");
  if (!s.ok()) return "?";
  std::string t = *s;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

// The median run of a case by ops_s, per phase.
PhaseFigures Median(std::vector<PhaseFigures> runs) {
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.ops_s < b.ops_s; });
  return runs[runs.size() / 2];
}

std::string CaseDesc(const std::string& op, int jobs, const std::string& mode, const std::string& dir_mode) {
  return CaseString({{"op", op},
                     {"jobs", std::to_string(jobs)},
                     {"mode", mode},
                     {"dir", dir_mode},
                     {"files", std::to_string(g_md.files)}});
}

// --- the suite ---------------------------------------------------------------

int RunMdSuite(Reporter& rep) {
  if (g_md.worker) return RunWorker();
  LocalClusterOptions& co = g_md.cluster;
  if (co.ros2ctl.empty()) co.ros2ctl = BuildTreeBinaryPath("tools/ros2ctl/ros2ctl");
  if (co.engine.empty()) {
    std::string e = BuildTreeBinaryPath("src/engine/ros2-engine");
    if (!e.empty() && access(e.c_str(), X_OK) == 0) co.engine = e;
  }
  if (g_md.fuse_binary.empty()) g_md.fuse_binary = BuildTreeBinaryPath("src/fuse/ros2-fuse");
  auto wants = [](const std::string& m) {
    return std::find(g_md.modes.begin(), g_md.modes.end(), m) != g_md.modes.end();
  };
  std::vector<std::string> modes;
  for (const std::string m : {"local", "dfs", "offload", "fuse"}) {
    if (!wants(m)) continue;
    if (m == "fuse" && access(g_md.fuse_binary.c_str(), X_OK) != 0) {
      std::fprintf(stderr, "md bench: no ros2-fuse at '%s' (use --fuse): skipping mode fuse\n",
                   g_md.fuse_binary.c_str());
      continue;
    }
    modes.push_back(m);
  }
  if (modes.empty() || g_md.jobs.empty() || g_md.files == 0 || g_md.repeat < 1) {
    std::fprintf(stderr, "md bench: need a mode, a --jobs value, --files > 0 and --repeat >= 1\n");
    return 2;
  }
  const bool need_cluster =
      wants("dfs") || wants("offload") || std::find(modes.begin(), modes.end(), "fuse") != modes.end();
  co.agent = wants("offload");
  if (need_cluster && access(co.ros2ctl.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "md bench: ros2ctl not found at '%s' (use --ros2ctl)\n", co.ros2ctl.c_str());
    return 2;
  }
  auto scratch = TempDir::Create(g_md.dir, "ros2-bench-md-");
  if (!scratch.ok()) {
    std::fprintf(stderr, "md bench: %s\n", scratch.status().ToString().c_str());
    return 1;
  }
  std::fprintf(stderr, "md bench: dir %s, %llu files per job, jobs %s, modes %s, load average %s\n",
               scratch->path().c_str(), static_cast<unsigned long long>(g_md.files),
               fmt::format("{}", fmt::join(g_md.jobs, ",")).c_str(), fmt::format("{}", fmt::join(modes, ",")).c_str(),
               LoadAverage().c_str());

  std::unique_ptr<LocalCluster> cluster;
  std::unique_ptr<FuseMount> mount;  // declared after the cluster: unmounted first
  if (need_cluster) {
    auto up = LocalCluster::Up(scratch->path(), co);
    if (!up.ok()) {
      std::fprintf(stderr, "md bench: %s\n", up.status().ToString().c_str());
      return 1;
    }
    cluster = std::move(*up);
    for (const auto& args : std::vector<std::vector<std::string>>{{"pool", "create", "md", "--size", co.shard_size},
                                                                  {"cont", "create", "md", "dfs"},
                                                                  {"cont", "create", "md", "fuse"}}) {
      if (auto r = cluster->Ctl(args); !r.ok()) {
        std::fprintf(stderr, "md bench: %s\n", r.status().ToString().c_str());
        return 1;
      }
    }
    if (std::find(modes.begin(), modes.end(), "fuse") != modes.end()) {
      auto m = FuseMount::Start(g_md.fuse_binary, cluster->data_dir(), co.transport, "md", "fuse",
                                scratch->path() + "/mnt", scratch->path() + "/fuse.log");
      if (!m.ok()) {
        std::fprintf(stderr, "md bench: %s\n", m.status().ToString().c_str());
        return 1;
      }
      mount = std::move(*m);
    }
  }
  const std::string local_root = scratch->path() + "/local";
  int rc = 0;
  for (const auto& dir_mode : g_md.dir_modes) {
    for (int jobs : g_md.jobs) {
      std::map<std::string, std::map<std::string, std::vector<PhaseFigures>>> runs;  // mode -> phase -> runs
      for (int run = 0; run < g_md.repeat; ++run) {
        for (const auto& mode : modes) {
          const CaseSpec c{mode, dir_mode, jobs, run};
          const std::string root = mode == "local"  ? local_root
                                   : mode == "fuse" ? mount->mountpoint()
                                                    : "/md";
          auto f = RunCase(scratch->path(), c, root, cluster ? cluster->data_dir() : "");
          if (!f.ok()) {
            std::fprintf(stderr, "md bench: %s\n", f.status().ToString().c_str());
            rc = 1;
            continue;
          }
          for (const auto& [phase, fig] : *f) runs[mode][phase].push_back(fig);
          std::fprintf(stderr,
                       "md bench: %s dir=%s jobs=%d run %d: create %.0f/s stat %.0f/s readdir %.0f/s "
                       "unlink %.0f/s (load %s)\n",
                       mode.c_str(), dir_mode.c_str(), jobs, run, (*f)["create"].ops_s, (*f)["stat"].ops_s,
                       (*f)["readdir"].ops_s, (*f)["unlink"].ops_s, LoadAverage().c_str());
        }
      }
      for (const char* phase : kMdPhases) {
        const auto local_runs = runs["local"][phase];
        const auto dfs_runs = runs["dfs"][phase];
        for (const auto& mode : modes) {
          const auto& rs = runs[mode][phase];
          if (rs.empty()) continue;
          const PhaseFigures f = Median(rs);
          Record r{"md", CaseDesc(phase, jobs, mode, dir_mode), "ops_s", f.ops_s, std::nullopt, std::nullopt};
          if (mode != "local" && !local_runs.empty()) {
            r.baseline = "local";
            r.baseline_value = Median(local_runs).ops_s;
          }
          rep.Add(r);
          if ((mode == "fuse" || mode == "offload") && !dfs_runs.empty()) {
            rep.Add(Record{"md", r.case_desc, "ops_s", f.ops_s, std::string("dfs"), Median(dfs_runs).ops_s});
          }
          if (std::string(phase) != "readdir") {
            rep.Add(Record{"md", r.case_desc, "lat_us_p50", f.lat_p50, std::nullopt, std::nullopt});
            rep.Add(Record{"md", r.case_desc, "lat_us_p99", f.lat_p99, std::nullopt, std::nullopt});
          }
        }
      }
    }
  }
  std::fprintf(stderr, "md bench: done, load average %s\n", LoadAverage().c_str());
  return rc;
}

const bool registered = RegisterSuite(Suite{
    "md",
    "metadata rates (create, stat, readdir, unlink) like mdtest: DFS, the ros2-fuse mount and the local file system",
    [](CLI::App& app) {
      app.add_option("--dir", g_md.dir, "parent directory for the scratch dir (cluster, local baseline, mount)");
      app.add_option("--jobs", g_md.jobs, "job counts (processes, each its own client)")->delimiter(',');
      app.add_option("--files", g_md.files, "files per job");
      app.add_option("--modes", g_md.modes, "modes: local dfs offload (DFS through ros2-agent) fuse")->delimiter(',');
      app.add_option("--dirs", g_md.dir_modes, "directory modes: unique (one per job) shared")->delimiter(',');
      app.add_option("--repeat", g_md.repeat, "runs per case (the median is reported)");
      app.add_option("--class", g_md.cluster.storage_class, "storage class of the cluster's targets");
      app.add_option("--transport", g_md.cluster.transport, "client transport (shm, tcp)");
      app.add_option("--targets", g_md.cluster.targets, "engine targets");
      app.add_option("--shard-size", g_md.cluster.shard_size, "container shard capacity and pool size");
      app.add_option("--ros2ctl", g_md.cluster.ros2ctl, "ros2ctl binary (default: the build tree's)");
      app.add_option("--engine", g_md.cluster.engine, "ros2-engine binary (default: the build tree's)");
      app.add_option("--fuse", g_md.fuse_binary,
                     "ros2-fuse binary (default: the build tree's; mode fuse is "
                     "skipped when it does not exist)");
      app.add_option("--case-timeout", g_md.case_timeout_s, "seconds one case may take");
      // One job process (spawned by the suite itself).
      const std::string internal = "";  // hidden from --help
      app.add_flag("--worker", g_md.worker, "run one job (internal)")->group(internal);
      app.add_option("--job", g_md.job)->group(internal);
      app.add_option("--ns", g_md.ns_kind)->group(internal);
      app.add_option("--path", g_md.path)->group(internal);
      app.add_option("--barrier", g_md.barrier)->group(internal);
      app.add_option("--result", g_md.result)->group(internal);
      app.add_option("--data-dir", g_md.data_dir)->group(internal);
      app.add_option("--pool", g_md.pool)->group(internal);
      app.add_option("--cont", g_md.container)->group(internal);
    },
    RunMdSuite,
});

}  // namespace
}  // namespace ros2::bench
