// The fio external ioengine against a real cluster: Debian's fio binary loads
// libros2_fio.so, writes files through DFS at iodepth 8 with 2 jobs and reads
// them back with crc32c verification (in the writing run and again from a new
// process), sequential and random, 4 KiB and 1 MiB blocks; bad options fail
// with messages that name the culprit.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/test_cluster.h"

namespace ros2 {
namespace {

using testing::CommandResult;
using testing::ReadWholeFile;
using testing::RunCommand;
using testing::TestCluster;

constexpr uint64_t kJobBytes = uint64_t{16} << 20;  // per job
constexpr int kJobs = 2;

struct FioRun {
  CommandResult cmd;
  nlohmann::json report;  // discarded when fio wrote none
  std::string Describe() const {
    return fmt::format("exit {}\nstderr:\n{}\nstdout:\n{}", cmd.exit_code, cmd.err, cmd.out);
  }
};

class FioEngineTest : public ::testing::Test {
 protected:
  // Failures here are recorded, not asserted: a fatal failure in
  // SetUpTestSuite makes GoogleTest skip the tests, which ctest counts as passed.
  static void SetUpTestSuite() {
    std::string error;
    cluster_ = TestCluster::Start("shm", 2, &error);
    if (cluster_ == nullptr) {
      setup_error_ = error;
      return;
    }
    // The test cluster's targets hold 64 MiB each: the pool takes all of it.
    auto pool = cluster_->Ctl({"pool", "create", "p", "--size", "128MiB"});
    if (pool.exit_code != 0) setup_error_ = "pool create: " + pool.err;
  }
  static void TearDownTestSuite() { cluster_.reset(); }

  void SetUp() override {
    if (!setup_error_.empty()) FAIL() << setup_error_;
  }

  // A fresh container for one test (destroyed by the test's end).
  std::string MakeContainer(const std::string& name) {
    auto r = cluster_->Ctl({"cont", "create", "p", name});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    containers_.push_back(name);
    return name;
  }
  void TearDown() override {
    if (cluster_ == nullptr) return;
    for (const auto& c : containers_) (void)cluster_->Ctl({"cont", "destroy", "p", c});
  }

  // Runs fio with the engine; `engine_options` come right after --ioengine.
  // `env`: NAME=VALUE settings for fio's environment.
  FioRun Fio(const std::vector<std::string>& engine_options, const std::vector<std::string>& job_options,
             const TestCluster* on = nullptr, const std::vector<std::string>& env = {}) {
    const TestCluster& cluster = on != nullptr ? *on : *cluster_;
    const std::string out_path = cluster.scratch() + "/fio.json";
    (void)std::remove(out_path.c_str());
    std::vector<std::string> argv;
    if (!env.empty()) {
      argv.push_back("/usr/bin/env");
      argv.insert(argv.end(), env.begin(), env.end());
    }
    argv.insert(argv.end(), {ROS2_FIO_PATH, "--ioengine=external:" ROS2_FIO_ENGINE_PATH});
    argv.insert(argv.end(), engine_options.begin(), engine_options.end());
    argv.insert(argv.end(), job_options.begin(), job_options.end());
    argv.push_back("--output-format=json");
    argv.push_back("--output=" + out_path);
    argv.push_back("--verify_state_save=0");  // no <job>-verify.state files in the working directory
    FioRun run;
    run.cmd = RunCommand(argv, cluster.scratch());
    run.report = nlohmann::json::parse(ReadWholeFile(out_path), nullptr, /*allow_exceptions=*/false);
    return run;
  }

  std::vector<std::string> Cluster(const std::string& cont) const {
    return {"--data_dir=" + cluster_->dir(), "--pool=p", "--cont=" + cont, "--transport=shm"};
  }

