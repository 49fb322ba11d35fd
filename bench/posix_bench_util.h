// fio runs of `ros2-bench posix` with arbitrary arguments, whose JSON report
// is parsed by ParseFioJson (the cluster and the mount it runs against come
// from the harness, src/testing/local_cluster.h). Main thread of the suite; failures are Status
// values quoting fio's stderr.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/harness.h"
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

// --- shared by the suites that drive fio through the ROS2 ioengine (posix, offload) ---

// read and randread (the ops whose files are prefilled and whose figures are fio's read side).
bool IsReadOp(const std::string& op);

// The median (0 for an empty sample).
double MedianOf(std::vector<double> v);

// The fio job arguments of one case: job name "r" (reads, time-based over
// files of `read_size` bytes a job, which PrefillReadFiles writes) or "w"
// (writes of `write_total` bytes split over the jobs), `op`, `bs`, `qd`,
// `jobs`, group reporting, `runtime_s` (the cap for writes).
std::vector<std::string> FioCaseArgs(const std::string& op, uint64_t bs, int qd, int jobs, double runtime_s,
                                     uint64_t read_size, uint64_t write_total);

// A pool holding every target's shard: `targets` x `shard_size` ("1GiB" -> "2GiB").
std::string PoolSizeFor(const std::string& shard_size, int targets);

// Creates container `name` in `pool` and writes 16 MiB through the ioengine
// (`engine_args` address that container), untimed: a target creates a
// container's shard (and zero-fills its data file) on its first request,
// which must not land inside a timed case; 16 chunks reach every target.
Status CreateWarmContainer(const LocalCluster& cluster, const std::string& pool, const std::string& name,
                           std::vector<std::string> engine_args, const std::string& scratch);

// `cont destroy`; a failure is only logged (the suite goes on).
void DestroyContainerLogged(const LocalCluster& cluster, const std::string& pool, const std::string& name);

// Writes `jobs` read files of `size` bytes each (fio job name "r", 1 MiB
// sequential at `qd`) through the ioengine; checks every byte was written.
Status PrefillReadFiles(std::vector<std::string> engine_args, int qd, int jobs, uint64_t size,
                        const std::string& scratch);

}  // namespace ros2::bench::posix
