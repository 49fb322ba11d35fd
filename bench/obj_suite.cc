// `ros2-bench obj`: object update and fetch through libros2 and a real engine,
// against VOS driven directly in-process with the same shapes, in the same run.
//
// For every (class, transport) the suite starts its own single-node cluster with
// `ros2ctl cluster up --class C --transport T` in a scratch directory, creates a
// pool and a container, preloads every job's working set, and runs each case
// (op, block size, jobs) for --runtime seconds. A job is a thread with its own
// libros2 Client, Pool, Container, Object and EventQueue (hence its own
// transport worker and endpoints) keeping --qd I/Os in flight. Each job's
// object is an S1 array object with the layout of a DFS file (dkey = 1 MiB
// chunk, akey "0", record size 1), so it lives on one target.
//
// The "vos-only" baseline of a case is the same shape on the same storage class
// with VOS in this process: as many threads as jobs, each with its own Vos store
// (its own directory) and --qd ops in flight through SubmitUpdate/SubmitFetch and
// Progress(), as an engine target drives its shard (bench/vos_bench_util.h). It
// runs once per (class, op, bs, jobs), the first time a transport needs it.
// Writes go to a fresh container per case (destroyed after it) and, on the VOS
// side, to fresh stores; reads to the preloaded ones. The 4 KiB randread IOPS over shm is also reported against the
// same case over tcp ("transport-tcp"). docs/benchmarks.md describes the suite.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <latch>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "client/local_cluster.h"
#include "bench/bench_report.h"
#include "bench/harness.h"
#include "bench/vos_bench_util.h"
#include "common/object_id.h"
#include "placement/placement.h"
#include "ros2/client.h"
#include "transport/transport.h"
#include "vos/vos.h"

namespace ros2::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct ObjSuiteOptions {
  std::string dir = "/tmp";
  std::vector<std::string> classes = {"ram", "nvme"};
  std::vector<std::string> transports = {"tcp", "shm"};
  std::vector<std::string> ops = {"write", "read", "randwrite", "randread"};
  std::vector<uint64_t> bs = {uint64_t{1} << 20, 4096};
  std::vector<int> jobs = {1, 2, 4};
  int qd = 8;
  double runtime_s = 3;
  uint64_t size = uint64_t{64} << 20;  // working set per job
  std::string shard_size = "1GiB";
  int targets = 2;
  std::string ros2ctl;
  std::string engine;
  bool baseline = true;
  // "io": the jobs' buffers are libros2 I/O buffers (shared segments a
  // same-host engine reads into directly); "heap": ordinary aligned memory.
  std::string buffers = "io";
  // libros2's spin before a job sleeps on its worker (ClientOptions::spin_budget):
  // 10 us like the fio engine's spin_us, since a job keeps qd I/Os in flight
  // and its completions come in batches (50 us, libros2's default, left the
  // jobs yielding in a loop for 18% of all CPU beside the targets).
  int spin_us = 10;
  int rounds = 1;  // per case, alternate the vos-only baseline and the client this many times
  // --pin: engine target t on CPU t % n of this process's n CPUs, and job j
  // (client or vos-only) on the CPU of the target that holds its object, so
  // that a job and the target serving it share a core and its caches.
  bool pin = false;
  std::string metrics;  // cluster up --metrics (host:port or off); empty: ros2ctl's default
};

ObjSuiteOptions g_opts;

// With --pin: the CPU of target t (the engine's target_cpus cycle over these).
int TargetCpu(int target) {
  static const std::vector<int> cpus = transport::CurrentThreadCpus();
  if (cpus.empty()) return 0;  // the affinity could not be read: CPU 0 exists
  return cpus[static_cast<size_t>(target) % cpus.size()];
}

// One job's libros2 handles (destroyed container, pool, client in that order).
struct JobHandles {
  std::unique_ptr<client::Client> client;
  std::unique_ptr<client::Pool> pool;
  std::unique_ptr<client::Container> container;
  ObjectId oid;
};

