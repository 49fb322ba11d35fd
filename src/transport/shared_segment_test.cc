// The client side of shared segments: which buffer lies in which segment
// (segment::Find), including after segments come and go.
#include "transport/shared_segment.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ros2::transport {
namespace {

TEST(SharedSegmentTest, FindNamesTheSegmentAndTheOffset) {
  auto a = SharedBuffer::Create(3 * 4096);
  auto b = SharedBuffer::Create(4096);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int pass = 0; pass < 2; ++pass) {  // the second pass answers from the thread's last lookup
    auto in_a = segment::Find((*a)->data() + 5000, 100);
    ASSERT_TRUE(in_a.has_value());
    EXPECT_EQ(in_a->ref.id, (*a)->id());
    EXPECT_EQ(in_a->offset, 5000u);
    auto whole_b = segment::Find((*b)->data(), 4096);
    ASSERT_TRUE(whole_b.has_value());
    EXPECT_EQ(whole_b->ref.id, (*b)->id());
    EXPECT_NE(in_a->ref.fd, whole_b->ref.fd);
    EXPECT_FALSE(segment::Find((*a)->data() + 3 * 4096 - 10, 11).has_value()) << "a range past the end";
    auto past_b = segment::Find((*b)->data() + 4096, 1);  // may be where the next mapping (a) starts
    EXPECT_TRUE(!past_b.has_value() || past_b->ref.id != (*b)->id()) << "just past the end";
    int stack_byte = 0;
    EXPECT_FALSE(segment::Find(&stack_byte, 1).has_value()) << "ordinary memory";
  }
}

TEST(SharedSegmentTest, AnUnmadeSegmentIsForgotten) {
  std::byte* base = nullptr;
  uint64_t old_id = 0;
  {
    auto a = SharedBuffer::Create(2 * 4096);
    ASSERT_TRUE(a.ok());
    base = (*a)->data();
    old_id = (*a)->id();
    ASSERT_TRUE(segment::Find(base, 4096).has_value());  // now this thread's last answer
  }
  EXPECT_FALSE(segment::Find(base, 4096).has_value()) << "a destroyed segment was still found";
  // A new segment, quite possibly mapped at the same address, is found as itself.
  std::vector<std::unique_ptr<SharedBuffer>> keep;
  for (int i = 0; i < 8; ++i) {
    auto n = SharedBuffer::Create(2 * 4096);
    ASSERT_TRUE(n.ok());
    auto where = segment::Find((*n)->data(), 4096);
    ASSERT_TRUE(where.has_value());
    EXPECT_EQ(where->ref.id, (*n)->id());
    EXPECT_NE(where->ref.id, old_id);
    keep.push_back(std::move(*n));
  }
}

// Threads asking about their own buffers while another makes and unmakes
// segments always get their own segment's id.
TEST(SharedSegmentTest, LookupsStayRightWhileSegmentsComeAndGo) {
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> askers;
  for (int t = 0; t < 2; ++t) {
    askers.emplace_back([&] {
      auto mine = SharedBuffer::Create(4096);
      if (!mine.ok()) return void(++wrong);
      while (!stop.load()) {
        auto where = segment::Find((*mine)->data() + 64, 64);
        if (!where || where->ref.id != (*mine)->id() || where->offset != 64) ++wrong;
      }
    });
  }
  for (int i = 0; i < 300; ++i) {
    auto churn = SharedBuffer::Create(4096);
    ASSERT_TRUE(churn.ok());
  }
  stop = true;
  for (auto& t : askers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace ros2::transport
