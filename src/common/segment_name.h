// Names of shared segments: the memfds a process offers to its peers for
// bulk with no copy (transport/shared_segment.h; the offload host's ring
// region, client/offload/host_session.h). A segment's memfd is named "ros2-seg-" and
// the 16 lowercase hex digits of its id; the peer reads the id back from the
// owner's /proc/<pid>/fd link. Dependency-free so the offload host library,
// which links no transport, names its region the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ros2 {

// A new segment id for this process: odd (the wire refuses 0), never repeated
// within the process, and random across its restarts (a peer that still maps
// an old segment of a pid must not take a new one for it).
uint64_t NewSegmentId();
// The memfd name of segment `id` ("ros2-seg-<id in hex>", 16 digits).
std::string SegmentName(uint64_t id);
// The id a memfd named SegmentName(id) carries, from its /proc/<pid>/fd link
// ("/memfd:ros2-seg-<16 hex digits> (deleted)"); nullopt for any other name.
std::optional<uint64_t> SegmentIdOfLink(std::string_view link);

}  // namespace ros2
