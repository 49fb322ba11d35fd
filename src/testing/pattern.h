// Deterministic pseudo-random bytes for tests: Pattern(n, seed) is the same
// sequence on every run and every machine (xorshift64), different for
// different seeds, so a read-back compares byte-exact against a fresh copy.
// Header-only; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ros2::testing {

inline std::vector<std::byte> Pattern(size_t n, uint64_t seed) {
  std::vector<std::byte> out(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<std::byte>(x);
  }
  return out;
}

}  // namespace ros2::testing
