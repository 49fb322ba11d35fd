// Access rights of tenants on pools and containers, as a bitmask. The same bits
// are stored in ACL entries, travel in capabilities (one byte) and in the wire
// enum ros2.rpc.Right. Free functions and constants; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace ros2::control {

// The bitmask type and its bits are public (ros2/types.h): the same names here.
using ::ros2::kAllRights;
using ::ros2::kRightAdmin;
using ::ros2::kRightCreate;
using ::ros2::kRightDelete;
using ::ros2::kRightRead;
using ::ros2::kRightWrite;
using ::ros2::Rights;

// True when `granted` holds every bit of `required`.
inline bool HasRights(Rights granted, Rights required) {
  return (granted & required) == required;
}

// "rwcda" letters of the granted bits, "-" for none (e.g. "rw---").
std::string RightsToString(Rights rights);

// Accepts letters "r", "w", "c", "d", "a" in any order ("rw"), or words
// separated by commas ("read,write,create,delete,admin"), or "all"/"none".
Result<Rights> ParseRights(std::string_view text);

// InvalidArgument naming the unknown bits when `rights` has bits outside kAllRights.
Status ValidateRights(uint32_t rights, std::string_view what);

}  // namespace ros2::control
