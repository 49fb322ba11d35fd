#include "common/uuid.h"

#include <openssl/rand.h>

#include <cstdio>

#include <fmt/format.h>

namespace ros2 {

Uuid Uuid::Generate() {
  Uuid u;
  if (RAND_bytes(u.bytes_.data(), static_cast<int>(u.bytes_.size())) != 1) {
    // OpenSSL's CSPRNG failing means the process cannot be trusted to make
    // identifiers at all; fall back to /dev/urandom rather than return a nil UUID.
    FILE* f = std::fopen("/dev/urandom", "rb");
    if (f != nullptr) {
      size_t n = std::fread(u.bytes_.data(), 1, u.bytes_.size(), f);
      (void)n;
      std::fclose(f);
    }
  }
  u.bytes_[6] = static_cast<uint8_t>((u.bytes_[6] & 0x0f) | 0x40);  // version 4
  u.bytes_[8] = static_cast<uint8_t>((u.bytes_[8] & 0x3f) | 0x80);  // RFC 4122 variant
  return u;
}

Uuid Uuid::FromBytes(const std::array<uint8_t, 16>& bytes) {
  Uuid u;
  u.bytes_ = bytes;
  return u;
}

bool Uuid::IsNil() const {
  for (uint8_t b : bytes_) {
    if (b != 0) return false;
  }
  return true;
}

std::string Uuid::ToString() const {
  const auto& b = bytes_;
  return fmt::format("{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
                     b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                     b[15]);
}

Result<Uuid> Uuid::Parse(std::string_view text) {
  if (text.size() != 36) {
    return Status::InvalidArgument(fmt::format("'{}' is not a UUID: expected 36 characters, got {}", text, text.size()));
  }
  Uuid u;
  size_t out = 0;
  for (size_t i = 0; i < text.size();) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-') return Status::InvalidArgument(fmt::format("'{}' is not a UUID: expected '-' at {}", text, i));
      ++i;
      continue;
    }
    auto nibble = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    int hi = nibble(text[i]), lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) {
      return Status::InvalidArgument(fmt::format("'{}' is not a UUID: bad hex digit near position {}", text, i));
    }
    u.bytes_[out++] = static_cast<uint8_t>(hi << 4 | lo);
    i += 2;
  }
  return u;
}

}  // namespace ros2
