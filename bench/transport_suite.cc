// `ros2-bench transport`: RPC round-trip latency, bulk bandwidth and idle CPU of
// ros2_transport between two processes, against ucx_perftest in the same run.
//
// For each transport (tcp, shm) the suite spawns ros2-bench-transport-peer (see
// transport_bench_peer.h), connects one Worker of this process to it, logs the
// lanes UCX chose, and then, size by size and in --rounds alternations, runs
// ucx_perftest (server + client on loopback with the UCX_TLS / UCX_NET_DEVICES /
// tcp segment sizes the transport Context selected) and the same shape through
// the transport:
//   mode=rpc  — one RPC at a time (CallSync), op=write (server Pulls bs bytes) or
//               op=read (server Pushes bs bytes); metric lat_us_p50/p99 of the
//               round trip. Two baselines, each a round trip = 2 x perftest's
//               one-way figure (perftest moves bs bytes in BOTH directions):
//               ucp_am_lat (active messages, as the transport sends; perftest's
//               receiver never reads the payload) and tag_lat (the payload lands
//               in the receiver's buffer, as an RPC's bulk must).
//   mode=bulk — `qd` RPCs in flight (128) with bs bytes of bulk each; metric mib_s;
//               baselines ucp_am_bw and tag_bw at message size bs. With
//               --bulk-buffers shared (the default) every call in flight uses
//               one client buffer and the peer one buffer per direction, as
//               ucx_perftest does (one send and one receive buffer whatever
//               its window); per-call gives each call in flight its own
//               buffer on both sides (qd x bs of memory a side, which no
//               longer stays in a core's cache at 1 MiB).
//   mode=idle — the connected pair left idle for --idle seconds; metric
//               cpu_pct_idle = CPU seconds of both processes / wall seconds x 100.
// On libfabric (--provider ofi or both) the baseline is fi_pingpong over the
// same provider and size instead (record fi_pingpong-rtt: 2 x its usec/xfer;
// fi_pingpong-bw: its MB/sec, both directions, in MiB/s).
// With --floor, each ofi bulk case also carries two raw libfabric floors of
// the same provider, op and size, run in each round before the op
// (ros2-bench-ofi-floor, bench/transport_ofi_floor.cc: qd messages in flight,
// a small reply each, no ROS2 code in the path): ofi-floor (a FI_WAIT_FD queue
// slept on when idle, as the transport's worker), ofi-floor-busy (no wait
// object, both processes busy-poll), and, where corked calls share batches
// (bs small enough that batch_limit holds two), ofi-floor-batched: a message
// carrying as many payloads as a batch of that size holds, one reply each.
// Finally the shm/tcp ratio of the 4 KiB write RPC p50 is a record of its own.
#include <linux/limits.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_report.h"
#include "bench/fi_pingpong_bench_util.h"
#include "bench/memory_bench_util.h"
#include "bench/perftest_bench_util.h"
#include "bench/harness.h"
#include "bench/transport_bench_peer.h"
#include "transport/shared_segment.h"
#include "transport/transport.h"

namespace ros2::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace ros2::transport;
namespace peer = ros2::bench::transport_peer;

struct TransportSuiteOptions {
  std::vector<std::string> transports = {"tcp", "shm"};
  std::vector<uint64_t> bs = {4096, uint64_t{1} << 20};
  std::vector<std::string> ops = {"write", "read"};
  // ucx_perftest's bandwidth tests never wait for a reply: the sender streams,
  // bounded only by its flow-control window (127 messages by default, -W). An
  // RPC transport matches that shape with as many calls in flight; at 8 the
  // 4 KiB cases measured the round trip, not the bandwidth (docs/benchmarks.md).
  int bulk_qd = 128;
  double runtime_s = 3;
  double idle_s = 5;
  int rounds = 1;
  bool floor = false;    // --floor: the raw libfabric floors beside ofi's bulk cases
  bool perftest = true;  // the baselines: ucx_perftest beside ucx, fi_pingpong beside ofi
  uint64_t pingpong_iterations = 10000;  // fi_pingpong -I up to 64 KiB (a tenth of it above)
  // ucx, ofi or both: each transport of `transports` on that fabric library
  // ("ofi-<kind>" names one directly).
  std::string provider = "ucx";
  std::string bulk_buffers = "shared";    // shared | per-call (see the top of this file)
  bool batch = true;                      // bulk mode: each burst of calls corked (Endpoint::Cork)
  std::string client_memory = "segment";  // segment (a SharedBuffer, as libros2's IoBuffer) | heap
  // --pin CLIENT,SERVER: the client thread (this process), the bench peer and
  // ucx_perftest's client/server (through taskset) run on these CPUs.
  std::vector<int> pin;
};

