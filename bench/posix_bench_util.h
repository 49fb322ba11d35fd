// fio runs of `ros2-bench posix` with arbitrary arguments, whose JSON report
// is parsed by ParseFioJson (the cluster and the mount it runs against come
// from cluster_bench_util.h). Main thread of the suite; failures are Status
// values quoting fio's stderr.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/fio_bench_util.h"
#include "common/status.h"

// Own namespace: other suites have helpers of the same names.
namespace ros2::bench::posix {

// Runs fio with `args` (everything but the output options) and parses its JSON
// report (written to a file in `scratch`, so library noise on stdout cannot
// corrupt it). `limit_s` bounds the run. `env` is added to fio's environment
// (e.g. ROS2_AGENT_SOCKET for offload mode). IOError quotes fio's stderr.
Result<FioResult> RunFioArgs(const std::vector<std::string>& args, const std::string& scratch, double limit_s,
                             const std::vector<std::pair<std::string, std::string>>& env = {});

}  // namespace ros2::bench::posix