// The engine target that holds job j's object.
int JobTarget(int job) {
  return job % std::max(g_opts.targets, 1);
}

// Job j's S1 object, chosen so that it lives on target JobTarget(j) (placement
// is a hash of the id): the jobs spread evenly over the engine's targets, as
// the baseline's jobs each get their own store and thread. Left to the hash,
// two jobs' objects shared one target about half the time and the other
// target idled.
ObjectId JobObject(int job) {
  const auto targets = static_cast<uint32_t>(std::max(g_opts.targets, 1));
  const auto want = static_cast<uint32_t>(JobTarget(job));
  for (uint64_t lo = static_cast<uint64_t>(job) * 1000 + 1;; ++lo) {
    ObjectId oid = client::Container::MakeObjectId(ObjectClass::kS1, 0xbe7c, lo, ObjectType::kArray);
    if (JumpConsistentHash(PlacementHash(oid), targets) == want) return oid;
  }
}

// Keeps g_opts.qd I/Os of `shape` in flight on `cont` from the calling thread
// for runtime_s seconds (or exactly max_ops sequential ones when max_ops > 0).
// `warmup` untimed ops come first; `start` is counted down before timing.
Result<CaseStats> RunClientJob(client::Client& cli, const client::Container& cont, ObjectId oid, const Shape& shape,
                               double runtime_s, uint64_t max_ops, uint64_t seed, std::latch* start) {
  bool arrived = false;
  auto fail = [&](Status st) -> Result<CaseStats> {
    if (start != nullptr && !arrived) start->count_down();
    arrived = true;
    return st;
  };
  auto obj = cont.OpenObject(oid);
  if (!obj.ok()) return fail(obj.status());
  // Declared before the queue: the buffers outlive any I/O in flight.
  IoMemory heap_mem;
  client::IoBuffer io_buf;
  std::vector<std::byte*> bufs;
  std::vector<Clock::time_point> started(static_cast<size_t>(shape.qd));
  std::vector<int> free_slots;
  std::byte* base = nullptr;
  if (g_opts.buffers == "io") {
    auto b = cli.AllocateIoBuffer(static_cast<uint64_t>(shape.qd) * shape.bs);
    if (!b.ok()) return fail(b.status());
    io_buf = std::move(*b);
    base = io_buf.data();
  } else {
    auto m = AllocateIoMemory(static_cast<size_t>(shape.qd) * shape.bs, PageKind::kSmall);
    if (!m.ok()) return fail(m.status());
    heap_mem = std::move(*m);
    base = heap_mem.data();
  }
  for (int i = 0; i < shape.qd; ++i) {
    bufs.push_back(base + static_cast<size_t>(i) * shape.bs);
    free_slots.push_back(i);
  }
  auto eq = cli.CreateEventQueue();
  if (!eq.ok()) return fail(eq.status());
  const uint64_t blocks = g_opts.size / shape.bs;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> pick(0, blocks - 1);
  uint64_t cursor = 0, submitted = 0;
  auto submit = [&](int slot) -> Status {
    ++submitted;
    const uint64_t block = IsRandom(shape.op) ? pick(rng) : (cursor++ % blocks);
    const uint64_t offset = block * shape.bs;
    std::byte* buf = bufs[static_cast<size_t>(slot)];
    started[static_cast<size_t>(slot)] = Clock::now();
    if (IsWrite(shape.op)) {
      client::UpdateArgs a;
      a.dkey = ChunkKey(offset / kChunk);
      a.akey = "0";
      a.kind = ValueType::kArray;
      a.index = offset % kChunk;
      a.data = std::span<const std::byte>(buf, shape.bs);
      return obj->SubmitUpdate(**eq, a, static_cast<uint64_t>(slot));
    }
    client::FetchArgs a;
    a.dkey = ChunkKey(offset / kChunk);
    a.akey = "0";
    a.kind = ValueType::kArray;
    a.index = offset % kChunk;
    a.count = shape.bs;
    a.buffer = std::span<std::byte>(buf, shape.bs);
    return obj->SubmitFetch(**eq, a, static_cast<uint64_t>(slot));
  };
  std::vector<client::Event> events(static_cast<size_t>(shape.qd));
  // Runs until `done()`; records latencies when `timed`.
  auto drive = [&](auto done, bool timed, CaseStats& stats) -> Status {
    while (true) {
      while (!free_slots.empty() && !done()) {
        int slot = free_slots.back();
        free_slots.pop_back();
        ROS2_RETURN_IF_ERROR(submit(slot));
      }
      if ((*eq)->in_flight() == 0 && (*eq)->ready() == 0) {
        if (done()) return Status::Ok();
        continue;
      }
      auto n = (*eq)->Wait(events, 1, std::chrono::seconds(60));
      if (!n.ok()) return n.status();
      for (size_t i = 0; i < *n; ++i) {
        const auto& ev = events[i];
        if (!ev.result.status.ok()) return ev.result.status.WithContext(fmt::format("obj bench: {}", shape.op));
        const int slot = static_cast<int>(ev.user_data);
        if (timed) {
          stats.lat_us.push_back(
              std::chrono::duration<double, std::micro>(Clock::now() - started[static_cast<size_t>(slot)]).count());
          stats.ops++;
          stats.bytes += shape.bs;
        }
        free_slots.push_back(slot);
      }
    }
  };
  CaseStats warm, stats;
  if (max_ops > 0) {
    if (start != nullptr) start->count_down();
    const auto t0 = Clock::now();
    Status st = drive([&] { return submitted >= max_ops; }, true, stats);
    if (!st.ok()) return st;
    stats.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return stats;
  }
  // Warm-up: the first I/Os make the thread's worker, endpoints and (for a new
  // container) the shard on the target.
  const uint64_t warm_ops = static_cast<uint64_t>(shape.qd) * 2;
  if (Status st = drive([&] { return submitted >= warm_ops; }, false, warm); !st.ok()) return fail(st);
  cursor = 0;
  arrived = true;
  if (start != nullptr) start->arrive_and_wait();
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(runtime_s));
  Status st = drive([&] { return Clock::now() >= deadline; }, true, stats);
  stats.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!st.ok()) {
    // A write case that fills the shard ends early: report what completed.
    if (st.IsNoSpace() && stats.ops > 0) {
      std::fprintf(stderr, "obj bench: %s bs=%llu: extent store full after %.2fs; measured up to there\n",
                   shape.op.c_str(), static_cast<unsigned long long>(shape.bs), stats.seconds);
      return stats;
    }
    return st;
  }
  return stats;
}