TransportSuiteOptions g_opts;

Result<std::vector<uint8_t>> FromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  if (hex.size() % 2 != 0) return Status::Protocol("peer address: odd hex length");
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

Result<std::string> PeerExecutable() {
  char self[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return Status::FromErrno(errno, "readlink /proc/self/exe");
  std::string path =
      std::filesystem::path(std::string(self, static_cast<size_t>(n))).parent_path() / peer::kPeerExecutable;
  if (access(path.c_str(), X_OK) != 0)
    return Status::NotFound(path + " is missing (build target " + std::string(peer::kPeerExecutable) + ")");
  return path;
}

uint16_t Opcode(const std::string& op) {
  return op == "read" ? peer::kOpRead : peer::kOpWrite;
}

CallOptions BulkOptions(const std::string& op, std::byte* buf, uint64_t bs) {
  CallOptions o;
  if (op == "read") {
    o.bulk_in = std::span<std::byte>(buf, bs);
  } else {
    o.bulk_out = std::span<const std::byte>(buf, bs);
  }
  return o;
}

// One connected client: context, worker, endpoint, and the spawned peer.
struct Connection {
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Worker> worker;
  std::shared_ptr<Endpoint> ep;
  ChildProcess peer_proc;
  std::unique_ptr<TempDir> scratch;

  ~Connection() {
    if (ep) ep->Close();
    ep.reset();
    if (peer_proc.running()) {
      peer_proc.Signal(SIGTERM);
      if (!peer_proc.Wait(std::chrono::milliseconds(3000)).ok()) peer_proc.Kill();
    }
    worker.reset();
    ctx.reset();
  }
};

Result<std::unique_ptr<Connection>> Connect(const std::string& kind_name) {
  auto conn = std::make_unique<Connection>();
  const auto [ofi, kind_only] = transport_peer::SplitProvider(kind_name);
  ROS2_ASSIGN_OR_RETURN(TransportKind kind, ParseTransportKind(kind_only));
  TransportOptions options;
  options.provider = ofi ? Provider::kOfi : Provider::kUcx;
  options.kind = kind;
  ROS2_ASSIGN_OR_RETURN(conn->ctx, Context::Create(options));
  ROS2_ASSIGN_OR_RETURN(conn->worker, conn->ctx->CreateWorker("bench-client"));
  ROS2_ASSIGN_OR_RETURN(auto scratch, TempDir::Create("/tmp", "ros2-bench-transport-"));
  conn->scratch = std::make_unique<TempDir>(std::move(scratch));
  ROS2_ASSIGN_OR_RETURN(std::string peer_path, PeerExecutable());
  const std::string address_file = conn->scratch->path() + "/peer.addr";
  SpawnOptions spawn;
  spawn.argv = {peer_path,    "--transport",    kind_name,          "--address-file",
                address_file, "--bulk-buffers", g_opts.bulk_buffers};
  if (g_opts.pin.size() == 2) {
    ROS2_RETURN_IF_ERROR(PinCurrentThreadToCpu(g_opts.pin[0]));
    spawn.argv.push_back("--cpu");
    spawn.argv.push_back(std::to_string(g_opts.pin[1]));
  }
  spawn.stderr_path = conn->scratch->path() + "/peer.err";
  ROS2_ASSIGN_OR_RETURN(conn->peer_proc, ChildProcess::Spawn(spawn));
  auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(address_file)) {
    auto exited = conn->peer_proc.Wait(std::chrono::milliseconds(20));
    if (exited.ok() || Clock::now() > deadline) {
      auto err = ReadFileOrError(spawn.stderr_path);
      return Status::TimedOut("transport peer did not publish its address: " + (err.ok() ? *err : ""));
    }
  }
  ROS2_ASSIGN_OR_RETURN(std::string hex, ReadFileOrError(address_file));
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == ' ')) hex.pop_back();
  ROS2_ASSIGN_OR_RETURN(auto address, FromHex(hex));
  ROS2_ASSIGN_OR_RETURN(conn->ep, conn->worker->Connect(address));
  return conn;
}

// Environment that makes ucx_perftest use what the transport Context selected.
std::vector<std::pair<std::string, std::string>> PerftestEnv(const Context& ctx) {
  std::vector<std::pair<std::string, std::string>> env = {{"UCX_TLS", ctx.ucx_tls()},
                                                          {"UCX_NET_DEVICES", ctx.options().net_devices}};
  if (ctx.options().tcp_seg_size != 0) {
    env.emplace_back("UCX_TCP_TX_SEG_SIZE", std::to_string(ctx.options().tcp_seg_size));
    env.emplace_back("UCX_TCP_RX_SEG_SIZE", std::to_string(ctx.options().tcp_seg_size));
  }
  return env;
}

