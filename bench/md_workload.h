// The work of one job process of `ros2-bench md` (an mdtest-like metadata
// benchmark): in its directory (its own, or one shared by all jobs) it creates
// `files` empty files with O_CREAT|O_EXCL, stats each, lists the whole
// directory, and unlinks each, with a ProcessBarrier before every phase so all
// jobs run the same phase together. Each phase records its start and end on
// CLOCK_MONOTONIC (comparable across processes), its operation count (for
// readdir: the entries returned) and per-operation latencies.
//
// MdNamespace is the directory a job works in, behind one interface for the
// three modes: plain POSIX calls on a path (the local file system, or a
// ros2-fuse mount) and DFS through an in-process libros2 client. A job owns
// its namespace; one thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/md_barrier.h"
#include "common/status.h"

namespace ros2::bench {

inline constexpr std::array<const char*, 4> kMdPhases = {"create", "stat", "readdir", "unlink"};

class MdNamespace {
 public:
  virtual ~MdNamespace() = default;
  // Creates an empty file (O_CREAT | O_EXCL, mode 0644) and closes it.
  virtual Status Create(const std::string& name) = 0;
  // stat(2) of one file: its attributes, size included.
  virtual Status Stat(const std::string& name) = 0;
  // Reads the whole directory; returns the number of entries (no . and ..).
  virtual Result<uint64_t> ListDirectory() = 0;
  virtual Status Unlink(const std::string& name) = 0;
  // Removes the directory when it is empty and owned by this job (cleanup,
  // not timed); another job's or a non-empty directory is left alone.
  virtual Status RemoveDirectory() = 0;
};

// POSIX calls in directory `dir` (made with its parents when missing).
Result<std::unique_ptr<MdNamespace>> OpenPosixNamespace(const std::string& dir);

struct MdDfsTarget {
  std::string data_dir;  // the local cluster (control socket, admin secret)
  std::string pool;
  std::string container;
  std::string transport = "shm";
  std::string dir;  // absolute path in the container (made with its parents)
};
// DFS through its own libros2 client, pool and container handles.
Result<std::unique_ptr<MdNamespace>> OpenDfsNamespace(const MdDfsTarget& target);

struct MdJobSpec {
  int job = 0;
  uint64_t files = 0;  // this job's files
};

struct MdPhaseResult {
  std::string name;
  int64_t start_ns = 0;  // CLOCK_MONOTONIC
  int64_t end_ns = 0;
  uint64_t ops = 0;
  std::vector<double> lat_us;  // per operation (not for readdir)
};

// Runs the four phases (a barrier wait before each and after the last).
Result<std::vector<MdPhaseResult>> RunMdJob(MdNamespace& ns, const MdJobSpec& spec, ProcessBarrier& barrier);

nlohmann::json MdPhasesToJson(const std::vector<MdPhaseResult>& phases);
Result<std::vector<MdPhaseResult>> MdPhasesFromJson(const nlohmann::json& j);

}  // namespace ros2::bench
