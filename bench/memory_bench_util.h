// Benchmark I/O memory: the buffers both sides of a storage comparison read
// into and write from.
//
// On this kind of VM the page size of an O_DIRECT buffer decides disk
// throughput: a 1 MiB request over 4 KiB pages reaches the virtio disk as 256
// scattered segments (more than its 254, so it is split), over huge pages as
// one. fio io_uring 1 MiB reads measured 1.3-2.0 GB/s from malloc'd buffers and
// 2.8-3.2 GB/s from huge pages (--iomem=shmhuge) in the same minutes, so a
// comparison is only fair when both sides use the same kind of page.
// kHuge maps hugetlb pages (MAP_HUGETLB): the kind fio can use too
// (--iomem=shmhuge); kSmall is ordinary 4 KiB-aligned heap memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace ros2::bench {

enum class PageKind { kSmall, kHuge };

constexpr size_t kHugePageSize = size_t{2} << 20;

// "small" | "huge".
Result<PageKind> ParsePageKind(std::string_view name);
std::string_view PageKindName(PageKind kind);

// A move-only, 4 KiB-aligned (kSmall) or 2 MiB-aligned (kHuge) buffer, filled
// with pseudo-random (incompressible) content so checksums do real work.
class IoMemory {
 public:
  IoMemory() = default;
  IoMemory(IoMemory&& o) noexcept;
  IoMemory& operator=(IoMemory&& o) noexcept;
  IoMemory(const IoMemory&) = delete;
  IoMemory& operator=(const IoMemory&) = delete;
  ~IoMemory();

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  PageKind kind() const { return kind_; }

 private:
  friend Result<IoMemory> AllocateIoMemory(size_t bytes, PageKind kind);
  void Release();

  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // kHuge: the mapping's length (size rounded up to huge pages)
  PageKind kind_ = PageKind::kSmall;
};

Result<IoMemory> AllocateIoMemory(size_t bytes, PageKind kind);

// Fills [b, b + bytes) with the pseudo-random content AllocateIoMemory gives
// (a whole number of 8-byte words; a shorter tail is left as it is).
void FillPseudoRandom(std::byte* b, size_t bytes);

// Huge pages free for this process: HugePages_Free of /proc/meminfo.
uint64_t FreeHugePages();

// Makes sure at least `pages` 2 MiB huge pages are free, raising
// vm.nr_hugepages by the shortfall when they are not (as DAOS's server does
// at start); the destructor puts the old value back. Fails, changing nothing,
// when the pages cannot be had (not root, or the kernel found too little
// contiguous memory).
class HugePageReservation {
 public:
  static Result<HugePageReservation> Ensure(uint64_t pages);
  HugePageReservation(HugePageReservation&& o) noexcept : restore_to_(o.restore_to_), raised_(o.raised_) {
    o.raised_ = false;
  }
  HugePageReservation& operator=(HugePageReservation&&) = delete;
  ~HugePageReservation();

  bool raised() const { return raised_; }

 private:
  HugePageReservation() = default;
  uint64_t restore_to_ = 0;
  bool raised_ = false;
};

}  // namespace ros2::bench