// The libfabric provider the Context picked for its kind (docs/transport.md, "Providers").
std::string OfiProviderName(const Context& ctx) {
  if (!ctx.options().ofi_provider.empty()) return ctx.options().ofi_provider;
  return ctx.resolved_kind() == TransportKind::kShm ? "shm" : "tcp;ofi_rxm";
}

// fi_pingpong over the libfabric provider the Context opened (same size):
// the round trip (2 x usec/xfer) and its MiB/s, as a Perftest result.
std::optional<PerftestResult> FiPingpong(const Context& ctx, uint64_t bs) {
  FiPingpongJob job;
  const bool shm = ctx.resolved_kind() == TransportKind::kShm;
  job.provider = OfiProviderName(ctx);
  job.domain = shm ? "" : ctx.options().net_devices;
  job.size = bs;
  job.iterations = bs <= 65536 ? g_opts.pingpong_iterations : std::max<uint64_t>(g_opts.pingpong_iterations / 10, 10);
  if (g_opts.pin.size() == 2) {
    job.client_launcher = {"taskset", "-c", std::to_string(g_opts.pin[0])};
    job.server_launcher = {"taskset", "-c", std::to_string(g_opts.pin[1])};
  }
  auto r = RunFiPingpong(job);
  if (!r.ok()) {
    std::fprintf(stderr, "transport bench: fi_pingpong bs=%llu: %s\n", static_cast<unsigned long long>(bs),
                 r.status().ToString().c_str());
    return std::nullopt;
  }
  std::fprintf(stderr, "transport bench: %s\n", r->command.c_str());
  PerftestResult p;
  p.iterations = r->iterations;
  p.lat_us_typical = r->rtt_us / 2;  // one way, as ucx_perftest's latency tests report
  p.bw_mib_s = r->bw_mib_s;
  p.command = r->command;
  return p;
}

// The raw libfabric floor (ros2-bench-ofi-floor) of one bulk case over the
// provider the Context opened: its MiB/s, or nothing when it failed.
std::optional<double> OfiFloor(const Context& ctx, const std::string& op, uint64_t bs, const std::string& wait,
                               int batch, double seconds) {
  const auto fail = [&](const Status& st) -> std::optional<double> {
    std::fprintf(stderr, "transport bench: ofi floor op=%s bs=%llu wait=%s: %s\n", op.c_str(),
                 static_cast<unsigned long long>(bs), wait.c_str(), st.ToString().c_str());
    return std::nullopt;
  };
  auto peer_path = PeerExecutable();
  if (!peer_path.ok()) return fail(peer_path.status());
  const std::string floor_path = std::filesystem::path(*peer_path).parent_path() / "ros2-bench-ofi-floor";
  auto scratch = TempDir::Create("/tmp", "ros2-bench-ofi-floor-");
  if (!scratch.ok()) return fail(scratch.status());
  const bool shm = ctx.resolved_kind() == TransportKind::kShm;
  SpawnOptions spawn;
  spawn.argv = {floor_path, "--provider", OfiProviderName(ctx), "--domain", shm ? "" : ctx.options().net_devices,
                "--op", op, "--size", std::to_string(bs), "--qd", std::to_string(g_opts.bulk_qd), "--wait", wait,
                "--batch", std::to_string(batch), "--seconds", fmt::format("{:.3f}", std::max(seconds, 0.05))};
  if (g_opts.pin.size() == 2) {
    spawn.argv.push_back("--cpus");
    spawn.argv.push_back(fmt::format("{},{}", g_opts.pin[0], g_opts.pin[1]));
  }
  spawn.stdout_path = scratch->path() + "/floor.out";
  spawn.stderr_path = scratch->path() + "/floor.err";
  auto proc = ChildProcess::Spawn(spawn);
  if (!proc.ok()) return fail(proc.status());
  auto rc = proc->Wait(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000) + 60000));
  if (!rc.ok()) {
    proc->Kill();
    return fail(rc.status());
  }
  auto out = ReadFileOrError(spawn.stdout_path);
  const size_t at = out.ok() ? out->find("mib_s=") : std::string::npos;
  if (*rc != 0 || at == std::string::npos) {
    auto err = ReadFileOrError(spawn.stderr_path);
    return fail(Status::IOError(fmt::format("exited with {}: {}", *rc, err.ok() ? *err : "")));
  }
  std::fprintf(stderr, "transport bench: %s", out->c_str());
  return std::stod(out->substr(at + 6));
}

