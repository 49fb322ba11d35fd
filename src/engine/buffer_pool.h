// BufferPool: 4 KiB-aligned I/O buffers for one target thread, recycled by
// power-of-two size class so the data path does not call the allocator per
// request. O_DIRECT I/O in VOS and RMA transfers both want aligned memory.
//
// Owned by one Target; Get() and the release of a PooledBuffer must happen on
// that target's thread (the pool is not thread-safe). Buffers above
// `max_pooled` bytes are allocated and freed directly. The pool must outlive
// every PooledBuffer it handed out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"

namespace ros2::engine {

class BufferPool;

// A buffer from a BufferPool; returns itself to the pool when destroyed. Move-only.
class PooledBuffer {
 public:
  PooledBuffer() = default;
  PooledBuffer(PooledBuffer&& other) noexcept;
  PooledBuffer& operator=(PooledBuffer&& other) noexcept;
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;
  ~PooledBuffer();

  // The requested size (the allocation may be larger).
  std::span<std::byte> span() const { return {data_, size_}; }
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  friend class BufferPool;
  PooledBuffer(BufferPool* pool, std::byte* data, size_t size, size_t capacity)
      : pool_(pool), data_(data), size_(size), capacity_(capacity) {}
  void Release();
  BufferPool* pool_ = nullptr;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

class BufferPool {
 public:
  static constexpr size_t kAlignment = 4096;

  // Keeps at most `max_cached_bytes` of idle buffers; pools sizes up to `max_pooled`.
  explicit BufferPool(size_t max_cached_bytes = size_t{256} << 20, size_t max_pooled = size_t{16} << 20);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer of at least `size` bytes (size may be 0), 4 KiB aligned.
  // NoSpace when the allocation fails.
  Result<PooledBuffer> Get(size_t size);

  size_t cached_bytes() const { return cached_bytes_; }
  uint64_t allocations() const { return allocations_; }

 private:
  friend class PooledBuffer;
  struct FreeDeleter {
    void operator()(std::byte* p) const;
  };
  using Block = std::unique_ptr<std::byte, FreeDeleter>;
  static size_t ClassOf(size_t capacity);  // index into free_
  void Return(std::byte* data, size_t capacity);

  size_t max_cached_bytes_;
  size_t max_pooled_;
  size_t cached_bytes_ = 0;
  uint64_t allocations_ = 0;
  std::vector<std::vector<Block>> free_;  // per size class
};

}  // namespace ros2::engine
