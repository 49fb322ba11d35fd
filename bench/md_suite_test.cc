// `ros2-bench md` end to end on a small scale: the suite starts its own
// cluster, runs the local and DFS modes with 2 job processes in unique and
// shared directories, and prints one JSON record per (op, mode, metric) with
// the DFS rates against the same run's local baseline.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/test_cluster.h"

namespace ros2::bench {
namespace {

TEST(MdSuiteTest, LocalAndDfsModesReportEveryPhaseWithTheLocalBaseline) {
  ros2::testing::TempDir tmp("md-suite");
  const std::string& dir = tmp.path();
  ros2::testing::CommandResult r = ros2::testing::RunCommand(
      {ROS2_BENCH_PATH, "--json", "md", "--modes", "local,dfs", "--files", "30", "--jobs", "2", "--dirs",
       "unique,shared", "--shard-size", "64MiB", "--dir", dir, "--ros2ctl", ROS2CTL_PATH, "--engine", ROS2_ENGINE_PATH},
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> seen;
  std::istringstream lines(r.out);
  std::string line;
  int with_baseline = 0;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON: " << line;
    EXPECT_EQ(j["bench"], "md");
    const std::string c = j["case"].get<std::string>();
    EXPECT_NE(c.find("jobs=2"), std::string::npos) << c;
    EXPECT_NE(c.find("files=30"), std::string::npos) << c;
    if (j["metric"] != "ops_s") continue;
    EXPECT_GT(j["value"].get<double>(), 0) << line;
    seen.insert(c);
    if (c.find("mode=dfs") != std::string::npos) {
      EXPECT_EQ(j["baseline"], "local") << line;
      EXPECT_GT(j["ratio"].get<double>(), 0) << line;
      ++with_baseline;
    }
  }
  // 4 ops x 2 modes x 2 directory modes.
  EXPECT_EQ(seen.size(), 16u) << r.out;
  EXPECT_EQ(with_baseline, 8) << r.out;
  for (const char* op : {"create", "stat", "readdir", "unlink"}) {
    EXPECT_TRUE(seen.contains(fmt::format("op={} jobs=2 mode=dfs dir=shared files=30", op))) << op;
  }
  EXPECT_NE(r.err.find("load average"), std::string::npos) << r.err;
}

// Mode offload: the DFS jobs' calls run in the cluster's ros2-agent; each
// phase is reported against the same run's direct DFS figure.
TEST(MdSuiteTest, OffloadModeReportsEveryPhaseAgainstDirectDfs) {
  ros2::testing::TempDir tmp("md-suite");
  const std::string& dir = tmp.path();
  ros2::testing::CommandResult r = ros2::testing::RunCommand(
      {ROS2_BENCH_PATH, "--json", "md", "--modes", "dfs,offload", "--files", "20", "--jobs", "1", "--dirs", "unique",
       "--shard-size", "64MiB", "--dir", dir, "--ros2ctl", ROS2CTL_PATH, "--engine", ROS2_ENGINE_PATH},
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> against_dfs;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON: " << line;
    const std::string c = j["case"].get<std::string>();
    if (j["metric"] != "ops_s" || c.find("mode=offload") == std::string::npos) continue;
    EXPECT_GT(j["value"].get<double>(), 0) << line;
    if (j.contains("baseline") && j["baseline"] == "dfs") {
      EXPECT_GT(j["ratio"].get<double>(), 0) << line;
      against_dfs.insert(c.substr(0, c.find(' ')));
    }
  }
  EXPECT_EQ(against_dfs, (std::set<std::string>{"op=create", "op=readdir", "op=stat", "op=unlink"})) << r.out;
}

}  // namespace
}  // namespace ros2::bench
