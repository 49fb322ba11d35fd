// `ros2-bench offload` end to end on a small scale: the suite starts its own
// cluster with an agent, runs a 4 KiB random read and a 4 KiB write case once
// in direct and once in offload mode over shm, with fio's buffers from
// libros2 (arena memory in offload mode) and from the heap (copied through the
// arena), and prints JSON records: the offload figures against the direct
// ones of the same run, the CPU of the host, the engine and the agent per I/O,
// and fio's own floor.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/temp_dir.h"
#include "testing/test_cluster.h"

namespace ros2::bench {
namespace {

TEST(OffloadSuiteTest, DirectAndOffloadRunsReportThroughputAndCpuAgainstDirect) {
  ros2::testing::TempDir tmp("offload-suite");
  const std::string& dir = tmp.path();
  ros2::testing::CommandResult r = ros2::testing::RunCommand(
      {ROS2_BENCH_PATH, "--json", "offload", "--transports", "shm", "--ops", "randread,write", "--bs", "4096",
       "--jobs", "1", "--buffers", "io,heap", "--rounds", "1", "--runtime", "0.5", "--read-size", "8388608",
       "--write-total", "8388608", "--shard-size", "64MiB", "--dir", dir, "--ros2ctl", ROS2CTL_PATH, "--engine", ROS2_ENGINE_PATH,
       "--fio-engine", ROS2_FIO_ENGINE_PATH},
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, double> seen;  // "<op> <buffers> <mode> <metric>" -> value
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON: " << line;
    EXPECT_EQ(j["bench"], "offload");
    const std::string c = j["case"].get<std::string>();
    EXPECT_NE(c.find("transport=shm"), std::string::npos) << c;
    const std::string op = c.find("op=randread") != std::string::npos ? "randread" : "write";
    const std::string mode = c.substr(c.find("mode=") + 5);
    const std::string buffers = c.find("buffers=heap") != std::string::npos ? "heap" : "io";
    // fio's null engine, the floor, uses no buffers of ours and names none.
    EXPECT_EQ(c.find("buffers=" + buffers) != std::string::npos, mode != "fio-null") << c;
    const std::string metric = j["metric"].get<std::string>();
    const std::string key = op + " " + (mode == "fio-null" ? "" : buffers + " ") + mode + " " + metric;
    EXPECT_FALSE(seen.contains(key)) << "twice: " << line;
    seen[key] = j["value"].get<double>();
    if (mode == "offload" && metric != "agent_cpu_us_per_io") {
      EXPECT_EQ(j["baseline"], "direct") << line;
      EXPECT_GT(j["ratio"].get<double>(), 0) << line;
    }
  }
  for (const std::string op : {"randread", "write"}) {
    for (const std::string buffers : {"io", "heap"}) {
      const std::string k = op + " " + buffers + " ";
      for (const std::string mode : {"direct", "offload"}) {
        for (const std::string metric : {"iops", "mib_s", "host_cpu_us_per_io", "engine_cpu_us_per_io"}) {
          ASSERT_TRUE(seen.contains(k + mode + " " + metric)) << k << mode << " " << metric << "\n" << r.out;
          EXPECT_GT(seen[k + mode + " " + metric], 0) << k << mode << " " << metric;
        }
      }
      // The agent runs the client only in offload mode.
      EXPECT_GT(seen[k + "offload agent_cpu_us_per_io"], 0) << r.out;
      EXPECT_FALSE(seen.contains(k + "direct agent_cpu_us_per_io")) << r.out;
    }
    // fio's null engine, the floor, once per shape.
    EXPECT_GT(seen[op + " fio-null host_cpu_us_per_io"], 0) << r.out;
  }
  EXPECT_NE(r.err.find("offload/direct"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ros2::bench
