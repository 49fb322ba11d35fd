#include "common/checksum.h"

#include <algorithm>
#include <cctype>
#include <string>

#include <fmt/format.h>
#include <isa-l/crc.h>
#include <isa-l/crc64.h>

namespace ros2 {

std::string_view ChecksumTypeName(ChecksumType type) {
  switch (type) {
    case ChecksumType::kNone: return "none";
    case ChecksumType::kCrc32c: return "crc32c";
    case ChecksumType::kCrc64: return "crc64";
  }
  return "unknown";
}

Result<ChecksumType> ParseChecksumType(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "none" || lower == "off") return ChecksumType::kNone;
  if (lower == "crc32c" || lower == "crc32" || lower == "on") return ChecksumType::kCrc32c;
  if (lower == "crc64") return ChecksumType::kCrc64;
  return Status::InvalidArgument(fmt::format("unknown checksum type '{}' (expected none, crc32c or crc64)", name));
}

uint32_t Crc32c(const void* data, size_t len, uint32_t seed) {
  // ISA-L's crc32_iscsi works on the raw register; the standard CRC32C applies
  // ~ on input and output.
  return ~crc32_iscsi(static_cast<unsigned char*>(const_cast<void*>(data)), static_cast<int>(len), ~seed);
}

uint64_t Crc64(const void* data, size_t len, uint64_t seed) {
  return crc64_ecma_refl(seed, static_cast<const uint8_t*>(data), len);
}

uint64_t ComputeChecksum(ChecksumType type, std::span<const std::byte> data) {
  switch (type) {
    case ChecksumType::kNone: return 0;
    case ChecksumType::kCrc32c: {
      // crc32_iscsi takes an int length: fold large buffers in 1 GiB steps.
      uint32_t crc = 0;
      size_t off = 0;
      do {
        size_t n = std::min<size_t>(data.size() - off, size_t{1} << 30);
        crc = Crc32c(data.data() + off, n, crc);
        off += n;
      } while (off < data.size());
      return crc;
    }
    case ChecksumType::kCrc64: return Crc64(data.data(), data.size());
  }
  return 0;
}

std::vector<uint64_t> ComputeChunkChecksums(ChecksumType type, std::span<const std::byte> data, size_t chunk_size) {
  std::vector<uint64_t> out;
  if (type == ChecksumType::kNone || chunk_size == 0) return out;
  out.reserve((data.size() + chunk_size - 1) / chunk_size);
  for (size_t off = 0; off < data.size(); off += chunk_size) {
    out.push_back(ComputeChecksum(type, data.subspan(off, std::min(chunk_size, data.size() - off))));
  }
  return out;
}

Status VerifyChunkChecksums(ChecksumType type, std::span<const std::byte> data, size_t chunk_size,
                            std::span<const uint64_t> expected, std::string_view what) {
  if (type == ChecksumType::kNone) return Status::Ok();
  if (chunk_size == 0) return Status::InvalidArgument(fmt::format("{}: checksum chunk size is 0", what));
  size_t chunks = (data.size() + chunk_size - 1) / chunk_size;
  if (expected.size() != chunks) {
    return Status::InvalidArgument(fmt::format("{}: {} checksums given for {} bytes in {}-byte chunks (need {})", what,
                                               expected.size(), data.size(), chunk_size, chunks));
  }
  for (size_t i = 0; i < chunks; ++i) {
    size_t off = i * chunk_size;
    uint64_t got = ComputeChecksum(type, data.subspan(off, std::min(chunk_size, data.size() - off)));
    if (got != expected[i]) {
      return Status::Corruption(fmt::format("{}: {} mismatch in chunk {} (bytes [{}, {})): stored {:#x}, computed {:#x}",
                                            what, ChecksumTypeName(type), i, off,
                                            std::min(off + chunk_size, data.size()), expected[i], got));
    }
  }
  return Status::Ok();
}

}  // namespace ros2
