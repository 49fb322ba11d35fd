// End-to-end checksums: CRC32C and CRC64 (ECMA, reflected) computed by ISA-L.
//
// A ChecksumType names the algorithm; every stored value and extent records which
// one it used, so a container may change its default without rewriting data.
// Chunked checksums split a buffer into fixed-size chunks (the last may be short)
// and produce one value per chunk, so a sub-range can be verified without reading
// the whole extent. Free functions; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ros2 {

// ChecksumType (kNone, kCrc32c, kCrc64) is defined in the public ros2/types.h.
std::string_view ChecksumTypeName(ChecksumType type);
// Parses "none", "crc32c" or "crc64" (case-insensitive).
Result<ChecksumType> ParseChecksumType(std::string_view name);

// CRC32C (Castagnoli, the iSCSI polynomial). Pass the previous result as `seed`
// to extend a checksum over several buffers.
uint32_t Crc32c(const void* data, size_t len, uint32_t seed = 0);
// CRC64 ECMA-182, reflected (the xz/ISA-L "ecma_refl" variant).
uint64_t Crc64(const void* data, size_t len, uint64_t seed = 0);

// Chunked checksums over a byte range, as updates carry them and VOS stores
// them: values[i] covers bytes [i * chunk_size, min((i + 1) * chunk_size, len))
// of that range. kNone has no chunk size and no values.
struct Checksums {
  ChecksumType type = ChecksumType::kNone;
  uint32_t chunk_size = 0;
  std::vector<uint64_t> values;
  friend bool operator==(const Checksums&, const Checksums&) = default;
};

// Checksum of `data` with `type`; 0 for kNone.
uint64_t ComputeChecksum(ChecksumType type, std::span<const std::byte> data);

// One checksum per `chunk_size` bytes of `data` (the last chunk may be short).
// REQUIRES: chunk_size > 0.
std::vector<uint64_t> ComputeChunkChecksums(ChecksumType type, std::span<const std::byte> data, size_t chunk_size);

// Verifies `data` against chunked checksums produced by ComputeChunkChecksums with
// the same type and chunk size. Returns Corruption naming `what` and the first bad
// chunk, InvalidArgument when the number of checksums does not fit the data.
Status VerifyChunkChecksums(ChecksumType type, std::span<const std::byte> data, size_t chunk_size,
                            std::span<const uint64_t> expected, std::string_view what);

}  // namespace ros2
