// `ros2-bench transport` end to end on a small scale: both transports, one
// size, two rounds. Every RPC and bulk case must carry both ucx_perftest
// baselines of the same run (active messages, and tag messages whose payload
// lands in the receiver's buffer), and the idle and shm/tcp records must be
// there.
#include <chrono>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/harness.h"

namespace ros2::bench {
namespace {

struct BenchRun {
  int exit_code = -1;
  std::string out, err;
};

// Runs ros2-bench with `args`, its output captured in a scratch directory.
BenchRun RunBench(const std::vector<std::string>& args) {
  testing::TempDir dir("transport-suite-test");
  std::vector<std::string> argv = {ROS2_BENCH_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  testing::CommandResult c = testing::RunCommand(argv, dir.path(), std::chrono::minutes(3));
  return BenchRun{c.exit_code, c.out, c.err};
}

TEST(TransportSuiteTest, EveryCaseCarriesBothPerftestBaselinesOfItsRounds) {
  BenchRun r = RunBench({"--json", "transport", "--transports", "shm,tcp", "--bs", "4096", "--ops", "write,read",
                         "--runtime", "0.4", "--rounds", "2", "--idle", "0.3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // case|metric -> baseline -> (value, baseline_value)
  std::map<std::string, std::map<std::string, std::pair<double, double>>> by_case;
  std::set<std::string> idle;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON: " << line;
    EXPECT_EQ(j["bench"], "transport");
    const std::string c = j["case"].get<std::string>();
    const std::string metric = j["metric"].get<std::string>();
    if (metric == "cpu_pct_idle") {
      EXPECT_GE(j["value"].get<double>(), 0) << line;
      idle.insert(c);
      continue;
    }
    EXPECT_GT(j["value"].get<double>(), 0) << line;
    if (!j.contains("baseline")) continue;
    EXPECT_GT(j["baseline_value"].get<double>(), 0) << line;
    EXPECT_NEAR(j["ratio"].get<double>(), j["value"].get<double>() / j["baseline_value"].get<double>(), 1e-6) << line;
    by_case[c + "|" + metric][j["baseline"].get<std::string>()] = {j["value"].get<double>(),
                                                                   j["baseline_value"].get<double>()};
  }
  for (const std::string kind : {"shm", "tcp"}) {
    EXPECT_TRUE(idle.count("mode=idle transport=" + kind)) << kind;
    for (const std::string op : {"write", "read"}) {
      const std::string rpc = "mode=rpc op=" + op + " bs=4096 qd=1 transport=" + kind + "|lat_us_p50";
      const std::string bulk = "mode=bulk op=" + op + " bs=4096 qd=128 transport=" + kind + "|mib_s";
      ASSERT_TRUE(by_case.count(rpc)) << rpc << "\n" << r.out;
      ASSERT_TRUE(by_case.count(bulk)) << bulk << "\n" << r.out;
      auto& lat = by_case[rpc];
      ASSERT_TRUE(lat.count("ucx_perftest-ucp_am_lat-rtt") && lat.count("ucx_perftest-tag_lat-rtt")) << rpc;
      // One measurement, two baselines.
      EXPECT_EQ(lat["ucx_perftest-ucp_am_lat-rtt"].first, lat["ucx_perftest-tag_lat-rtt"].first);
      auto& bw = by_case[bulk];
      ASSERT_TRUE(bw.count("ucx_perftest-ucp_am_bw") && bw.count("ucx_perftest-tag_bw")) << bulk;
      EXPECT_EQ(bw["ucx_perftest-ucp_am_bw"].first, bw["ucx_perftest-tag_bw"].first);
    }
  }
  // The shm/tcp comparison of the 4 KiB write RPC.
  auto cmp = by_case.find("mode=rpc op=write bs=4096 qd=1 transport=shm|lat_us_p50");
  ASSERT_NE(cmp, by_case.end());
  EXPECT_TRUE(cmp->second.count("transport-tcp"));
}

TEST(TransportSuiteTest, BulkRunsWithABufferPerCallInFlight) {
  BenchRun r = RunBench({"--json", "transport", "--transports", "shm", "--bs", "65536", "--ops", "write,read",
                         "--runtime", "0.3", "--idle", "0.1", "--no-perftest", "--bulk-buffers", "per-call"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int bulk = 0;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("mode=bulk") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line);
    EXPECT_GT(j.at("value").get<double>(), 0) << line;
    ++bulk;
  }
  EXPECT_EQ(bulk, 2) << r.out;  // write and read
  BenchRun bad = RunBench({"--json", "transport", "--bulk-buffers", "each"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--bulk-buffers"), std::string::npos) << bad.err;
}

// --floor: each ofi bulk case carries the raw libfabric floors of its op
// (FI_WAIT_FD as the worker, busy-polled, and batched as corked calls are),
// measured in the same run.
TEST(TransportSuiteTest, OfiBulkCasesCarryTheRawLibfabricFloors) {
  BenchRun r = RunBench({"--json", "transport", "--provider", "ofi", "--transports", "tcp", "--bs", "4096", "--ops",
                         "write,read", "--runtime", "0.3", "--idle", "0.1", "--no-perftest", "--floor"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::set<std::string>> floors;  // op -> floor baselines
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);
    const std::string c = j.at("case").get<std::string>();
    if (c.find("mode=bulk") == std::string::npos || !j.contains("baseline")) continue;
    EXPECT_TRUE(c.ends_with("transport=ofi-tcp")) << line;
    EXPECT_GT(j.at("value").get<double>(), 0) << line;
    EXPECT_GT(j.at("baseline_value").get<double>(), 0) << line;
    floors[c.find("op=write") != std::string::npos ? "write" : "read"].insert(j.at("baseline").get<std::string>());
  }
  for (const std::string op : {"write", "read"}) {
    EXPECT_EQ(floors[op], (std::set<std::string>{"ofi-floor", "ofi-floor-busy", "ofi-floor-batched"})) << op << "\n" << r.out << r.err;
  }
}

TEST(TransportSuiteTest, RejectsABadRoundCount) {
  BenchRun r = RunBench({"--json", "transport", "--rounds", "0"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--rounds"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ros2::bench
