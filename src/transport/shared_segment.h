// Shared segments: client memory the engine maps and copies into directly.
//
// A SharedBuffer is an anonymous shared-memory file (memfd) the client creates,
// seals against shrinking and maps. While it lives it is listed in a
// process-wide registry, so a bulk buffer inside it travels as a kSegment
// descriptor (segment id, the client's fd number, offset) instead of an address
// for cross-memory attach. A server that proved the client's pid (the same
// proof as cma) opens the segment through /proc/<pid>/fd/<fd>, checks that it
// is the memfd of that id, sealed, and large enough, maps it once per
// connection, and then moves bulk with a memcpy — or hands the mapped range to
// its storage so that a fetch lands in the client's buffer with no copy of its
// own. process_vm_readv/writev, the cma path, runs well below memcpy speed
// (docs/transport.md, "Shared segments").
//
// The seal (F_SEAL_SHRINK | F_SEAL_GROW) is what makes the mapping safe for the
// server: a client cannot truncate the file under it (a SIGBUS in the engine).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/segment_name.h"
#include "common/status.h"
#include "transport/wire.h"

namespace ros2::transport {

// Client side: one shared segment, unmapped and closed on destruction.
// Thread-safe to use from any thread; the registry is process-wide.
class SharedBuffer {
 public:
  // A segment of `length` bytes (rounded up to whole pages), zero-filled.
  static Result<std::unique_ptr<SharedBuffer>> Create(uint64_t length);
  ~SharedBuffer();
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;

  std::byte* data() const { return base_; }
  uint64_t size() const { return length_; }
  uint64_t id() const { return id_; }

 private:
  SharedBuffer() = default;
  std::byte* base_ = nullptr;
  uint64_t length_ = 0;
  uint64_t id_ = 0;
  int fd_ = -1;
};

// Memory this process mapped from a memfd another process made and handed
// over (ros2-agent's mapping of a host session's region, docs/agent.md),
// listed in the registry like a SharedBuffer, so bulk inside it travels as a
// kSegment reference and the server copies straight to and from it. The
// memfd must be named as a segment (SegmentName) with an id this process has
// never listed before (the server keeps its mappings by id, so a reused id
// could find another memfd's old mapping), and be sealed against shrinking
// and growing. The mapping stays the caller's: it must cover [base, base +
// length) from offset 0 of the file and outlive this object, which unlists it.
class ForeignSegment {
 public:
  static Result<std::unique_ptr<ForeignSegment>> Register(int fd, std::byte* base, uint64_t length);
  ~ForeignSegment();
  ForeignSegment(const ForeignSegment&) = delete;
  ForeignSegment& operator=(const ForeignSegment&) = delete;
  uint64_t id() const { return id_; }

 private:
  ForeignSegment() = default;
  std::byte* base_ = nullptr;
  uint64_t id_ = 0;
};

namespace segment {

// The segment reference and offset of [addr, addr + length) if that range lies
// inside one live SharedBuffer of this process.
struct Location {
  wire::SegmentRef ref;
  uint64_t offset = 0;
};
std::optional<Location> Find(const void* addr, uint64_t length);

// Segment names and ids (common/segment_name.h).
using ros2::SegmentIdOfLink;
using ros2::SegmentName;

// Server side: a client's segment mapped into this process.
class PeerMapping {
 public:
  ~PeerMapping();
  PeerMapping(const PeerMapping&) = delete;
  PeerMapping& operator=(const PeerMapping&) = delete;
  uint64_t id() const { return id_; }
  uint64_t size() const { return size_; }
  // The mapped range [offset, offset + length), or InvalidArgument when it
  // does not lie inside the segment.
  Result<std::byte*> Range(uint64_t offset, uint64_t length) const;

  // Takes the descriptor `ref.fd` of the process `pidfd` names (pid `pid`,
  // for messages) with pidfd_getfd, opening nothing, and maps it. Refuses
  // (clear error, nothing mapped) anything that is not a sealed ros2 memfd
  // with that id, checking the seals before anything else so that no check
  // calls into another kind of file, and (InvalidArgument) a segment of more
  // than `max_size` bytes: a client must not make the server map whatever
  // size it chose (address space is a shared resource of every tenant).
  static Result<std::shared_ptr<PeerMapping>> Map(int pidfd, int32_t pid, const wire::SegmentRef& ref,
                                                  uint64_t max_size);

 private:
  PeerMapping() = default;
  std::byte* base_ = nullptr;
  uint64_t size_ = 0;
  uint64_t id_ = 0;
};

}  // namespace segment
}  // namespace ros2::transport
