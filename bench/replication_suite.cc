// `ros2-bench replication`: replicated object classes against S1 on the same
// cluster in the same run, and what a client sees across an engine's kill -9.
//
// The suite starts one etcd member and three ros2-engine processes sharing
// their management state in it (one target each, extents in a data file:
// storage class nvme, all on this machine's disk), as replication_test does.
// A client connects with the admin tenant over tcp.
//
// 1. Throughput, per case (op:bs, default 4 KiB randwrite, 1 MiB write and
//    1 MiB read) and object class (default S1, RP_2G1, RP_3G1): one thread
//    keeps --qd I/Os in flight on one array object (DFS file layout: dkey = 1
//    MiB chunk) for --runtime seconds. --rounds rounds; in each every class
//    runs once, their order rotating from round to round so the VM's drift
//    falls on all alike. Writes go to a fresh container per (case, class,
//    round), reads to a per-class container preloaded with --size bytes.
//    Reported: the median over the rounds of IOPS, MiB/s, p99 latency and CPU
//    per I/O (the three engines' CPU plus this process's, over the ops), the
//    RP classes' records with the S1 median as baseline; the spread (min..max
//    of the rounds, and of the per-round ratios) on stderr.
// 2. Disk copy rate (op=copy oclass=fio-disk): fio reading and writing the
//    same bytes at once (rw=rw, 1 MiB, direct) on the disk the engines use:
//    the rate a rebuild that reads one copy and writes another can reach here.
// 3. Engine kill (event=kill): one writer thread per RP class puts 64 KiB
//    values one at a time, in turn on six objects (one has a copy on the
//    killed engine but with odds 1/729); after --kill-after seconds one engine (neither the
//    client's control engine nor the management leader) gets SIGKILL; the
//    writers go on for --post-kill seconds more. Reported per class: the
//    longest single write (stall_ms_max) against the bound 2 x lease TTL +
//    1 s, the p99 latency over the whole loop against the p99 before the
//    kill, and how many acknowledged writes did not read back byte-exact
//    afterwards (lost_writes, any but 0 fails the suite).
// 4. Rebuild (op=rebuild): the rebuild the kill starts by itself (rebuild
//    delay 2 x TTL + 4 s, so it starts once the kill's writers stopped and
//    their writes were read back; the
//    engines' client_share --rebuild-share; --rebuild-delay) copies every RP shard that had a
//    copy on the dead engine to its fallback. Reported: its rate (bytes done
//    over job start to done, as `pool query` shows it) against the disk's own
//    copy rate of the same bytes, measured right after by fio reading and
//    writing that many bytes (rw=rw, 1 MiB, direct, not time-based), and the
//    live engines' CPU over the rebuild per MiB rebuilt
//    (engine_cpu_ms_per_mib).
// docs/replication.md holds the figures and the command.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_report.h"
#include "bench/fio_bench_util.h"
#include "bench/harness.h"
#include "control/control_channel.h"
#include "control/credentials.h"
#include "control/management_client.h"
#include "ros2/client.h"
#include "testing/engine_process.h"
#include "testing/etcd_cluster.h"
#include "testing/etcd_process.h"
#include "testing/pattern.h"

namespace ros2::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kMiB = uint64_t{1} << 20;

struct ReplSuiteOptions {
  std::string dir = "/tmp";
  std::vector<std::string> cases = {"randwrite:4096", "write:1048576", "read:1048576"};
  std::vector<std::string> oclasses = {"S1", "RP_2G1", "RP_3G1"};
  int rounds = 3;
  double runtime_s = 2;
  int qd = 8;
  uint64_t size = 64 * kMiB;        // read set per class
  std::string shard_size = "4GiB";  // grows on demand; the kill writers write on after the cases
  int ttl_s = 3;
  double kill_after_s = 2;
  double post_kill_s = -1;  // < 0: 2 x TTL + 2 s
  bool kill = true;
  bool copy = true;
  uint64_t copy_size = 256 * kMiB;
  bool rebuild = true;
  int rebuild_share = 50;       // the engines' rebuild.client_share (their default)
  double rebuild_delay_s = -1;  // < 0: 2 x TTL + 4 s
  bool rebuild_client = false;  // a client reads S1's read set during the rebuild
};

ReplSuiteOptions g_opts;

struct Case {
  std::string op;
  uint64_t bs = 0;
};

bool IsWriteOp(const std::string& op) {
  return op == "write" || op == "randwrite";
}

// "op:bs" -> Case; InvalidArgument naming the bad entry.
Result<Case> ParseCase(const std::string& s) {
  const auto colon = s.find(':');
  Case c;
  if (colon != std::string::npos) {
    c.op = s.substr(0, colon);
    c.bs = std::strtoull(s.c_str() + colon + 1, nullptr, 10);
  }
  const bool op_ok = c.op == "write" || c.op == "randwrite" || c.op == "read" || c.op == "randread";
  if (!op_ok || c.bs == 0 || c.bs > kMiB || kMiB % c.bs != 0) {
    return Status::InvalidArgument(fmt::format(
        "replication bench: case '{}': want op:bs, op one of write randwrite read randread, bs dividing 1 MiB", s));
  }
  return c;
}

