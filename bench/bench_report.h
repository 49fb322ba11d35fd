// The record format every ros2-bench suite prints, and the suite registry.
//
// With --json each measurement is one JSON object on its own line:
//   {"bench":"vos","case":"op=randread bs=4096 qd=32 class=nvme","metric":"iops",
//    "value":81234.5,"baseline":"fio-io_uring","baseline_value":90000.1,"ratio":0.90}
// `case` is space-separated key=value pairs; the keys used across suites are
// op (read, write, randread, randwrite), bs (bytes), qd, jobs, transport, class,
// mode. `metric` is e.g. iops, mib_s, lat_us_p50, lat_us_p99, cpu_s_per_gib.
// baseline/baseline_value/ratio appear only when a baseline ran in the same run;
// ratio is value / baseline_value. Without --json the same records print as an
// aligned table. Suites run on the main thread; the reporter is not thread-safe.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace ros2::bench {

struct Record {
  std::string bench;
  std::string case_desc;  // "op=read bs=1048576 qd=1 class=nvme"
  std::string metric;
  double value = 0;
  std::optional<std::string> baseline;  // name of the baseline, e.g. "fio-io_uring"
  std::optional<double> baseline_value;
};

class Reporter {
 public:
  explicit Reporter(bool json) : json_(json) {}
  // Prints the record immediately (JSON mode) or buffers it for the table.
  void Add(Record r);
  // Prints the table (text mode); no-op in JSON mode.
  void Flush();
  const std::vector<Record>& records() const { return records_; }

 private:
  bool json_;
  std::vector<Record> records_;
};

// Builds "k1=v1 k2=v2" from ordered pairs.
std::string CaseString(const std::vector<std::pair<std::string, std::string>>& kv);

// Percentile (0..100) of a sample, by nearest rank; 0 for an empty sample.
double Percentile(std::vector<double> sample, double pct);

// A suite registers itself with a sub-command of ros2-bench. `setup` adds the
// suite's options to its CLI11 sub-command; `run` executes after parsing and
// returns the process exit code.
struct Suite {
  std::string name;
  std::string help;
  std::function<void(CLI::App&)> setup;
  std::function<int(Reporter&)> run;
};

// Called from a static initializer in each suite file:
//   static const bool registered = ros2::bench::RegisterSuite({...});
bool RegisterSuite(Suite suite);
std::vector<Suite>& Suites();

}  // namespace ros2::bench