CaseStats Merge(std::vector<CaseStats>& parts) {
  CaseStats m;
  for (auto& p : parts) {
    m.seconds = std::max(m.seconds, p.seconds);
    m.ops += p.ops;
    m.bytes += p.bytes;
    m.lat_us.insert(m.lat_us.end(), p.lat_us.begin(), p.lat_us.end());
  }
  return m;
}

// Runs fn(job) on `jobs` threads and merges their statistics.
template <typename Fn>
Result<CaseStats> RunJobs(int jobs, Fn fn) {
  std::vector<Result<CaseStats>> results(static_cast<size_t>(jobs), Status::Cancelled("job did not run"));
  std::latch start(jobs);
  {
    std::vector<std::jthread> threads;
    for (int j = 0; j < jobs; ++j) {
      threads.emplace_back([&, j] {
        // Job j's object lives on target JobTarget(j); its vos-only twin runs
        // on the same CPU.
        if (g_opts.pin) {
          if (Status st = transport::PinCurrentThreadToCpu(TargetCpu(JobTarget(j))); !st.ok()) {
            results[static_cast<size_t>(j)] = st;
            start.count_down();
            return;
          }
        }
        results[static_cast<size_t>(j)] = fn(j, &start);
      });
    }
  }
  std::vector<CaseStats> parts;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    parts.push_back(std::move(*r));
  }
  return Merge(parts);
}

