// End-to-end checksums on the client side of object I/O: the chunked checksums
// sent with an update, and the verification of fetched bytes against the
// checksums the engine returned. Free functions; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "common/checksum.h"
#include "common/status.h"
#include "object/obj_rpc.h"

namespace ros2::client {

// Chunked checksums of `data` (type kNone: none, the engine computes its own).
obj::Checksums ChecksumsForUpdate(ChecksumType type, uint32_t chunk_size, std::span<const std::byte> data);

// Verifies `data` (the bytes the engine pushed) against `csum`. With checking
// disabled (the container's checksum property is off) only a malformed shape is
// refused. Errors name `what`:
//   Protocol   — checksums missing, of an unknown type, or not fitting the data
//   Corruption — a chunk does not match (the data must not be used)
Status VerifyFetched(bool enabled, const obj::Checksums& csum, std::span<const std::byte> data, std::string_view what);

}  // namespace ros2::client
