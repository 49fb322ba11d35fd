// Tests of the baseline runners shared by ros2-bench suites: fio JSON and
// ucx_perftest output parsing, and the benchmarks' I/O memory (the processes
// and directories they use are the harness's: src/testing/harness_test.cc).
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "bench/fi_pingpong_bench_util.h"
#include "bench/fio_bench_util.h"
#include "bench/harness.h"
#include "bench/memory_bench_util.h"
#include "bench/perftest_bench_util.h"
#include "bench/stages_bench_util.h"
#include "transport/transport.h"

namespace ros2::bench {
namespace {

// Trimmed from a real fio 3.33 --output-format=json --lat_percentiles=1 report.
constexpr const char* kFioJson = R"(fio: some warning printed before the document
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "job", "error" : 0, "usr_cpu" : 4.5, "sys_cpu" : 40.25, "job_runtime" : 2000,
      "read" : {
        "io_bytes" : 661651456, "bw_bytes" : 330588753, "iops" : 80710.5, "total_ios" : 161536,
        "clat_ns" : { "mean" : 390000.0, "percentile" : { "50.000000" : 366592, "99.000000" : 505856 } },
        "lat_ns" : { "mean" : 396000.0, "percentile" : { "50.000000" : 370688, "99.000000" : 514048 } }
      },
      "write" : {
        "io_bytes" : 0, "bw_bytes" : 0, "iops" : 0.0, "total_ios" : 0,
        "clat_ns" : { "mean" : 0.0 }, "lat_ns" : { "mean" : 0.0 }
      }
    }
  ]
})";

TEST(FioParse, ReadsIopsBandwidthAndTotalLatencyPercentiles) {
  auto r = ParseFioJson(kFioJson);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(r->read.iops, 80710.5);
  EXPECT_DOUBLE_EQ(r->read.bw_bytes, 330588753);
  EXPECT_EQ(r->read.total_ios, 161536u);
  EXPECT_NEAR(r->read.lat_us_p50, 370.688, 1e-9);
  EXPECT_NEAR(r->read.lat_us_p99, 514.048, 1e-9);
  EXPECT_NEAR(r->read.clat_us_p50, 366.592, 1e-9);
  EXPECT_NEAR(r->read.lat_us_mean, 396.0, 1e-9);
  EXPECT_DOUBLE_EQ(r->write.iops, 0);
  EXPECT_DOUBLE_EQ(r->sys_cpu_pct, 40.25);
  EXPECT_NEAR(r->cpu_s, (4.5 + 40.25) / 100 * 2.0, 1e-9);  // percent of the job's 2000 ms
}

TEST(FioParse, RejectsGarbageAndFailedJobs) {
  EXPECT_EQ(ParseFioJson("no json here").status().code(), Status::Code::kProtocol);
  EXPECT_EQ(ParseFioJson("{ \"jobs\": [ ").status().code(), Status::Code::kProtocol);
  EXPECT_EQ(ParseFioJson("{ \"jobs\": [] }").status().code(), Status::Code::kProtocol);
  auto failed = ParseFioJson(R"({ "jobs": [ { "jobname": "x", "error": 5 } ] })");
  EXPECT_EQ(failed.status().code(), Status::Code::kIOError);
}

TEST(FiPingpongParse, ReadsTheResultLineAfterItsHeader) {
  const std::string out =
      "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n"
      "4k      10k     =10k     78m         3.24s      24.00     170.00       0.01\n";
  auto r = ParseFiPingpongOutput(out);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->iterations, 10000u);
  EXPECT_DOUBLE_EQ(r->rtt_us, 340.0);  // twice usec/xfer: a round trip
  EXPECT_NEAR(r->bw_mib_s, 24.0 * 1e6 / (1 << 20), 1e-9);
}

TEST(FiPingpongParse, RejectsOutputWithoutAResultLine) {
  EXPECT_FALSE(ParseFiPingpongOutput("").ok());
  EXPECT_FALSE(ParseFiPingpongOutput("fi_getinfo: -61\n").ok());
  EXPECT_FALSE(ParseFiPingpongOutput("bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec\n4k 1k\n").ok());
  EXPECT_FALSE(
      ParseFiPingpongOutput("bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec\n4k 1k =1k 7m 1s x y 0\n").ok());
}

