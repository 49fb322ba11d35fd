// ros2-bench-transport-peer: the server side of `ros2-bench transport`. It serves
// the opcodes of transport_bench_peer.h on one Worker driven by the transport's
// own adaptive progress loop (Worker::Wait), so its CPU use while idle is the
// transport's real idle cost. Not meant to be run by hand.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "bench/memory_bench_util.h"
#include "bench/transport_bench_peer.h"
#include "common/log.h"
#include "transport/transport.h"

namespace {

using ros2::Status;
using namespace ros2::transport;
using namespace ros2::bench::transport_peer;
using ros2::bench::AllocateIoMemory;
using ros2::bench::IoMemory;
using ros2::bench::PageKind;

std::atomic<bool> g_stop{false};

void OnSignal(int) {
  g_stop.store(true);
}

// Destinations of concurrent Pulls: per call, each write in flight gets its
// own buffer; shared, every write of a size lands in one buffer (as
// ucx_perftest's receiver does; nobody reads what lands).
class BufferPool {
 public:
  explicit BufferPool(bool shared) : shared_(shared) {}
  std::byte* Take(uint64_t size) {
    if (shared_) {
      for (const IoMemory& m : all_)
        if (m.size() >= size) return m.data();
    } else {
      for (size_t i = 0; i < free_.size(); ++i) {
        if (free_[i].second >= size) {
          std::byte* b = free_[i].first;
          free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
          return b;
        }
      }
    }
    auto m = AllocateIoMemory(size, PageKind::kSmall);
    if (!m.ok()) return nullptr;
    all_.push_back(std::move(*m));
    return all_.back().data();
  }
  void Give(std::byte* b) {
    if (shared_) return;
    for (const IoMemory& m : all_) {
      if (m.data() == b) free_.emplace_back(b, m.size());
    }
  }

 private:
  bool shared_;
  std::vector<IoMemory> all_;
  std::vector<std::pair<std::byte*, uint64_t>> free_;
};

std::string Hex(std::span<const uint8_t> bytes) {
  std::string s;
  s.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) s += fmt::format("{:02x}", b);
  return s;
}

int Serve(const std::string& kind_name, const std::string& address_file, int cpu, bool shared_buffers) {
  if (cpu >= 0) {
    if (Status st = PinCurrentThreadToCpu(cpu); !st.ok()) {
      std::fprintf(stderr, "peer: %s\n", st.ToString().c_str());
      return 2;
    }
  }
  const auto [ofi, kind_only] = SplitProvider(kind_name);
  auto kind = ParseTransportKind(kind_only);
  if (!kind.ok()) {
    std::fprintf(stderr, "peer: %s\n", kind.status().ToString().c_str());
    return 2;
  }
  TransportOptions options;
  options.provider = ofi ? Provider::kOfi : Provider::kUcx;
  options.kind = *kind;
  // The bench's requests carry no capability (there is no engine here): its
  // connection stays open however long the ucx_perftest baselines between
  // the cases take.
  options.unauthenticated_timeout = std::chrono::milliseconds(0);
  auto ctx = Context::Create(options);
  if (!ctx.ok()) {
    std::fprintf(stderr, "peer: context: %s\n", ctx.status().ToString().c_str());
    return 1;
  }
  auto worker_r = (*ctx)->CreateWorker("bench-peer");
  if (!worker_r.ok()) {
    std::fprintf(stderr, "peer: worker: %s\n", worker_r.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<Worker> worker = std::move(*worker_r);
  BufferPool pool(shared_buffers);
  auto source_r = AllocateIoMemory(kMaxBulk, PageKind::kSmall);
  if (!source_r.ok()) {
    std::fprintf(stderr, "peer: %s\n", source_r.status().ToString().c_str());
    return 1;
  }
  IoMemory source = std::move(*source_r);

  auto check = [](Status st) {
    if (!st.ok()) std::fprintf(stderr, "peer: register handler: %s\n", st.ToString().c_str());
    return st.ok();
  };
  bool ok = check(worker->RegisterHandler(kOpNoop, [](IncomingRequest req) { req.Reply(Status::Ok()); }));
  ok = ok && check(worker->RegisterHandler(kOpWrite, [&pool](IncomingRequest req) {
         const uint64_t n = req.bulk_out_size();
         if (n == 0) return req.Reply(Status::Ok());
         if (n > kMaxBulk) return req.Reply(Status::InvalidArgument("bench peer: bulk too large"));
         std::byte* dst = pool.Take(n);
         if (dst == nullptr) return req.Reply(Status::NoSpace("bench peer: cannot allocate a bulk buffer"));
         req.Pull(std::span<std::byte>(dst, n), [req, dst, &pool](const Status& st) mutable {
           pool.Give(dst);
           req.Reply(st);
         });
       }));
  ok = ok && check(worker->RegisterHandler(kOpRead, [&source](IncomingRequest req) {
         const uint64_t n = std::min(req.bulk_in_capacity(), kMaxBulk);
         if (n == 0) return req.Reply(Status::Ok());
         req.Push(std::span<const std::byte>(source.data(), n), [req](const Status& st) mutable { req.Reply(st); });
       }));
  if (!ok) return 1;

  {
    const std::string tmp = address_file + ".tmp";
    std::ofstream out(tmp);
    out << Hex(worker->address()) << "\n";
    out.close();
    if (!out) {
      std::fprintf(stderr, "peer: cannot write %s\n", tmp.c_str());
      return 1;
    }
    std::error_code ec;
    std::filesystem::rename(tmp, address_file, ec);
    if (ec) {
      std::fprintf(stderr, "peer: rename %s: %s\n", tmp.c_str(), ec.message().c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "peer: serving (%s)\n", (*ctx)->Describe().c_str());
  while (!g_stop.load()) worker->Wait(std::chrono::milliseconds(100));
  worker.reset();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ros2-bench transport peer (spawned by ros2-bench transport)"};
  std::string kind = "tcp", address_file, log_level = "warn";
  int cpu = -1;
  app.add_option("--transport", kind, "tcp | shm | rdma | auto, or ofi-<kind> (libfabric)");
  app.add_option("--address-file", address_file, "where to publish the worker address (hex)")->required();
  app.add_option("--log-level", log_level, "log level");
  app.add_option("--cpu", cpu, "pin the serving thread to this CPU (default: not pinned)");
  std::string bulk_buffers = "per-call";
  app.add_option("--bulk-buffers", bulk_buffers, "write destinations: shared (one per size) or per-call")
      ->check(CLI::IsMember({"shared", "per-call"}));
  CLI11_PARSE(app, argc, argv);
  if (auto st = ros2::InitLogging("bench-peer", log_level); !st.ok()) return 2;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  return Serve(kind, address_file, cpu, bulk_buffers == "shared");
}
