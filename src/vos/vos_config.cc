#include "vos/vos_config.h"

#include <fmt/format.h>

#include "common/config.h"

namespace ros2::vos {

Result<VosOptions> ParseVosOptions(const YAML::Node& node, std::string_view where) {
  VosOptions o;
  if (node && !node.IsMap() && !node.IsNull()) {
    return Status::InvalidArgument(fmt::format("{}: expected a map of VOS settings", where));
  }
  static constexpr const char* kKnown[] = {
      "class",       "path",     "block_device",    "data_size", "inline_threshold", "sync_commit",
      "extent_sync", "checksum", "csum_chunk_size", "io_depth",  "inline_commit"};
  if (node && node.IsMap()) {
    for (const auto& kv : node) {
      std::string key = kv.first.as<std::string>();
      bool known = false;
      for (const char* k : kKnown) known = known || key == k;
      if (!known) return Status::InvalidArgument(fmt::format("{}.{}: unknown VOS setting", where, key));
    }
  }
  std::string cls = std::string(StorageClassName(o.storage_class));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "class", &cls));
  auto parsed_class = ParseStorageClass(cls);
  if (!parsed_class.ok()) return parsed_class.status().WithContext(fmt::format("{}.class", where));
  o.storage_class = *parsed_class;
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "path", &o.path));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "block_device", &o.block_device));
  ROS2_RETURN_IF_ERROR(ReadSize(node, where, "data_size", &o.data_size));
  ROS2_RETURN_IF_ERROR(ReadSize(node, where, "inline_threshold", &o.inline_threshold));
  ROS2_RETURN_IF_ERROR(ReadBool(node, where, "sync_commit", &o.sync_commit));
  ROS2_RETURN_IF_ERROR(ReadBool(node, where, "inline_commit", &o.inline_commit));
  std::string extent_sync = std::string(ExtentSyncName(o.extent_sync));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "extent_sync", &extent_sync));
  auto parsed_sync = ParseExtentSync(extent_sync);
  if (!parsed_sync.ok()) return parsed_sync.status().WithContext(fmt::format("{}.extent_sync", where));
  o.extent_sync = *parsed_sync;
  std::string csum = std::string(ChecksumTypeName(o.checksum));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "checksum", &csum));
  auto parsed_csum = ParseChecksumType(csum);
  if (!parsed_csum.ok()) return parsed_csum.status().WithContext(fmt::format("{}.checksum", where));
  o.checksum = *parsed_csum;
  uint64_t chunk = o.csum_chunk_size;
  ROS2_RETURN_IF_ERROR(ReadSize(node, where, "csum_chunk_size", &chunk));
  if (chunk == 0 || chunk > (uint64_t{1} << 30)) {
    return Status::InvalidArgument(fmt::format("{}.csum_chunk_size: {} not in [1, 1GiB]", where, chunk));
  }
  o.csum_chunk_size = static_cast<uint32_t>(chunk);
  uint64_t depth = o.io_depth;
  ROS2_RETURN_IF_ERROR(ReadUint(node, where, "io_depth", &depth));
  if (depth == 0 || depth > 4096) {
    return Status::InvalidArgument(fmt::format("{}.io_depth: {} not in [1, 4096]", where, depth));
  }
  o.io_depth = static_cast<uint32_t>(depth);
  if (o.storage_class == StorageClass::kNvme && o.path.empty()) {
    return Status::InvalidArgument(fmt::format("{}.path: required for the nvme class", where));
  }
  if (o.data_size < 4096) {
    return Status::InvalidArgument(fmt::format("{}.data_size: {} is below one 4 KiB block", where, o.data_size));
  }
  return o;
}

}  // namespace ros2::vos