TEST(FioRun, NullEngineJobRunsAndReportsIos) {
  auto dir = TempDir::Create("/tmp", "bench-util-test-");
  ASSERT_TRUE(dir.ok());
  FioJob job;
  job.rw = "randread";
  job.bs = 4096;
  job.size = 1 << 20;
  job.runtime_s = 0.3;
  job.filename = dir->path() + "/f";
  job.ioengine = "null";
  job.direct = false;
  auto r = RunFio(job);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->read.total_ios, 0u);
  EXPECT_NE(r->command.find("--ioengine=null"), std::string::npos);
}

TEST(FioRun, FailureCarriesFiosMessage) {
  auto dir = TempDir::Create("/tmp", "bench-util-test-");
  ASSERT_TRUE(dir.ok());
  FioJob job;
  job.rw = "not-a-mode";
  job.filename = dir->path() + "/f";
  job.ioengine = "null";
  auto r = RunFio(job);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kIOError);
  EXPECT_NE(r.status().message().find("not-a-mode"), std::string::npos) << r.status().message();
  FioJob no_file;
  EXPECT_EQ(RunFio(no_file).status().code(), Status::Code::kInvalidArgument);
}

TEST(Stages, SplitsTheClientsReadsBetweenEngineDeviceAndOutside) {
  StageSnapshot before, after;
  // 2 s of I/O: 20,000 reads whose total stage summed to 16 s (8 in the
  // engine on average), 12 s of device depth (6 at the device).
  after.reads[io_stages::kTotal] = 20000;
  after.seconds[io_stages::kTotal] = 16;
  after.reads[io_stages::kDevice] = 20000;
  after.seconds[io_stages::kDevice] = 12;
  after.device_inflight_seconds = 12;
  const std::string text = FormatStages(before, after, 16, 2.0);
  EXPECT_NE(text.find("stage total       800.0 us  (20000 reads)"), std::string::npos) << text;
  EXPECT_NE(text.find("device in flight 6.0"), std::string::npos) << text;
  EXPECT_NE(text.find("client's 16 reads: 8.0 in the engine (6.0 at the device), 8.0 outside it"), std::string::npos)
      << text;
}

TEST(Stages, ClientStagesSumTheQueuesLines) {
  auto dir = TempDir::Create("/tmp", "stages-test-");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  const std::string file = dir->path() + "/fio-stages.txt";
  EXPECT_EQ(FormatClientStages(file), "");  // no file: nothing to say
  std::ofstream(file) << "ios 100 library_ns 20000000 waiting_ns 1000000\n"
                      << "ios 300 library_ns 20000000 waiting_ns 3000000\n";
  EXPECT_EQ(FormatClientStages(file), "  client: submit to callback 100.0 us, callback to fio 10.0 us (400 I/Os)\n");
  std::ofstream(file) << "ios 100 library_ns 20000000 waiting_ns 1000000 requests 100 messages 40\n"
                      << "ios 300 library_ns 20000000 waiting_ns 3000000 requests 300 messages 120\n";
  EXPECT_EQ(FormatClientStages(file),
            "  client: submit to callback 100.0 us, callback to fio 10.0 us (400 I/Os)\n"
            "  client: 400 requests in 160 messages (2.50 a message)\n");
  std::ofstream(file) << "ios 100 library_ns 20000000 waiting_ns 1000000 requests 100 messages 100 reaps 100 waits 30 "
                         "sleeps 5\n"
                      << "ios 300 library_ns 20000000 waiting_ns 3000000 requests 300 messages 300 reaps 300 waits 50 "
                         "sleeps 15\n";
  EXPECT_EQ(FormatClientStages(file),
            "  client: submit to callback 100.0 us, callback to fio 10.0 us (400 I/Os)\n"
            "  client: 400 requests in 400 messages (1.00 a message)\n"
            "  client: 400 reaps, 1.00 a read; 0.20 of them waited for a reply; 0.050 sleeps (wake-ups) a read\n");
}

