// Uuid: 128-bit identifiers for pools, containers, sessions and engines.
// Random (version 4) UUIDs from OpenSSL's CSPRNG; text form is the usual
// 8-4-4-4-12 lower-case hex. A value type, safe to copy between threads.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace ros2 {

class Uuid {
 public:
  Uuid() = default;  // the nil UUID
  static Uuid Generate();
  static Result<Uuid> Parse(std::string_view text);
  static Uuid FromBytes(const std::array<uint8_t, 16>& bytes);

  bool IsNil() const;
  std::string ToString() const;
  const std::array<uint8_t, 16>& bytes() const { return bytes_; }

  friend auto operator<=>(const Uuid&, const Uuid&) = default;

 private:
  std::array<uint8_t, 16> bytes_{};
};

}  // namespace ros2
