// Shared segments (shared_segment.h): memfd creation and the process registry
// on the client side, validated mapping of a peer's segment on the server side.
#include "transport/shared_segment.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>

namespace ros2::transport {
namespace {

struct Registered {
  uint64_t length;
  uint64_t id;
  int fd;
};

// Live segments of this process by base address. `live` mirrors
// by_base.size() so that Find, on every bulk buffer of every call, skips the
// lock in a process that never made a segment; `generation` changes with every
// segment made or unmade, so a thread may keep its last answer without the
// lock while it holds (Find).
struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Registered> by_base;
  // Every foreign segment's id ever listed (ForeignSegment): none is listed
  // twice, and no SharedBuffer of ours is listed under one. Our own ids never
  // repeat (NewSegmentId).
  std::set<uint64_t> foreign_ids;
  std::atomic<size_t> live{0};
  std::atomic<uint64_t> generation{0};
};

Registry& TheRegistry() {
  static Registry* r = new Registry();  // never destroyed: buffers may outlive static destruction order
  return *r;
}

// Lists [base, base + entry.length) as segment entry.id (r.mu held).
void ListLocked(Registry& r, const std::byte* base, const Registered& entry) {
  r.by_base[reinterpret_cast<uintptr_t>(base)] = entry;
  r.live.store(r.by_base.size(), std::memory_order_relaxed);
  r.generation.fetch_add(1, std::memory_order_release);
}

}  // namespace

Result<std::unique_ptr<SharedBuffer>> SharedBuffer::Create(uint64_t length) {
  if (length == 0) return Status::InvalidArgument("shared buffer: length 0");
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (length > (uint64_t{1} << 46)) return Status::InvalidArgument(fmt::format("shared buffer: {} bytes", length));
  const uint64_t rounded = (length + page - 1) / page * page;
  std::unique_ptr<SharedBuffer> b(new SharedBuffer());
  b->id_ = NewSegmentId();
  const std::string name = segment::SegmentName(b->id_);
  b->fd_ = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (b->fd_ < 0) return Status::FromErrno(errno, "shared buffer: memfd_create " + name);
  if (::ftruncate(b->fd_, static_cast<off_t>(rounded)) != 0) {
    return Status::FromErrno(errno, fmt::format("shared buffer: sizing {} to {} bytes", name, rounded));
  }
  if (::fcntl(b->fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return Status::FromErrno(errno, "shared buffer: sealing " + name);
  }
  void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd_, 0);
  if (p == MAP_FAILED) return Status::FromErrno(errno, fmt::format("shared buffer: mapping {} bytes", rounded));
  b->base_ = static_cast<std::byte*>(p);
  b->length_ = rounded;
  Registry& r = TheRegistry();
  std::lock_guard lock(r.mu);
  // A foreign segment may have taken a number this sequence reaches later:
  // the memfd keeps its name, so such a buffer is simply not listed (its bulk
  // goes the way of ordinary memory).
  if (r.foreign_ids.contains(b->id_)) return b;
  ListLocked(r, b->base_, Registered{b->length_, b->id_, b->fd_});
  return b;
}

namespace {

// Takes [base, base + length) out of the registry (a no-op when not listed).
void Unlist(std::byte* base) {
  Registry& r = TheRegistry();
  std::lock_guard lock(r.mu);
  if (r.by_base.erase(reinterpret_cast<uintptr_t>(base)) == 0) return;
  r.live.store(r.by_base.size(), std::memory_order_relaxed);
  r.generation.fetch_add(1, std::memory_order_release);
}

}  // namespace

Result<std::unique_ptr<ForeignSegment>> ForeignSegment::Register(int fd, std::byte* base, uint64_t length) {
  char link[256];
  const std::string self = fmt::format("/proc/self/fd/{}", fd);
  const ssize_t n = ::readlink(self.c_str(), link, sizeof(link) - 1);
  if (n < 0) return Status::FromErrno(errno, "foreign segment: naming descriptor " + std::to_string(fd));
  const std::string_view name(link, static_cast<size_t>(n));
  const auto id = segment::SegmentIdOfLink(name);
  if (!id) return Status::InvalidArgument(fmt::format("foreign segment: '{}' is not a segment's memfd", name));
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) return Status::FromErrno(errno, fmt::format("foreign segment: reading the seals of '{}'", name));
  if ((seals & F_SEAL_SHRINK) == 0 || (seals & F_SEAL_GROW) == 0) {
    return Status::InvalidArgument(fmt::format("foreign segment: '{}' is not sealed against resizing", name));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::FromErrno(errno, fmt::format("foreign segment: sizing '{}'", name));
  if (length == 0 || static_cast<uint64_t>(st.st_size) < length) {
    return Status::InvalidArgument(
        fmt::format("foreign segment: '{}' has {} bytes, the mapping {}", name, st.st_size, length));
  }
  Registry& r = TheRegistry();
  std::lock_guard lock(r.mu);
  const bool live = std::any_of(r.by_base.begin(), r.by_base.end(), [&](const auto& e) { return e.second.id == *id; });
  if (live || !r.foreign_ids.insert(*id).second) {
    return Status::AlreadyExists(fmt::format("foreign segment: id {:#x} was listed before", *id));
  }
  ListLocked(r, base, Registered{length, *id, fd});
  std::unique_ptr<ForeignSegment> seg(new ForeignSegment());
  seg->base_ = base;
  seg->id_ = *id;
  return seg;
}

