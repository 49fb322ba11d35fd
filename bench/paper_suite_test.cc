// `ros2-bench paper --quick` end to end: every part of the paper's evaluation
// runs on a tiny scale (local fio, the obj suite's clusters, fio through the
// ROS2 engine on a ram and an nvme pool), and every output file the run lists
// exists and parses: the JSONL and CSV records, summary.json, the PNG figures
// and report.md.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/temp_dir.h"
#include "testing/test_cluster.h"

namespace ros2::bench {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

uint32_t BigEndian32(const std::string& s, size_t at) {
  return (static_cast<uint32_t>(static_cast<unsigned char>(s[at])) << 24) |
         (static_cast<uint32_t>(static_cast<unsigned char>(s[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<unsigned char>(s[at + 2])) << 8) |
         static_cast<uint32_t>(static_cast<unsigned char>(s[at + 3]));
}

// Splits one CSV line (the writer quotes fields that hold commas or quotes).
std::vector<std::string> CsvFields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  return out;
}

class PaperSuiteTest : public ::testing::Test {
 protected:
  ros2::testing::TempDir tmp_{"paper-suite"};
  const std::string dir_ = tmp_.path();
};

TEST_F(PaperSuiteTest, QuickRunWritesEveryOutputAndEachParses) {
  const std::string out = dir_ + "/out";
  ros2::testing::CommandResult r = ros2::testing::RunCommand(
      {ROS2_BENCH_PATH, "paper", "--quick", "--out", out, "--dir", dir_, "--no-progress"}, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.out << "\n" << r.err;

  // summary.json: every part ran, and lists the outputs.
  auto summary = nlohmann::json::parse(ReadFile(out + "/summary.json"), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  for (const char* part : {"fig3", "fig4", "fig5"}) {
    EXPECT_EQ(summary["parts"][part]["status"], "ok") << part << ": " << summary["parts"][part].dump();
  }
  EXPECT_EQ(summary["parts"]["peer"]["status"], "skipped");
  std::set<std::string> outputs;
  for (const auto& o : summary["outputs"]) outputs.insert(o.get<std::string>());
  for (const char* want :
       {"records.jsonl", "records.csv", "summary.json", "report.md", "fig3_media.png", "fig4_data_plane.png",
        "fig5_end_to_end_ram.png", "fig5_end_to_end_nvme.png", "fig6_cpu_per_io.png"}) {
    EXPECT_TRUE(outputs.count(want)) << want << " not listed";
  }
  ASSERT_FALSE(summary["targets"].empty());

  // records.jsonl: ros2-bench records, with every part's benches present.
  std::map<std::string, int> by_bench;
  std::set<std::string> fig4_cells, fig5_cells;
  size_t n_records = 0;
  {
    std::istringstream lines(ReadFile(out + "/records.jsonl"));
    std::string line;
    while (std::getline(lines, line)) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << "not JSON: " << line;
      ASSERT_TRUE(j.contains("bench") && j.contains("case") && j.contains("metric") && j.contains("value")) << line;
      EXPECT_TRUE(j["value"].is_number()) << line;
      ++n_records;
      const std::string bench = j["bench"];
      const std::string c = j["case"];
      ++by_bench[bench];
      if (bench == "obj" && j["metric"] == "iops") {
        EXPECT_GT(j["value"].get<double>(), 0) << line;
        for (const char* key : {"transport=tcp", "transport=shm"}) {
          for (const char* t : {"targets=1", "targets=2"}) {
            if (c.find(key) != std::string::npos && c.find(t) != std::string::npos)
              fig4_cells.insert(std::string(key) + t);
          }
        }
      }
      if (bench == "offload" && j["metric"] == "iops") {
        EXPECT_GT(j["value"].get<double>(), 0) << line;
        for (const char* cls : {"class=ram", "class=nvme"}) {
          for (const char* t : {"transport=tcp", "transport=shm"}) {
            if (c.find(cls) != std::string::npos && c.find(t) != std::string::npos)
              fig5_cells.insert(std::string(cls) + t);
          }
        }
      }
    }
  }
  // Fig. 3: 4 ops x 2 block sizes x 2 job counts, each with iops and mib_s.
  EXPECT_GE(by_bench["media"], 32);
  EXPECT_EQ(fig4_cells.size(), 4u) << "Fig. 4 needs tcp and shm at 1 and 2 targets";
  EXPECT_EQ(fig5_cells.size(), 4u) << "Fig. 5 needs tcp and shm on the ram and the nvme pool";
  EXPECT_GT(by_bench["paper"], 0) << "no target records";

  // records.csv: a header and one row per record, each with the header's width.
  {
    std::istringstream lines(ReadFile(out + "/records.csv"));
    std::string line;
    ASSERT_TRUE(std::getline(lines, line));
    auto head = CsvFields(line);
    ASSERT_GE(head.size(), 7u);
    EXPECT_EQ(head[0], "bench");
    EXPECT_EQ(head[3], "value");
    size_t rows = 0;
    while (std::getline(lines, line)) {
      auto f = CsvFields(line);
      ASSERT_EQ(f.size(), head.size()) << line;
      EXPECT_NO_THROW((void)std::stod(f[3])) << line;
      ++rows;
    }
    EXPECT_EQ(rows, n_records);
  }

  // The figures: PNG files with a plausible size, each shown in report.md.
  const std::string report = ReadFile(out + "/report.md");
  EXPECT_NE(report.find("## Targets"), std::string::npos);
  for (const auto& name : outputs) {
    ASSERT_TRUE(std::filesystem::exists(out + "/" + name)) << name;
    if (name.size() < 4 || name.substr(name.size() - 4) != ".png") continue;
    const std::string png = ReadFile(out + "/" + name);
    ASSERT_GT(png.size(), 24u) << name;
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << name;
    EXPECT_EQ(png.substr(12, 4), "IHDR") << name;
    EXPECT_GE(BigEndian32(png, 16), 300u) << name << " width";
    EXPECT_GE(BigEndian32(png, 20), 200u) << name << " height";
    EXPECT_NE(report.find("](" + name + ")"), std::string::npos) << name << " not shown in report.md";
  }

  // --redraw runs nothing and rebuilds the outputs from the same records.
  const std::string before = ReadFile(out + "/records.jsonl");
  ros2::testing::CommandResult rd =
      ros2::testing::RunCommand({ROS2_BENCH_PATH, "paper", "--redraw", "--out", out, "--no-progress"}, dir_);
  ASSERT_EQ(rd.exit_code, 0) << rd.out << "\n" << rd.err;
  EXPECT_EQ(ReadFile(out + "/records.jsonl"), before);
  auto again = nlohmann::json::parse(ReadFile(out + "/summary.json"), nullptr, false);
  ASSERT_FALSE(again.is_discarded());
  EXPECT_EQ(again["outputs"], summary["outputs"]);
  EXPECT_EQ(again["parts"]["fig3"]["status"], "ok");
}

}  // namespace
}  // namespace ros2::bench