struct Figures {
  double iops = 0, mib_s = 0, p50 = 0;
};
Figures FiguresOf(const CaseStats& s) {
  Figures f;
  if (s.seconds > 0) {
    f.iops = static_cast<double>(s.ops) / s.seconds;
    f.mib_s = static_cast<double>(s.bytes) / s.seconds / (1 << 20);
  }
  f.p50 = Percentile(s.lat_us, 50);
  return f;
}

// The VOS-only side of one class: one store per job, preloaded once.
class VosBaseline {
 public:
  static Result<std::unique_ptr<VosBaseline>> Open(const std::string& scratch, const std::string& cls, int max_jobs) {
    ROS2_ASSIGN_OR_RETURN(auto sc, vos::ParseStorageClass(cls));
    auto b = std::unique_ptr<VosBaseline>(new VosBaseline(scratch, cls, sc));
    ROS2_ASSIGN_OR_RETURN(b->read_stores_, b->OpenStores("read", max_jobs));
    b->read_epochs_.assign(static_cast<size_t>(max_jobs), 1);
    ROS2_ASSIGN_OR_RETURN(auto pre, RunOn(b->read_stores_, b->read_epochs_, Shape{"write", kChunk, g_opts.qd}, max_jobs,
                                          0, g_opts.size / kChunk));
    std::fprintf(stderr, "obj bench: vos-only %s: preloaded %d x %llu MiB in %.2fs\n", cls.c_str(), max_jobs,
                 static_cast<unsigned long long>(g_opts.size >> 20), pre.seconds);
    return b;
  }

  // Reads use the preloaded stores; each write case gets fresh stores (removed
  // after it), as the engine side writes into a fresh container.
  Result<CaseStats> Run(const Shape& shape, int jobs, double runtime_s) {
    if (!IsWrite(shape.op)) return RunOn(read_stores_, read_epochs_, shape, jobs, runtime_s, 0);
    const std::string tag = fmt::format("write{}", write_seq_++);
    ROS2_ASSIGN_OR_RETURN(auto stores, OpenStores(tag, jobs));
    std::vector<Epoch> epochs(static_cast<size_t>(jobs), 1);
    auto r = RunOn(stores, epochs, shape, jobs, runtime_s, 0);
    stores.clear();
    for (int j = 0; j < jobs; ++j) (void)vos::Vos::Destroy(StorePath(tag, j));
    return r;
  }

 private:
  VosBaseline(std::string scratch, std::string cls, vos::StorageClass sc)
      : scratch_(std::move(scratch)), cls_(std::move(cls)), sc_(sc) {}

  std::string StorePath(const std::string& tag, int job) const {
    return fmt::format("{}/vos-{}-{}-{}", scratch_, cls_, tag, job);
  }

  Result<std::vector<std::unique_ptr<vos::Vos>>> OpenStores(const std::string& tag, int jobs) const {
    std::vector<std::unique_ptr<vos::Vos>> stores;
    for (int j = 0; j < jobs; ++j) {
      vos::VosOptions o;
      o.path = StorePath(tag, j);
      o.storage_class = sc_;
      o.data_size = 3 * g_opts.size;
      ROS2_ASSIGN_OR_RETURN(auto store, vos::Vos::Open(o));
      stores.push_back(std::move(store));
    }
    return stores;
  }

