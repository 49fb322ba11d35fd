// Aligned buffer recycling for target threads.
#include "engine/buffer_pool.h"

#include <bit>
#include <cstdlib>

#include <fmt/format.h>

namespace ros2::engine {

PooledBuffer::PooledBuffer(PooledBuffer&& other) noexcept
    : pool_(other.pool_), data_(other.data_), size_(other.size_), capacity_(other.capacity_) {
  other.pool_ = nullptr;
  other.data_ = nullptr;
}

PooledBuffer& PooledBuffer::operator=(PooledBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    pool_ = other.pool_;
    data_ = other.data_;
    size_ = other.size_;
    capacity_ = other.capacity_;
    other.pool_ = nullptr;
    other.data_ = nullptr;
  }
  return *this;
}

PooledBuffer::~PooledBuffer() {
  Release();
}

void PooledBuffer::Release() {
  if (pool_ != nullptr && data_ != nullptr) pool_->Return(data_, capacity_);
  pool_ = nullptr;
  data_ = nullptr;
}

void BufferPool::FreeDeleter::operator()(std::byte* p) const {
  std::free(p);
}

BufferPool::BufferPool(size_t max_cached_bytes, size_t max_pooled)
    : max_cached_bytes_(max_cached_bytes), max_pooled_(std::bit_ceil(std::max(max_pooled, kAlignment))) {
  free_.resize(ClassOf(max_pooled_) + 1);
}

BufferPool::~BufferPool() = default;

size_t BufferPool::ClassOf(size_t capacity) {
  return static_cast<size_t>(std::countr_zero(capacity) - std::countr_zero(kAlignment));
}

Result<PooledBuffer> BufferPool::Get(size_t size) {
  size_t capacity = std::max(size, kAlignment);
  capacity = capacity <= max_pooled_ ? std::bit_ceil(capacity) : (capacity + kAlignment - 1) / kAlignment * kAlignment;
  if (capacity <= max_pooled_) {
    auto& list = free_[ClassOf(capacity)];
    if (!list.empty()) {
      std::byte* p = list.back().release();
      list.pop_back();
      cached_bytes_ -= capacity;
      return PooledBuffer(this, p, size, capacity);
    }
  }
  void* p = nullptr;
  if (::posix_memalign(&p, kAlignment, capacity) != 0) {
    return Status::NoSpace(fmt::format("engine: cannot allocate a {}-byte I/O buffer", capacity));
  }
  ++allocations_;
  return PooledBuffer(this, static_cast<std::byte*>(p), size, capacity);
}

void BufferPool::Return(std::byte* data, size_t capacity) {
  if (capacity > max_pooled_ || cached_bytes_ + capacity > max_cached_bytes_) {
    std::free(data);
    return;
  }
  free_[ClassOf(capacity)].emplace_back(data);
  cached_bytes_ += capacity;
}

}  // namespace ros2::engine
