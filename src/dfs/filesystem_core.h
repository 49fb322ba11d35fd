// FilesystemCore: the state of one mounted DFS namespace and the record-level
// operations every public call is built from (fetch/insert/replace/remove of a
// directory entry, a file's size, object ids for new entries, permission
// checks). The public Filesystem (include/ros2/dfs.h) holds it by shared_ptr.
//
// Where attributes live: an entry's record is the single value under akey
// kEntryAkey of dkey <name> in its parent directory's object; the root's is
// under dkey kRootDkey of the superblock object. LocationOf() maps an Entry to
// that (object, dkey) pair, so the root needs no special case elsewhere.
//
// Thread-safe: the fields are immutable after mount except the object-id
// counter (atomic); every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dfs/entry_record.h"
#include "dfs/file_crypto.h"
#include "ros2/client.h"
#include "ros2/dfs.h"

namespace ros2::dfs {

inline constexpr std::string_view kEntryAkey = "e";        // a directory entry's record
inline constexpr std::string_view kSuperblockDkey = "sb";  // superblock object: the superblock record
inline constexpr std::string_view kRootDkey = "/";         // superblock object: the root's entry record
inline constexpr std::string_view kDataAkey = "d";         // a file chunk's byte array
// A directory object: dkey kDirTimesDkey (never an entry name) / akey
// kDirTimesAkey holds the directory's mtime and ctime as of its last change
// of entries (docs/dfs.md, "Times").
inline constexpr std::string_view kDirTimesDkey = ".";
inline constexpr std::string_view kDirTimesAkey = "t";
// A directory object: dkey kDirTimesDkey / akey kSubdirAkeyPrefix + name, one
// per subdirectory (a one-byte marker), so that the directory's link count is
// 2 plus their number (docs/dfs.md, "Link counts").
inline constexpr std::string_view kSubdirAkeyPrefix = "d/";
// Superblock object: dkey InodeDkey(oid) / akey kEntryAkey holds the shared
// inode record of a hard-linked entry.
std::string InodeDkey(const ObjectId& oid);

// The fixed object ids of a file system. The superblock (which also holds
// the inode records) is S1, or RP_2G1 / RP_3G1 in a container whose default
// class or redundancy factor asks for two or three copies.
ObjectId SuperblockObjectId(const client::ContainerSummary& cs);
ObjectId RootObjectId(ObjectClass dir_class);
// The dkey of chunk `index` of a file: 8 bytes, big-endian.
std::string ChunkDkey(uint64_t index);
// Inverse of ChunkDkey; Corruption for a dkey of another shape.
Result<uint64_t> ChunkIndex(std::string_view dkey);
// The stable inode number of an object (the root's is 1).
uint64_t InodeNumber(const ObjectId& oid, const ObjectId& root);
timespec Now();

class FilesystemCore {
 public:
  FilesystemCore(client::Container& container, const MountOptions& options, const SuperblockRecord& superblock,
                 const EntryRecord& root, std::optional<FileCipher> cipher = std::nullopt);

  client::Container& container() const { return container_; }
  const MountOptions& options() const { return options_; }
  const SuperblockRecord& superblock() const { return superblock_; }
  uint64_t chunk_size() const { return chunk_size_; }
  ObjectClass file_class() const { return file_class_; }
  ObjectClass dir_class() const { return dir_class_; }
  Entry Root() const;
  // The cipher of file data when the container is encrypted (encrypted_io.h), else null.
  const FileCipher* cipher() const { return cipher_ ? &*cipher_ : nullptr; }

  // A fresh object id (this mount's random allocator id + a counter).
  ObjectId NewObjectId(ObjectType type, ObjectClass oc);
  Result<client::Object> OpenObject(const ObjectId& oid) const;

  struct Location {
    ObjectId object;
    std::string dkey;
  };
  Location LocationOf(const Entry& entry) const;

  // The record of entry `name` in directory object `dir`; NotFound when
  // absent. A link stub is resolved: the result is the shared inode record
  // (linked = true, with its link count). A directory's record carries the
  // times of its last change of entries (ApplyDirectoryTimes).
  Result<EntryRecord> FetchRecord(const ObjectId& dir, std::string_view name) const;
  // The directory entry itself, unresolved (a stub stays a stub).
  Result<EntryRecord> FetchRawRecord(const ObjectId& dir, std::string_view name) const;
  // Inserts a new entry: AlreadyExists when one of that name exists. A linked
  // record is written as a link stub (so are the two calls below).
  Status InsertRecord(const ObjectId& dir, std::string_view name, const EntryRecord& record) const;
  // Replaces an existing entry's record: NotFound when it is gone.
  Status ReplaceRecord(const ObjectId& dir, std::string_view name, const EntryRecord& record) const;
  // Writes the record whether or not the entry exists (rename over a target).
  Status StoreRecord(const ObjectId& dir, std::string_view name, const EntryRecord& record) const;

