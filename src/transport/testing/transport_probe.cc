// transport_probe: a quick manual measurement of the data plane against a
// transport_test_peer process (not a benchmark suite; ros2-bench transport is).
// Usage: transport_probe <tcp|shm> [iterations]
// Environment: ROS2_TRANSPORT_SPIN_US (spin budget), ROS2_TRANSPORT_FORCE_RMA (bulk by RMA).
// Prints RPC round-trip percentiles (payload inline) and bulk bandwidth for
// heap and UCX-allocated buffers in both directions, plus the peer's idle CPU.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "transport/testing/peer_process.h"
#include "transport/testing/test_protocol.h"
#include "transport/transport.h"

using namespace ros2;
using namespace ros2::transport;
using Clock = std::chrono::steady_clock;

namespace {

double Pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * v.size()))];
}

// CPU seconds (user + system) a process used so far, from /proc/<pid>/stat.
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> f;
  std::string cur;
  for (size_t i = close + 2; i < s.size(); ++i) {
    if (s[i] == ' ') {
      f.push_back(cur);
      cur.clear();
    } else {
      cur += s[i];
    }
  }
  if (f.size() < 13) return 0;
  return (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <tcp|shm> [iterations]\n", argv[0]);
    return 2;
  }
  const std::string kind = argv[1];
  const int iters = argc > 2 ? std::atoi(argv[2]) : 2000;
  transport::testing::PeerProcess peer;
  if (Status st = peer.Start(TRANSPORT_TEST_PEER_PATH, kind); !st.ok()) {
    fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  TransportOptions o;
  o.kind = ParseTransportKind(kind).value();
  if (const char* spin = getenv("ROS2_TRANSPORT_SPIN_US")) o.spin_budget = std::chrono::microseconds(atoi(spin));
  o.force_rma_bulk = getenv("ROS2_TRANSPORT_FORCE_RMA") != nullptr;
  auto ctx = Context::Create(o).value();
  auto worker = ctx->CreateWorker("probe").value();
  auto ep = worker->Connect(peer.address()).value();
  printf("%s\nendpoint: am=%s rma=%s bulk=%s failure=%s\n", ctx->Describe().c_str(), ep->info().am_transport.c_str(),
         ep->info().rma_transport.c_str(), std::string(BulkTransferName(ep->info().bulk_mode)).c_str(),
         std::string(FailureDetectionName(ep->info().failure_detection)).c_str());

  for (size_t size : {size_t{8}, size_t{4096}}) {
    std::vector<std::byte> out(size, std::byte{1}), in(size);
    std::vector<double> us;
    for (int i = 0; i < iters; ++i) {
      CallOptions co;
      co.bulk_out = out;
      co.bulk_in = in;
      auto t0 = Clock::now();
      auto r = ep->CallSync(transport::testing::kOpEcho, {}, co);
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      if (!r.ok()) return fprintf(stderr, "%s\n", r.status().ToString().c_str()), 1;
    }
    printf("rpc echo %5zu B both ways: round trip p50 %.1f us  p99 %.1f us  (one way ~%.2f us)\n", size, Pct(us, 50),
           Pct(us, 99), Pct(us, 50) / 2);
  }

  for (bool arena : {false, true}) {
    for (size_t size : {size_t{1} << 20, size_t{64} << 20}) {
      std::shared_ptr<const MemoryRegion> region;
      std::vector<std::byte> heap;
      std::byte* buf;
      if (arena) {
        region = ctx->AllocateMemory(size).value();
        buf = region->mutable_base();
      } else {
        heap.assign(size, std::byte{2});
        buf = heap.data();
      }
      const int n = std::max(4, static_cast<int>((256u << 20) / size));
      for (uint16_t op : {transport::testing::kOpSink, transport::testing::kOpFill}) {
        CallOptions co;
        if (op == transport::testing::kOpSink)
          co.bulk_out = std::span<const std::byte>(buf, size);
        else
          co.bulk_in = std::span<std::byte>(buf, size);
        co.bulk_out_region = co.bulk_in_region = region;
        std::vector<double> gbs;
        for (int i = 0; i < n; ++i) {
          auto t0 = Clock::now();
          auto r = ep->CallSync(op, {}, co);
          if (!r.ok()) return fprintf(stderr, "%s\n", r.status().ToString().c_str()), 1;
          gbs.push_back(size / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
        }
        printf("bulk %-5s %-5s %3zu MiB: p50 %.2f GB/s  best %.2f GB/s\n", op == transport::testing::kOpSink ? "write" : "read",
               arena ? "arena" : "heap", size >> 20, Pct(gbs, 50), Pct(gbs, 100));
      }
    }
  }
  const WorkerStats& st = worker->stats();
  printf("client stats: sleeps=%lu inline=%lu am=%lu rma(server side)=n/a\n", (unsigned long)st.sleeps,
         (unsigned long)st.bulk_inline_bytes, (unsigned long)st.bulk_am_bytes);

  // Idle connected pair: CPU used by both processes over 3 s with no traffic.
  const double peer0 = ProcessCpuSeconds(peer.pid()), self0 = ProcessCpuSeconds(getpid());
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < std::chrono::seconds(3)) worker->Wait(std::chrono::milliseconds(100));
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  printf("idle connected pair over %.1f s: peer CPU %.2f%%  client CPU %.2f%%\n", secs,
         100 * (ProcessCpuSeconds(peer.pid()) - peer0) / secs, 100 * (ProcessCpuSeconds(getpid()) - self0) / secs);
  return 0;
}
