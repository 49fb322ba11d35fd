#include "bench/memory_bench_util.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

namespace ros2::bench {
namespace {

constexpr const char* kNrHugePages = "/proc/sys/vm/nr_hugepages";

// A /proc/meminfo field in its own unit (kB, or pages for the HugePages_ counts); -1 if absent.
int64_t MeminfoField(std::string_view name) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, name.size(), name) == 0 && line.size() > name.size() && line[name.size()] == ':') {
      return std::strtoll(line.c_str() + name.size() + 1, nullptr, 10);
    }
  }
  return -1;
}

Result<uint64_t> ReadNrHugePages() {
  std::ifstream in(kNrHugePages);
  uint64_t n = 0;
  if (!(in >> n)) return Status::IOError(fmt::format("cannot read {}", kNrHugePages));
  return n;
}

Status WriteNrHugePages(uint64_t n) {
  std::ofstream out(kNrHugePages);
  out << n << '\n';
  out.flush();
  if (!out) return Status::PermissionDenied(fmt::format("cannot write {} (needs root)", kNrHugePages));
  return Status::Ok();
}

}  // namespace

void FillPseudoRandom(std::byte* b, size_t bytes) {
  std::mt19937_64 gen(bytes);
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    uint64_t v = gen();
    std::memcpy(b + i, &v, 8);
  }
}

Result<PageKind> ParsePageKind(std::string_view name) {
  if (name == "small") return PageKind::kSmall;
  if (name == "huge") return PageKind::kHuge;
  return Status::InvalidArgument(fmt::format("unknown page kind '{}' (small | huge)", name));
}

std::string_view PageKindName(PageKind kind) {
  return kind == PageKind::kHuge ? "huge" : "small";
}

IoMemory::IoMemory(IoMemory&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(o.size_), mapped_(o.mapped_), kind_(o.kind_) {}

IoMemory& IoMemory::operator=(IoMemory&& o) noexcept {
  if (this != &o) {
    Release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = o.size_;
    mapped_ = o.mapped_;
    kind_ = o.kind_;
  }
  return *this;
}

IoMemory::~IoMemory() {
  Release();
}

void IoMemory::Release() {
  if (data_ == nullptr) return;
  if (kind_ == PageKind::kHuge) {
    ::munmap(data_, mapped_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
}

Result<IoMemory> AllocateIoMemory(size_t bytes, PageKind kind) {
  if (bytes == 0) return Status::InvalidArgument("bench memory: zero-length buffer");
  IoMemory m;
  m.size_ = bytes;
  m.kind_ = kind;
  if (kind == PageKind::kHuge) {
    if (MeminfoField("Hugepagesize") != static_cast<int64_t>(kHugePageSize >> 10)) {
      return Status::NotSupported("bench memory: the default huge page size is not 2 MiB");
    }
    m.mapped_ = (bytes + kHugePageSize - 1) / kHugePageSize * kHugePageSize;
    void* p = ::mmap(nullptr, m.mapped_, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
      return Status::FromErrno(
          errno, fmt::format("bench memory: mmap of {} bytes of huge pages ({} free)", m.mapped_, FreeHugePages()));
    }
    m.data_ = static_cast<std::byte*>(p);
  } else {
    void* p = nullptr;
    if (int rc = posix_memalign(&p, 4096, bytes); rc != 0) return Status::FromErrno(rc, "bench memory: posix_memalign");
    m.data_ = static_cast<std::byte*>(p);
  }
  FillPseudoRandom(m.data_, bytes);
  return m;
}

uint64_t FreeHugePages() {
  int64_t n = MeminfoField("HugePages_Free");
  return n > 0 ? static_cast<uint64_t>(n) : 0;
}

Result<HugePageReservation> HugePageReservation::Ensure(uint64_t pages) {
  HugePageReservation r;
  const uint64_t free_now = FreeHugePages();
  if (free_now >= pages) return r;
  ROS2_ASSIGN_OR_RETURN(uint64_t total, ReadNrHugePages());
  ROS2_RETURN_IF_ERROR(WriteNrHugePages(total + (pages - free_now)));
  r.restore_to_ = total;
  r.raised_ = true;
  if (FreeHugePages() < pages) {
    // The kernel found too little contiguous memory; r's destructor undoes the raise.
    return Status::NoSpace(fmt::format("bench memory: {} huge pages wanted, {} free after raising {}", pages,
                                       FreeHugePages(), kNrHugePages));
  }
  return r;
}

HugePageReservation::~HugePageReservation() {
  if (raised_) (void)WriteNrHugePages(restore_to_);
}

}  // namespace ros2::bench