std::optional<PerftestResult> Perftest(const Context& ctx, const std::string& test, uint64_t bs) {
  if (!g_opts.perftest) return std::nullopt;
  // ucx_perftest measures UCX, fi_pingpong libfabric: each only beside its own provider.
  if ((ctx.ofi() != nullptr) != (test == "fi_pingpong")) return std::nullopt;
  if (test == "fi_pingpong") return FiPingpong(ctx, bs);
  PerftestJob job;
  job.test = test;
  job.size = bs;
  const bool lat = test.ends_with("_lat");
  job.iterations = bs <= 65536 ? (lat ? 100000 : 300000) : (lat ? 3000 : 5000);
  job.warmup = bs <= 65536 ? 1000 : 100;
  job.env = PerftestEnv(ctx);
  if (g_opts.pin.size() == 2) {
    job.client_launcher = {"taskset", "-c", std::to_string(g_opts.pin[0])};
    job.server_launcher = {"taskset", "-c", std::to_string(g_opts.pin[1])};
  }
  auto r = RunUcxPerftest(job);
  if (!r.ok()) {
    std::fprintf(stderr, "transport bench: ucx_perftest %s bs=%llu: %s\n", test.c_str(),
                 static_cast<unsigned long long>(bs), r.status().ToString().c_str());
    return std::nullopt;
  }
  std::fprintf(stderr, "transport bench: %s\n", r->command.c_str());
  return *r;
}

// The client's bulk memory: by default a shared segment, as libros2's IoBuffer
// gives applications (over shm the server then copies straight from or into
// it, at any size from TransportOptions::segment_min_bulk); with
// --client-memory heap ordinary memory (inline, cma or rendezvous by size).
// Either way filled with pseudo-random bytes.
class ClientMemory {
 public:
  static Result<ClientMemory> Allocate(uint64_t bytes) {
    ClientMemory m;
    if (g_opts.client_memory == "heap") {
      ROS2_ASSIGN_OR_RETURN(m.heap_, AllocateIoMemory(bytes, PageKind::kSmall));
      m.data_ = m.heap_.data();
      return m;
    }
    ROS2_ASSIGN_OR_RETURN(m.segment_, SharedBuffer::Create(bytes));
    m.data_ = m.segment_->data();
    FillPseudoRandom(m.data_, bytes);
    return m;
  }
  std::byte* data() const { return data_; }

 private:
  IoMemory heap_;
  std::unique_ptr<SharedBuffer> segment_;
  std::byte* data_ = nullptr;
};

// One RPC at a time for runtime_s; returns round-trip latencies in microseconds.
Result<std::vector<double>> RpcLatency(Connection& c, const std::string& op, uint64_t bs, double runtime_s) {
  ROS2_ASSIGN_OR_RETURN(ClientMemory buf, ClientMemory::Allocate(std::max<uint64_t>(bs, 1)));
  std::vector<double> lat;
  const CallOptions options = BulkOptions(op, buf.data(), bs);
  for (int i = 0; i < 200; ++i) ROS2_RETURN_IF_ERROR(c.ep->CallSync(Opcode(op), {}, options).status());
  lat.reserve(1 << 20);
  // One clock read per RPC, as ucx_perftest takes one timestamp per iteration:
  // each RPC's end is the next one's start. Three reads (start, end, loop
  // check) cost about 36 ns each here, a tenth of a shm round trip.
  auto prev = Clock::now();
  const auto end = prev + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(runtime_s));
  while (prev < end && lat.size() < 2'000'000) {
    auto r = c.ep->CallSync(Opcode(op), {}, options);
    if (!r.ok()) return r.status().WithContext(fmt::format("rpc op={} bs={}", op, bs));
    const auto now = Clock::now();
    lat.push_back(std::chrono::duration<double, std::micro>(now - prev).count());
    prev = now;
  }
  return lat;
}

