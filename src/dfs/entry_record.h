// The on-disk records of DFS (docs/dfs.md, "Layout"): the superblock record and
// the directory-entry record, both fixed-layout little-endian binary values
// with a version, stored as single values.
//
// EntryRecord is everything stat(2) needs about an entry except a file's size
// (which is derived from the file's object): type and permission bits, the
// entry's object id, owner, times, a file's chunk size, a device's number and
// a symlink's target. A create, rename or chmod writes one whole record in one
// update.
//
// Hard links: an entry with more than one name keeps its attributes in one
// shared *inode record* (the entry record's layout behind a u32 link count),
// and each name's directory entry is a *link stub* (flag kEntryFlagLinked:
// type bits and object id only). EntryRecord::linked tells which of the two
// an in-memory record stands for; FilesystemCore resolves stubs.
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
inline constexpr uint8_t kEntryFlagLinked = 1;       // a link stub: the attributes are in the inode record
inline constexpr size_t kInodeRecordHeaderSize = 4;  // u32 nlink, then an entry record
inline constexpr size_t kEntryRecordFixedSize = 76;
inline constexpr uint64_t kSuperblockMagic = 0x3153464432534f52ull;  // "ROS2DFS1" read little-endian
inline constexpr uint32_t kLayoutVersion = 1;
inline constexpr size_t kSuperblockRecordSize = 48;

struct EntryRecord {
  mode_t mode = 0;  // S_IFREG / S_IFDIR / S_IFLNK / S_IFIFO / S_IFCHR / S_IFBLK / S_IFSOCK + permission bits
  ObjectId oid;
  uid_t uid = 0;
  gid_t gid = 0;
  timespec atime{};
  timespec mtime{};
  timespec ctime{};
  uint64_t chunk_size = 0;     // regular files: bytes per chunk dkey
  uint64_t rdev = 0;           // character and block devices (stored in the chunk-size field)
  std::string symlink_target;  // symlinks only
  // Hard links: true when the entry's attributes live in a shared inode
  // record (its directory entries are link stubs); nlink is its link count.
  bool linked = false;
  uint32_t nlink = 1;
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

// A link stub for `record` (type bits and object id; the rest is in the inode record).
std::vector<std::byte> EncodeLinkStub(const EntryRecord& record);
// The shared inode record of a hard-linked entry: u32 nlink + the entry record.
std::vector<std::byte> EncodeInode(const EntryRecord& record);
// Decodes an inode record (linked = true, nlink from the header).
Result<EntryRecord> DecodeInode(std::span<const std::byte> bytes, std::string_view what);

std::vector<std::byte> EncodeSuperblock(const SuperblockRecord& record);
Result<SuperblockRecord> DecodeSuperblock(std::span<const std::byte> bytes);

}  // namespace ros2::dfs
