// Shared segment names (segment_name.h).
#include "common/segment_name.h"

#include <atomic>
#include <random>

#include <fmt/format.h>

namespace ros2 {

uint64_t NewSegmentId() {
  static std::atomic<uint64_t> next{[] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32 | rd()) | 1;
  }()};
  return next.fetch_add(2);
}

std::string SegmentName(uint64_t id) {
  return fmt::format("ros2-seg-{:016x}", id);
}

std::optional<uint64_t> SegmentIdOfLink(std::string_view link) {
  constexpr std::string_view kPrefix = "/memfd:ros2-seg-";
  constexpr std::string_view kSuffix = " (deleted)";
  if (!link.starts_with(kPrefix) || !link.ends_with(kSuffix)) return std::nullopt;
  const std::string_view hex = link.substr(kPrefix.size(), link.size() - kPrefix.size() - kSuffix.size());
  if (hex.size() != 16) return std::nullopt;
  uint64_t id = 0;
  for (char c : hex) {
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    id = id << 4 | static_cast<uint64_t>(v);
  }
  if (id == 0) return std::nullopt;  // the wire refuses id 0
  return id;
}

}  // namespace ros2
