// Little-endian fields of the ofi worker's own frames (hello announce, large
// message announce, keepalive, sequence numbers) and the status of a failed
// libfabric call, shared by the worker's source files.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string_view>

#include <fmt/format.h>

#include "common/status.h"
#include "transport/ofi/fabric_library.h"

namespace ros2::transport::ofi {

inline Status FiStatus(std::string_view what, ssize_t rc) {
  return Status::IOError(fmt::format("transport ofi: {}: {} ({})", what, Fi().strerror(static_cast<int>(-rc)), rc));
}

inline void PutLe32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void PutLe64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t GetLe32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t GetLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace ros2::transport::ofi