// qd RPCs in flight for runtime_s; returns MiB/s.
Result<double> BulkBandwidth(Connection& c, const std::string& op, uint64_t bs, int qd, double runtime_s) {
  const uint64_t slot_bytes = std::max<uint64_t>(bs, 1);
  const bool shared = g_opts.bulk_buffers == "shared";
  const uint64_t slots = shared ? 1 : static_cast<uint64_t>(qd);
  ROS2_ASSIGN_OR_RETURN(ClientMemory region, ClientMemory::Allocate(slot_bytes * slots));
  std::vector<std::byte*> bufs;
  for (int i = 0; i < qd; ++i) bufs.push_back(region.data() + (shared ? 0 : slot_bytes * static_cast<uint64_t>(i)));
  // What the reply callbacks update. A callback captures only this and its
  // slot, so it fits std::function's inline storage: the loop measures the
  // transport, not a malloc and free per call (as CallSync does).
  struct Progress {
    std::vector<int> free_slots;
    Status error;
    uint64_t done_bytes = 0;
    uint64_t bs = 0;
  } run;
  run.bs = bs;
  std::vector<int>& free_slots = run.free_slots;
  Status& error = run.error;
  uint64_t& done_bytes = run.done_bytes;
  const uint16_t opcode = Opcode(op);
  std::vector<CallOptions> options;
  for (int i = 0; i < qd; ++i) options.push_back(BulkOptions(op, bufs[static_cast<size_t>(i)], bs));
  auto submit = [&](int slot) -> Status {
    return c.ep->Call(opcode, {}, options[static_cast<size_t>(slot)], [p = &run, slot](const ReplyView& reply) {
      if (!reply.status.ok() && p->error.ok()) p->error = reply.status;
      p->done_bytes += p->bs;
      p->free_slots.push_back(slot);
    });
  };
  auto run_for = [&](double seconds) -> Result<double> {
    free_slots.clear();
    for (int i = 0; i < qd; ++i) free_slots.push_back(i);
    done_bytes = 0;
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    while (true) {
      const bool more = Clock::now() < end && error.ok();
      // The free slots' calls go out as one burst; corked, they share messages.
      if (g_opts.batch && more && !free_slots.empty()) c.ep->Cork();
      while (more && !free_slots.empty()) {
        int slot = free_slots.back();
        free_slots.pop_back();
        ROS2_RETURN_IF_ERROR(submit(slot));
      }
      if (g_opts.batch) c.ep->Uncork();
      if (c.ep->outstanding() == 0 && !more) break;
      c.worker->Wait(std::chrono::milliseconds(10));
    }
    if (!error.ok()) return error.WithContext(fmt::format("bulk op={} bs={}", op, bs));
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    return static_cast<double>(done_bytes) / secs / (1 << 20);
  };
  ROS2_RETURN_IF_ERROR(run_for(0.2).status());  // warm-up: registrations, rendezvous setup
  return run_for(runtime_s);
}

// CPU of this process and of the peer while the pair sits connected and idle.
Result<std::pair<double, double>> IdleCpu(Connection& c) {
  ROS2_ASSIGN_OR_RETURN(double self0, ProcessCpuSeconds(getpid()));
  ROS2_ASSIGN_OR_RETURN(double peer0, ProcessCpuSeconds(c.peer_proc.pid()));
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(g_opts.idle_s));
  while (Clock::now() < end) c.worker->Wait(std::chrono::milliseconds(100));
  double wall = std::chrono::duration<double>(Clock::now() - start).count();
  ROS2_ASSIGN_OR_RETURN(double self1, ProcessCpuSeconds(getpid()));
  ROS2_ASSIGN_OR_RETURN(double peer1, ProcessCpuSeconds(c.peer_proc.pid()));
  return std::make_pair((self1 - self0) / wall * 100, (peer1 - peer0) / wall * 100);
}

// A ucx_perftest baseline of one mode: the test, its records' baseline name,
// and whether its value is a round trip (2 x the one-way latency) or MiB/s.
struct Baseline {
  std::string test;
  std::string record;
  bool latency;
};

// One mode's --rounds for one size: values per round of each baseline (by
// record name) and of each metric `measure` returns, per op. Only ops measured
// in every round are kept.
struct RoundResults {
  std::vector<std::pair<std::string, std::vector<double>>> baselines;
  // Baselines of one op (the ofi floors): op -> record name -> rounds.
  std::map<std::string, std::vector<std::pair<std::string, std::vector<double>>>> op_baselines;
  std::map<std::string, std::vector<std::vector<double>>> metrics;  // op -> metric -> rounds
};

