// RocksDB value encodings of the VOS: value records (one per single-value
// version or array extent) and akey headers. Specified in docs/vos.md,
// "Record formats". Value types; thread-safe free functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"
#include "vos/vos.h"

namespace ros2::vos {

// One stored version: a single value or an array extent. Its data is either
// inline (in the record) or external (in the extent store at `offset`).
struct ValueRecord {
  uint64_t length = 0;       // data bytes
  uint32_t record_size = 1;  // arrays: bytes per record; single values: 1
  Checksums csum;            // chunked over the data; values[i] is the checksum of chunk csum_first + i
  uint64_t csum_first = 0;   // first chunk whose checksum was decoded (see ChecksumWindow)
  bool external = false;
  uint64_t offset = 0;           // external: byte offset in the extent store
  uint64_t alloc_len = 0;        // external: allocated bytes (length rounded up to the block size)
  std::string_view inline_data;  // inline: points into the decoded buffer
};

// Appends the encoding of `rec` (with `inline_data` when not external).
std::string EncodeValueRecord(const ValueRecord& rec, std::span<const std::byte> inline_data);
// The data bytes whose chunk checksums a decoder should keep (the fetch path
// only needs the chunks it reads; a large extent has hundreds).
struct ChecksumWindow {
  uint64_t begin = 0;
  uint64_t end = ~uint64_t{0};
};
inline constexpr ChecksumWindow kAllChecksums{};
inline constexpr ChecksumWindow kNoChecksums{0, 0};

// The chunks [first, last) of a `length`-byte value with `n` checksums of
// `chunk_size` bytes each that cover `window` (all n when chunk_size is 0).
inline std::pair<uint64_t, uint64_t> ChunksCovering(ChecksumWindow window, uint64_t length, uint32_t chunk_size,
                                                    uint64_t n) {
  if (chunk_size == 0 || n == 0) return {0, n};
  const uint64_t b = std::min(window.begin, length);
  const uint64_t e = std::min(window.end, length);
  const uint64_t first = std::min<uint64_t>(b / chunk_size, n);
  return {first, e <= b ? first : std::min<uint64_t>((e - 1) / chunk_size + 1, n)};
}

// The bytes of a version starting at record `index` that a fetch of records
// [lo, hi) of `record_size` bytes reads (the end saturates instead of overflowing).
inline ChecksumWindow FetchWindow(uint64_t lo, uint64_t hi, uint64_t index, uint64_t record_size) {
  const uint64_t records_to_hi = hi - index;
  return {lo > index ? (lo - index) * record_size : 0,
          records_to_hi > ~uint64_t{0} / record_size ? ~uint64_t{0} : records_to_hi * record_size};
}

// Decodes a record, keeping the checksums of the chunks that cover `window`;
// `encoded` must outlive the result (inline_data points into it). Corruption
// when malformed or when the record's own CRC fails (always checked in full).
Result<ValueRecord> DecodeValueRecord(std::string_view encoded, std::string_view what,
                                      ChecksumWindow window = kAllChecksums);

// Per-akey header: fixes the value type and record size of the akey and bounds
// the length of its extents (fetch uses it to find overlapping extents).
struct AkeyHeader {
  ValueType type = ValueType::kSingle;
  uint32_t record_size = 0;
  uint64_t max_extent_records = 0;  // longest extent ever written (records)
  uint64_t class_mask = 0;          // bit c: the akey has (or had) extents of size class c (keys.h)
  friend bool operator==(const AkeyHeader&, const AkeyHeader&) = default;
};
std::string EncodeAkeyHeader(const AkeyHeader& h);
Result<AkeyHeader> DecodeAkeyHeader(std::string_view encoded, std::string_view what);

// The value of a check record ('C', keys.h): the record keys of one commit
// group's extents, each as a 4-byte little-endian length and the key.
void AppendKeyToList(std::string* list, std::string_view key);
Result<std::vector<std::string>> DecodeKeyList(std::string_view encoded, std::string_view what);

}  // namespace ros2::vos
