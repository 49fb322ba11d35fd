// `ros2-bench obj` end to end on a small scale: the suite starts its own
// cluster per transport, runs libros2 jobs against it and the vos-only
// baseline of the same shapes in this run, and prints one JSON record per
// (case, metric) with the baseline and the ratio. With --pin the records say
// mode=pinned.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/test_cluster.h"

namespace ros2::bench {
namespace {

class ObjSuiteTest : public ::testing::Test {
 protected:
  // Runs the suite with `args`; the records' JSON objects by case then metric.
  std::map<std::string, std::map<std::string, nlohmann::json>> Run(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {ROS2_BENCH_PATH, "--json",     "obj",      "--dir",          dir_,
                                     "--ros2ctl",     ROS2CTL_PATH, "--engine", ROS2_ENGINE_PATH, "--size",
                                     "2097152",       "--runtime",  "0.3",      "--shard-size",   "64MiB"};
    argv.insert(argv.end(), args.begin(), args.end());
    ros2::testing::CommandResult r = ros2::testing::RunCommand(argv, dir_);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<std::string, std::map<std::string, nlohmann::json>> records;
    std::istringstream lines(r.out);
    std::string line;
    while (std::getline(lines, line)) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      EXPECT_FALSE(j.is_discarded()) << "not JSON: " << line;
      if (j.is_discarded()) continue;
      EXPECT_EQ(j["bench"], "obj");
      records[j["case"].get<std::string>()][j["metric"].get<std::string>()] = j;
    }
    return records;
  }
  ros2::testing::TempDir tmp_{"obj-suite"};
  const std::string dir_ = tmp_.path();
};

TEST_F(ObjSuiteTest, EveryCaseOfBothTransportsHasItsSameRunVosOnlyBaseline) {
  auto records = Run({"--classes", "ram", "--transports", "tcp", "shm", "--ops", "read", "randwrite", "--bs", "4096",
                      "1048576", "--jobs", "2"});
  std::set<std::string> expected;
  for (const char* t : {"tcp", "shm"}) {
    for (const char* op : {"read", "randwrite"}) {
      for (int bs : {4096, 1048576}) {
        expected.insert(fmt::format("op={} bs={} qd=8 jobs=2 transport={} class=ram", op, bs, t));
      }
    }
  }
  std::set<std::string> seen;
  for (const auto& [c, metrics] : records) seen.insert(c);
  EXPECT_EQ(seen, expected);
  for (const auto& [c, metrics] : records) {
    for (const char* m : {"iops", "mib_s", "lat_us_p50"}) {
      ASSERT_TRUE(metrics.contains(m)) << c << " has no " << m;
      const auto& j = metrics.at(m);
      EXPECT_GT(j["value"].get<double>(), 0) << j.dump();
      EXPECT_EQ(j["baseline"], "vos-only") << j.dump();
      EXPECT_GT(j["baseline_value"].get<double>(), 0) << j.dump();
      EXPECT_NEAR(j["ratio"].get<double>(), j["value"].get<double>() / j["baseline_value"].get<double>(), 1e-6)
          << j.dump();
    }
    // MiB/s is IOPS times the block size.
    const double bs = c.find("bs=4096") != std::string::npos ? 4096.0 : 1048576.0;
    EXPECT_NEAR(metrics.at("mib_s")["value"].get<double>(), metrics.at("iops")["value"].get<double>() * bs / (1 << 20),
                1e-6 * metrics.at("mib_s")["value"].get<double>() + 0.01)
        << c;
  }
}

TEST_F(ObjSuiteTest, PinnedRunsSayModePinned) {
  auto records =
      Run({"--classes", "ram", "--transports", "shm", "--ops", "read", "--bs", "1048576", "--jobs", "2", "--pin"});
  ASSERT_EQ(records.size(), 1u);
  const auto& [c, metrics] = *records.begin();
  EXPECT_EQ(c, "op=read bs=1048576 qd=8 jobs=2 transport=shm class=ram mode=pinned");
  EXPECT_EQ(metrics.at("mib_s")["baseline"], "vos-only");
  EXPECT_GT(metrics.at("mib_s")["value"].get<double>(), 0);
}

}  // namespace
}  // namespace ros2::bench
