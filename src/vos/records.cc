#include "vos/records.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace ros2::vos {
namespace {

constexpr uint8_t kFormatVersion = 1;
constexpr uint8_t kFlagExternal = 1;

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool GetLe(std::string_view* in, int bytes, uint64_t* v) {
  if (in->size() < static_cast<size_t>(bytes)) return false;
  *v = 0;
  for (int i = 0; i < bytes; ++i) *v |= uint64_t{static_cast<uint8_t>((*in)[i])} << (8 * i);
  in->remove_prefix(bytes);
  return true;
}

int ChecksumWidth(ChecksumType t) {
  return t == ChecksumType::kCrc64 ? 8 : 4;
}

}  // namespace

std::string EncodeValueRecord(const ValueRecord& rec, std::span<const std::byte> inline_data) {
  std::string out;
  size_t n = rec.csum.type == ChecksumType::kNone ? 0 : rec.csum.values.size();
  out.reserve(48 + n * 8 + (rec.external ? 0 : inline_data.size()));
  out.push_back(static_cast<char>(kFormatVersion));
  out.push_back(static_cast<char>(rec.external ? kFlagExternal : 0));
  PutLe(&out, rec.length, 8);
  PutLe(&out, rec.record_size, 4);
  out.push_back(static_cast<char>(rec.csum.type));
  PutLe(&out, rec.csum.chunk_size, 4);
  PutLe(&out, n, 4);
  int width = ChecksumWidth(rec.csum.type);
  for (size_t i = 0; i < n; ++i) PutLe(&out, rec.csum.values[i], width);
  if (rec.external) {
    PutLe(&out, rec.offset, 8);
    PutLe(&out, rec.alloc_len, 8);
  }
  // The record CRC covers every field above (the inline data has its own checksums).
  PutLe(&out, Crc32c(out.data(), out.size()), 4);
  if (!rec.external) out.append(reinterpret_cast<const char*>(inline_data.data()), inline_data.size());
  return out;
}

Result<ValueRecord> DecodeValueRecord(std::string_view encoded, std::string_view what, ChecksumWindow window) {
  auto bad = [&](std::string_view why) {
    return Status::Corruption(fmt::format("vos: {}: malformed value record: {}", what, why));
  };
  std::string_view in = encoded;
  ValueRecord rec;
  uint64_t v = 0;
  if (!GetLe(&in, 1, &v) || v != kFormatVersion) return bad("unknown format version");
  uint64_t flags = 0;
  if (!GetLe(&in, 1, &flags)) return bad("truncated");
  rec.external = (flags & kFlagExternal) != 0;
  if (!GetLe(&in, 8, &rec.length)) return bad("truncated");
  if (!GetLe(&in, 4, &v)) return bad("truncated");
  rec.record_size = static_cast<uint32_t>(v);
  if (!GetLe(&in, 1, &v) || v > static_cast<uint64_t>(ChecksumType::kCrc64)) return bad("bad checksum type");
  rec.csum.type = static_cast<ChecksumType>(v);
  if (!GetLe(&in, 4, &v)) return bad("truncated");
  rec.csum.chunk_size = static_cast<uint32_t>(v);
  uint64_t n = 0;
  if (!GetLe(&in, 4, &n) || n * 4 > in.size()) return bad("bad checksum count");
  int width = ChecksumWidth(rec.csum.type);
  if (n * width > in.size()) return bad("truncated checksums");
  const auto [first, last] = ChunksCovering(window, rec.length, rec.csum.chunk_size, n);  // last: one past
  rec.csum_first = first;
  rec.csum.values.resize(last - first);
  const auto* p = reinterpret_cast<const unsigned char*>(in.data()) + first * width;
  for (uint64_t i = 0; i < last - first; ++i, p += width) {
    uint64_t v = 0;
    for (int b = width - 1; b >= 0; --b) v = (v << 8) | p[b];  // little-endian; compilers fold this into a load
    rec.csum.values[i] = v;
  }
  in.remove_prefix(n * width);
  if (rec.external) {
    if (!GetLe(&in, 8, &rec.offset) || !GetLe(&in, 8, &rec.alloc_len)) return bad("truncated location");
  }
  size_t covered = encoded.size() - in.size();
  uint64_t stored_crc = 0;
  if (!GetLe(&in, 4, &stored_crc)) return bad("truncated record crc");
  uint32_t crc = Crc32c(encoded.data(), covered);
  if (crc != stored_crc) {
    return Status::Corruption(
        fmt::format("vos: {}: value record crc32c mismatch: stored {:#x}, computed {:#x}", what, stored_crc, crc));
  }
  if (rec.external) {
    if (!in.empty()) return bad("trailing bytes after an external record");
    if (rec.alloc_len < rec.length) return bad("allocation shorter than the data");
  } else {
    if (in.size() != rec.length) return bad("inline data length differs from the recorded length");
    rec.inline_data = in;
  }
  if (rec.csum.type != ChecksumType::kNone) {
    if (rec.csum.chunk_size == 0) return bad("zero checksum chunk size");
    uint64_t chunks = (rec.length + rec.csum.chunk_size - 1) / rec.csum.chunk_size;
    if (chunks != n) return bad("checksum count does not fit the length");
  }
  return rec;
}

std::string EncodeAkeyHeader(const AkeyHeader& h) {
  std::string out;
  out.push_back(static_cast<char>(kFormatVersion));
  out.push_back(static_cast<char>(h.type));
  PutLe(&out, h.record_size, 4);
  PutLe(&out, h.max_extent_records, 8);
  PutLe(&out, h.class_mask, 8);
  return out;
}

Result<AkeyHeader> DecodeAkeyHeader(std::string_view encoded, std::string_view what) {
  std::string_view in = encoded;
  AkeyHeader h;
  uint64_t v = 0;
  if (!GetLe(&in, 1, &v) || v != kFormatVersion || !GetLe(&in, 1, &v) ||
      (v != static_cast<uint64_t>(ValueType::kSingle) && v != static_cast<uint64_t>(ValueType::kArray))) {
    return Status::Corruption(fmt::format("vos: {}: malformed akey header", what));
  }
  h.type = static_cast<ValueType>(v);
  if (!GetLe(&in, 4, &v) || !GetLe(&in, 8, &h.max_extent_records) || !GetLe(&in, 8, &h.class_mask) || !in.empty()) {
    return Status::Corruption(fmt::format("vos: {}: malformed akey header", what));
  }
  h.record_size = static_cast<uint32_t>(v);
  return h;
}

void AppendKeyToList(std::string* list, std::string_view key) {
  PutLe(list, key.size(), 4);
  list->append(key);
}

Result<std::vector<std::string>> DecodeKeyList(std::string_view encoded, std::string_view what) {
  std::string_view in = encoded;
  std::vector<std::string> keys;
  while (!in.empty()) {
    uint64_t len = 0;
    if (!GetLe(&in, 4, &len) || len == 0 || len > in.size()) {
      return Status::Corruption(
          fmt::format("vos: {}: malformed key list at byte {}", what, encoded.size() - in.size()));
    }
    keys.emplace_back(in.substr(0, len));
    in.remove_prefix(len);
  }
  return keys;
}

}  // namespace ros2::vos
