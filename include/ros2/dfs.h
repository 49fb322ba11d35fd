// DFS: a POSIX namespace on the objects of one container (the C++ API; the
// layout is specified in docs/dfs.md).
//
// Layout, as in DAOS DFS: a superblock object (magic, layout version, chunk
// size, object classes, the root's attributes) at a fixed object id, a root
// directory object, and for every directory an object with one dkey per entry
// (the entry's name) whose attributes (mode, owner, times, the entry's object
// id, a symlink's target, a device's number) are one single value under a
// fixed akey; an entry with several names (hard links) keeps them in one
// shared inode record instead, and each name holds a stub. A regular
// file is an array object of 1-byte records chunked by the file system's chunk
// size: chunk i is dkey i (8 bytes, big-endian, so the largest dkey is the
// last chunk) and the chunks spread over the targets by placement. A file's
// size is not stored: it is the end of its highest written record, found by
// querying the object (as DAOS does), so writes from many clients need no
// metadata update.
//
// Files and directories are named by Entry handles (an object id plus the
// parent directory and name its attributes live under), so a FUSE low-level
// file system can map inode numbers to them; path helpers resolve "/a/b/c"
// from the root. An Entry is a small copyable value; any thread may use it.
//
// Every update is durable when the call returns (the engine's group commit);
// Sync is a barrier for API symmetry. Operations on different entries from
// many threads run concurrently; POSIX atomicity holds per call where the
// object layer gives it (create with O_EXCL, mkdir and rename without
// replacement are conditional inserts of the entry's dkey), and rename
// between two directories is not atomic against a concurrent crash (the new
// entry is inserted before the old one is removed, so a crash can leave both,
// never neither).
//
// Errors are ros2::Status values whose code maps to an errno through
// Status::ToErrno (ros2/types.h): ENOENT, EEXIST, ENOTDIR, EISDIR,
// ENOTEMPTY, ENAMETOOLONG, EACCES, ENOSPC, EINVAL, ... with messages naming
// the path or entry and the cause; Errno() below gives the number.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ros2/client.h"
#include "ros2/types.h"