// Each round runs the baselines and then every op for runtime / rounds, so a
// shift of the VM's speed (it swings 2-3x within minutes) lands inside one
// round instead of between a case and its baseline.
// `op_baseline(op, seconds)`, when given, returns the per-op baselines of
// one round (record name, value), run just before the op.
using OpBaseline = std::function<std::vector<std::pair<std::string, double>>(const std::string& op, double seconds)>;
RoundResults RunRounds(Connection& c, uint64_t bs, const std::vector<Baseline>& baselines,
                       const std::function<Result<std::vector<double>>(const std::string& op, double seconds)>& measure,
                       int* rc, const OpBaseline& op_baseline = nullptr) {
  RoundResults out;
  for (const Baseline& b : baselines) out.baselines.emplace_back(b.record, std::vector<double>{});
  const double slice = g_opts.runtime_s / g_opts.rounds;
  for (int round = 0; round < g_opts.rounds; ++round) {
    for (size_t i = 0; i < baselines.size(); ++i) {
      if (auto r = Perftest(*c.ctx, baselines[i].test, bs))
        out.baselines[i].second.push_back(baselines[i].latency ? 2 * r->lat_us_typical : r->bw_mib_s);
    }
    for (const auto& op : g_opts.ops) {
      if (op_baseline) {
        auto& mine = out.op_baselines[op];
        for (const auto& [name, value] : op_baseline(op, slice)) {
          auto it = std::find_if(mine.begin(), mine.end(), [&](const auto& kv) { return kv.first == name; });
          if (it == mine.end()) it = mine.insert(mine.end(), {name, {}});
          it->second.push_back(value);
        }
      }
      auto m = measure(op, slice);
      if (!m.ok()) {
        std::fprintf(stderr, "transport bench: %s\n", m.status().ToString().c_str());
        *rc = 1;
        continue;
      }
      auto& per_metric = out.metrics[op];
      per_metric.resize(m->size());
      for (size_t k = 0; k < m->size(); ++k) per_metric[k].push_back((*m)[k]);
    }
  }
  std::erase_if(out.metrics, [](const auto& kv) {
    return kv.second.empty() || kv.second[0].size() != static_cast<size_t>(g_opts.rounds);
  });
  return out;
}

// Adds `r` once per baseline that ran in every round (the median of its
// rounds), or once without a baseline when none did.
void AddWithBaselines(Reporter& rep, const Record& r,
                      const std::vector<std::pair<std::string, std::vector<double>>>& baselines) {
  bool added = false;
  for (const auto& [name, values] : baselines) {
    if (values.size() != static_cast<size_t>(g_opts.rounds)) continue;
    Record with = r;
    with.baseline = name;
    with.baseline_value = Percentile(values, 50);
    rep.Add(with);
    added = true;
  }
  if (!added) rep.Add(r);
}

std::string Lanes(const EndpointInfo& info) {
  std::string s;
  for (const auto& l : info.lanes) s += (s.empty() ? "" : ",") + l;
  return s;
}

