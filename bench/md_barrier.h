// ProcessBarrier: a pthread barrier shared by the job processes of
// `ros2-bench md`, so that every job starts a phase (create, stat, readdir,
// unlink) at the same moment, as mdtest's MPI barriers do. It lives in a small
// file mapped MAP_SHARED by every process: the suite creates and initializes
// it for N parties (Create) and destroys it when the jobs have exited; each
// job process maps it (Attach) and calls Wait between phases. A job that dies
// leaves the others waiting: the suite notices the exit and kills them. One
// object per process; Wait may be called from any one thread of it.
#pragma once

#include <pthread.h>

#include <string>

#include "common/status.h"

namespace ros2::bench {

class ProcessBarrier {
 public:
  // Makes `path` and initializes a barrier for `parties` processes.
  static Result<ProcessBarrier> Create(const std::string& path, unsigned parties);
  // Maps the barrier another process created at `path`.
  static Result<ProcessBarrier> Attach(const std::string& path);
  ProcessBarrier(ProcessBarrier&& other) noexcept;
  ProcessBarrier& operator=(ProcessBarrier&&) = delete;
  ProcessBarrier(const ProcessBarrier&) = delete;
  ProcessBarrier& operator=(const ProcessBarrier&) = delete;
  ~ProcessBarrier();

  // Blocks until all parties called Wait.
  Status Wait();

 private:
  ProcessBarrier(pthread_barrier_t* barrier, bool owner) : barrier_(barrier), owner_(owner) {}
  pthread_barrier_t* barrier_ = nullptr;
  bool owner_ = false;  // the creator destroys the barrier
};

}  // namespace ros2::bench