namespace ros2::dfs {

inline constexpr size_t kMaxNameLength = 255;   // bytes of one entry name (ENAMETOOLONG above)
inline constexpr size_t kMaxPathLength = 4096;  // bytes of a path (ENAMETOOLONG above)
inline constexpr uint64_t kDefaultChunkSize = uint64_t{1} << 20;

struct MountOptions {
  // Chunk size of files created by this mount; 0 takes the superblock's (set
  // when the file system was formatted: the container's chunk_size property,
  // else kDefaultChunkSize).
  uint64_t chunk_size = 0;
  // Object classes of new files and directories; kNone-like 0 takes the
  // superblock's (the container's default class at format time).
  ObjectClass file_class = ObjectClass{0};
  ObjectClass dir_class = ObjectClass{0};
  // Owner of entries this mount creates (a FUSE mount passes the caller's).
  uid_t uid = 0;
  gid_t gid = 0;
  // Format the container when it holds no superblock yet (first mount). When
  // false, mounting an empty container is NotFound.
  bool create = true;
  // Encrypted containers (property encryption=aes-256-gcm; docs/dfs.md,
  // "Encrypted files"): the container's key as 32 raw bytes, or, when empty,
  // the path of a key file (see ReadKeyFile). Mounting an encrypted container
  // without either is PermissionDenied naming the container and its key id;
  // a key whose check value differs from the one the file system recorded at
  // its first keyed mount is PermissionDenied too. Giving a key for a
  // container that is not encrypted is InvalidArgument (so a client never
  // writes plaintext believing it encrypts).
  std::vector<std::byte> encryption_key;
  std::string encryption_key_file;
  // Optional: the key id the caller expects; when set and different from the
  // container's encryption_key_id property, PermissionDenied.
  std::string encryption_key_id;
};

// Key files of encrypted containers: 32 random bytes written as 64 lowercase
// hex digits and a newline, mode 0600. CreateKeyFile makes a new one
// (AlreadyExists when `path` exists; the file is fsynced). ReadKeyFile returns
// the 32 key bytes; it accepts 64 hex digits (white space around them
// ignored) or exactly 32 raw bytes, and refuses a file that its group or
// others may read (PermissionDenied) or that holds anything else
// (InvalidArgument).
Status CreateKeyFile(const std::string& path);
Result<std::vector<std::byte>> ReadKeyFile(const std::string& path);

// Attributes of one entry, as stat(2) reports them.
struct Attr {
  uint64_t ino = 0;  // stable 64-bit number derived from the object id (root: 1)
  mode_t mode = 0;   // type bits (S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO, S_IFCHR, S_IFBLK, S_IFSOCK) + permissions
  uid_t uid = 0;
  gid_t gid = 0;
  uint64_t size = 0;    // file: end of the highest written byte; symlink: target length
  uint64_t blocks = 0;  // 512-byte blocks (size rounded up; holes not subtracted)
  uint32_t nlink = 1;   // names of the entry (hard links); a directory: 2 + its subdirectories
  uint64_t rdev = 0;    // character and block devices: the device number
  uint32_t blksize = 0;  // the chunk size (preferred I/O size)
  timespec atime{};
  timespec mtime{};
  timespec ctime{};
  ObjectId oid;
};

// File system totals for statfs(2), from the pool's space.
struct StatFs {
  uint64_t block_size = 4096;
  uint64_t blocks = 0;       // pool capacity / block_size
  uint64_t blocks_free = 0;  // pool free space / block_size
  uint64_t files = 0;        // best effort (0 when unknown)
  uint64_t files_free = 0;
  uint32_t name_max = kMaxNameLength;
};

// A handle on one file, directory or symlink: its object, and where its
// attributes live (the parent directory's object and the entry's name; the
// root's live in the superblock). Cheap to copy. Becomes stale when the entry
// is renamed or removed (operations then fail with NotFound / ENOENT).
struct Entry {
  ObjectId oid;
  ObjectId parent;   // zero for the root
  std::string name;  // empty for the root
  mode_t mode = 0;   // type bits + permissions as of the lookup
  uid_t uid = 0;     // owner as of the lookup (permission checks of operations inside a directory)
  gid_t gid = 0;
  uint64_t chunk_size = 0;  // regular files: bytes per chunk
  bool is_dir() const { return S_ISDIR(mode); }
  bool is_file() const { return S_ISREG(mode); }
  bool is_symlink() const { return S_ISLNK(mode); }
};

struct DirEntry {
  std::string name;
  mode_t mode = 0;  // type bits + permissions
  ObjectId oid;
  uint64_t ino = 0;
};

// Resumable position of a Readdir: start with a default one, pass back what
// the previous call left, stop when `eof`. Opaque otherwise. A directory's
// entries are the dkeys of its object, so this is the object API's paged dkey
// listing position (client::KeyAnchor), the same type.
using DirAnchor = client::KeyAnchor;

// Fields of SetAttr to apply (bitwise or of the flags).
enum SetAttrMask : uint32_t {
  kSetMode = 1u << 0,
  kSetUid = 1u << 1,
  kSetGid = 1u << 2,
  kSetSize = 1u << 3,  // truncate (shrink or grow) a regular file
  kSetAtime = 1u << 4,
  kSetMtime = 1u << 5,
  kSetAtimeNow = 1u << 6,
  kSetMtimeNow = 1u << 7,
};
struct SetAttrArgs {
  uint32_t mask = 0;
  mode_t mode = 0;  // permission bits only; the type cannot change
  uid_t uid = 0;
  gid_t gid = 0;
  uint64_t size = 0;
  timespec atime{};
  timespec mtime{};
};

// Flags of Rename.
enum RenameFlags : unsigned {
  kRenameNoReplace = 1u << 0,  // EEXIST when the destination exists (RENAME_NOREPLACE)
};

class FilesystemBackend;  // internal (src/dfs/filesystem_backend.h): direct, or through ros2-agent

// A mounted DFS namespace on an open container. Thread-safe: any thread may
// call any method; each thread's I/O uses that thread's data-plane worker (see
// ros2/client.h). The Container (and its Pool and Client) must outlive it.
//
// On a container opened in offload mode (ClientOptions::agent_socket) the
// same methods run in ros2-agent, which mounts the container for this
// process's tenant; every call is a submission on the agent's rings
// (docs/agent.md). MountOptions' uid/gid are then the caller's own.
class Filesystem {
 public:
  static Result<std::unique_ptr<Filesystem>> Mount(client::Container& container, const MountOptions& options = {});
  ~Filesystem();
  Filesystem(const Filesystem&) = delete;
  Filesystem& operator=(const Filesystem&) = delete;

  uint64_t chunk_size() const;
  Entry Root() const;

  // --- names ---
  // The entry `name` of directory `parent` (ENOTDIR when parent is not one).
  Result<Entry> Lookup(const Entry& parent, std::string_view name);
  // Resolves an absolute path ("/" is the root); symlinks in intermediate
  // components are followed (ELOOP after 40), the last one is not.
  Result<Entry> LookupPath(std::string_view path);
  // Like Lookup, plus the attributes (one round trip for the dentry, one size
  // query for files).
  Result<std::pair<Entry, Attr>> LookupWithAttr(const Entry& parent, std::string_view name);