  static Result<CaseStats> RunOn(std::vector<std::unique_ptr<vos::Vos>>& stores, std::vector<Epoch>& epochs,
                                 const Shape& shape, int jobs, double runtime_s, uint64_t max_ops) {
    return RunJobs(jobs, [&](int j, std::latch* start) -> Result<CaseStats> {
      start->arrive_and_wait();
      VosCaseRunner runner(stores[static_cast<size_t>(j)].get(), JobObject(j), g_opts.size, 1,
                           &epochs[static_cast<size_t>(j)], PageKind::kSmall, 42 + static_cast<uint64_t>(j));
      return runner.Run(shape, runtime_s, max_ops);
    });
  }

  std::string scratch_;
  std::string cls_;
  vos::StorageClass sc_;
  std::vector<std::unique_ptr<vos::Vos>> read_stores_;
  std::vector<Epoch> read_epochs_;
  int write_seq_ = 0;
};

struct CaseKey {
  std::string op;
  uint64_t bs;
  int jobs;
  auto operator<=>(const CaseKey&) const = default;
};

std::string CaseDesc(const CaseKey& k, const std::string& transport, const std::string& cls) {
  std::vector<std::pair<std::string, std::string>> kv = {{"op", k.op},
                                                         {"bs", std::to_string(k.bs)},
                                                         {"qd", std::to_string(g_opts.qd)},
                                                         {"jobs", std::to_string(k.jobs)},
                                                         {"transport", transport},
                                                         {"class", cls}};
  if (g_opts.pin) kv.emplace_back("mode", "pinned");
  return CaseString(kv);
}

// While alive, writes to stdout (fd 1) go to stderr: UCX prints its warnings on
// stdout (when a context or worker is made), which would break --json.
class StdoutToStderr {
 public:
  StdoutToStderr() {
    std::fflush(stdout);
    saved_ = dup(STDOUT_FILENO);
    if (saved_ >= 0) (void)dup2(STDERR_FILENO, STDOUT_FILENO);
  }
  ~StdoutToStderr() {
    if (saved_ < 0) return;
    std::fflush(stdout);
    (void)dup2(saved_, STDOUT_FILENO);
    close(saved_);
  }
  StdoutToStderr(const StdoutToStderr&) = delete;
  StdoutToStderr& operator=(const StdoutToStderr&) = delete;

 private:
  int saved_ = -1;
};

// Connects `jobs` handle sets to container `cont` of pool "bench".
Result<std::vector<JobHandles>> ConnectJobs(const LocalCluster& cluster, const std::string& transport, int jobs,
                                            const std::string& cont) {
  StdoutToStderr quiet;
  client::ClientOptions options;
  options.transport = transport;
  options.spin_budget = std::chrono::microseconds(g_opts.spin_us);
  ROS2_RETURN_IF_ERROR(local_cluster::CompleteClientOptions(options, cluster.data_dir()));
  std::vector<JobHandles> out;
  for (int j = 0; j < jobs; ++j) {
    JobHandles h;
    ROS2_ASSIGN_OR_RETURN(h.client, client::Client::Connect(options));
    ROS2_ASSIGN_OR_RETURN(h.pool, h.client->ConnectPool("bench"));
    ROS2_ASSIGN_OR_RETURN(h.container, h.pool->OpenContainer(cont));
    h.oid = JobObject(j);
    out.push_back(std::move(h));
  }
  return out;
}

Result<CaseStats> RunClientCase(std::vector<JobHandles>& handles, const Shape& shape, int jobs, double runtime_s,
                                uint64_t max_ops) {
  StdoutToStderr quiet;
  return RunJobs(jobs, [&](int j, std::latch* start) {
    auto& h = handles[static_cast<size_t>(j)];
    return RunClientJob(*h.client, *h.container, h.oid, shape, runtime_s, max_ops, 42 + static_cast<uint64_t>(j),
                        start);
  });
}

// The engine's target_cpus for --pin (empty without it).
std::vector<int> TargetCpus() {
  std::vector<int> cpus;
  if (g_opts.pin) {
    for (int t = 0; t < g_opts.targets; ++t) cpus.push_back(TargetCpu(t));
  }
  return cpus;
}