  // Writes the attributes of `entry` (chmod, utimens, ...): into its shared
  // inode record when linked, else its directory entry (NotFound when gone);
  // a directory's times also go to its times value.
  Status StoreAttributes(const Entry& entry, const EntryRecord& record) const;

  // --- hard links: the shared inode records ---
  Result<EntryRecord> FetchInode(const ObjectId& oid) const;
  // Insert if absent (AlreadyExists), replace if present (NotFound).
  Status InsertInode(const EntryRecord& record) const;
  Status ReplaceInode(const EntryRecord& record) const;
  // The inode record's one write, under `condition` (absent: insert, present: replace).
  Status WriteInode(const EntryRecord& record, client::Condition condition) const;
  Status RemoveInode(const ObjectId& oid) const;
  // One name of a linked entry went away: nlink - 1 and ctime now, or the
  // inode record and the object removed at the last link.
  Status DropLink(const ObjectId& oid) const;

  // --- directory times ---
  // The entries of directory object `dir` changed: its mtime and ctime become
  // now (one blind update of its times value).
  Status TouchDirectory(const ObjectId& dir) const;
  // Stores explicit times (utimens on a directory).
  Status StoreDirectoryTimes(const ObjectId& dir, const timespec& mtime, const timespec& ctime) const;
  // Takes the directory's mtime and its later ctime from its times value, when it has one.
  Status ApplyDirectoryTimes(EntryRecord& record) const;
  // --- directory link counts ---
  // Subdirectory `name` appeared in (or left) directory object `dir`: one blind
  // put (punch) of its marker, idempotent.
  Status AddSubdirectory(const ObjectId& dir, std::string_view name) const;
  Status RemoveSubdirectory(const ObjectId& dir, std::string_view name) const;
  // 2 + the subdirectories of directory object `dir` (one listing of its markers).
  Result<uint32_t> DirectoryLinkCount(const ObjectId& dir) const;

  // Removes an entry: NotFound when it is absent.
  Status RemoveRecord(const ObjectId& dir, std::string_view name) const;

  // The size of a regular file: the end of its highest written byte.
  Result<uint64_t> FileSize(const ObjectId& file, uint64_t chunk_size) const;
  // The record behind an entry handle (NotFound when it went away), resolved
  // like FetchRecord. A handle whose name went away while the entry keeps
  // another (hard link) still finds it through the inode record.
  Result<EntryRecord> RecordOf(const Entry& entry) const;

  Attr MakeAttr(const EntryRecord& record, uint64_t size) const;
  // MakeAttr with a directory's link count counted (DirectoryLinkCount).
  Result<Attr> AttrOf(const EntryRecord& record, uint64_t size) const;
  Entry MakeEntry(const ObjectId& parent, std::string_view name, const EntryRecord& record) const;
  EntryRecord NewRecord(mode_t mode, const ObjectId& oid) const;

  // POSIX permission check of `want` (R_OK | W_OK | X_OK bits) for the mount's
  // uid/gid; uid 0 passes. PermissionDenied names `what`.
  Status CheckAccess(mode_t mode, uid_t uid, gid_t gid, int want, std::string_view what) const;
  Status CheckAccess(const EntryRecord& r, int want, std::string_view what) const {
    return CheckAccess(r.mode, r.uid, r.gid, want, what);
  }
  Status CheckAccess(const Entry& e, int want, std::string_view what) const {
    return CheckAccess(e.mode, e.uid, e.gid, want, what);
  }
  // Owner or root: what chmod and utimens with explicit times need.
  Status CheckOwner(const EntryRecord& r, std::string_view what) const;

 private:
  client::Container& container_;
  const MountOptions options_;
  const SuperblockRecord superblock_;
  const EntryRecord root_;  // as of mount (Root() reports its mode and owner)
  uint64_t chunk_size_ = 0;
  ObjectClass file_class_;
  ObjectClass dir_class_;
  uint64_t allocator_id_ = 0;  // 48 random bits, never 0
  std::atomic<uint64_t> next_lo_{1};
  const std::optional<FileCipher> cipher_;
};

// "'name' in directory <oid>" for messages.
std::string DescribeEntry(const ObjectId& dir, std::string_view name);

}  // namespace ros2::dfs
