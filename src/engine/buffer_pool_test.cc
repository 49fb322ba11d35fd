// BufferPool: alignment, reuse by size class, and the cache bound.
#include "engine/buffer_pool.h"

#include <gtest/gtest.h>

namespace ros2::engine {
namespace {

TEST(BufferPool, BuffersAreAlignedAndReused) {
  BufferPool pool(1 << 20, 1 << 20);
  std::byte* first = nullptr;
  {
    auto b = pool.Get(5000);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->size(), 5000u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % BufferPool::kAlignment, 0u);
    first = b->data();
  }
  EXPECT_EQ(pool.cached_bytes(), 8192u);
  auto again = pool.Get(8000);  // same 8 KiB class
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data(), first);
  EXPECT_EQ(pool.allocations(), 1u);
  auto zero = pool.Get(0);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->size(), 0u);
}

TEST(BufferPool, LargeBuffersAndFullCacheAreNotKept) {
  BufferPool pool(16384, 8192);
  {
    auto big = pool.Get(100000);
    ASSERT_TRUE(big.ok());
  }
  EXPECT_EQ(pool.cached_bytes(), 0u);
  {
    auto a = pool.Get(8192), b = pool.Get(8192), c = pool.Get(8192);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  }
  EXPECT_EQ(pool.cached_bytes(), 16384u);
}

TEST(BufferPool, MovedBufferReturnsOnce) {
  BufferPool pool;
  auto a = pool.Get(4096);
  ASSERT_TRUE(a.ok());
  PooledBuffer moved = std::move(*a);
  PooledBuffer other;
  other = std::move(moved);
  EXPECT_EQ(other.size(), 4096u);
  other = PooledBuffer();
  EXPECT_EQ(pool.cached_bytes(), 4096u);
}

}  // namespace
}  // namespace ros2::engine