TEST(Stages, SamplesTheNamedThreadsOfAProcess) {
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    ::pthread_setname_np(::pthread_self(), "stages-spin");
    while (!stop.load()) {
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto before = SampleThreads(::getpid(), "stages-");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto after = SampleThreads(::getpid(), "stages-");
  stop = true;
  spinner.join();
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after.begin()->second.name, "stages-spin");
  EXPECT_GT(after.begin()->second.run_ns, before.begin()->second.run_ns);
  const std::string text = FormatThreads(before, after, 0.2);
  EXPECT_NE(text.find("thread stages-spin"), std::string::npos) << text;
  EXPECT_TRUE(SampleThreads(::getpid(), "no-such-thread").empty());
}

TEST(Stages, MachineCpuSampleCountsThisProcessesBusyTime) {
  auto before = SampleMachineCpu();
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_GT(before->cpus, 0);
  EXPECT_GE(before->busy_s, before->irq_s);
  // Spin for 50 ms of wall time: the machine's busy time must grow by about that.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  volatile uint64_t n = 0;
  while (std::chrono::steady_clock::now() < until) n = n + 1;
  auto after = SampleMachineCpu();
  ASSERT_TRUE(after.ok());
  EXPECT_GT(after->busy_s, before->busy_s);
}

TEST(Stages, MachineCpuSampleHasEveryCpu) {
  auto m = SampleMachineCpu();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(static_cast<int>(m->per_cpu_busy_s.size()), m->cpus);
  double sum = 0;
  for (double b : m->per_cpu_busy_s) sum += b;
  // The per-CPU lines add up to the machine's line (each rounded to a tick).
  EXPECT_NEAR(sum, m->busy_s, 0.05 * m->busy_s + 1);
}

TEST(Stages, WakeProbeCountsEveryRoundTrip) {
  auto p = ProbeWakeUps(200);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->rounds, 200);
  EXPECT_GE(p->same_cpu_share, 0.0);
  EXPECT_LE(p->same_cpu_share, 1.0);
  EXPECT_GT(p->free_rtt_us, 0.0);
  if (transport::CurrentThreadCpus().size() >= 2) {
    EXPECT_GT(p->split_rtt_us, 0.0);
  }
  // The probe gives the calling thread its CPUs back after pinning it.
  EXPECT_FALSE(transport::CurrentThreadPinnedToOneCpu());
  const std::string line = FormatWakeProbe(*p);
  EXPECT_NE(line.find("posix bench: wake-ups: "), std::string::npos) << line;
  EXPECT_NE(line.find("(median of 200)"), std::string::npos) << line;
  EXPECT_FALSE(ProbeWakeUps(0).ok());
}

TEST(Stages, CpuOfRunSplitsOwnAndOtherProcesses) {
  MachineCpu before{.busy_s = 100, .irq_s = 1, .cpus = 2, .at = std::chrono::steady_clock::time_point{}};
  MachineCpu after = before;
  after.at = before.at + std::chrono::seconds(4);
  after.busy_s = 106;  // 1.5 CPUs busy over 4 s
  after.irq_s = 1.2;
  const RunCpu r = CpuOfRun(before, after, /*own_s=*/2.0, /*ios=*/100000);
  EXPECT_DOUBLE_EQ(r.wall_s, 4);
  EXPECT_DOUBLE_EQ(r.busy_cpus, 1.5);
  EXPECT_DOUBLE_EQ(r.other_cpus, 1.0);      // 1.5 busy - 2 s / 4 s own
  EXPECT_NEAR(r.irq_us_per_io, 2.0, 1e-9);  // 0.2 s over 100,000 I/Os
  EXPECT_TRUE(r.per_cpu_busy.empty());      // no per-CPU samples given
  // The arithmetic: 20 + 10 us a read on 2 idle CPUs is 66.7 K IOPS, 2.22 x
  // local's 30 K; the 1.0 CPU the other load left allows half of that.
  const std::string line = FormatCpuArithmetic(20, 10, 4, 30000, r);
  EXPECT_NE(line.find("engine 20.0 + client 10.0 = 30.0 us a read (7.5x local fio's 4.0)"), std::string::npos) << line;
  EXPECT_NE(line.find("2 idle CPUs allow 66.7 K IOPS (2.22 x local's 30.0 K)"), std::string::npos) << line;
  EXPECT_NE(line.find("left 1.00 CPUs: 33.3 K (1.11 x local)"), std::string::npos) << line;
  EXPECT_EQ(FormatCpuArithmetic(0, 0, 4, 30000, r), "");  // nothing measured: no line

  before.per_cpu_busy_s = {50, 50};
  after.per_cpu_busy_s = {53.6, 52.4};  // 0.9 and 0.6 of a CPU over the 4 s
  const RunCpu split = CpuOfRun(before, after, 2.0, 100000);
  ASSERT_EQ(split.per_cpu_busy.size(), 2u);
  EXPECT_NEAR(split.per_cpu_busy[0], 0.9, 1e-9);
  EXPECT_NEAR(split.per_cpu_busy[1], 0.6, 1e-9);
}

