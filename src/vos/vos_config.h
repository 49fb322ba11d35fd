// VOS configuration from YAML: the `vos` section of a target in the engine's
// configuration file. Keys (all optional, defaults from VosOptions):
//   class: nvme | ram          path: <directory>        block_device: <path>
//   data_size: 1GiB            inline_threshold: 4KiB   sync_commit: true
//   extent_sync: wal|group|dsync
//   checksum: crc32c|crc64|none  csum_chunk_size: 4KiB  io_depth: 128
// Free function; thread-safe.
#pragma once

#include <string_view>

#include <yaml-cpp/yaml.h>

#include "common/status.h"
#include "vos/vos.h"

namespace ros2::vos {

// Fills VosOptions from `node`; errors name `where` and the key
// ("engine.yaml: targets[0].vos.class: ...").
Result<VosOptions> ParseVosOptions(const YAML::Node& node, std::string_view where);

}  // namespace ros2::vos
