// The client side of shared segments: which buffer lies in which segment
// (segment::Find), including after segments come and go, and memory another
// process made listed as a segment (ForeignSegment).
#include "transport/shared_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

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

// A memfd as another process hands one over: made, sized, sealed and mapped
// here, under the name given.
struct Memfd {
  int fd = -1;
  std::byte* base = nullptr;
  uint64_t size = 0;
  Memfd(const std::string& name, uint64_t bytes, unsigned seals) : size(bytes) {
    fd = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) return;
    if (seals != 0 && ::fcntl(fd, F_ADD_SEALS, seals) != 0) return;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) base = static_cast<std::byte*>(p);
  }
  ~Memfd() {
    if (base != nullptr) ::munmap(base, size);
    if (fd >= 0) ::close(fd);
  }
};

constexpr unsigned kResizeSeals = F_SEAL_SHRINK | F_SEAL_GROW;

TEST(SharedSegmentTest, AForeignSegmentIsFoundUnderItsNamesIdUntilUnlisted) {
  const uint64_t id = 0x5eed0000c0ffee01;
  Memfd m(segment::SegmentName(id), 4 * 4096, kResizeSeals);
  ASSERT_NE(m.base, nullptr);
  {
    auto seg = ForeignSegment::Register(m.fd, m.base, m.size);
    ASSERT_TRUE(seg.ok()) << seg.status().ToString();
    EXPECT_EQ((*seg)->id(), id);
    auto where = segment::Find(m.base + 8192, 4096);
    ASSERT_TRUE(where.has_value());
    EXPECT_EQ(where->ref.id, id);
    EXPECT_EQ(where->ref.fd, m.fd);
    EXPECT_EQ(where->offset, 8192u);
    EXPECT_FALSE(segment::Find(m.base + 8192, 3 * 4096).has_value()) << "a range past the end";
  }
  EXPECT_FALSE(segment::Find(m.base, 4096).has_value()) << "an unlisted foreign segment was still found";
  // Never listed twice: the server keeps its mappings by id.
  auto again = ForeignSegment::Register(m.fd, m.base, m.size);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Status::Code::kAlreadyExists) << again.status().ToString();
}

TEST(SharedSegmentTest, AForeignSegmentMustBeNamedSealedAndNew) {
  {
    Memfd m("ros2-offload", 4096, kResizeSeals);
    auto seg = ForeignSegment::Register(m.fd, m.base, m.size);
    ASSERT_FALSE(seg.ok());
    EXPECT_NE(seg.status().message().find("ros2-offload"), std::string::npos) << seg.status().ToString();
  }
  {
    Memfd m(segment::SegmentName(0x5eed0000c0ffee03), 4096, F_SEAL_SHRINK);  // may grow
    auto seg = ForeignSegment::Register(m.fd, m.base, m.size);
    ASSERT_FALSE(seg.ok());
    EXPECT_NE(seg.status().message().find("sealed"), std::string::npos) << seg.status().ToString();
  }
  {
    Memfd m(segment::SegmentName(0x5eed0000c0ffee05), 4096, kResizeSeals);
    auto seg = ForeignSegment::Register(m.fd, m.base, 2 * 4096);  // more than the file holds
    EXPECT_FALSE(seg.ok());
  }
  {
    // A live segment of ours: its id cannot be taken.
    auto ours = SharedBuffer::Create(4096);
    ASSERT_TRUE(ours.ok());
    Memfd m(segment::SegmentName((*ours)->id()), 4096, kResizeSeals);
    auto seg = ForeignSegment::Register(m.fd, m.base, m.size);
    ASSERT_FALSE(seg.ok());
    EXPECT_EQ(seg.status().code(), Status::Code::kAlreadyExists);
    auto where = segment::Find((*ours)->data(), 4096);
    ASSERT_TRUE(where.has_value());
    EXPECT_EQ(where->ref.id, (*ours)->id()) << "our segment is still found as itself";
  }
  EXPECT_EQ(segment::SegmentIdOfLink("/memfd:ros2-seg-00000000000000ff (deleted)"), 0xffu);
  EXPECT_FALSE(segment::SegmentIdOfLink("/memfd:ros2-seg-00000000000000FF (deleted)").has_value());
  EXPECT_FALSE(segment::SegmentIdOfLink("/memfd:ros2-seg-0000000000000000 (deleted)").has_value());
  EXPECT_FALSE(segment::SegmentIdOfLink("/memfd:ros2-seg-ff (deleted)").has_value());
  EXPECT_FALSE(segment::SegmentIdOfLink("/tmp/ros2-seg-00000000000000ff").has_value());
}

}  // namespace
}  // namespace ros2::transport
