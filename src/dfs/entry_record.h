// The on-disk records of DFS (docs/dfs.md, "Layout"): the superblock record and
// the directory-entry record, both fixed-layout little-endian binary values
// with a version, stored as single values.
//
// EntryRecord is everything stat(2) needs about an entry except a file's size
// (which is derived from the file's object): type and permission bits, the
// entry's object id, owner, times, a file's chunk size and a symlink's target.
// A create, rename or chmod writes one whole record in one update.
//
// Value types and free functions; safe from any thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <span>
#include <string>
#include <vector>

#include "common/object_id.h"
#include "common/status.h"

namespace ros2::dfs {

inline constexpr uint8_t kEntryRecordVersion = 1;
inline constexpr size_t kEntryRecordFixedSize = 76;
inline constexpr uint64_t kSuperblockMagic = 0x3153464432534f52ull;  // "ROS2DFS1" read little-endian
inline constexpr uint32_t kLayoutVersion = 1;
inline constexpr size_t kSuperblockRecordSize = 48;

struct EntryRecord {
  mode_t mode = 0;  // S_IFREG / S_IFDIR / S_IFLNK + permission bits
  ObjectId oid;
  uid_t uid = 0;
  gid_t gid = 0;
  timespec atime{};
  timespec mtime{};
  timespec ctime{};
  uint64_t chunk_size = 0;     // regular files: bytes per chunk dkey
  std::string symlink_target;  // symlinks only
};

struct SuperblockRecord {
  uint32_t layout_version = kLayoutVersion;
  uint64_t chunk_size = 0;
  ObjectClass file_class = ObjectClass::kSX;
  ObjectClass dir_class = ObjectClass::kSX;
  ObjectId root;
};

std::vector<std::byte> EncodeEntry(const EntryRecord& record);
// Validates version, size, type bits and time ranges; Corruption names `what`.
Result<EntryRecord> DecodeEntry(std::span<const std::byte> bytes, std::string_view what);

std::vector<std::byte> EncodeSuperblock(const SuperblockRecord& record);
Result<SuperblockRecord> DecodeSuperblock(std::span<const std::byte> bytes);

}  // namespace ros2::dfs
