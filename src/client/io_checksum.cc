#include "client/io_checksum.h"

#include <fmt/format.h>

namespace ros2::client {

obj::Checksums ChecksumsForUpdate(ChecksumType type, uint32_t chunk_size, std::span<const std::byte> data) {
  obj::Checksums c;
  if (type == ChecksumType::kNone) return c;
  c.type = type;
  c.chunk_size = chunk_size;
  c.values = ComputeChunkChecksums(type, data, chunk_size);
  return c;
}

Status VerifyFetched(bool enabled, const obj::Checksums& csum, std::span<const std::byte> data, std::string_view what) {
  if (csum.type == ChecksumType::kNone) {
    if (!csum.values.empty() || csum.chunk_size != 0) {
      return Status::Protocol(fmt::format("{}: checksum type none with {} values", what, csum.values.size()));
    }
    if (enabled && !data.empty()) {
      return Status::Protocol(
          fmt::format("{}: the engine returned {} bytes without checksums, cannot verify them", what, data.size()));
    }
    return Status::Ok();
  }
  Status shape = obj::ValidateChecksums(csum, data.size(), what);
  if (!shape.ok()) return Status::Protocol(shape.message());
  if (!enabled) return Status::Ok();
  return VerifyChunkChecksums(csum.type, data, csum.chunk_size, csum.values, what);
}

}  // namespace ros2::client
