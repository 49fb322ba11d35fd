// `ros2-bench replication` end to end on a small scale: etcd and three
// engines, S1 against RP_2G1 and RP_3G1 for one write and one read case, one
// engine killed under the RP writers, the disk's copy rate through fio, the
// rebuild the kill starts. Every record parses; the RP records carry S1's
// same-run figure and the ratio; the kill case reports its stall against the
// bound and no lost write; the rebuild its rate against fio's copy of as many
// bytes.
#include <unistd.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace ros2::bench {
namespace {

// A lease TTL of 3 s: an engine fences itself when its lease goes unrenewed
// for half the TTL, and with 2 s a second-long stall of the loaded full suite
// once fenced the leader mid-write (Busy to the kill writers).
TEST(ReplicationSuiteTest, RpAgainstS1TheKillAndTheRebuild) {
  ros2::testing::TempDir tmp{"repl-suite"};
  std::vector<std::string> argv = {
      ROS2_BENCH_PATH, "--json", "replication", "--dir",        tmp.path(), "--cases",     "write:1048576,read:1048576",
      "--rounds",      "1",      "--runtime",   "0.3",          "--size",   "4194304",     "--shard-size",
      "64MiB",         "--ttl",  "3",           "--kill-after", "0.5",      "--post-kill", "0.5",
      "--copy-size",   "8388608"};
  argv.insert(argv.end(), {"--rebuild-delay", "0.5"});
  ros2::testing::CommandResult r = ros2::testing::RunCommand(argv, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::map<std::string, nlohmann::json>> records;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON: " << line;
    EXPECT_EQ(j["bench"], "replication");
    records[j["case"].get<std::string>()][j["metric"].get<std::string>()] = j;
  }
  for (const char* op : {"write", "read"}) {
    for (const char* oc : {"S1", "RP_2G1", "RP_3G1"}) {
      const std::string c = fmt::format("op={} bs=1048576 qd=8 oclass={} engines=3", op, oc);
      ASSERT_TRUE(records.contains(c)) << c << " missing:\n" << r.out;
      for (const char* m : {"iops", "mib_s", "lat_us_p99", "cpu_us_per_io"}) {
        ASSERT_TRUE(records[c].contains(m)) << c << " has no " << m;
        const auto& j = records[c][m];
        EXPECT_GT(j["value"].get<double>(), 0) << j.dump();
        if (std::string(oc) == "S1") {
          EXPECT_FALSE(j.contains("baseline")) << j.dump();
          continue;
        }
        EXPECT_EQ(j["baseline"], "S1") << j.dump();
        EXPECT_EQ(j["baseline_value"].get<double>(),
                  records[fmt::format("op={} bs=1048576 qd=8 oclass=S1 engines=3", op)][m]["value"].get<double>());
        EXPECT_NEAR(j["ratio"].get<double>(), j["value"].get<double>() / j["baseline_value"].get<double>(), 1e-6);
      }
    }
  }
  for (const char* oc : {"RP_2G1", "RP_3G1"}) {
    const std::string c = fmt::format("op=write bs=65536 qd=1 oclass={} engines=3 event=kill", oc);
    ASSERT_TRUE(records.contains(c)) << c << " missing:\n" << r.out;
    const auto& stall = records[c]["stall_ms_max"];
    EXPECT_EQ(stall["baseline"], "bound-2xttl+1s");
    EXPECT_EQ(stall["baseline_value"].get<double>(), 7000.0);
    EXPECT_GT(stall["value"].get<double>(), 0);
    EXPECT_EQ(records[c]["lost_writes"]["value"].get<double>(), 0) << records[c]["lost_writes"].dump();
    EXPECT_EQ(records[c]["lat_us_p99"]["baseline"], "before-kill");
  }
  const std::string copy = "op=copy bs=1048576 oclass=fio-disk";
  ASSERT_TRUE(records.contains(copy)) << r.out;
  EXPECT_GT(records[copy]["mib_s"]["value"].get<double>(), 0);
  // The rebuild the kill started, against the disk's copy of the same bytes.
  const std::string rebuild = "op=rebuild bs=1048576 oclass=RP_2G1+RP_3G1 engines=3 share=50";
  ASSERT_TRUE(records.contains(rebuild)) << r.out;
  const auto& rate = records[rebuild]["mib_s"];
  EXPECT_GT(rate["value"].get<double>(), 0) << rate.dump();
  EXPECT_EQ(rate["baseline"], "fio-disk-copy") << rate.dump();
  EXPECT_GT(rate["baseline_value"].get<double>(), 0) << rate.dump();
  EXPECT_NEAR(rate["ratio"].get<double>(), rate["value"].get<double>() / rate["baseline_value"].get<double>(), 1e-6);
  EXPECT_GT(records[rebuild]["bytes"]["value"].get<double>(), 0);
  EXPECT_GT(records[rebuild]["engine_cpu_ms_per_mib"]["value"].get<double>(), 0);
}

}  // namespace
}  // namespace ros2::bench
