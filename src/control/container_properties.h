// Container properties: parsing the textual properties of a create request
// into rpc::ContainerProperties, with defaults and validation.
//
// Keys (every one optional): "oclass" (S1, SX, RP_2G1, RP_3G1, RP_2GX,
// RP_3GX; default SX), "rd_fac" (0, 1 or 2: the engine losses the container's
// objects must survive; default 0; the default class must survive them),
// "checksum" (on/off; default on), "chunk_size" (a size such as 1MiB, a
// multiple of 4 KiB between 4 KiB and 64 MiB; default 1 MiB), "encryption"
// (aes-256-gcm or off, "on" an alias of aes-256-gcm; default off),
// "encryption_key_id" (the name of the key, only with encryption; no key
// material ever reaches the control plane), "layout" (POSIX or plain; default
// POSIX). Unknown keys
// and bad values are InvalidArgument naming the key and the value. Free
// functions; thread-safe.
#pragma once

#include <map>
#include <string>

#include "common/status.h"
#include "ros2/common.pb.h"

namespace ros2::control {

inline constexpr uint64_t kDefaultChunkSize = 1 << 20;

rpc::ContainerProperties DefaultContainerProperties();
Result<rpc::ContainerProperties> ParseContainerProperties(const std::map<std::string, std::string>& props);

}  // namespace ros2::control