// User + system CPU seconds of `pids` summed (a process gone counts 0).
double CpuSecondsOf(const std::vector<pid_t>& pids) {
  double s = 0;
  for (pid_t pid : pids) {
    if (auto c = ProcessCpuSeconds(pid); c.ok()) s += *c;
  }
  return s;
}

// The etcd member, the three engines and the admin credentials: the tests'
// EtcdEngineCluster (src/testing/etcd_cluster.h) with the bench's options.
class EngineSet {
 public:
  static Result<std::unique_ptr<EngineSet>> Start(const std::string& scratch, int engines) {
    auto set = std::unique_ptr<EngineSet>(new EngineSet());
    testing::EtcdEngineClusterOptions o;
    o.engines = engines;
    o.targets = 1;
    o.storage_class = "nvme";
    o.data_size = g_opts.shard_size;
    o.lease_ttl = std::chrono::seconds(g_opts.ttl_s);
    o.data_parent = scratch;
    // The rebuild after the kill starts once the kill's writers are done and
    // their writes read back (the kill is marked DOWN within 2 x TTL; they
    // write on 2 x TTL + 2 s, the read-back takes a few seconds more), so it
    // runs without client I/O and at full speed (client_share applies only
    // while clients use the engines).
    const double delay_s = g_opts.rebuild_delay_s >= 0 ? g_opts.rebuild_delay_s : 2.0 * g_opts.ttl_s + 4.0;
    o.rebuild =
        fmt::format("{{ delay: {}ms, client_share: {} }}", static_cast<int64_t>(delay_s * 1000), g_opts.rebuild_share);
    ROS2_RETURN_IF_ERROR(set->cluster_.Start(o));
    return set;
  }

  std::unique_ptr<control::ManagementClient> Mgmt(size_t i) { return cluster_.Mgmt(i); }

  Result<std::unique_ptr<client::Client>> Connect(size_t home) const {
    client::ClientOptions o = cluster_.ClientOptionsFor(home);
    o.reconnect_timeout = std::chrono::seconds(30);
    o.io_timeout = std::chrono::seconds(10);
    o.spin_budget = std::chrono::microseconds(10);
    return client::Client::Connect(o);
  }

  // The management leader's index, asking engine `ask`; -1 when none answers.
  int LeaderIndex(size_t ask) { return cluster_.LeaderIndex(ask); }
  Result<size_t> FindLeader(size_t ask) { return cluster_.FindLeader(ask); }

  // The pids of the engines still running.
  std::vector<pid_t> LivePids() const {
    std::vector<pid_t> out;
    for (const auto& e : cluster_.engines) {
      if (e->pid() > 0) out.push_back(e->pid());
    }
    return out;
  }

  // User + system CPU seconds of the live engines.
  double EnginesCpuSeconds() const { return CpuSecondsOf(LivePids()); }

  // Ok unless an engine exited on its own: then its exit and log tail.
  Status CheckEngines() { return cluster_.CheckEngines(); }

  size_t size() const { return cluster_.engines.size(); }
  testing::EngineProcess& engine(size_t i) { return *cluster_.engines[i]; }

 private:
  EngineSet() = default;
  testing::EtcdEngineCluster cluster_;
};