// Runs every case of one (class, transport) on its own cluster.
Status RunTransport(Reporter& rep, const std::string& scratch, const std::string& cls, const std::string& transport,
                    VosBaseline* baseline, std::map<CaseKey, Figures>& vos_figures,
                    std::map<CaseKey, Figures>& client_figures) {
  const int max_jobs = *std::max_element(g_opts.jobs.begin(), g_opts.jobs.end());
  ROS2_ASSIGN_OR_RETURN(auto cluster, LocalCluster::Up(scratch, {.ros2ctl = g_opts.ros2ctl,
                                                                 .engine = g_opts.engine,
                                                                 .storage_class = cls,
                                                                 .transport = transport,
                                                                 .targets = g_opts.targets,
                                                                 .shard_size = g_opts.shard_size,
                                                                 .name = "cluster-" + cls + "-" + transport,
                                                                 .target_cpus = TargetCpus(),
                                                                 .metrics = g_opts.metrics}));
  ROS2_RETURN_IF_ERROR(cluster->Ctl({"pool", "create", "bench", "--size", g_opts.shard_size}).status());
  ROS2_RETURN_IF_ERROR(cluster->Ctl({"cont", "create", "bench", "data", "--oclass", "S1"}).status());
  ROS2_ASSIGN_OR_RETURN(auto readers, ConnectJobs(*cluster, transport, max_jobs, "data"));
  // Preload every job's working set with 1 MiB updates (also creates the shards).
  ROS2_ASSIGN_OR_RETURN(auto pre,
                        RunClientCase(readers, Shape{"write", kChunk, g_opts.qd}, max_jobs, 0, g_opts.size / kChunk));
  std::fprintf(stderr, "obj bench: %s/%s: preloaded %d x %llu MiB in %.2fs (%s)\n", cls.c_str(), transport.c_str(),
               max_jobs, static_cast<unsigned long long>(g_opts.size >> 20), pre.seconds,
               readers[0].client->DescribeTransport().c_str());
  int write_seq = 0;
  for (uint64_t bs : g_opts.bs) {
    for (const auto& op : g_opts.ops) {
      for (int jobs : g_opts.jobs) {
        const CaseKey key{op, bs, jobs};
        const Shape shape{op, bs, g_opts.qd};
        const std::string desc = CaseDesc(key, transport, cls);
        // With --rounds 1 the baseline runs once per shape, before the first
        // transport's case, and both transports' records refer to it; with
        // more, every case alternates its own baseline and client rounds of
        // runtime / rounds each, so the VM's drift falls on both sides alike.
        const int rounds = std::max(g_opts.rounds, 1);
        const double round_s = g_opts.runtime_s / rounds;
        const bool own_baseline = baseline != nullptr && rounds > 1;
        if (baseline != nullptr && !own_baseline && !vos_figures.contains(key)) {
          auto v = baseline->Run(shape, jobs, g_opts.runtime_s);
          if (!v.ok()) return v.status().WithContext("vos-only " + desc);
          vos_figures[key] = FiguresOf(*v);
        }
        CaseStats total, base_total;
        // A fresh container per write case, so overwrites never fill the read set's shard.
        const std::string cont = IsWrite(op) ? fmt::format("w{}", write_seq++) : std::string();
        if (!cont.empty()) {
          ROS2_RETURN_IF_ERROR(cluster->Ctl({"cont", "create", "bench", cont, "--oclass", "S1"}).status());
        }
        Status case_status;
        {
          std::vector<JobHandles> writers;
          if (!cont.empty()) {
            auto w = ConnectJobs(*cluster, transport, jobs, cont);
            if (w.ok()) writers = std::move(*w);
            case_status = w.status();
          }
          for (int round = 0; round < rounds && case_status.ok(); ++round) {
            if (own_baseline) {
              auto v = baseline->Run(shape, jobs, round_s);
              if (!v.ok()) return v.status().WithContext("vos-only " + desc);
              MergeRound(&base_total, std::move(*v));
            }
            auto stats = RunClientCase(cont.empty() ? readers : writers, shape, jobs, round_s, 0);
            if (!stats.ok()) {
              case_status = stats.status();
              break;
            }
            MergeRound(&total, std::move(*stats));
          }
        }
        if (!cont.empty()) {
          if (auto d = cluster->Ctl({"cont", "destroy", "bench", cont}); !d.ok())
            std::fprintf(stderr, "obj bench: %s\n", d.status().ToString().c_str());
        }
        if (!case_status.ok()) return case_status.WithContext(desc);
        const Figures f = FiguresOf(total);
        client_figures[key] = f;
        std::optional<Figures> base_figures;
        if (own_baseline) {
          base_figures = FiguresOf(base_total);
        } else if (auto it = vos_figures.find(key); it != vos_figures.end()) {
          base_figures = it->second;
        }
        auto add = [&](const char* metric, double value, double (*base)(const Figures&)) {
          Record r{"obj", desc, metric, value, std::nullopt, std::nullopt};
          if (base_figures) {
            r.baseline = "vos-only";
            r.baseline_value = base(*base_figures);
          }
          rep.Add(std::move(r));
        };
        add("iops", f.iops, [](const Figures& b) { return b.iops; });
        add("mib_s", f.mib_s, [](const Figures& b) { return b.mib_s; });
        add("lat_us_p50", f.p50, [](const Figures& b) { return b.p50; });
      }
    }
  }
  return Status::Ok();
}