TEST(PerftestParse, TakesTheFinalNumericLine) {
  const std::string out =
      "+------+\n|  Test  | # iterations | 50.0%ile | average |\n+------+\n"
      "                       20000      4.733     4.694     4.694      832.14     832.14      213029      213029\n";
  auto r = ParsePerftestOutput(out);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->iterations, 20000u);
  EXPECT_DOUBLE_EQ(r->lat_us_typical, 4.733);
  EXPECT_DOUBLE_EQ(r->lat_us_avg, 4.694);
  EXPECT_DOUBLE_EQ(r->bw_mib_s, 832.14);
  EXPECT_DOUBLE_EQ(r->msg_rate, 213029);
  EXPECT_EQ(ParsePerftestOutput("| header only |\n").status().code(), Status::Code::kProtocol);
}

TEST(PerftestPort, PicksAnUnprivilegedPort) {
  auto port = PickFreeTcpPort();
  ASSERT_TRUE(port.ok());
  EXPECT_GT(*port, 1023);
  EXPECT_LT(*port, 65536);
}

TEST(BenchMemory, PageKindsParseAndTyposAreNamed) {
  EXPECT_EQ(*ParsePageKind("huge"), PageKind::kHuge);
  EXPECT_EQ(*ParsePageKind("small"), PageKind::kSmall);
  auto bad = ParsePageKind("hug");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'hug'"), std::string::npos) << bad.status().ToString();
}

TEST(BenchMemory, SmallBuffersAreAlignedAndFilled) {
  auto m = AllocateIoMemory(3 * 4096 + 100, PageKind::kSmall);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m->data()) % 4096, 0u);
  EXPECT_EQ(m->size(), 3u * 4096 + 100);
  // Incompressible content: not all zero, not one repeated word.
  uint64_t first = 0, other = 0;
  std::memcpy(&first, m->data(), 8);
  std::memcpy(&other, m->data() + 4096, 8);
  EXPECT_NE(first, 0u);
  EXPECT_NE(first, other);
  EXPECT_FALSE(AllocateIoMemory(0, PageKind::kSmall).ok());
}

// Needs root to raise vm.nr_hugepages (CI runs as root); elsewhere the
// reservation must fail with a message naming the knob and change nothing.
TEST(BenchMemory, HugeBuffersComeFromHugePagesAndTheReservationIsUndone) {
  std::ifstream in("/proc/sys/vm/nr_hugepages");
  uint64_t before = 0;
  ASSERT_TRUE(in >> before);
  {
    const uint64_t want = FreeHugePages() + 2;  // always more than are free: the knob must move
    auto r = HugePageReservation::Ensure(want);
    if (::geteuid() != 0) {
      ASSERT_FALSE(r.ok());
      EXPECT_NE(r.status().message().find("nr_hugepages"), std::string::npos) << r.status().ToString();
      return;
    }
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->raised());
    const uint64_t free_before = FreeHugePages();
    {
      auto m = AllocateIoMemory(kHugePageSize + 1, PageKind::kHuge);  // two pages
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      EXPECT_EQ(reinterpret_cast<uintptr_t>(m->data()) % kHugePageSize, 0u);
      EXPECT_EQ(m->kind(), PageKind::kHuge);
      EXPECT_EQ(FreeHugePages(), free_before - 2);
      IoMemory moved = std::move(*m);
      EXPECT_EQ(m->data(), nullptr);
      EXPECT_NE(moved.data(), nullptr);
    }
    EXPECT_EQ(FreeHugePages(), free_before);
  }
  std::ifstream again("/proc/sys/vm/nr_hugepages");
  uint64_t after = 0;
  ASSERT_TRUE(again >> after);
  EXPECT_EQ(after, before);
}

}  // namespace
}  // namespace ros2::bench
