// Driving a VOS store with one benchmark shape: shared by the vos suite (VOS
// against fio) and the obj suite (VOS-only baseline of the object path).
//
// VosCaseRunner keeps `qd` update or fetch ops in flight on one Vos through
// SubmitUpdate/SubmitFetch and Progress() on the calling thread, as an engine
// target drives its VOS. Data uses the layout of a DFS file: dkey = 1 MiB chunk
// number (ChunkKey), akey "0", array records, index = offset within the chunk.
// A runner borrows the Vos and the epoch counter; one thread uses it at a time.
// Its buffers (one region of qd x bs per Run) are of the PageKind it is given.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/memory_bench_util.h"
#include "common/object_id.h"
#include "common/status.h"
#include "vos/vos.h"

namespace ros2::bench {

constexpr uint64_t kChunk = uint64_t{1} << 20;  // bytes per dkey, as a DFS file chunk

inline bool IsWrite(const std::string& op) {
  return op == "write" || op == "randwrite";
}
inline bool IsRandom(const std::string& op) {
  return op == "randread" || op == "randwrite";
}

// The dkey of 1 MiB chunk `chunk`.
std::string ChunkKey(uint64_t chunk);

struct Shape {
  std::string op;
  uint64_t bs = 0;
  int qd = 1;
};

struct CaseStats {
  double seconds = 0;
  uint64_t ops = 0;
  uint64_t bytes = 0;
  std::vector<double> lat_us;
};

// Adds one round's figures to a case's total (ops, bytes and time summed, latencies pooled).
void MergeRound(CaseStats* total, CaseStats round);

// Drives VOS with `shape` for `runtime_s` seconds (or, when max_ops > 0, for
// exactly max_ops sequential ops from offset 0). Time spent in Aggregate() after
// the extent store filled up is excluded from the measurement.
class VosCaseRunner {
 public:
  VosCaseRunner(vos::Vos* vos, ObjectId oid, uint64_t size, uint32_t record_size, Epoch* next_epoch,
                PageKind pages = PageKind::kSmall, uint64_t seed = 42)
      : vos_(vos),
        oid_(oid),
        size_(size),
        record_size_(record_size),
        next_epoch_(next_epoch),
        pages_(pages),
        rng_(seed) {}

  Result<CaseStats> Run(const Shape& shape, double runtime_s, uint64_t max_ops);

  // Fetches with FetchOp::caller_verifies, as the engine fetches (the stored
  // checksums go to the client, which verifies); off (the default), VOS
  // verifies every fetched extent itself.
  void set_caller_verifies(bool on) { caller_verifies_ = on; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Slot {
    std::byte* buf;
    Clock::time_point started;
  };

  void Submit(int slot, uint64_t offset);
  void Complete(int slot, const Status& st);

  vos::Vos* vos_;
  ObjectId oid_;
  uint64_t size_;
  uint32_t record_size_;
  Epoch* next_epoch_;
  PageKind pages_;
  Shape shape_;
  IoMemory memory_;  // the slots' buffers
  std::vector<Slot> slots_;
  std::vector<int> free_slots_;
  CaseStats stats_;
  Status error_;
  bool need_space_ = false;
  bool caller_verifies_ = false;
  std::mt19937_64 rng_;
};

}  // namespace ros2::bench