  static inline std::unique_ptr<TestCluster> cluster_;
  static inline std::string setup_error_;
  std::vector<std::string> containers_;
};

// Every job of the report finished without error and moved `read`/`write` bytes.
void ExpectJobs(const FioRun& run, uint64_t read_bytes, uint64_t write_bytes) {
  ASSERT_EQ(run.cmd.exit_code, 0) << run.Describe();
  ASSERT_FALSE(run.report.is_discarded()) << run.Describe();
  ASSERT_TRUE(run.report.contains("jobs")) << run.report.dump();
  const auto& jobs = run.report["jobs"];
  ASSERT_EQ(jobs.size(), static_cast<size_t>(kJobs)) << run.report.dump();
  for (const auto& job : jobs) {
    SCOPED_TRACE(job.value("jobname", "?"));
    EXPECT_EQ(job.value("error", -1), 0);
    EXPECT_EQ(job["read"].value("io_bytes", uint64_t{0}), read_bytes);
    EXPECT_EQ(job["write"].value("io_bytes", uint64_t{0}), write_bytes);
    EXPECT_EQ(job["read"].value("short_ios", -1), 0);
    EXPECT_EQ(job["write"].value("short_ios", -1), 0);
  }
}

struct Shape {
  const char* name;
  const char* write_rw;
  const char* read_rw;
  uint64_t bs;
};

void PrintTo(const Shape& s, std::ostream* os) {
  *os << s.name;
}

class FioEngineShapes : public FioEngineTest, public ::testing::WithParamInterface<Shape> {};

// A write pass verifying its own data (do_verify), then a read pass in a new
// process verifying what the first left in DFS.
TEST_P(FioEngineShapes, WriteThenVerify) {
  const Shape& s = GetParam();
  const std::string cont = MakeContainer(std::string("c-") + s.name);
  const std::vector<std::string> job = {"--name=" + std::string(s.name),
                                        "--filename_format=/fio/$jobname.$jobnum.$filenum",
                                        fmt::format("--bs={}", s.bs),
                                        "--iodepth=8",
                                        fmt::format("--numjobs={}", kJobs),
                                        fmt::format("--size={}", kJobBytes),
                                        "--verify=crc32c"};
  auto write = job;
  write.push_back(std::string("--rw=") + s.write_rw);
  write.push_back("--do_verify=1");
  FioRun w = Fio(Cluster(cont), write);
  // The verify phase reads every written block back.
  ExpectJobs(w, kJobBytes, kJobBytes);

  auto read = job;
  read.push_back(std::string("--rw=") + s.read_rw);
  FioRun r = Fio(Cluster(cont), read);
  ExpectJobs(r, kJobBytes, 0);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FioEngineShapes,
                         ::testing::Values(Shape{"seq4k", "write", "read", 4096},
                                           Shape{"rand4k", "randwrite", "randread", 4096},
                                           Shape{"seq1m", "write", "read", uint64_t{1} << 20},
                                           Shape{"rand1m", "randwrite", "randread", uint64_t{1} << 20}),
                         [](const auto& info) { return std::string(info.param.name); });

// Offload mode: the same verify jobs with ROS2_AGENT_SOCKET set, so the
// engine's DFS calls run in the cluster's ros2-agent; a second pass in a new
// process verifies what the first left.
TEST_F(FioEngineTest, VerifyJobsThroughTheAgent) {
  std::string error;
  auto agent_cluster = TestCluster::Start("shm", 2, &error, "ram", "64MiB", {"--agent"});
  ASSERT_NE(agent_cluster, nullptr) << error;
  ASSERT_EQ(agent_cluster->Ctl({"pool", "create", "p", "--size", "128MiB"}).exit_code, 0);
  ASSERT_EQ(agent_cluster->Ctl({"cont", "create", "p", "c"}).exit_code, 0);
  ASSERT_FALSE(agent_cluster->agent_socket().empty());
  ::setenv("ROS2_AGENT_SOCKET", agent_cluster->agent_socket().c_str(), 1);
  const std::vector<std::string> engine = {"--data_dir=" + agent_cluster->dir(), "--pool=p", "--cont=c"};
  const std::vector<std::string> job = {"--name=off", "--filename_format=/fio/$jobname.$jobnum.$filenum",
                                        "--bs=64k", "--iodepth=8", fmt::format("--numjobs={}", kJobs),
                                        fmt::format("--size={}", kJobBytes), "--verify=crc32c"};
  auto write = job;
  write.push_back("--rw=randwrite");
  write.push_back("--do_verify=1");
  FioRun w = Fio(engine, write, agent_cluster.get());
  auto read = job;
  read.push_back("--rw=read");
  FioRun r = Fio(engine, read, agent_cluster.get());
  ::unsetenv("ROS2_AGENT_SOCKET");
  ExpectJobs(w, kJobBytes, kJobBytes);
  ExpectJobs(r, kJobBytes, 0);
  EXPECT_NE(ReadWholeFile(agent_cluster->dir() + "/agent.log").find("mounted p/c"), std::string::npos);
}

// With --thread the jobs are threads of one fio process sharing one mount,
// each with its own event queue. spin_us=0: every wait sleeps on the worker at once.
TEST_F(FioEngineTest, ThreadedJobsShareOneMount) {
  const std::string cont = MakeContainer("c-thread");
  auto engine = Cluster(cont);
  engine.push_back("--spin_us=0");
  FioRun w = Fio(
      engine, {"--name=t", "--thread", "--rw=randwrite", "--bs=64k", "--iodepth=16", fmt::format("--numjobs={}", kJobs),
               fmt::format("--size={}", kJobBytes), "--verify=crc32c", "--do_verify=1"});
  ExpectJobs(w, kJobBytes, kJobBytes);
}

// ROS2_FIO_STAGES: every job's event queue appends its sums when it ends,
// one line a job, counting each I/O fio reaped once, and the requests its
// thread sent against the transport messages they took.
TEST_F(FioEngineTest, StagesFileCountsEveryIo) {
  const std::string cont = MakeContainer("c-stages");
  const std::string stages = cluster_->scratch() + "/fio-stages.txt";
  (void)std::remove(stages.c_str());
  const std::vector<std::string> job = {"--name=s", "--rw=randwrite", "--bs=64k", "--iodepth=8",
                                        fmt::format("--numjobs={}", kJobs), fmt::format("--size={}", kJobBytes)};
  ExpectJobs(Fio(Cluster(cont), job, nullptr, {"ROS2_FIO_STAGES=" + stages}), 0, kJobBytes);
  const std::string text = ReadWholeFile(stages);
  unsigned long long ios = 0, library = 0, waiting = 0, requests = 0, messages = 0, total = 0;
  int lines = 0;
  for (const char* p = text.c_str();
       std::sscanf(p, "ios %llu library_ns %llu waiting_ns %llu requests %llu messages %llu\n", &ios, &library,
                   &waiting, &requests, &messages) == 5;
       p = std::strchr(p, '\n') + 1) {
    ++lines;
    total += ios;
    EXPECT_GT(library, 0u) << text;
    // Every write is one request; the first iodepth of them leave before the
    // job's first reap, corked into one batch at least.
    EXPECT_GE(requests, ios) << text;
    EXPECT_GT(messages, 0u) << text;
    EXPECT_LT(messages, requests) << text;
  }
  EXPECT_EQ(lines, kJobs) << text;
  EXPECT_EQ(total, kJobs * kJobBytes / (64 << 10)) << text;

  // Reading it back 4 KiB at a time: every read is one request, and no
  // message carries more requests than were sent. Without a spin
  // (spin_us=0) a reap that waits sleeps at once, and each sleep is counted.
  (void)std::remove(stages.c_str());
  const std::vector<std::string> reads = {"--name=s", "--rw=randread", "--bs=4k", "--iodepth=16",
                                          fmt::format("--numjobs={}", kJobs), fmt::format("--size={}", kJobBytes)};
  auto no_spin = Cluster(cont);
  no_spin.push_back("--spin_us=0");
  ExpectJobs(Fio(no_spin, reads, nullptr, {"ROS2_FIO_STAGES=" + stages}), kJobBytes, 0);
  const std::string read_text = ReadWholeFile(stages);
  lines = 0;
  unsigned long long reaps = 0, waits = 0, sleeps = 0;
  for (const char* p = read_text.c_str();
       std::sscanf(p,
                   "ios %llu library_ns %llu waiting_ns %llu requests %llu messages %llu reaps %llu waits %llu "
                   "sleeps %llu\n",
                   &ios, &library, &waiting, &requests, &messages, &reaps, &waits, &sleeps) == 8;
       p = std::strchr(p, '\n') + 1) {
    ++lines;
    EXPECT_EQ(ios, kJobBytes / 4096) << read_text;
    EXPECT_GE(requests, ios) << read_text;
    EXPECT_GT(messages, 0u) << read_text;
    EXPECT_LE(messages, requests) << read_text;
    // The first reap finds nothing completed and waits; the replies of a
    // burst complete together, and the reaps after the first of them return
    // one without waiting.
    EXPECT_GT(waits, 0u) << read_text;
    EXPECT_LT(waits, reaps) << read_text;
    EXPECT_GT(sleeps, 0u) << read_text;
  }
  EXPECT_EQ(lines, kJobs) << read_text;
  // Unset: no file.
  (void)std::remove(stages.c_str());
  ExpectJobs(Fio(Cluster(cont), reads), kJobBytes, 0);
  EXPECT_EQ(ReadWholeFile(stages), "");
}

// fio's buffers are libros2 I/O buffers by default (the shapes above);
// io_buffers=0 gives heap memory, which must work the same.
TEST_F(FioEngineTest, HeapBuffersWorkToo) {
  const std::string cont = MakeContainer("c-heap");
  auto engine = Cluster(cont);
  engine.push_back("--io_buffers=0");
  FioRun w = Fio(engine, {"--name=h", "--rw=randwrite", "--bs=1m", "--iodepth=8", fmt::format("--numjobs={}", kJobs),
                          fmt::format("--size={}", kJobBytes), "--verify=crc32c", "--do_verify=1"});
  ExpectJobs(w, kJobBytes, kJobBytes);
}

// Verification must see DFS's real bytes: a file whose first 8 KiB were
// written reads zeros behind them, which fail crc32c verification. Reading a
// file that does not exist fails at open, naming it.
TEST_F(FioEngineTest, VerifyFailsOnUnwrittenData) {
  const std::string cont = MakeContainer("c-holes");
  FioRun missing = Fio(Cluster(cont), {"--name=h", "--rw=read", "--bs=4k", "--size=1m"});
  EXPECT_NE(missing.cmd.exit_code, 0) << missing.Describe();
  EXPECT_NE(missing.cmd.err.find("h.0.0"), std::string::npos) << missing.Describe();

  FioRun head = Fio(Cluster(cont), {"--name=h", "--rw=write", "--bs=4k", "--size=1m", "--io_size=8k", "--verify=crc32c",
                                    "--do_verify=0"});
  ASSERT_EQ(head.cmd.exit_code, 0) << head.Describe();
  FioRun r = Fio(Cluster(cont), {"--name=h", "--rw=read", "--bs=4k", "--iodepth=4", "--size=1m", "--verify=crc32c"});
  EXPECT_NE(r.cmd.exit_code, 0) << r.Describe();
  EXPECT_NE((r.cmd.err + r.cmd.out).find("verify: bad magic header 0"), std::string::npos) << r.Describe();
}

TEST_F(FioEngineTest, UnknownPoolIsNamed) {
  FioRun r = Fio({"--data_dir=" + cluster_->dir(), "--pool=nosuchpool", "--cont=c", "--transport=shm"},
                 {"--name=x", "--rw=write", "--bs=4k", "--size=1m"});
  EXPECT_NE(r.cmd.exit_code, 0) << r.Describe();
  EXPECT_NE(r.cmd.err.find("nosuchpool"), std::string::npos) << r.Describe();
}

TEST_F(FioEngineTest, UnknownContainerIsNamed) {
  FioRun r = Fio({"--data_dir=" + cluster_->dir(), "--pool=p", "--cont=nosuchcont", "--transport=shm"},
                 {"--name=x", "--rw=write", "--bs=4k", "--size=1m"});
  EXPECT_NE(r.cmd.exit_code, 0) << r.Describe();
  EXPECT_NE(r.cmd.err.find("nosuchcont"), std::string::npos) << r.Describe();
}

TEST_F(FioEngineTest, MissingAndBadOptionsAreExplained) {
  const std::string cont = MakeContainer("c-opts");
  FioRun no_pool = Fio({"--data_dir=" + cluster_->dir(), "--cont=" + cont}, {"--name=x", "--rw=write", "--size=1m"});
  EXPECT_NE(no_pool.cmd.exit_code, 0) << no_pool.Describe();
  EXPECT_NE(no_pool.cmd.err.find("pool= is required"), std::string::npos) << no_pool.Describe();

  auto bad_class = Cluster(cont);
  bad_class.push_back("--oclass=XYZ");
  FioRun oc = Fio(bad_class, {"--name=x", "--rw=write", "--size=1m"});
  EXPECT_NE(oc.cmd.exit_code, 0) << oc.Describe();
  EXPECT_NE(oc.cmd.err.find("oclass=XYZ"), std::string::npos) << oc.Describe();

  FioRun transport = Fio({"--data_dir=" + cluster_->dir(), "--pool=p", "--cont=" + cont, "--transport=carrier-pigeon"},
                         {"--name=x", "--rw=write", "--size=1m"});
  EXPECT_NE(transport.cmd.exit_code, 0) << transport.Describe();
  EXPECT_NE(transport.cmd.err.find("carrier-pigeon"), std::string::npos) << transport.Describe();

  auto long_spin = Cluster(cont);
  long_spin.push_back("--spin_us=2000000");
  FioRun spin = Fio(long_spin, {"--name=x", "--rw=write", "--size=1m"});
  EXPECT_NE(spin.cmd.exit_code, 0) << spin.Describe();
  EXPECT_NE(spin.cmd.err.find("spin_us"), std::string::npos) << spin.Describe();

  FioRun no_cluster = Fio({"--data_dir=" + cluster_->dir() + "/nowhere", "--pool=p", "--cont=" + cont},
                          {"--name=x", "--rw=write", "--size=1m"});
  EXPECT_NE(no_cluster.cmd.exit_code, 0) << no_cluster.Describe();
  EXPECT_NE(no_cluster.cmd.err.find("cluster.json"), std::string::npos) << no_cluster.Describe();
}

}  // namespace
}  // namespace ros2
