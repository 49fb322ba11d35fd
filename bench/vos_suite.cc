// `ros2-bench vos`: VOS array update and fetch against fio's io_uring engine on the
// same file system, case by case in the same run.
//
// For every shape (op, block size, queue depth) the suite first runs fio on a file
// in the scratch directory, then drives VOS with the same shape for the same time,
// so drift of the noisy VM hits both sides of a ratio alike. VOS update is compared
// with fio write, fetch with fio read. The VOS data uses the layout of a DFS file:
// one array object per block size, dkey = 1 MiB chunk number, akey "0", record size
// 1 (or --record-size), index = offset within the chunk; it is preloaded before the
// first case so fetches read real extents, as fio's file is laid out before fio
// reads it. Queue depth for VOS is the number of ops in flight through
// SubmitUpdate/SubmitFetch with Progress() on this one thread, which is how an
// engine target drives its VOS. docs/benchmarks.md describes the suite in full.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_report.h"
#include "bench/fio_bench_util.h"
#include "bench/harness.h"
#include "bench/vos_bench_util.h"
#include "common/object_id.h"
#include "vos/vos.h"

namespace ros2::bench {
namespace {

struct VosSuiteOptions {
  std::string dir = "/tmp";
  std::string storage_class = "nvme";
  uint64_t size = uint64_t{1} << 30;
  double runtime_s = 5;
  std::vector<std::string> ops = {"write", "read", "randwrite", "randread"};
  std::vector<uint64_t> bs = {uint64_t{1} << 20, 4096};
  std::vector<int> qd = {1, 32};
  uint32_t record_size = 1;
  bool fdatasync_baseline = true;
  bool fio = true;
  uint64_t vos_data_size = 0;    // 0: 3 x size
  std::string extent_sync;       // empty: the VosOptions default
  bool relaxed = false;          // VosOptions::sync_commit = false (to measure what durability costs)
  bool inline_commit = true;     // VosOptions::inline_commit
  int rounds = 1;                // per case, alternate fio and VOS this many times (runtime split evenly)
  std::string buffers = "huge";  // page kind of both sides' I/O buffers (memory_bench_util.h)
  // engine: FetchOp::caller_verifies, as the engine fetches (checksums verified
  // at the client); verify: VOS verifies every fetched extent itself.
  std::vector<std::string> fetch_modes = {"engine", "verify"};
};

VosSuiteOptions g_opts;
PageKind g_pages = PageKind::kSmall;  // what --buffers resolved to

void Emit(Reporter& rep, const std::string& case_desc, const CaseStats& vos, const FioSide* fio,
          const std::string& baseline) {
  const double iops = vos.seconds > 0 ? static_cast<double>(vos.ops) / vos.seconds : 0;
  const double mib_s = vos.seconds > 0 ? static_cast<double>(vos.bytes) / vos.seconds / (1 << 20) : 0;
  auto add = [&](const char* metric, double value, double base) {
    Record r{"vos", case_desc, metric, value, std::nullopt, std::nullopt};
    if (fio != nullptr) {
      r.baseline = baseline;
      r.baseline_value = base;
    }
    rep.Add(std::move(r));
  };
  add("iops", iops, fio ? fio->iops : 0);
  add("mib_s", mib_s, fio ? fio->bw_bytes / (1 << 20) : 0);
  add("lat_us_p50", Percentile(vos.lat_us, 50), fio ? fio->lat_us_p50 : 0);
  add("lat_us_p99", Percentile(vos.lat_us, 99), fio ? fio->lat_us_p99 : 0);
}

// Sums fio rounds of one shape: rates over the summed time, latency
// percentiles as the median of the rounds' percentiles.
FioSide MergeFioRounds(const std::vector<FioSide>& rounds) {
  FioSide m;
  double seconds = 0;
  std::vector<double> p50, p99;
  for (const FioSide& r : rounds) {
    m.io_bytes += r.io_bytes;
    m.total_ios += r.total_ios;
    if (r.iops > 0) seconds += static_cast<double>(r.total_ios) / r.iops;
    p50.push_back(r.lat_us_p50);
    p99.push_back(r.lat_us_p99);
  }
  if (seconds > 0) {
    m.iops = static_cast<double>(m.total_ios) / seconds;
    m.bw_bytes = static_cast<double>(m.io_bytes) / seconds;
  }
  m.lat_us_p50 = Percentile(p50, 50);
  m.lat_us_p99 = Percentile(p99, 50);
  return m;
}

Result<FioSide> RunFioShape(const Shape& shape, const std::string& file, bool ram, bool fdatasync) {
  FioJob job;
  job.name = fmt::format("{}-{}-qd{}", shape.op, shape.bs, shape.qd);
  job.rw = shape.op;
  job.bs = shape.bs;
  job.iodepth = shape.qd;
  job.size = g_opts.size;
  job.runtime_s = g_opts.runtime_s / g_opts.rounds;
  job.filename = file;
  job.direct = !ram;
  // Uniform random offsets with replacement, as the VOS side draws them.
  if (IsRandom(shape.op)) job.extra.push_back("--norandommap=1");
  if (ram) job.extra.push_back("--invalidate=0");  // keep the file in the page cache
  if (fdatasync) job.extra.push_back("--fdatasync=1");
  if (g_pages == PageKind::kHuge) job.extra.push_back("--iomem=shmhuge");  // the pages VOS's buffers have
  ROS2_ASSIGN_OR_RETURN(auto r, RunFio(job));
  return IsWrite(shape.op) ? r.write : r.read;
}

// One case: `rounds` alternations of fio, VOS and (writes) fio with fdatasync,
// each for runtime / rounds, so the VM's drift spreads over both sides of a
// ratio instead of falling between them. Emits the records; false when the
// VOS side failed.
bool RunCase(Reporter& rep, VosCaseRunner& runner, const Shape& shape, const std::string& case_desc,
             const std::string& fio_file, bool ram, const std::string& baseline) {
  const bool durable_baseline = IsWrite(shape.op) && g_opts.fdatasync_baseline && g_opts.fio && !ram;
  std::vector<FioSide> fio_rounds, durable_rounds;
  Status fio_error = g_opts.fio ? Status::Ok() : Status::Cancelled("fio baseline disabled (--no-fio)");
  Status durable_error;
  CaseStats stats;
  for (int round = 0; round < g_opts.rounds; ++round) {
    if (fio_error.ok()) {
      auto fio = RunFioShape(shape, fio_file, ram, /*fdatasync=*/false);
      if (fio.ok()) {
        fio_rounds.push_back(*fio);
      } else {
        fio_error = fio.status();
      }
    }
    auto vos_round = runner.Run(shape, g_opts.runtime_s / g_opts.rounds, 0);
    if (!vos_round.ok()) {
      std::fprintf(stderr, "vos bench: %s: %s\n", case_desc.c_str(), vos_round.status().ToString().c_str());
      return false;
    }
    MergeRound(&stats, std::move(*vos_round));
    if (durable_baseline && durable_error.ok()) {
      auto durable = RunFioShape(shape, fio_file, ram, /*fdatasync=*/true);
      if (durable.ok()) {
        durable_rounds.push_back(*durable);
      } else {
        durable_error = durable.status();
      }
    }
  }
  if (!fio_error.ok())
    std::fprintf(stderr, "vos bench: %s: fio: %s\n", case_desc.c_str(), fio_error.ToString().c_str());
  FioSide fio = MergeFioRounds(fio_rounds);
  Emit(rep, case_desc, stats, fio_error.ok() ? &fio : nullptr, baseline);
  if (!durable_baseline) return true;
  if (durable_error.ok()) {
    FioSide durable = MergeFioRounds(durable_rounds);
    Emit(rep, case_desc, stats, &durable, "fio-io_uring-fdatasync");
  } else {
    std::fprintf(stderr, "vos bench: %s: fio fdatasync: %s\n", case_desc.c_str(), durable_error.ToString().c_str());
  }
  return true;
}

int RunVosSuite(Reporter& rep) {
  auto cls = vos::ParseStorageClass(g_opts.storage_class);
  if (!cls.ok()) {
    std::fprintf(stderr, "vos bench: %s\n", cls.status().ToString().c_str());
    return 2;
  }
  const bool ram = *cls == vos::StorageClass::kRam;
  for (uint64_t bs : g_opts.bs) {
    if (bs == 0 || bs % 4096 != 0 || (bs > kChunk ? bs % kChunk : kChunk % bs) != 0 || g_opts.size % kChunk != 0) {
      std::fprintf(stderr, "vos bench: block sizes must be 4 KiB multiples dividing 1 MiB, size a multiple of 1 MiB\n");
      return 2;
    }
    if (bs > kChunk) {
      std::fprintf(stderr, "vos bench: block size %llu exceeds the 1 MiB chunk\n", static_cast<unsigned long long>(bs));
      return 2;
    }
  }
  auto pages = ParsePageKind(g_opts.buffers);
  if (!pages.ok()) {
    std::fprintf(stderr, "vos bench: --buffers: %s\n", pages.status().ToString().c_str());
    return 2;
  }
  g_pages = *pages;
  std::optional<HugePageReservation> reservation;
  if (g_pages == PageKind::kHuge) {
    // VOS's region and fio's, never both in use at once but both mapped: the
    // runner keeps its region between cases.
    uint64_t biggest = kChunk * 8;  // the preload
    for (uint64_t bs : g_opts.bs)
      for (int qd : g_opts.qd) biggest = std::max(biggest, bs * static_cast<uint64_t>(std::max(qd, 1)));
    const uint64_t region_pages = (biggest + kHugePageSize - 1) / kHugePageSize;
    auto r = HugePageReservation::Ensure(2 * region_pages + 2);
    if (r.ok()) {
      reservation.emplace(std::move(*r));
    } else {
      std::fprintf(stderr, "vos bench: huge pages unavailable (%s); both sides use small pages\n",
                   r.status().ToString().c_str());
      g_pages = PageKind::kSmall;
    }
  }
  auto scratch = TempDir::Create(g_opts.dir, "ros2-bench-vos-");
  if (!scratch.ok()) {
    std::fprintf(stderr, "vos bench: %s\n", scratch.status().ToString().c_str());
    return 1;
  }
  const std::string fio_file = scratch->path() + "/fio.dat";
  vos::VosOptions vopts;
  vopts.path = scratch->path() + "/vos";
  vopts.storage_class = *cls;
  vopts.data_size = g_opts.vos_data_size ? g_opts.vos_data_size : 3 * g_opts.size;
  vopts.sync_commit = !g_opts.relaxed;
  vopts.inline_commit = g_opts.inline_commit;
  if (!g_opts.extent_sync.empty()) {
    auto sync = vos::ParseExtentSync(g_opts.extent_sync);
    if (!sync.ok()) {
      std::fprintf(stderr, "vos bench: --extent-sync: %s\n", sync.status().ToString().c_str());
      return 2;
    }
    vopts.extent_sync = *sync;
  }
  auto opened = vos::Vos::Open(vopts);
  if (!opened.ok()) {
    std::fprintf(stderr, "vos bench: open %s: %s\n", vopts.path.c_str(), opened.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<vos::Vos> store = std::move(*opened);
  Epoch next_epoch = 1;
  const std::string baseline = ram ? "fio-io_uring-buffered" : "fio-io_uring";
  std::fprintf(stderr,
               "vos bench: dir %s class %s extent_sync %s%s%s size %llu runtime %.1fs; baseline %s; buffers %s pages "
               "on both sides\n",
               scratch->path().c_str(), g_opts.storage_class.c_str(),
               std::string(vos::ExtentSyncName(vopts.extent_sync)).c_str(), g_opts.relaxed ? " (relaxed)" : "",
               g_opts.inline_commit ? "" : " (every commit on the commit thread)",
               static_cast<unsigned long long>(g_opts.size), g_opts.runtime_s, baseline.c_str(),
               std::string(PageKindName(g_pages)).c_str());

  int rc = 0;
  for (uint64_t bs : g_opts.bs) {
    const ObjectId oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kS1, 0xbe7c, bs);
    VosCaseRunner runner(store.get(), oid, g_opts.size, g_opts.record_size, &next_epoch, g_pages);
    // Preload the whole working set with 1 MiB updates, as fio lays out its file.
    auto pre = runner.Run(Shape{"write", kChunk, 8}, 0, g_opts.size / kChunk);
    if (!pre.ok()) {
      std::fprintf(stderr, "vos bench: preload bs=%llu: %s\n", static_cast<unsigned long long>(bs),
                   pre.status().ToString().c_str());
      return 1;
    }
    std::fprintf(stderr, "vos bench: preloaded %llu MiB in %.2fs\n", static_cast<unsigned long long>(g_opts.size >> 20),
                 pre->seconds);
    for (const auto& op : g_opts.ops) {
      // Fetches run once per checking mode (--fetch-modes), updates once.
      const std::vector<std::string> modes = IsWrite(op) ? std::vector<std::string>{""} : g_opts.fetch_modes;
      for (int qd : g_opts.qd) {
        for (const std::string& mode : modes) {
          const Shape shape{op, bs, qd};
          std::vector<std::pair<std::string, std::string>> keys = {
              {"op", op}, {"bs", std::to_string(bs)}, {"qd", std::to_string(qd)}, {"class", g_opts.storage_class}};
          if (!mode.empty()) keys.emplace_back("mode", mode);
          runner.set_caller_verifies(mode == "engine");
          if (!RunCase(rep, runner, shape, CaseString(keys), fio_file, ram, baseline)) rc = 1;
          if (IsWrite(op)) {
            // Reclaim overwritten versions between cases, outside any measurement.
            if (auto agg = store->Aggregate(); !agg.ok()) {
              std::fprintf(stderr, "vos bench: aggregate: %s\n", agg.status().ToString().c_str());
            }
          }
        }
      }
    }
  }
  store.reset();
  return rc;
}

const bool registered = RegisterSuite(Suite{
    "vos",
    "VOS update/fetch vs fio io_uring (direct=1) on the same file system, same run",
    [](CLI::App& app) {
      app.add_option("--dir", g_opts.dir, "parent directory for the scratch dir (VOS store and fio's file)");
      app.add_option("--class", g_opts.storage_class, "VOS storage class: nvme | ram (ram: fio buffered baseline)");
      app.add_option("--size", g_opts.size, "working set in bytes (per block size), multiple of 1 MiB");
      app.add_option("--runtime", g_opts.runtime_s, "seconds per case and side");
      app.add_option("--rounds", g_opts.rounds,
                     "per case, alternate fio and VOS this many times, runtime / rounds each (spreads drift)")
          ->check(CLI::Range(1, 100));
      app.add_option("--ops", g_opts.ops, "ops to run: write read randwrite randread")->delimiter(',');
      app.add_option("--bs", g_opts.bs, "block sizes in bytes")->delimiter(',');
      app.add_option("--qd", g_opts.qd, "queue depths")->delimiter(',');
      app.add_option("--record-size", g_opts.record_size, "VOS array record size (1 or 4096)");
      app.add_option("--vos-data-size", g_opts.vos_data_size, "VOS extent store capacity (default 3 x size)");
      app.add_option("--extent-sync", g_opts.extent_sync,
                     "VOS durable extent writes: wal | group | dsync (default: VOS's)");
      app.add_option("--buffers", g_opts.buffers,
                     "page kind of both sides' I/O buffers: huge (hugetlb; fio --iomem=shmhuge; raises "
                     "vm.nr_hugepages while it runs if needed) | small (4 KiB pages; fio's default malloc)");
      app.add_option("--fetch-modes", g_opts.fetch_modes,
                     "fetch checking modes, each its own case (mode=): engine (VOS hands the stored checksums to "
                     "its caller, as the engine's fetch does; the client verifies) | verify (VOS verifies itself)")
          ->delimiter(',')
          ->check(CLI::IsMember({"engine", "verify"}));
      app.add_flag("!--no-fio", g_opts.fio, "VOS only, no fio baseline (for profiling)");
      app.add_flag("--relaxed", g_opts.relaxed,
                   "VOS relaxed durability (sync_commit: false), to measure what durable commits cost");
      app.add_flag("!--no-inline-commit", g_opts.inline_commit,
                   "VOS inline_commit: false (every commit group on the commit thread, even a lone update's)");
      app.add_flag("!--no-fdatasync-baseline", g_opts.fdatasync_baseline,
                   "skip the second write baseline (fio --fdatasync=1)");
    },
    RunVosSuite,
});

}  // namespace
}  // namespace ros2::bench