int RunTransportSuite(Reporter& rep) {
  int rc = 0;
  if (!g_opts.pin.empty() && g_opts.pin.size() != 2) {
    std::fprintf(stderr, "transport bench: --pin takes two CPUs: CLIENT,SERVER\n");
    return 2;
  }
  if (g_opts.pin.size() == 2) {
    std::fprintf(
        stderr,
        "transport bench: pinned: client (and perftest client) on CPU %d, server (and perftest server) on CPU %d\n",
        g_opts.pin[0], g_opts.pin[1]);
  }
  std::map<std::string, double> write4k_p50;  // transport -> p50 of the 4 KiB write RPC
  std::vector<std::string> kinds;
  for (const auto& k : g_opts.transports) {
    const bool named = k.rfind("ofi-", 0) == 0;
    if (named || g_opts.provider != "ofi") kinds.push_back(k);
    if (!named && g_opts.provider != "ucx") kinds.push_back("ofi-" + k);
  }
  for (const auto& kind : kinds) {
    auto conn_r = Connect(kind);
    if (!conn_r.ok()) {
      std::fprintf(stderr, "transport bench: %s: %s\n", kind.c_str(), conn_r.status().ToString().c_str());
      rc = 1;
      continue;
    }
    Connection& c = **conn_r;
    const EndpointInfo& info = c.ep->info();
    std::fprintf(stderr, "transport bench: %s; endpoint am=%s rma=%s lanes=%s bulk=%s failure=%s\n",
                 c.ctx->Describe().c_str(), info.am_transport.c_str(), info.rma_transport.c_str(), Lanes(info).c_str(),
                 std::string(BulkTransferName(info.bulk_mode)).c_str(),
                 std::string(FailureDetectionName(info.failure_detection)).c_str());
    if ((kind == "shm" && !info.IsSharedMemoryOnly()) || (kind == "tcp" && !info.UsesTcp())) {
      std::fprintf(stderr, "transport bench: WARNING: %s selected but the endpoint's lanes are %s\n", kind.c_str(),
                   Lanes(info).c_str());
    }
    for (uint64_t bs : g_opts.bs) {
      const bool ofi = c.ctx->ofi() != nullptr;
      const std::vector<Baseline> rpc_baselines =
          ofi ? std::vector<Baseline>{{"fi_pingpong", "fi_pingpong-rtt", true}}
              : std::vector<Baseline>{{"ucp_am_lat", "ucx_perftest-ucp_am_lat-rtt", true},
                                      {"tag_lat", "ucx_perftest-tag_lat-rtt", true}};
      const std::vector<Baseline> bulk_baselines =
          ofi ? std::vector<Baseline>{{"fi_pingpong", "fi_pingpong-bw", false}}
              : std::vector<Baseline>{{"ucp_am_bw", "ucx_perftest-ucp_am_bw", false},
                                      {"tag_bw", "ucx_perftest-tag_bw", false}};
      const RoundResults rpc = RunRounds(
          c, bs, rpc_baselines,
          [&](const std::string& op, double seconds) -> Result<std::vector<double>> {
            ROS2_ASSIGN_OR_RETURN(std::vector<double> lat, RpcLatency(c, op, bs, seconds));
            return std::vector<double>{Percentile(lat, 50), Percentile(lat, 99)};
          },
          &rc);
      for (const auto& op : g_opts.ops) {
        auto m = rpc.metrics.find(op);
        if (m == rpc.metrics.end()) continue;
        const std::string case_desc =
            CaseString({{"mode", "rpc"}, {"op", op}, {"bs", std::to_string(bs)}, {"qd", "1"}, {"transport", kind}});
        const double p50 = Percentile(m->second[0], 50);
        AddWithBaselines(rep, Record{"transport", case_desc, "lat_us_p50", p50, std::nullopt, std::nullopt},
                         rpc.baselines);
        rep.Add(Record{"transport", case_desc, "lat_us_p99", Percentile(m->second[1], 50), std::nullopt, std::nullopt});
        if (op == "write" && bs == 4096) write4k_p50[kind] = p50;
      }
      OpBaseline floors;
      if (ofi && g_opts.floor) {
        floors = [&](const std::string& op, double seconds) {
          std::vector<std::pair<std::string, double>> out;
          for (const auto& [wait, name] : {std::pair{"fd", "ofi-floor"}, std::pair{"none", "ofi-floor-busy"}}) {
            if (auto v = OfiFloor(*c.ctx, op, bs, wait, 1, seconds)) out.emplace_back(name, *v);
          }
          // Corked, the calls share kBatch messages of up to batch_limit bytes
          // (about 7 calls of 4 KiB with their entries): the same stream raw.
          const uint64_t per_batch = c.ctx->options().batch_limit / (bs + 64);
          if (g_opts.batch && per_batch >= 2) {
            const int b = static_cast<int>(std::min<uint64_t>(per_batch, 64));
            if (auto v = OfiFloor(*c.ctx, op, bs, "fd", b, seconds)) out.emplace_back("ofi-floor-batched", *v);
          }
          return out;
        };
      }
      const RoundResults bulk = RunRounds(
          c, bs, bulk_baselines,
          [&](const std::string& op, double seconds) -> Result<std::vector<double>> {
            ROS2_ASSIGN_OR_RETURN(double mib_s, BulkBandwidth(c, op, bs, g_opts.bulk_qd, seconds));
            return std::vector<double>{mib_s};
          },
          &rc, floors);
      for (const auto& op : g_opts.ops) {
        auto m = bulk.metrics.find(op);
        if (m == bulk.metrics.end()) continue;
        const std::string case_desc = CaseString({{"mode", "bulk"},
                                                  {"op", op},
                                                  {"bs", std::to_string(bs)},
                                                  {"qd", std::to_string(g_opts.bulk_qd)},
                                                  {"transport", kind}});
        auto baselines = bulk.baselines;
        if (auto f = bulk.op_baselines.find(op); f != bulk.op_baselines.end())
          baselines.insert(baselines.end(), f->second.begin(), f->second.end());
        AddWithBaselines(
            rep, Record{"transport", case_desc, "mib_s", Percentile(m->second[0], 50), std::nullopt, std::nullopt},
            baselines);
      }
    }
    // Idle CPU of the connected pair.
    auto idle = IdleCpu(c);
    if (idle.ok()) {
      std::fprintf(stderr, "transport bench: %s idle cpu: client %.2f%% peer %.2f%%\n", kind.c_str(), idle->first,
                   idle->second);
      rep.Add(Record{"transport", CaseString({{"mode", "idle"}, {"transport", kind}}), "cpu_pct_idle",
                     idle->first + idle->second, std::nullopt, std::nullopt});
    } else {
      std::fprintf(stderr, "transport bench: idle cpu: %s\n", idle.status().ToString().c_str());
      rc = 1;
    }
    const WorkerStats& st = c.worker->stats();
    std::fprintf(
        stderr,
        "transport bench: %s worker stats: sent %llu replies %llu timed_out %llu inline %llu rma %llu am %llu "
        "cma %llu sleeps %llu batches sent %llu (%llu requests) received %llu\n",
        kind.c_str(), static_cast<unsigned long long>(st.requests_sent),
        static_cast<unsigned long long>(st.replies_received), static_cast<unsigned long long>(st.requests_timed_out),
        static_cast<unsigned long long>(st.bulk_inline_bytes), static_cast<unsigned long long>(st.bulk_rma_bytes),
        static_cast<unsigned long long>(st.bulk_am_bytes), static_cast<unsigned long long>(st.bulk_cma_bytes),
        static_cast<unsigned long long>(st.sleeps), static_cast<unsigned long long>(st.batches_sent),
        static_cast<unsigned long long>(st.batched_messages), static_cast<unsigned long long>(st.batches_received));
  }
  if (write4k_p50.count("shm") && write4k_p50.count("tcp")) {
    rep.Add(Record{"transport",
                   CaseString({{"mode", "rpc"}, {"op", "write"}, {"bs", "4096"}, {"qd", "1"}, {"transport", "shm"}}),
                   "lat_us_p50", write4k_p50["shm"], std::string("transport-tcp"), write4k_p50["tcp"]});
  }
  return rc;
}

