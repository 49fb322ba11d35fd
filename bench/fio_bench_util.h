// RunFio: runs one fio job as a child process and returns its parsed results.
//
// Used by every suite that compares against local fio in the same run (vos; later
// the fio engine and FUSE suites). The job is given as parameters, fio writes its
// JSON report (--output-format=json) to a scratch file, and the read and write
// sides are parsed with nlohmann_json. Failures come back as a Status: NotFound
// when fio is not installed, IOError with fio's stderr when fio fails, Protocol
// when its output cannot be parsed. Blocking; call from one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace ros2::bench {

struct FioJob {
  std::string name = "job";
  std::string rw = "read";  // read, write, randread, randwrite, rw, randrw
  uint64_t bs = 4096;
  int iodepth = 1;
  int numjobs = 1;
  uint64_t size = uint64_t{1} << 30;  // bytes per job's file region
  double runtime_s = 5;               // time_based: the job runs this long
  std::string filename;               // file or device; fio lays the file out when missing
  std::string ioengine = "io_uring";
  bool direct = true;
  std::vector<std::string> extra;  // more options, each "--key=value"
};

// One direction (read or write) of a fio job, summed over its jobs.
struct FioSide {
  uint64_t io_bytes = 0;
  uint64_t total_ios = 0;
  double iops = 0;
  double bw_bytes = 0;  // bytes per second
  // Total latency (submission to completion) percentiles when fio reported them
  // (RunFio asks for --lat_percentiles=1), otherwise completion latency.
  double lat_us_p50 = 0;
  double lat_us_p99 = 0;
  double clat_us_p50 = 0;  // completion latency (fio's clat_ns)
  double clat_us_p99 = 0;
  double lat_us_mean = 0;
};

struct FioResult {
  FioSide read;
  FioSide write;
  double usr_cpu_pct = 0;  // fio's own CPU use, percent of one CPU over the job
  double sys_cpu_pct = 0;
  // fio's usr + sys CPU seconds, summed over its jobs (each job's percentages
  // times its job_runtime): the client side's CPU, whatever the group reporting.
  double cpu_s = 0;
  std::string command;  // the command line that ran, for the record
};

// Runs `job` and waits for it (runtime plus a generous margin for layout).
Result<FioResult> RunFio(const FioJob& job);

// Parses fio's JSON report (exposed for reuse and testing).
Result<FioResult> ParseFioJson(const std::string& json_text);

}  // namespace ros2::bench
