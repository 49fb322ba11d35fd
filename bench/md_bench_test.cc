// The md suite's pieces without a cluster: job processes meeting at the
// ProcessBarrier run the four phases together on a local directory (no job
// starts a phase before every job ended the previous one), the phase counts
// are right, and the per-job result survives its JSON round trip.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bench/md_barrier.h"
#include "bench/md_workload.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace ros2::bench {
namespace {

TEST(MdWorkloadTest, JobsRunEachPhaseTogetherAndCountTheirOperations) {
  ros2::testing::TempDir tmp("md-test");
  const std::string& dir = tmp.path();
  constexpr int kJobs = 3;
  constexpr uint64_t kFiles = 40;
  auto barrier = ProcessBarrier::Create(dir + "/barrier", kJobs);
  ASSERT_TRUE(barrier.ok()) << barrier.status().ToString();
  std::vector<ros2::testing::ChildProcess> children;
  for (int j = 0; j < kJobs; ++j) {
    // A child: one job in the shared directory; its exit code says how it went.
    auto child = ros2::testing::ChildProcess::Fork([&dir, j] {
      auto b = ProcessBarrier::Attach(dir + "/barrier");
      if (!b.ok()) return 2;
      auto ns = OpenPosixNamespace(dir + "/shared");
      if (!ns.ok()) return 3;
      auto phases = RunMdJob(**ns, MdJobSpec{j, kFiles}, *b);
      if (!phases.ok()) return 4;
      if (!(*ns)->RemoveDirectory().ok()) return 5;  // as the suite's worker does
      std::ofstream(dir + "/job" + std::to_string(j) + ".json") << MdPhasesToJson(*phases).dump();
      return 0;
    });
    ASSERT_TRUE(child.ok()) << child.status().ToString();
    children.push_back(std::move(*child));
  }
  for (auto& child : children) {
    auto code = child.Wait(std::chrono::seconds(60));
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    EXPECT_EQ(*code, 0);
  }
  std::vector<std::vector<MdPhaseResult>> jobs;
  for (int j = 0; j < kJobs; ++j) {
    std::ifstream in(dir + "/job" + std::to_string(j) + ".json");
    auto parsed = MdPhasesFromJson(nlohmann::json::parse(in, nullptr, false));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    ASSERT_EQ(parsed->size(), kMdPhases.size());
    jobs.push_back(std::move(*parsed));
  }
  for (size_t p = 0; p < kMdPhases.size(); ++p) {
    for (const auto& job : jobs) {
      const MdPhaseResult& r = job[p];
      EXPECT_EQ(r.name, kMdPhases[p]);
      EXPECT_LE(r.start_ns, r.end_ns);
      // readdir: every job read the whole shared directory.
      EXPECT_EQ(r.ops, r.name == "readdir" ? kJobs * kFiles : kFiles) << r.name;
      EXPECT_EQ(r.lat_us.size(), r.name == "readdir" ? 0u : kFiles) << r.name;
      if (p == 0) continue;
      // The barrier: no job starts phase p before every job ended phase p-1.
      for (const auto& other : jobs) EXPECT_GE(r.start_ns, other[p - 1].end_ns) << r.name;
    }
  }
  // Unlink removed every file; the jobs removed the (empty) directory.
  EXPECT_FALSE(std::filesystem::exists(dir + "/shared"));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(MdWorkloadTest, ResultJsonRoundTripsAndRejectsGarbage) {
  std::vector<MdPhaseResult> in(2);
  in[0] = {"create", 10, 20, 3, {1.5, 2.5, 3.5}};
  in[1] = {"readdir", 30, 45, 7, {}};
  auto out = MdPhasesFromJson(nlohmann::json::parse(MdPhasesToJson(in).dump()));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].name, "create");
  EXPECT_EQ((*out)[0].end_ns, 20);
  EXPECT_EQ((*out)[0].lat_us, (std::vector<double>{1.5, 2.5, 3.5}));
  EXPECT_EQ((*out)[1].ops, 7u);
  EXPECT_FALSE(MdPhasesFromJson(nlohmann::json::object()).ok());
  EXPECT_FALSE(MdPhasesFromJson(nlohmann::json::parse(R"([{"name":"x"}])")).ok());
  EXPECT_FALSE(
      MdPhasesFromJson(nlohmann::json::parse(R"([{"name":1,"start_ns":"a","end_ns":0,"ops":0,"lat_us":[]}])")).ok());
}

TEST(MdBarrierTest, AttachToAMissingFileFails) {
  ros2::testing::TempDir tmp("md-test");
  const std::string& dir = tmp.path();
  EXPECT_FALSE(ProcessBarrier::Attach(dir + "/none").ok());
  EXPECT_FALSE(ProcessBarrier::Create(dir + "/zero", 0).ok());
  auto b = ProcessBarrier::Create(dir + "/one", 1);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->Wait().ok());  // a barrier of one never blocks
  EXPECT_FALSE(ProcessBarrier::Create(dir + "/one", 1).ok()) << "an existing barrier file is not reused";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace ros2::bench