const bool registered = RegisterSuite(Suite{
    "transport",
    "RPC latency, bulk bandwidth and idle CPU of ros2_transport vs ucx_perftest, same run",
    [](CLI::App& app) {
      app.add_option("--transports", g_opts.transports, "transports to measure: tcp shm")->delimiter(',');
      app.add_option("--bs", g_opts.bs, "message / bulk sizes in bytes")->delimiter(',');
      app.add_option("--ops", g_opts.ops, "write (server pulls) and/or read (server pushes)")->delimiter(',');
      app.add_option("--qd", g_opts.bulk_qd,
                     "RPCs in flight for the bandwidth cases (default 128, ucx_perftest's flow-control window + 1)");
      app.add_flag("!--no-batch", g_opts.batch,
                   "bandwidth cases: send each burst of calls uncorked (one message a call) instead of batched");
      app.add_option("--bulk-buffers", g_opts.bulk_buffers,
                     "bandwidth cases: shared (one buffer a side for every call in flight, as ucx_perftest) or "
                     "per-call (a buffer per call in flight on both sides)")
          ->check(CLI::IsMember({"shared", "per-call"}));
      app.add_option("--client-memory", g_opts.client_memory,
                     "the client's bulk buffers: segment (a shared segment, as libros2's IoBuffer; over shm the "
                     "server copies straight from or into it) or heap (ordinary memory)")
          ->check(CLI::IsMember({"segment", "heap"}));
      app.add_option("--runtime", g_opts.runtime_s, "seconds per case");
      app.add_option("--rounds", g_opts.rounds,
                     "per size, alternate the ucx_perftest baselines and the transport this many times, runtime / "
                     "rounds each; records carry the medians over rounds")
          ->check(CLI::Range(1, 100));
      app.add_option("--idle", g_opts.idle_s, "seconds of the idle CPU measurement");
      app.add_flag("--floor", g_opts.floor,
                   "ofi bulk cases: also run the raw libfabric floor (ros2-bench-ofi-floor) of each op in each "
                   "round, records ofi-floor (FI_WAIT_FD queue, as the worker), ofi-floor-busy (busy-polled) and "
                   "ofi-floor-batched (payloads shared by messages as corked calls share batches)");
      app.add_flag("!--no-perftest", g_opts.perftest, "skip the baselines (ucx_perftest, fi_pingpong)");
      app.add_option("--pingpong-iterations", g_opts.pingpong_iterations,
                     "fi_pingpong transfers per baseline up to 64 KiB (a tenth of it above)")
          ->check(CLI::Range(uint64_t{1}, uint64_t{10000000}));
      app.add_option("--provider", g_opts.provider,
                     "ucx, ofi (libfabric) or both: the fabric library of every transport measured")
          ->check(CLI::IsMember({"ucx", "ofi", "both"}));
      app.add_option("--pin", g_opts.pin,
                     "CLIENT,SERVER CPUs: pin the client thread and the bench peer, and ucx_perftest's client and "
                     "server (taskset) the same way")
          ->delimiter(',');
    },
    RunTransportSuite,
});

}  // namespace
}  // namespace ros2::bench
