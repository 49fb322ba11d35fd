// ExtentAllocator: places extents in the extent store (data file or device).
//
// Space is handed out in multiples of the 4 KiB block. The allocator keeps the
// free space as a map of free runs (offset -> length) plus an index by length;
// an allocation continues after the previous one when the run there is large
// enough (sequential writes stay sequential) and is not the tail run while a
// hole below fits, otherwise takes the smallest run that fits (best fit; the
// tail, the run that reaches the end, is the largest, so it comes last: a data
// file that grows on demand only grows when no hole fits). Frees coalesce with neighbours. The state is persistent
// through RocksDB: every allocation of a committed extent has an 'A' record
// written in the same batch as the extent (docs/vos.md), and Open rebuilds the
// free map from those records with MarkAllocated. Owned by the VOS; target
// thread only.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "common/status.h"

namespace ros2::vos {

class ExtentAllocator {
 public:
  // Manages [0, capacity); capacity is rounded down to the block size.
  explicit ExtentAllocator(uint64_t capacity);

  // Returns the offset of `len` bytes (rounded up to the block size), or NoSpace.
  // REQUIRES: len > 0.
  Result<uint64_t> Allocate(uint64_t len);
  // Returns [offset, offset + len) to the free space. REQUIRES: it was allocated.
  void Free(uint64_t offset, uint64_t len);
  // Marks a recovered allocation as used; Corruption when it is out of range or
  // overlaps free-space that is already used.
  Status MarkAllocated(uint64_t offset, uint64_t len);

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_; }
  uint64_t largest_free() const;
  size_t free_runs() const { return free_.size(); }

 private:
  void InsertFree(uint64_t offset, uint64_t len);
  void EraseFree(std::map<uint64_t, uint64_t>::iterator it);

  uint64_t capacity_;
  uint64_t used_ = 0;
  uint64_t cursor_ = 0;                             // where the previous allocation ended
  std::map<uint64_t, uint64_t> free_;               // offset -> length
  std::set<std::pair<uint64_t, uint64_t>> by_len_;  // (length, offset)
};

}  // namespace ros2::vos
