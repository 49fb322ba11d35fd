// Reading the engine's read stages (ROS2_ENGINE_IO_STAGES=1, common/io_stages.h)
// from its metrics endpoint, for `ros2-bench posix --stages`: a scrape before
// and after a run, and the difference as the mean time a read spent in each
// stage and the device's mean queue depth over the run. Main thread only.
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/io_stages.h"
#include "common/status.h"

namespace ros2::bench {

// The engine's stage counters summed over its targets at one moment.
struct StageSnapshot {
  std::array<double, io_stages::kStages> seconds{};
  std::array<double, io_stages::kStages> reads{};
  double device_inflight_seconds = 0;
  std::chrono::steady_clock::time_point at;
};

// The endpoint "host:port" of the engine whose ready file is `ready_file`
// (its `metrics=` line); NotFound when it has none.
Result<std::string> EngineMetricsEndpoint(const std::string& ready_file);

// Scrapes `endpoint`; NotSupported when it has no stage counters (the
// engine was not started with ROS2_ENGINE_IO_STAGES=1).
Result<StageSnapshot> ScrapeStages(const std::string& endpoint);

// One line per stage, "  <stage> <mean us> us (<reads> reads)", then where
// the client's `client_in_flight` reads were on average over the run between
// the two snapshots: in the engine (its `total` stage integrated, i.e. the
// read rate x the mean total: Little's law), at the device (the I/Os the
// kernel held, integrated) and outside the engine (the rest: in the client
// process, fio, or the transport between them, including a request's wait
// for the target's next pass). Rates are over `io_seconds` (the time the
// client issued I/O; 0: the time between the snapshots, which also counts the
// client's start-up).
std::string FormatStages(const StageSnapshot& before, const StageSnapshot& after, int client_in_flight,
                         double io_seconds = 0);

// What the fio engine's event queues timed (ROS2_FIO_STAGES=<file>, one
// line per queue): "  client: ..." with the mean time from a read's
// submission to its completion callback (the client library, the transport
// both ways and the engine) and from the callback to fio taking it, then
// how many requests the jobs sent in how many transport messages (a batch is
// one), and how many of fio's reaps had to wait for a reply and how often the
// jobs' threads slept (each a wake-up); empty when the file holds no I/O.
std::string FormatClientStages(const std::string& file);

// The scheduler's view of one thread (/proc/<pid>/task/<tid>/schedstat):
// nanoseconds on a CPU, nanoseconds runnable waiting for one, and the waits.
struct ThreadSched {
  std::string name;
  double run_ns = 0;
  double wait_ns = 0;
  double waits = 0;
};
// Every thread of `pid` whose name starts with `prefix`, by thread id (empty
// when the process is gone).
std::map<pid_t, ThreadSched> SampleThreads(pid_t pid, const std::string& prefix);
// One line per thread present in both samples: the share of `wall` seconds it
// ran and waited runnable for a CPU, and its mean wait, e.g. a target thread
// that completions wait on while it waits for a CPU.
std::string FormatThreads(const std::map<pid_t, ThreadSched>& before, const std::map<pid_t, ThreadSched>& after,
                          double wall);

// The whole machine's CPU time (/proc/stat's "cpu" line) at one moment:
// seconds busy (user, nice, system, irq, softirq, steal; iowait counts as
// idle), of which interrupt handling (irq, softirq), over `cpus` CPUs.
struct MachineCpu {
  double busy_s = 0;
  double irq_s = 0;
  int cpus = 0;
  std::vector<double> per_cpu_busy_s;  // the same per CPU ("cpuN" lines), in /proc/stat's order
  std::chrono::steady_clock::time_point at;
};
Result<MachineCpu> SampleMachineCpu();

// Where the CPU of a run went, from two machine samples and the CPU seconds
// of the run's own processes (`own_s`: the engine's and fio's): the mean
// CPUs busy, those used by other processes (the machine's other load), and
// the interrupt time per I/O (interrupts are charged to whichever process
// runs, so it is counted apart; on a busy machine it includes other
// processes' interrupts).
struct RunCpu {
  double wall_s = 0;
  double busy_cpus = 0;
  double other_cpus = 0;  // busy minus the run's own processes
  double irq_us_per_io = 0;
  int cpus = 0;
  // How busy each CPU was (0..1): a scheduler that keeps the run's threads
  // together shows one CPU far busier than the other.
  std::vector<double> per_cpu_busy;
};
RunCpu CpuOfRun(const MachineCpu& before, const MachineCpu& after, double own_s, double ios);

// The CPU arithmetic of one small-read case: per read, the engine's CPU, the
// client's (fio and libros2) and local fio's, and the rate those costs allow
// on the machine's CPUs when nothing else runs (cpus / (engine + client)) and
// on the CPUs the other load left the engine run (cpus - other_cpus), each
// against local fio's measured rate. One line, "  cpu arithmetic ...".
std::string FormatCpuArithmetic(double engine_us, double client_us, double local_us, double local_iops,
                                const RunCpu& engine_run);

// What a wake-up costs on this machine, and where the scheduler runs the
// woken thread: two threads hand a token back and forth over event fds
// (each blocks in read(2) until the other writes), `rounds` round trips left
// to the scheduler, then as many with the threads pinned to two different
// CPUs. A read through the engine is such a hand-off twice (client to
// target, target to client), so these bound what the hand-offs cost a read
// (docs/engine.md, "What bounds small reads on a 2-vCPU machine").
struct WakeProbe {
  int rounds = 0;
  double same_cpu_share = 0;  // free round trips whose woken thread ran on the waker's CPU
  double free_rtt_us = 0;     // median round trip, threads where the scheduler put them
  double split_rtt_us = 0;    // median round trip, threads on two CPUs (0: fewer than two CPUs usable)
};
Result<WakeProbe> ProbeWakeUps(int rounds);
// One line, "posix bench: wake-ups: ...".
std::string FormatWakeProbe(const WakeProbe& p);

}  // namespace ros2::bench