ForeignSegment::~ForeignSegment() {
  Unlist(base_);
}

SharedBuffer::~SharedBuffer() {
  if (base_ != nullptr) {
    Unlist(base_);
    ::munmap(base_, length_);
  }
  if (fd_ >= 0) ::close(fd_);
}

namespace segment {

std::optional<Location> Find(const void* addr, uint64_t length) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  Registry& r = TheRegistry();
  // Relaxed is enough: a buffer this thread passes for I/O was created before
  // (by this thread, or handed over with the synchronisation that implies).
  if (r.live.load(std::memory_order_relaxed) == 0) return std::nullopt;
  auto inside = [&](uintptr_t base, const Registered& seg) -> std::optional<Location> {
    if (a < base) return std::nullopt;
    const uint64_t offset = a - base;
    if (offset > seg.length || length > seg.length - offset) return std::nullopt;
    return Location{wire::SegmentRef{seg.id, seg.fd}, offset};
  };
  // Every I/O thread asks about its own few buffers over and over: the last
  // segment it found stands while no segment was made or unmade since (a
  // buffer in I/O cannot be unmade meanwhile, see ~SharedBuffer). Without it,
  // every call of every thread took the process-wide lock.
  struct LastFound {
    uint64_t generation = ~uint64_t{0};
    uintptr_t base = 0;
    Registered seg{};
  };
  thread_local LastFound last;
  if (last.generation == r.generation.load(std::memory_order_acquire)) {
    if (auto hit = inside(last.base, last.seg)) return hit;
  }
  std::lock_guard lock(r.mu);
  auto it = r.by_base.upper_bound(a);
  if (it == r.by_base.begin()) return std::nullopt;
  --it;
  auto found = inside(it->first, it->second);
  if (found) last = LastFound{r.generation.load(std::memory_order_relaxed), it->first, it->second};
  return found;
}

PeerMapping::~PeerMapping() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

Result<std::byte*> PeerMapping::Range(uint64_t offset, uint64_t length) const {
  if (offset > size_ || length > size_ - offset) {
    return Status::InvalidArgument(
        fmt::format("segment {:#x}: range [{}, +{}) outside its {} bytes", id_, offset, length, size_));
  }
  return base_ + offset;
}

Result<std::shared_ptr<PeerMapping>> PeerMapping::Map(int pidfd, int32_t pid, const wire::SegmentRef& ref,
                                                      uint64_t max_size) {
  const std::string what = fmt::format("segment {:#x} (fd {} of pid {})", ref.id, ref.fd, pid);
  if (pidfd < 0) return Status::PermissionDenied(what + ": the client's process is not watched (no pidfd)");
  // A duplicate of the client's own descriptor, taken from the process the
  // pidfd names: nothing is opened, so no file system is asked anything (a
  // path under /proc/<pid>/fd would open the file again, and a file on a
  // FUSE mount would stall this thread in that open for the daemon's
  // timeout), and no other process's descriptors can be named.
  const int fd = static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd, ref.fd, 0));
  if (fd < 0) return Status::FromErrno(errno, "taking " + what);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // The seals first: F_GET_SEALS answers from the inode for memfds and
  // refuses (EINVAL) every other kind of file without calling into it, so
  // no check below can block on a file the client chose.
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    return errno == EINVAL ? Status::InvalidArgument(what + ": not a memfd")
                           : Status::FromErrno(errno, "reading the seals of " + what);
  }
  if ((seals & F_SEAL_SHRINK) == 0) return Status::InvalidArgument(what + ": not sealed against shrinking");
  // A memfd on tmpfs: one of hugetlbfs (MFD_HUGETLB) can fail a page fault
  // with SIGBUS when the huge page pool runs dry.
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0) return Status::FromErrno(errno, "inspecting " + what);
  if (fs.f_type != TMPFS_MAGIC) return Status::InvalidArgument(what + ": a memfd, but not on tmpfs (huge pages?)");
  // The name of what we took (not of what the number names now): a memfd
  // reads back as "/memfd:<name> (deleted)".
  char link[256];
  const std::string self = fmt::format("/proc/self/fd/{}", fd);
  const ssize_t n = ::readlink(self.c_str(), link, sizeof(link) - 1);
  if (n < 0) return Status::FromErrno(errno, "naming " + what);
  const std::string expect = "/memfd:" + SegmentName(ref.id) + " (deleted)";
  if (std::string_view(link, static_cast<size_t>(n)) != expect) {
    return Status::InvalidArgument(fmt::format("{}: the descriptor is '{}', not the segment", what,
                                               std::string_view(link, static_cast<size_t>(n))));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::FromErrno(errno, "sizing " + what);
  if (st.st_size <= 0) return Status::InvalidArgument(what + ": empty");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_size) {
    return Status::InvalidArgument(
        fmt::format("{}: {} bytes, more than the {} this server maps (max_segment_size)", what, size, max_size));
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Status::FromErrno(errno, "mapping " + what);
  std::shared_ptr<PeerMapping> m(new PeerMapping());
  m->base_ = static_cast<std::byte*>(p);
  m->size_ = size;
  m->id_ = ref.id;
  return m;
}

}  // namespace segment
}  // namespace ros2::transport
