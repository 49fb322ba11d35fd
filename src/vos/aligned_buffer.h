// AlignedBuffer: an owned heap buffer aligned for O_DIRECT (4 KiB by default).
// A movable value; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>

namespace ros2::vos {

inline constexpr size_t kBlockSize = 4096;  // extent-store block: alignment of offsets, lengths, buffers

inline uint64_t AlignUp(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}
inline uint64_t AlignDown(uint64_t v, uint64_t a) {
  return v / a * a;
}
inline bool IsAligned(const void* p, size_t a) {
  return reinterpret_cast<uintptr_t>(p) % a == 0;
}

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // REQUIRES: size > 0. Aborts on allocation failure like operator new.
  explicit AlignedBuffer(size_t size, size_t alignment = kBlockSize)
      : data_(static_cast<std::byte*>(std::aligned_alloc(alignment, AlignUp(size, alignment)))), size_(size) {
    if (!data_) std::abort();
  }
  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }
  std::span<std::byte> span() { return {data_.get(), size_}; }
  void Zero() { std::memset(data_.get(), 0, size_); }

 private:
  struct FreeDeleter {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte[], FreeDeleter> data_;
  size_t size_ = 0;
};

}  // namespace ros2::vos