int RunObjSuite(Reporter& rep) {
  if (g_opts.ros2ctl.empty()) g_opts.ros2ctl = BuildTreeBinaryPath("tools/ros2ctl/ros2ctl");
  if (g_opts.engine.empty()) {
    std::string e = BuildTreeBinaryPath("src/engine/ros2-engine");
    if (!e.empty() && access(e.c_str(), X_OK) == 0) g_opts.engine = e;
  }
  if (access(g_opts.ros2ctl.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "obj bench: ros2ctl not found at '%s' (use --ros2ctl)\n", g_opts.ros2ctl.c_str());
    return 2;
  }
  for (uint64_t bs : g_opts.bs) {
    if (bs == 0 || bs > kChunk || kChunk % bs != 0 || g_opts.size % kChunk != 0 || g_opts.size < kChunk) {
      std::fprintf(stderr, "obj bench: block sizes must divide 1 MiB; --size a multiple of 1 MiB\n");
      return 2;
    }
  }
  std::fprintf(stderr, "obj bench: client buffers: %s\n",
               g_opts.buffers == "io" ? "io (libros2 I/O buffers: shared segments)" : "heap (aligned memory)");
  if (g_opts.jobs.empty() || g_opts.qd < 1) {
    std::fprintf(stderr, "obj bench: need at least one --jobs value and --qd >= 1\n");
    return 2;
  }
  auto scratch = TempDir::Create(g_opts.dir, "ros2-bench-obj-");
  if (!scratch.ok()) {
    std::fprintf(stderr, "obj bench: %s\n", scratch.status().ToString().c_str());
    return 1;
  }
  std::fprintf(stderr, "obj bench: dir %s ros2ctl %s qd %d size/job %llu MiB runtime %.1fs\n", scratch->path().c_str(),
               g_opts.ros2ctl.c_str(), g_opts.qd, static_cast<unsigned long long>(g_opts.size >> 20), g_opts.runtime_s);
  const int max_jobs = *std::max_element(g_opts.jobs.begin(), g_opts.jobs.end());
  int rc = 0;
  for (const auto& cls : g_opts.classes) {
    std::unique_ptr<VosBaseline> baseline;
    if (g_opts.baseline) {
      auto b = VosBaseline::Open(scratch->path(), cls, max_jobs);
      if (!b.ok()) {
        std::fprintf(stderr, "obj bench: vos-only %s: %s\n", cls.c_str(), b.status().ToString().c_str());
        rc = 1;
        continue;
      }
      baseline = std::move(*b);
    }
    std::map<CaseKey, Figures> vos_figures;
    std::map<std::string, std::map<CaseKey, Figures>> by_transport;
    for (const auto& transport : g_opts.transports) {
      Status st =
          RunTransport(rep, scratch->path(), cls, transport, baseline.get(), vos_figures, by_transport[transport]);
      if (!st.ok()) {
        std::fprintf(stderr, "obj bench: %s/%s: %s\n", cls.c_str(), transport.c_str(), st.ToString().c_str());
        rc = 1;
      }
    }
    // Cross-transport: 4 KiB randread IOPS over shm against tcp, same run.
    for (const auto& [key, shm] : by_transport["shm"]) {
      if (key.op != "randread" || key.bs != 4096) continue;
      auto& tcp = by_transport["tcp"];
      auto it = tcp.find(key);
      if (it == tcp.end()) continue;
      rep.Add(
          Record{"obj", CaseDesc(key, "shm", cls), "iops", shm.iops, std::string("transport-tcp"), it->second.iops});
    }
  }
  return rc;
}