// The summed CPU seconds (user + system) of a fixed set of processes,
// sampled every 10 ms with each sample's wall-clock ms from construction to
// destruction: the CPU of a span the engines stamp in wall-clock ms (a
// rebuild's start to done) however late the bench learns of the span.
class CpuSampler {
 public:
  explicit CpuSampler(std::vector<pid_t> pids) : pids_(std::move(pids)) {
    thread_ = std::jthread([this](std::stop_token stop) {
      while (!stop.stop_requested()) {
        Take();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
  }

  // CPU seconds from the last sample at or before `from_ms` (the first
  // sample when none is) to the first at or after `to_ms`, waiting up to
  // 1 s for that one; TimedOut when it never comes.
  Result<double> Between(uint64_t from_ms, uint64_t to_ms) {
    const auto deadline = Clock::now() + std::chrono::seconds(1);
    while (true) {
      {
        std::lock_guard lock(mu_);
        if (!samples_.empty() && samples_.back().first >= to_ms) {
          auto after = std::lower_bound(samples_.begin(), samples_.end(), std::make_pair(to_ms, 0.0));
          auto before = std::upper_bound(samples_.begin(), samples_.end(), std::make_pair(from_ms, 1e300));
          if (before != samples_.begin()) --before;
          return after->second - before->second;
        }
      }
      if (Clock::now() > deadline) return Status::TimedOut("CPU sampler: no sample after the span's end");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

 private:
  void Take() {
    const double s = CpuSecondsOf(pids_);
    const auto now = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    std::lock_guard lock(mu_);
    samples_.emplace_back(now, s);
  }

  const std::vector<pid_t> pids_;
  std::mutex mu_;
  std::vector<std::pair<uint64_t, double>> samples_;  // (wall-clock ms, CPU seconds), in time order
  std::jthread thread_;                               // last: stopped and joined before the members go
};

double SelfCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct Figures {
  double iops = 0, mib_s = 0, p99_us = 0, cpu_us_per_io = 0;
};

// One container of pool "bench" opened by its own client, and its object.
struct Target {
  std::unique_ptr<client::Client> client;
  std::unique_ptr<client::Pool> pool;
  std::unique_ptr<client::Container> container;
  std::unique_ptr<client::Object> object;
};

Result<Target> OpenTarget(const EngineSet& set, const std::string& cont, ObjectClass oc, uint64_t lo) {
  Target t;
  ROS2_ASSIGN_OR_RETURN(t.client, set.Connect(0));
  ROS2_ASSIGN_OR_RETURN(t.pool, t.client->ConnectPool("bench"));
  ROS2_ASSIGN_OR_RETURN(t.container, t.pool->OpenContainer(cont));
  ROS2_ASSIGN_OR_RETURN(auto obj,
                        t.container->OpenObject(client::Container::MakeObjectId(oc, 0xbe7c, lo, ObjectType::kArray)));
  t.object = std::make_unique<client::Object>(std::move(obj));
  return t;
}

// Keeps g_opts.qd I/Os of `c` in flight on t's object, for `runtime_s` seconds
// (timed) or exactly `max_ops` (untimed: preload and warm-up).
Result<Figures> Drive(const EngineSet& set, Target& t, const Case& c, double runtime_s, uint64_t max_ops,
                      uint64_t span) {
  const int qd = g_opts.qd;
  ROS2_ASSIGN_OR_RETURN(auto io, t.client->AllocateIoBuffer(static_cast<uint64_t>(qd) * c.bs));
  for (uint64_t i = 0; i < io.size(); ++i) io.data()[i] = static_cast<std::byte>(i * 131 + 7);
  ROS2_ASSIGN_OR_RETURN(auto eq, t.client->CreateEventQueue());
  const uint64_t blocks = span / c.bs;
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<uint64_t> pick(0, blocks - 1);
  std::vector<Clock::time_point> started(static_cast<size_t>(qd));
  std::vector<int> free_slots;
  for (int i = 0; i < qd; ++i) free_slots.push_back(i);
  uint64_t cursor = 0, submitted = 0, ops = 0;
  std::vector<double> lat_us;
  auto submit = [&](int slot) -> Status {
    ++submitted;
    const uint64_t block = c.op.starts_with("rand") ? pick(rng) : (cursor++ % blocks);
    const uint64_t offset = block * c.bs;
    std::byte* buf = io.data() + static_cast<size_t>(slot) * c.bs;
    started[static_cast<size_t>(slot)] = Clock::now();
    const std::string dkey = fmt::format("{}", offset / kMiB);
    if (IsWriteOp(c.op)) {
      client::UpdateArgs a;
      a.dkey = dkey;
      a.akey = "0";
      a.kind = ValueType::kArray;
      a.index = offset % kMiB;
      a.data = std::span<const std::byte>(buf, c.bs);
      return t.object->SubmitUpdate(*eq, a, static_cast<uint64_t>(slot));
    }
    client::FetchArgs a;
    a.dkey = dkey;
    a.akey = "0";
    a.kind = ValueType::kArray;
    a.index = offset % kMiB;
    a.count = c.bs;
    a.buffer = std::span<std::byte>(buf, c.bs);
    return t.object->SubmitFetch(*eq, a, static_cast<uint64_t>(slot));
  };
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(runtime_s));
  auto done = [&] { return max_ops > 0 ? submitted >= max_ops : Clock::now() >= deadline; };
  const double cpu0 = set.EnginesCpuSeconds() + SelfCpuSeconds();
  std::vector<client::Event> events(static_cast<size_t>(qd));
  while (true) {
    while (!free_slots.empty() && !done()) {
      const int slot = free_slots.back();
      free_slots.pop_back();
      ROS2_RETURN_IF_ERROR(submit(slot));
    }
    if (eq->in_flight() == 0 && eq->ready() == 0) break;
    ROS2_ASSIGN_OR_RETURN(size_t n, eq->Wait(events, 1, std::chrono::seconds(60)));
    for (size_t i = 0; i < n; ++i) {
      if (!events[i].result.status.ok()) return events[i].result.status.WithContext(c.op);
      const int slot = static_cast<int>(events[i].user_data);
      lat_us.push_back(
          std::chrono::duration<double, std::micro>(Clock::now() - started[static_cast<size_t>(slot)]).count());
      ++ops;
      free_slots.push_back(slot);
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = set.EnginesCpuSeconds() + SelfCpuSeconds() - cpu0;
  Figures f;
  if (secs > 0 && ops > 0) {
    f.iops = static_cast<double>(ops) / secs;
    f.mib_s = f.iops * static_cast<double>(c.bs) / kMiB;
    f.cpu_us_per_io = cpu / static_cast<double>(ops) * 1e6;
  }
  f.p99_us = Percentile(lat_us, 99);
  return f;
}

std::string CaseDesc(const Case& c, const std::string& oclass) {
  return CaseString({{"op", c.op},
                     {"bs", std::to_string(c.bs)},
                     {"qd", std::to_string(g_opts.qd)},
                     {"oclass", oclass},
                     {"engines", "3"}});
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One round of case `c` for class `oc`: a fresh container for writes.
Result<Figures> RunRound(EngineSet& set, control::ManagementClient& mgmt, const Case& c, const std::string& oclass,
                         ObjectClass oc, int* seq) {
  if (!IsWriteOp(c.op)) {
    ROS2_ASSIGN_OR_RETURN(Target t, OpenTarget(set, "r-" + oclass, oc, 1));
    return Drive(set, t, c, g_opts.runtime_s, 0, g_opts.size);
  }
  const std::string cont = fmt::format("w{}", (*seq)++);
  ROS2_RETURN_IF_ERROR(mgmt.CreateContainer("bench", cont, {{"oclass", oclass}}).status());
  Result<Figures> f = Status::Cancelled("not run");
  {
    auto t = OpenTarget(set, cont, oc, 1);
    if (!t.ok()) return t.status();
    // Untimed warm-up: each copy's target creates the container's shard.
    f = Drive(set, *t, c, 0, static_cast<uint64_t>(g_opts.qd) * 2, g_opts.size);
    if (f.ok()) f = Drive(set, *t, c, g_opts.runtime_s, 0, g_opts.size);
  }
  if (Status d = mgmt.DestroyContainer("bench", cont); !d.ok()) {
    std::fprintf(stderr, "replication bench: destroy %s: %s\n", cont.c_str(), d.ToString().c_str());
  }
  return f;
}

// The median of each metric over the rounds, RP classes against S1's median;
// the spread of the rounds on stderr.
void ReportCase(Reporter& rep, const Case& c, const std::vector<std::vector<Figures>>& runs) {
  struct Metric {
    const char* name;
    double Figures::*field;
  };
  const Metric metrics[] = {{"iops", &Figures::iops},
                            {"mib_s", &Figures::mib_s},
                            {"lat_us_p99", &Figures::p99_us},
                            {"cpu_us_per_io", &Figures::cpu_us_per_io}};
  const auto s1 = std::find(g_opts.oclasses.begin(), g_opts.oclasses.end(), "S1");
  const size_t s1_index = static_cast<size_t>(s1 - g_opts.oclasses.begin());
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string& oclass = g_opts.oclasses[i];
    for (const Metric& m : metrics) {
      std::vector<double> xs, ratios;
      for (size_t r = 0; r < runs[i].size(); ++r) {
        xs.push_back(runs[i][r].*m.field);
        if (s1 != g_opts.oclasses.end() && runs[s1_index][r].*m.field > 0) {
          ratios.push_back(runs[i][r].*m.field / (runs[s1_index][r].*m.field));
        }
      }
      Record rec{"replication", CaseDesc(c, oclass), m.name, Median(xs), std::nullopt, std::nullopt};
      if (s1 != g_opts.oclasses.end() && i != s1_index) {
        std::vector<double> base;
        for (const Figures& f : runs[s1_index]) base.push_back(f.*m.field);
        rec.baseline = "S1";
        rec.baseline_value = Median(base);
      }
      std::fprintf(stderr, "replication bench: %-16s %-7s %-14s median %10.1f (rounds %.1f..%.1f)", c.op.c_str(),
                   oclass.c_str(), m.name, rec.value, *std::min_element(xs.begin(), xs.end()),
                   *std::max_element(xs.begin(), xs.end()));
      if (rec.baseline && !ratios.empty()) {
        std::fprintf(stderr, "  x S1 per round %.2f..%.2f", *std::min_element(ratios.begin(), ratios.end()),
                     *std::max_element(ratios.begin(), ratios.end()));
      }
      std::fprintf(stderr, "\n");
      rep.Add(std::move(rec));
    }
  }
}

// The throughput cases: rounds x classes, rotating the class order.
Status RunThroughput(Reporter& rep, EngineSet& set, const std::vector<Case>& cases) {
  auto mgmt = set.Mgmt(0);
  if (!mgmt) return Status::Disconnected("replication bench: no management channel");
  std::vector<ObjectClass> classes;
  for (const auto& name : g_opts.oclasses) {
    ROS2_ASSIGN_OR_RETURN(ObjectClass oc, ParseObjectClass(name));
    classes.push_back(oc);
    bool reads = false;
    for (const auto& c : cases) reads = reads || !IsWriteOp(c.op);
    if (!reads) continue;
    ROS2_RETURN_IF_ERROR(mgmt->CreateContainer("bench", "r-" + name, {{"oclass", name}}).status());
    ROS2_ASSIGN_OR_RETURN(Target t, OpenTarget(set, "r-" + name, oc, 1));
    const auto t0 = Clock::now();
    ROS2_RETURN_IF_ERROR(Drive(set, t, Case{"write", kMiB}, 0, g_opts.size / kMiB, g_opts.size).status());
    std::fprintf(stderr, "replication bench: %s read set: %llu MiB preloaded in %.2fs\n", name.c_str(),
                 static_cast<unsigned long long>(g_opts.size / kMiB),
                 std::chrono::duration<double>(Clock::now() - t0).count());
  }
  int seq = 0;
  const size_t n = classes.size();
  for (const Case& c : cases) {
    std::vector<std::vector<Figures>> runs(n);
    for (int round = 0; round < g_opts.rounds; ++round) {
      for (size_t k = 0; k < n; ++k) {
        const size_t i = (k + static_cast<size_t>(round)) % n;
        ROS2_ASSIGN_OR_RETURN(Figures f, RunRound(set, *mgmt, c, g_opts.oclasses[i], classes[i], &seq));
        runs[i].push_back(f);
      }
    }
    ReportCase(rep, c, runs);
  }
  return Status::Ok();
}

// One RP class's writer across the kill: 64 KiB puts, one at a time.
struct KillWriter {
  std::string oclass;
  // Six objects, written in turn: each RP object misses a given engine with
  // odds 1/3 (RP_2 on three engines), so one of them almost surely has a
  // copy on the engine killed.
  std::vector<Target> targets;
  std::vector<std::pair<std::string, uint64_t>> acked;  // dkey, pattern seed
  std::vector<double> lat_ms;
  size_t before_kill = 0;  // writes acknowledged before the kill
  Status status;
};

constexpr size_t kKillValue = 64 * 1024;

void RunKillWriter(KillWriter& w, const std::atomic<int64_t>& kill_ns, const std::atomic<bool>& stop) {
  for (uint64_t i = 0; !stop.load(); ++i) {
    const std::string dkey = fmt::format("k{}", i);
    const uint64_t seed = 5000 + i;
    const auto value = testing::Pattern(kKillValue, seed);
    const auto t0 = Clock::now();
    const Target& t = w.targets[i % w.targets.size()];
    w.status = t.object->Put(dkey, "a", std::span<const std::byte>(value.data(), value.size()));
    if (!w.status.ok()) return;
    w.lat_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    w.acked.emplace_back(dkey, seed);
    if (kill_ns.load() == 0 || t0.time_since_epoch().count() < kill_ns.load()) w.before_kill = w.acked.size();
  }
}

// Writers on every RP class, one engine killed under them.
// `*cpu` samples the surviving engines' CPU from the kill on (for the
// rebuild the kill starts).
Status RunKill(Reporter& rep, EngineSet& set, bool* lost, std::unique_ptr<CpuSampler>* cpu) {
  auto mgmt = set.Mgmt(0);
  if (!mgmt) return Status::Disconnected("replication bench: no management channel");
  std::vector<std::unique_ptr<KillWriter>> writers;
  for (const auto& name : g_opts.oclasses) {
    ROS2_ASSIGN_OR_RETURN(ObjectClass oc, ParseObjectClass(name));
    if (ReplicaCount(oc) < 2) continue;
    ROS2_RETURN_IF_ERROR(mgmt->CreateContainer("bench", "k-" + name, {{"oclass", name}}).status());
    auto w = std::make_unique<KillWriter>();
    w->oclass = name;
    for (uint64_t lo = 9; lo < 15; ++lo) {
      ROS2_ASSIGN_OR_RETURN(Target t, OpenTarget(set, "k-" + name, oc, lo));
      w->targets.push_back(std::move(t));
    }
    writers.push_back(std::move(w));
  }
  if (writers.empty()) return Status::Ok();
  const int leader = set.LeaderIndex(0);
  size_t victim = 1;
  while (victim == 0 || static_cast<int>(victim) == leader) ++victim;
  std::atomic<int64_t> kill_ns{0};
  std::atomic<bool> stop{false};
  const double post_kill_s = g_opts.post_kill_s >= 0 ? g_opts.post_kill_s : 2.0 * g_opts.ttl_s + 2;
  {
    std::vector<std::jthread> threads;
    for (auto& w : writers) threads.emplace_back([&, wp = w.get()] { RunKillWriter(*wp, kill_ns, stop); });
    std::this_thread::sleep_for(std::chrono::duration<double>(g_opts.kill_after_s));
    kill_ns.store(Clock::now().time_since_epoch().count());
    set.engine(victim).Kill();
    *cpu = std::make_unique<CpuSampler>(set.LivePids());
    std::fprintf(stderr, "replication bench: engine %zu killed (SIGKILL) under %zu writers (leader: engine %d)\n",
                 victim, writers.size(), leader);
    std::this_thread::sleep_for(std::chrono::duration<double>(post_kill_s));
    stop.store(true);
  }
  const double bound_ms = 2000.0 * g_opts.ttl_s + 1000;
  for (auto& w : writers) {
    if (!w->status.ok())
      return w->status.WithContext(fmt::format("{} writer after {} writes", w->oclass, w->acked.size()));
    size_t bad = 0;
    for (size_t k = 0; k < w->acked.size(); ++k) {
      const auto& [dkey, seed] = w->acked[k];
      auto got = w->targets[k % w->targets.size()].object->Get(dkey, "a", kKillValue);
      if (!got.ok() || *got != testing::Pattern(kKillValue, seed)) ++bad;
    }
    std::vector<double> before(w->lat_ms.begin(), w->lat_ms.begin() + static_cast<std::ptrdiff_t>(w->before_kill));
    std::vector<double> all_us, before_us;
    for (double ms : w->lat_ms) all_us.push_back(ms * 1000);
    for (double ms : before) before_us.push_back(ms * 1000);
    const double stall = w->lat_ms.empty() ? 0 : *std::max_element(w->lat_ms.begin(), w->lat_ms.end());
    const std::string desc = CaseString({{"op", "write"},
                                         {"bs", std::to_string(kKillValue)},
                                         {"qd", "1"},
                                         {"oclass", w->oclass},
                                         {"engines", "3"},
                                         {"event", "kill"}});
    std::fprintf(stderr,
                 "replication bench: kill %s: %zu writes acknowledged (%zu before the kill), longest %.0f ms "
                 "(bound %.0f ms), %zu did not read back\n",
                 w->oclass.c_str(), w->acked.size(), w->before_kill, stall, bound_ms, bad);
    rep.Add(Record{"replication", desc, "stall_ms_max", stall, std::string("bound-2xttl+1s"), bound_ms});
    rep.Add(Record{"replication", desc, "lat_us_p99", Percentile(all_us, 99), std::string("before-kill"),
                   Percentile(before_us, 99)});
    rep.Add(Record{"replication", desc, "lost_writes", static_cast<double>(bad), std::nullopt, std::nullopt});
    if (bad > 0) *lost = true;
  }
  return Status::Ok();
}

// The disk's own copy rate: fio reading and writing the same bytes at once.
Status RunCopy(Reporter& rep, const std::string& scratch) {
  FioJob job;
  job.name = "copy";
  job.rw = "rw";
  job.bs = kMiB;
  job.iodepth = 8;
  job.size = g_opts.copy_size;
  job.runtime_s = std::max(g_opts.runtime_s, 1.0);
  job.filename = scratch + "/copy.dat";
  job.extra = {"--rwmixread=50"};
  ROS2_ASSIGN_OR_RETURN(FioResult r, RunFio(job));
  const double mib_s = std::min(r.read.bw_bytes, r.write.bw_bytes) / kMiB;
  std::fprintf(stderr, "replication bench: disk copy (fio rw=rw 1 MiB direct): read %.1f MiB/s, write %.1f MiB/s\n",
               r.read.bw_bytes / kMiB, r.write.bw_bytes / kMiB);
  rep.Add(Record{"replication", CaseString({{"op", "copy"}, {"bs", std::to_string(kMiB)}, {"oclass", "fio-disk"}}),
                 "mib_s", mib_s, std::nullopt, std::nullopt});
  return Status::Ok();
}

// fio reading and writing `bytes` of one file at once (rw=rw, half and half,
// in whole MiB and at least 16 MiB, so the mix has I/Os to balance): the
// bytes copied per second, half the bytes moved over the job's time.
Result<double> DiskCopyRate(const std::string& scratch, uint64_t bytes) {
  FioJob job;
  job.name = "copy-same";
  job.rw = "rw";
  job.bs = kMiB;
  job.iodepth = 8;
  job.size = std::max((bytes + kMiB - 1) / kMiB * kMiB, 16 * kMiB);
  job.runtime_s = 600;  // a cap: --time_based=0 below ends the job when its bytes are done
  job.filename = scratch + "/copy-same.dat";
  job.extra = {"--rwmixread=50", "--time_based=0", fmt::format("--io_size={}", 2 * job.size)};
  ROS2_ASSIGN_OR_RETURN(FioResult r, RunFio(job));
  const double bw = r.read.bw_bytes + r.write.bw_bytes;
  if (bw <= 0) return Status::Internal("fio copy: no bandwidth reported");
  const double moved = static_cast<double>(r.read.io_bytes + r.write.io_bytes);
  std::fprintf(stderr, "replication bench: disk copy of the rebuild's bytes: read %.1f MiB, wrote %.1f MiB in %.2f s\n",
               static_cast<double>(r.read.io_bytes) / kMiB, static_cast<double>(r.write.io_bytes) / kMiB, moved / bw);
  return bw / 2;
}

// A client reading S1's read set (1 MiB, --qd in flight) in 0.2 s slices
// until `stop`: each slice's wall-clock start and end and its MiB/s.
struct ClientSlices {
  std::vector<std::tuple<uint64_t, uint64_t, double>> slices;
  Status status;
};

void RunRebuildClient(const EngineSet& set, ClientSlices* out, const std::atomic<bool>& stop) {
  auto t = OpenTarget(set, "r-S1", ObjectClass::kS1, 1);
  if (!t.ok()) {
    out->status = t.status().WithContext("the client during the rebuild (needs S1 and a read case)");
    return;
  }
  auto wall_ms = [] {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
  };
  while (!stop.load()) {
    const uint64_t start = wall_ms();
    auto f = Drive(set, *t, Case{"read", kMiB}, 0.2, 0, g_opts.size);
    if (!f.ok()) {
      out->status = f.status();
      return;
    }
    out->slices.emplace_back(start, wall_ms(), f->mib_s);
  }
}

// The client's MiB/s over the slices inside [from, to] (wall ms).
double SliceRate(const ClientSlices& c, uint64_t from, uint64_t to) {
  std::vector<double> v;
  for (const auto& [s, e, r] : c.slices) {
    if (s >= from && e <= to) v.push_back(r);
  }
  return Median(v);
}

// Waits for the rebuild the kill started, then copies as many bytes with fio.
// With --rebuild-client, a client reads meanwhile: its rate during the
// rebuild against its rate before it, and the rebuild's rate (throttled).
// `cpu` has sampled the live engines since the kill: their CPU between the
// job's start and done stamps, however early the job ran.
Status RunRebuild(Reporter& rep, EngineSet& set, const std::string& scratch, CpuSampler& cpu) {
  std::atomic<bool> stop_client{false};
  ClientSlices client;
  std::jthread client_thread;
  if (g_opts.rebuild_client) client_thread = std::jthread([&] { RunRebuildClient(set, &client, stop_client); });
  // An early return stops the client before its thread is joined.
  struct StopOnExit {
    std::atomic<bool>& flag;
    ~StopOnExit() { flag = true; }
  } stop_on_exit{stop_client};
  ROS2_ASSIGN_OR_RETURN(const size_t leader, set.FindLeader(0));
  auto mgmt = set.Mgmt(leader);
  if (!mgmt) return Status::Disconnected("replication bench: no management channel");
  const auto deadline = Clock::now() + std::chrono::seconds(300);
  rpc::RebuildStatus st;
  while (true) {
    ROS2_ASSIGN_OR_RETURN(rpc::PoolInfo info, mgmt->QueryPool("bench"));
    st = info.rebuild();
    if (st.state() == "done") break;
    if (st.state() == "failed") return Status::Internal(fmt::format("rebuild failed: {}", st.error()));
    if (Clock::now() > deadline) return Status::TimedOut(fmt::format("rebuild still '{}' after 300 s", st.state()));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ROS2_ASSIGN_OR_RETURN(const double engine_cpu, cpu.Between(st.started_ms(), st.finished_ms()));
  stop_client = true;
  if (client_thread.joinable()) client_thread.join();
  ROS2_RETURN_IF_ERROR(client.status);
  const double secs = static_cast<double>(st.finished_ms() - st.started_ms()) / 1000.0;
  if (st.bytes_done() == 0 || secs <= 0) {
    return Status::Internal(
        fmt::format("rebuild done with {} bytes in {:.3f} s: nothing to measure", st.bytes_done(), secs));
  }
  const double rate = static_cast<double>(st.bytes_done()) / secs;
  const double cpu_ms_per_mib = engine_cpu * 1000.0 / (static_cast<double>(st.bytes_done()) / kMiB);
  std::fprintf(stderr,
               "replication bench: rebuild: %llu objects, %.1f MiB in %.2f s: %.1f MiB/s (client_share %d), the "
               "engines' CPU %.2f s: %.1f ms a MiB (wall clock ms %llu to %llu)\n",
               static_cast<unsigned long long>(st.objects_done()), static_cast<double>(st.bytes_done()) / kMiB, secs,
               rate / kMiB, g_opts.rebuild_share, engine_cpu, cpu_ms_per_mib,
               static_cast<unsigned long long>(st.started_ms()), static_cast<unsigned long long>(st.finished_ms()));
  ROS2_ASSIGN_OR_RETURN(double copy, DiskCopyRate(scratch, st.bytes_done()));
  std::string classes;
  for (const auto& name : g_opts.oclasses) {
    auto oc = ParseObjectClass(name);
    if (oc.ok() && ReplicaCount(*oc) >= 2) classes += (classes.empty() ? "" : "+") + name;
  }
  std::vector<std::pair<std::string, std::string>> fields = {{"op", "rebuild"},
                                                             {"bs", std::to_string(kMiB)},
                                                             {"oclass", classes},
                                                             {"engines", "3"},
                                                             {"share", std::to_string(g_opts.rebuild_share)}};
  if (g_opts.rebuild_client) fields.emplace_back("client", "read-S1");
  const std::string desc = CaseString(fields);
  if (g_opts.rebuild_client) {
    const double during = SliceRate(client, st.started_ms(), st.finished_ms());
    const double before = SliceRate(client, 0, st.started_ms());
    std::fprintf(stderr,
                 "replication bench: a client reading 1 MiB during the rebuild: %.1f MiB/s, before it %.1f MiB/s: "
                 "%.2fx (%zu slices)\n",
                 during, before, before > 0 ? during / before : 0.0, client.slices.size());
    rep.Add(Record{"replication", desc, "client_mib_s", during, std::string("before-rebuild"), before});
  }
  std::fprintf(stderr,
               "replication bench: rebuild %.1f MiB/s against the disk's copy of the same bytes %.1f MiB/s: "
               "%.2fx (target >= 0.5x)\n",
               rate / kMiB, copy / kMiB, rate / copy);
  rep.Add(Record{"replication", desc, "mib_s", rate / kMiB, std::string("fio-disk-copy"), copy / kMiB});
  rep.Add(Record{"replication", desc, "bytes", static_cast<double>(st.bytes_done()), std::nullopt, std::nullopt});
  rep.Add(Record{"replication", desc, "engine_cpu_ms_per_mib", cpu_ms_per_mib, std::nullopt, std::nullopt});
  return Status::Ok();
}

int RunReplicationSuite(Reporter& rep) {
  std::vector<Case> cases;
  for (const auto& s : g_opts.cases) {
    auto c = ParseCase(s);
    if (!c.ok()) {
      std::fprintf(stderr, "%s\n", c.status().message().c_str());
      return 2;
    }
    cases.push_back(*c);
  }
  for (const auto& name : g_opts.oclasses) {
    if (!ParseObjectClass(name).ok()) {
      std::fprintf(stderr, "replication bench: --oclasses: unknown object class '%s'\n", name.c_str());
      return 2;
    }
  }
  if (g_opts.size < kMiB || g_opts.size % kMiB != 0) {
    std::fprintf(stderr, "replication bench: --size must be a multiple of 1 MiB\n");
    return 2;
  }
  auto scratch = TempDir::Create(g_opts.dir, "ros2-bench-repl-");
  if (!scratch.ok()) {
    std::fprintf(stderr, "replication bench: %s\n", scratch.status().ToString().c_str());
    return 1;
  }
  int rc = 0;
  auto fail = [&](const char* what, const Status& st) {
    std::fprintf(stderr, "replication bench: %s: %s\n", what, st.ToString().c_str());
    rc = 1;
  };
  if (g_opts.copy) {
    if (Status st = RunCopy(rep, scratch->path()); !st.ok()) fail("disk copy", st);
  }
  auto set = EngineSet::Start(scratch->path(), 3);
  if (!set.ok()) {
    fail("start etcd and 3 engines", set.status());
    return rc;
  }
  auto mgmt = (*set)->Mgmt(0);
  if (Status st = mgmt ? mgmt->CreatePool("bench", uint64_t{64} << 30).status() : Status::Disconnected("no channel");
      !st.ok()) {
    fail("pool create", st);
    return rc;
  }
  if (!cases.empty()) {
    if (Status st = RunThroughput(rep, **set, cases); !st.ok()) fail("throughput", st);
  }
  bool lost = false;
  std::unique_ptr<CpuSampler> cpu_since_kill;
  if (g_opts.kill) {
    if (Status st = RunKill(rep, **set, &lost, &cpu_since_kill); !st.ok()) fail("engine kill", st);
  }
  if (lost) fail("engine kill", Status::Corruption("acknowledged writes did not read back"));
  if (g_opts.kill && g_opts.rebuild && rc == 0 && cpu_since_kill != nullptr) {
    if (Status st = RunRebuild(rep, **set, scratch->path(), *cpu_since_kill); !st.ok()) fail("rebuild", st);
  }
  // A failure an engine's death explains says so, with the dead engine's log.
  if (Status st = (*set)->CheckEngines(); rc != 0 && !st.ok()) std::fprintf(stderr, "%s\n", st.ToString().c_str());
  return rc;
}

const bool registered = RegisterSuite(Suite{
    "replication",
    "replicated classes (RP_2G1, RP_3G1) against S1 on three engines, same run; the disk's copy rate; "
    "client stall across an engine's kill -9; the rebuild that follows against the disk's copy rate",
    [](CLI::App& app) {
      app.add_option("--dir", g_opts.dir, "parent directory for the scratch dir (etcd, engines, fio file)");
      app.add_option("--cases", g_opts.cases, "op:bs cases, op one of write randwrite read randread")->delimiter(',');
      app.add_option("--oclasses", g_opts.oclasses, "object classes; S1 is the baseline")->delimiter(',');
      app.add_option("--rounds", g_opts.rounds, "rounds; in each every class runs once (the median is reported)")
          ->check(CLI::Range(1, 100));
      app.add_option("--runtime", g_opts.runtime_s, "seconds per case, class and round");
      app.add_option("--qd", g_opts.qd, "I/Os in flight")->check(CLI::Range(1, 256));
      app.add_option("--size", g_opts.size, "bytes each case spans (the read set), multiple of 1 MiB");
      app.add_option("--shard-size", g_opts.shard_size, "extent capacity of each container shard (engine data_size)");
      app.add_option("--ttl", g_opts.ttl_s, "the engines' lease TTL in seconds")->check(CLI::Range(1, 60));
      app.add_option("--kill-after", g_opts.kill_after_s, "seconds the kill writers run before the kill");
      app.add_option("--post-kill", g_opts.post_kill_s, "seconds they run after it (default 2 x TTL + 2)");
      app.add_flag("!--no-kill", g_opts.kill, "skip the engine kill case");
      app.add_flag("!--no-copy", g_opts.copy, "skip the disk copy case (fio)");
      app.add_option("--copy-size", g_opts.copy_size, "bytes of the disk copy case's file");
      app.add_flag("!--no-rebuild", g_opts.rebuild, "skip the rebuild case (it follows the kill)");
      app.add_option("--rebuild-share", g_opts.rebuild_share,
                     "the engines' rebuild.client_share: percent of the time rebuild leaves to clients")
          ->check(CLI::Range(0, 95));
      app.add_option(
          "--rebuild-delay", g_opts.rebuild_delay_s,
          "seconds a target stays DOWN before its rebuild starts (default 2 x TTL + 4: after the kill's writers and "
          "their read-back)");
      app.add_flag("--rebuild-client", g_opts.rebuild_client,
                   "a client reads S1's read set during the rebuild: its rate against its rate before (the rebuild "
                   "then pauses for it)");
    },
    RunReplicationSuite,
});

}  // namespace
}  // namespace ros2::bench
