// RocksDB value encodings of the VOS: value records (one per single-value
// version or array extent) and akey headers. Specified in docs/vos.md,
// "Record formats". Value types; thread-safe free functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

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
};
std::string EncodeAkeyHeader(const AkeyHeader& h);
Result<AkeyHeader> DecodeAkeyHeader(std::string_view encoded, std::string_view what);

}  // namespace ros2::vos