const bool registered = RegisterSuite(Suite{
    "obj",
    "object update/fetch through libros2 and a local engine vs VOS in-process (vos-only), same run",
    [](CLI::App& app) {
      app.add_option("--dir", g_opts.dir, "parent directory for the scratch dir (clusters and VOS stores)");
      app.add_option("--classes", g_opts.classes, "storage classes: ram nvme")->delimiter(',');
      app.add_option("--transports", g_opts.transports, "transports: tcp shm")->delimiter(',');
      app.add_option("--ops", g_opts.ops, "ops: write read randwrite randread")->delimiter(',');
      app.add_option("--bs", g_opts.bs, "block sizes in bytes (dividing 1 MiB)")->delimiter(',');
      app.add_option("--jobs", g_opts.jobs, "job counts (threads, each its own client)")->delimiter(',');
      app.add_option("--qd", g_opts.qd, "I/Os in flight per job");
      app.add_option("--runtime", g_opts.runtime_s, "seconds per case and side");
      app.add_option("--size", g_opts.size, "working set per job in bytes, multiple of 1 MiB");
      app.add_option("--shard-size", g_opts.shard_size, "extent capacity of each container shard (cluster up)");
      app.add_option("--targets", g_opts.targets, "engine targets");
      app.add_option("--ros2ctl", g_opts.ros2ctl, "ros2ctl binary (default: the build tree's)");
      app.add_option("--metrics", g_opts.metrics,
                     "the engine's metrics endpoint host:port, or off (cluster up --metrics; default: 127.0.0.1:0)");
      app.add_option("--engine", g_opts.engine, "ros2-engine binary (default: the build tree's)");
      app.add_flag("!--no-baseline", g_opts.baseline, "skip the vos-only baseline");
      app.add_option("--buffers", g_opts.buffers,
                     "client buffers: io (libros2 I/O buffers, shared segments) or heap (aligned memory)")
          ->check(CLI::IsMember({"io", "heap"}));
      app.add_option("--rounds", g_opts.rounds,
                     "per case, alternate vos-only and the client this many times, runtime / rounds each "
                     "(spreads drift; 1: one baseline per shape shared by the transports)")
          ->check(CLI::Range(1, 100));
      app.add_option("--spin-us", g_opts.spin_us,
                     "microseconds a job polls for completions before sleeping (libros2 spin_budget)")
          ->check(CLI::Range(0, 1000000));
      app.add_flag("--pin", g_opts.pin,
                   "pin engine target t to CPU t (cycling over this process's CPUs) and each job, client or "
                   "vos-only, to the CPU of the target holding its object; records get mode=pinned");
    },
    RunObjSuite,
});

}  // namespace
}  // namespace ros2::bench
