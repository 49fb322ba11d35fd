#include "vos/extent_allocator.h"

#include <fmt/format.h>

#include "vos/aligned_buffer.h"

namespace ros2::vos {

ExtentAllocator::ExtentAllocator(uint64_t capacity) : capacity_(AlignDown(capacity, kBlockSize)) {
  if (capacity_ > 0) InsertFree(0, capacity_);
}

void ExtentAllocator::InsertFree(uint64_t offset, uint64_t len) {
  free_.emplace(offset, len);
  by_len_.emplace(len, offset);
}

void ExtentAllocator::EraseFree(std::map<uint64_t, uint64_t>::iterator it) {
  by_len_.erase({it->second, it->first});
  free_.erase(it);
}

Result<uint64_t> ExtentAllocator::Allocate(uint64_t len) {
  len = AlignUp(len, kBlockSize);
  if (len == 0 || len > capacity_ - used_) {
    return Status::NoSpace(
        fmt::format("vos: extent store full: {} bytes requested, {} of {} free", len, capacity_ - used_, capacity_));
  }
  // Next fit: the free run that starts at the cursor, unless that is the tail
  // (the run reaching the end of the address space) and a hole below fits: a
  // data file grows into the tail, so holes are filled first.
  auto it = free_.find(cursor_);
  const bool tail = it != free_.end() && it->first + it->second == capacity_;
  if (it == free_.end() || it->second < len || (tail && by_len_.lower_bound({len, 0})->second != it->first)) {
    auto best = by_len_.lower_bound({len, 0});
    if (best == by_len_.end()) {
      return Status::NoSpace(
          fmt::format("vos: extent store fragmented: no free run of {} bytes ({} bytes free, "
                      "largest run {})",
                      len, capacity_ - used_, largest_free()));
    }
    it = free_.find(best->second);
  }
  uint64_t offset = it->first;
  uint64_t run = it->second;
  EraseFree(it);
  if (run > len) InsertFree(offset + len, run - len);
  used_ += len;
  cursor_ = offset + len;
  return offset;
}

void ExtentAllocator::Free(uint64_t offset, uint64_t len) {
  len = AlignUp(len, kBlockSize);
  used_ -= len;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + len == next->first) {
    len += next->second;
    auto erase = next++;
    EraseFree(erase);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      len += prev->second;
      EraseFree(prev);
    }
  }
  InsertFree(offset, len);
}

Status ExtentAllocator::MarkAllocated(uint64_t offset, uint64_t len) {
  len = AlignUp(len, kBlockSize);
  if (offset % kBlockSize != 0 || len == 0 || offset > capacity_ || len > capacity_ - offset) {
    return Status::Corruption(
        fmt::format("vos: allocation [{}, +{}) is outside the extent store of {} bytes", offset, len, capacity_));
  }
  auto it = free_.upper_bound(offset);
  if (it == free_.begin()) {
    return Status::Corruption(fmt::format("vos: allocation [{}, +{}) overlaps another allocation", offset, len));
  }
  --it;
  uint64_t run_off = it->first;
  uint64_t run_len = it->second;
  if (offset + len > run_off + run_len) {
    return Status::Corruption(fmt::format("vos: allocation [{}, +{}) overlaps another allocation", offset, len));
  }
  EraseFree(it);
  if (offset > run_off) InsertFree(run_off, offset - run_off);
  if (run_off + run_len > offset + len) InsertFree(offset + len, run_off + run_len - offset - len);
  used_ += len;
  if (offset + len > cursor_) cursor_ = offset + len;
  return Status::Ok();
}

uint64_t ExtentAllocator::largest_free() const {
  return by_len_.empty() ? 0 : by_len_.rbegin()->first;
}

}  // namespace ros2::vos