  // --- create / remove ---
  // open(2) of `name` in `parent`: flags O_CREAT, O_EXCL, O_TRUNC are honoured
  // (O_ACCMODE is checked against the entry's permission bits for the mount's
  // uid/gid); EISDIR when O_CREAT names a directory or O_TRUNC / write access
  // asks for one. `mode` is used when the file is created; `created`
  // (optional) tells whether this call created it.
  Result<Entry> Open(const Entry& parent, std::string_view name, int flags, mode_t mode = 0644,
                     bool* created = nullptr);
  Result<Entry> Mkdir(const Entry& parent, std::string_view name, mode_t mode = 0755);
  // mkdir -p of an absolute path: creates every missing directory (an entry
  // made meanwhile by another client counts as found), NotDirectory when a
  // component exists and is not a directory. `created` (optional) receives how
  // many directories this call made.
  Result<Entry> MkdirAll(std::string_view path, mode_t mode = 0755, uint64_t* created = nullptr);
  Result<Entry> Symlink(const Entry& parent, std::string_view name, std::string_view target);
  // mknod(2) of a FIFO, socket, character or block device (`mode` carries the
  // type bits; `rdev` the device number of a device). Such an entry has no
  // data: it is stored with its type and rdev for the kernel to interpret.
  // A regular file type creates an empty file (as Open with O_CREAT|O_EXCL).
  Result<Entry> Mknod(const Entry& parent, std::string_view name, mode_t mode, uint64_t rdev = 0);
  // link(2): a new name `new_name` in `new_parent` for the non-directory
  // `target` (PermissionDenied for a directory, AlreadyExists when the name
  // exists). Both names then share one inode record (docs/dfs.md, "Hard links").
  Result<Entry> Link(const Entry& target, const Entry& new_parent, std::string_view new_name);
  Result<std::string> Readlink(const Entry& link);
  // Removes a file or symlink (EISDIR for a directory) and punches its object.
  Status Unlink(const Entry& parent, std::string_view name);
  // Removes an empty directory (ENOTEMPTY otherwise, ENOTDIR for a file).
  Status Rmdir(const Entry& parent, std::string_view name);
  // rename(2): replaces an existing destination of a compatible type (a file
  // over a file, an empty directory over a directory; EISDIR / ENOTDIR /
  // ENOTEMPTY otherwise), within or across directories; EINVAL when moving a
  // directory into itself.
  Status Rename(const Entry& parent, std::string_view name, const Entry& new_parent, std::string_view new_name,
                unsigned flags = 0);

  // --- attributes ---
  Result<Attr> Stat(const Entry& entry);
  // chmod / chown / truncate / utimens; returns the new attributes.
  Result<Attr> SetAttr(const Entry& entry, const SetAttrArgs& args);
  Status Truncate(const Entry& file, uint64_t size);
  Result<StatFs> Statfs();

  // --- directories ---
  // Up to `max` entries from `anchor` (not "." or ".."), in no particular order;
  // empty only at the end (then anchor.eof is set).
  Result<std::vector<DirEntry>> Readdir(const Entry& dir, DirAnchor& anchor, size_t max);

  // --- data (blocking) ---
  // Reads up to buffer.size() bytes at `offset`; returns the bytes read, short
  // only at the end of the file (holes read as zeros).
  Result<uint64_t> Read(const Entry& file, uint64_t offset, std::span<std::byte> buffer);
  // Writes all of `data` at `offset` (durable on return); returns data.size().
  Result<uint64_t> Write(const Entry& file, uint64_t offset, std::span<const std::byte> data);
  // Durability barrier (updates are already durable when acknowledged).
  Status Sync(const Entry& entry);

  // --- data (asynchronous, through the caller's event queue) ---
  // The callback runs inside eq.Poll()/Wait() on the queue's thread once every
  // chunk of the request completed; IoResult::size is the bytes read (short at
  // the end of the file) or written. Buffers stay valid until then. Errors in
  // submission are returned at once and nothing is queued; if a later chunk of
  // a multi-chunk request cannot be submitted, the chunks already in flight
  // complete and the callback reports that error. Each chunk counts in
  // eq.in_flight(). A zero-length request calls back at once. SubmitRead
  // connects the thread to every shard of the file first (see
  // client::Object::ConnectShards).
  Status SubmitRead(client::EventQueue& eq, const Entry& file, uint64_t offset, std::span<std::byte> buffer,
                    client::IoCallback callback);
  Status SubmitWrite(client::EventQueue& eq, const Entry& file, uint64_t offset, std::span<const std::byte> data,
                     client::IoCallback callback);

 private:
  explicit Filesystem(std::unique_ptr<FilesystemBackend> backend);
  std::unique_ptr<FilesystemBackend> backend_;  // chosen at mount: direct, or the agent's rings
};

// The errno of a DFS status (0 for OK).
int Errno(const Status& status);

}  // namespace ros2::dfs
