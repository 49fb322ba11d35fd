// FilesystemCore: records, sizes, object ids and permission checks (see
// filesystem_core.h); DirectFilesystem::Mount formats or opens the superblock.
#include "dfs/filesystem_core.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "client/client_internal.h"
#include "dfs/encrypted_io.h"
#include "dfs/direct_filesystem.h"

namespace ros2::dfs {
namespace {

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::span<const std::byte> AsSpan(const std::vector<std::byte>& v) {
  return {v.data(), v.size()};
}

// A directory's times value: mtime then ctime, each u64 seconds + u32 ns, little-endian.
constexpr size_t kDirTimesSize = 24;

std::vector<std::byte> EncodeDirTimes(const timespec& mtime, const timespec& ctime) {
  std::vector<std::byte> out;
  auto le = [&out](uint64_t v, int width) {
    for (int i = 0; i < width; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
  };
  for (const timespec* t : {&mtime, &ctime}) {
    le(static_cast<uint64_t>(t->tv_sec), 8);
    le(static_cast<uint64_t>(t->tv_nsec), 4);
  }
  return out;
}

bool Later(const timespec& a, const timespec& b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec;
}

}  // namespace

ObjectId SuperblockObjectId(const client::ContainerSummary& cs) {
  const uint32_t copies = std::max(ReplicaCount(cs.default_object_class), cs.rd_fac + 1);
  const ObjectClass oc = copies >= 3 ? ObjectClass::kRP3G1 : copies == 2 ? ObjectClass::kRP2G1 : ObjectClass::kS1;
  return ObjectId::Make(ObjectType::kSuperblock, oc, 0, 0);
}
ObjectId RootObjectId(ObjectClass dir_class) {
  return ObjectId::Make(ObjectType::kDirectory, dir_class, 0, 1);
}

std::string ChunkDkey(uint64_t index) {
  std::string k(8, '\0');
  for (int i = 0; i < 8; ++i) k[i] = static_cast<char>(index >> (8 * (7 - i)));
  return k;
}

Result<uint64_t> ChunkIndex(std::string_view dkey) {
  if (dkey.size() != 8) return Status::Corruption(fmt::format("dfs: file chunk dkey of {} bytes", dkey.size()));
  uint64_t index = 0;
  for (char c : dkey) index = (index << 8) | static_cast<uint8_t>(c);
  return index;
}

std::string InodeDkey(const ObjectId& oid) {
  return "inode/" + oid.ToString();
}

uint64_t InodeNumber(const ObjectId& oid, const ObjectId& root) {
  if (oid == root) return 1;
  uint64_t ino = Mix(oid.hi ^ Mix(oid.lo));
  return ino <= 1 ? ino + 2 : ino;
}

timespec Now() {
  timespec t{};
  ::clock_gettime(CLOCK_REALTIME, &t);
  return t;
}

std::string DescribeEntry(const ObjectId& dir, std::string_view name) {
  return fmt::format("'{}' in directory {}", name, dir.ToString());
}

FilesystemCore::FilesystemCore(client::Container& container, const MountOptions& options,
                               const SuperblockRecord& superblock, const EntryRecord& root,
                               std::optional<FileCipher> cipher)
    : container_(container), options_(options), superblock_(superblock), root_(root), cipher_(std::move(cipher)) {
  chunk_size_ = options.chunk_size != 0 ? options.chunk_size : superblock.chunk_size;
  file_class_ = options.file_class != ObjectClass{0} ? options.file_class : superblock.file_class;
  dir_class_ = options.dir_class != ObjectClass{0} ? options.dir_class : superblock.dir_class;
  std::random_device rd;
  do {
    allocator_id_ = ((uint64_t{rd()} << 32) | rd()) & ((uint64_t{1} << 48) - 1);
  } while (allocator_id_ == 0);
}

Entry FilesystemCore::Root() const {
  Entry e;
  e.oid = superblock_.root;
  e.mode = root_.mode;
  e.uid = root_.uid;
  e.gid = root_.gid;
  return e;
}

ObjectId FilesystemCore::NewObjectId(ObjectType type, ObjectClass oc) {
  return ObjectId::Make(type, oc, allocator_id_, next_lo_.fetch_add(1, std::memory_order_relaxed));
}

Result<client::Object> FilesystemCore::OpenObject(const ObjectId& oid) const {
  return container_.OpenObject(oid);
}

FilesystemCore::Location FilesystemCore::LocationOf(const Entry& entry) const {
  if (entry.oid == superblock_.root && entry.name.empty()) {
    return {SuperblockObjectId(container_.summary()), std::string(kRootDkey)};
  }
  return {entry.parent, entry.name};
}

Result<EntryRecord> FilesystemCore::FetchRawRecord(const ObjectId& dir, std::string_view name) const {
  ROS2_ASSIGN_OR_RETURN(client::Object obj, OpenObject(dir));
  ROS2_ASSIGN_OR_RETURN(auto value, obj.Get(name, kEntryAkey, 256));
  if (value.empty()) return Status::NotFound(fmt::format("dfs: no entry {}", DescribeEntry(dir, name)));
  return DecodeEntry(value, DescribeEntry(dir, name));
}

Result<EntryRecord> FilesystemCore::FetchRecord(const ObjectId& dir, std::string_view name) const {
  ROS2_ASSIGN_OR_RETURN(EntryRecord rec, FetchRawRecord(dir, name));
  if (rec.linked) {
    auto inode = FetchInode(rec.oid);
    if (!inode.ok() && inode.status().IsNotFound()) {
      // The last other name went away between the two fetches.
      return Status::NotFound(fmt::format("dfs: entry {} lost its inode record", DescribeEntry(dir, name)));
    }
    return inode;
  }
  if (S_ISDIR(rec.mode)) ROS2_RETURN_IF_ERROR(ApplyDirectoryTimes(rec));
  return rec;
}

Status FilesystemCore::StoreAttributes(const Entry& entry, const EntryRecord& record) const {
  if (record.linked) return ReplaceInode(record);
  Location loc = LocationOf(entry);
  ROS2_RETURN_IF_ERROR(ReplaceRecord(loc.object, loc.dkey, record));
  if (S_ISDIR(record.mode)) return StoreDirectoryTimes(record.oid, record.mtime, record.ctime);
  return Status::Ok();
}

Result<EntryRecord> FilesystemCore::FetchInode(const ObjectId& oid) const {
  ROS2_ASSIGN_OR_RETURN(client::Object sb, OpenObject(SuperblockObjectId(container_.summary())));
  const std::string dkey = InodeDkey(oid);
  ROS2_ASSIGN_OR_RETURN(auto value, sb.Get(dkey, kEntryAkey, 256));
  if (value.empty()) return Status::NotFound(fmt::format("dfs: no inode record of {}", oid.ToString()));
  return DecodeInode(value, "inode " + oid.ToString());
}

Status FilesystemCore::InsertInode(const EntryRecord& record) const {
  return WriteInode(record, client::Condition::kAbsent);
}

Status FilesystemCore::ReplaceInode(const EntryRecord& record) const {
  Status st = WriteInode(record, client::Condition::kPresent);
  if (st.IsNotFound()) return Status::NotFound(fmt::format("dfs: inode record of {} is gone", record.oid.ToString()));
  return st;
}

Status FilesystemCore::WriteInode(const EntryRecord& record, client::Condition condition) const {
  ROS2_ASSIGN_OR_RETURN(client::Object sb, OpenObject(SuperblockObjectId(container_.summary())));
  auto bytes = EncodeInode(record);
  client::UpdateArgs args;
  args.dkey = InodeDkey(record.oid);
  args.akey = kEntryAkey;
  args.data = AsSpan(bytes);
  args.condition = condition;
  return sb.Update(args);
}

Status FilesystemCore::RemoveInode(const ObjectId& oid) const {
  ROS2_ASSIGN_OR_RETURN(client::Object sb, OpenObject(SuperblockObjectId(container_.summary())));
  return sb.PunchDkey(InodeDkey(oid), client::Condition::kPresent);
}

Status FilesystemCore::DropLink(const ObjectId& oid) const {
  ROS2_ASSIGN_OR_RETURN(EntryRecord inode, FetchInode(oid));
  if (inode.nlink <= 1) {
    ROS2_RETURN_IF_ERROR(RemoveInode(oid));
    if (!S_ISREG(inode.mode)) return Status::Ok();
    ROS2_ASSIGN_OR_RETURN(client::Object obj, OpenObject(oid));
    ROS2_ASSIGN_OR_RETURN(auto tail, obj.QueryArrayTail(kDataAkey));
    if (!tail) return Status::Ok();
    return obj.PunchObject();
  }
  --inode.nlink;
  inode.ctime = Now();
  return ReplaceInode(inode);
}

Status FilesystemCore::TouchDirectory(const ObjectId& dir) const {
  const timespec now = Now();
  return StoreDirectoryTimes(dir, now, now);
}

Status FilesystemCore::StoreDirectoryTimes(const ObjectId& dir, const timespec& mtime, const timespec& ctime) const {
  ROS2_ASSIGN_OR_RETURN(client::Object obj, OpenObject(dir));
  auto bytes = EncodeDirTimes(mtime, ctime);
  return obj.Put(kDirTimesDkey, kDirTimesAkey, AsSpan(bytes));
}

Status FilesystemCore::AddSubdirectory(const ObjectId& dir, std::string_view name) const {
  ROS2_ASSIGN_OR_RETURN(client::Object obj, OpenObject(dir));
  const std::byte marker{1};
  return obj.Put(kDirTimesDkey, std::string(kSubdirAkeyPrefix) + std::string(name),
                 std::span<const std::byte>(&marker, 1));
}

Status FilesystemCore::RemoveSubdirectory(const ObjectId& dir, std::string_view name) const {
  ROS2_ASSIGN_OR_RETURN(client::Object obj, OpenObject(dir));
  return obj.PunchAkey(kDirTimesDkey, std::string(kSubdirAkeyPrefix) + std::string(name));
}

Result<uint32_t> FilesystemCore::DirectoryLinkCount(const ObjectId& dir) const {
  ROS2_ASSIGN_OR_RETURN(client::Object obj, OpenObject(dir));
  ROS2_ASSIGN_OR_RETURN(auto akeys, obj.ListAkeys(kDirTimesDkey));
  uint32_t count = 2;
  for (const auto& akey : akeys) {
    if (akey.starts_with(kSubdirAkeyPrefix)) ++count;
  }
  return count;
}

Status FilesystemCore::ApplyDirectoryTimes(EntryRecord& record) const {
  ROS2_ASSIGN_OR_RETURN(client::Object obj, OpenObject(record.oid));
  ROS2_ASSIGN_OR_RETURN(auto value, obj.Get(kDirTimesDkey, kDirTimesAkey, kDirTimesSize));
  if (value.empty()) return Status::Ok();  // never changed since created (or made by an older build)
  if (value.size() != kDirTimesSize) {
    return Status::Corruption(fmt::format("dfs: times of directory {}: {} bytes", record.oid.ToString(), value.size()));
  }
  timespec t[2]{};
  size_t pos = 0;
  for (auto& ts : t) {
    uint64_t sec = 0, nsec = 0;
    for (int i = 0; i < 8; ++i) sec |= uint64_t{static_cast<uint8_t>(value[pos++])} << (8 * i);
    for (int i = 0; i < 4; ++i) nsec |= uint64_t{static_cast<uint8_t>(value[pos++])} << (8 * i);
    ts.tv_sec = static_cast<time_t>(static_cast<int64_t>(sec));
    ts.tv_nsec = static_cast<long>(nsec);
  }
  record.mtime = t[0];
  if (Later(t[1], record.ctime)) record.ctime = t[1];
  return Status::Ok();
}

Status FilesystemCore::InsertRecord(const ObjectId& dir, std::string_view name, const EntryRecord& record) const {
  ROS2_ASSIGN_OR_RETURN(client::Object obj, OpenObject(dir));
  auto bytes = EncodeEntry(record);
  client::UpdateArgs args;
  args.dkey = name;
  args.akey = kEntryAkey;
  args.data = AsSpan(bytes);
  args.condition = client::Condition::kAbsent;
  Status st = obj.Update(args);
  if (st.code() == Status::Code::kAlreadyExists) {
    return Status::AlreadyExists(fmt::format("dfs: {} exists", DescribeEntry(dir, name)));
  }
  return st;
}

Status FilesystemCore::ReplaceRecord(const ObjectId& dir, std::string_view name, const EntryRecord& record) const {
  ROS2_ASSIGN_OR_RETURN(client::Object obj, OpenObject(dir));
  auto bytes = EncodeEntry(record);
  client::UpdateArgs args;
  args.dkey = name;
  args.akey = kEntryAkey;
  args.data = AsSpan(bytes);
  args.condition = client::Condition::kPresent;
  Status st = obj.Update(args);
  if (st.IsNotFound()) return Status::NotFound(fmt::format("dfs: entry {} is gone", DescribeEntry(dir, name)));
  return st;
}

Status FilesystemCore::StoreRecord(const ObjectId& dir, std::string_view name, const EntryRecord& record) const {
  ROS2_ASSIGN_OR_RETURN(client::Object obj, OpenObject(dir));
  auto bytes = EncodeEntry(record);
  return obj.Put(name, kEntryAkey, AsSpan(bytes));
}

Status FilesystemCore::RemoveRecord(const ObjectId& dir, std::string_view name) const {
  ROS2_ASSIGN_OR_RETURN(client::Object obj, OpenObject(dir));
  Status st = obj.PunchDkey(name, client::Condition::kPresent);
  if (st.IsNotFound()) return Status::NotFound(fmt::format("dfs: no entry {}", DescribeEntry(dir, name)));
  return st;
}

Result<uint64_t> FilesystemCore::FileSize(const ObjectId& file, uint64_t chunk_size) const {
  if (cipher_) return EncryptedFileSize(*this, file, chunk_size);
  ROS2_ASSIGN_OR_RETURN(client::Object obj, OpenObject(file));
  ROS2_ASSIGN_OR_RETURN(auto tail, obj.QueryArrayTail(kDataAkey));
  if (!tail) return uint64_t{0};
  ROS2_ASSIGN_OR_RETURN(uint64_t index, ChunkIndex(tail->dkey));
  return index * chunk_size + tail->end;
}

Result<EntryRecord> FilesystemCore::RecordOf(const Entry& entry) const {
  Location loc = LocationOf(entry);
  auto rec = FetchRecord(loc.object, loc.dkey);
  if (rec.ok() && rec->oid == entry.oid) return rec;
  if (!rec.ok() && !rec.status().IsNotFound()) return rec.status();
  // This name is gone or names another object: the entry may live on under
  // another name (a hard link).
  if (!entry.is_dir() && !(entry.oid == superblock_.root)) {
    auto inode = FetchInode(entry.oid);
    if (inode.ok() || !inode.status().IsNotFound()) return inode;
  }
  if (!rec.ok()) return rec.status();
  return Status::NotFound(fmt::format("dfs: entry {} now names another object (stale handle of {})",
                                      DescribeEntry(loc.object, loc.dkey), entry.oid.ToString()));
}

Attr FilesystemCore::MakeAttr(const EntryRecord& record, uint64_t size) const {
  Attr a;
  a.ino = InodeNumber(record.oid, superblock_.root);
  a.mode = record.mode;
  a.uid = record.uid;
  a.gid = record.gid;
  a.size = S_ISLNK(record.mode) ? record.symlink_target.size() : size;
  a.blocks = (a.size + 511) / 512;
  a.nlink = record.linked ? record.nlink : S_ISDIR(record.mode) ? std::max<uint32_t>(record.nlink, 2) : 1;
  a.rdev = record.rdev;
  a.blksize = static_cast<uint32_t>(
      std::min<uint64_t>(record.chunk_size != 0 ? record.chunk_size : chunk_size_, uint64_t{1} << 30));
  a.atime = record.atime;
  a.mtime = record.mtime;
  a.ctime = record.ctime;
  a.oid = record.oid;
  return a;
}

Result<Attr> FilesystemCore::AttrOf(const EntryRecord& record, uint64_t size) const {
  Attr a = MakeAttr(record, size);
  if (S_ISDIR(record.mode)) {
    ROS2_ASSIGN_OR_RETURN(a.nlink, DirectoryLinkCount(record.oid));
  }
  return a;
}

Entry FilesystemCore::MakeEntry(const ObjectId& parent, std::string_view name, const EntryRecord& record) const {
  Entry e;
  e.oid = record.oid;
  e.parent = parent;
  e.name = std::string(name);
  e.mode = record.mode;
  e.uid = record.uid;
  e.gid = record.gid;
  e.chunk_size = record.chunk_size;
  return e;
}

EntryRecord FilesystemCore::NewRecord(mode_t mode, const ObjectId& oid) const {
  EntryRecord r;
  r.mode = mode;
  r.oid = oid;
  r.uid = options_.uid;
  r.gid = options_.gid;
  r.atime = r.mtime = r.ctime = Now();
  if (S_ISREG(mode)) r.chunk_size = chunk_size_;
  return r;
}

Status FilesystemCore::CheckAccess(mode_t mode, uid_t uid, gid_t gid, int want, std::string_view what) const {
  if (options_.uid == 0 || want == 0) return Status::Ok();
  mode_t bits = 0;
  if (uid == options_.uid) {
    bits = (mode >> 6) & 7;
  } else if (gid == options_.gid) {
    bits = (mode >> 3) & 7;
  } else {
    bits = mode & 7;
  }
  if ((static_cast<mode_t>(want) & ~bits) != 0) {
    return Status::PermissionDenied(
        fmt::format("dfs: {}: mode {:o} owned by {}:{} denies uid {}", what, mode & 07777, uid, gid, options_.uid));
  }
  return Status::Ok();
}

Status FilesystemCore::CheckOwner(const EntryRecord& r, std::string_view what) const {
  if (options_.uid == 0 || options_.uid == r.uid) return Status::Ok();
  return Status::PermissionDenied(
      fmt::format("dfs: {}: uid {} does not own the entry (owner {})", what, options_.uid, r.uid));
}

// --- mount ---

Result<std::unique_ptr<DirectFilesystem>> DirectFilesystem::Mount(client::Container& container,
                                                                   const MountOptions& options) {
  const std::string what = fmt::format("dfs mount of container {}", container.summary().label);
  ROS2_ASSIGN_OR_RETURN(client::Object sb_obj, container.OpenObject(SuperblockObjectId(container.summary())));
  // An encrypted container is refused before anything is written without its key.
  ROS2_ASSIGN_OR_RETURN(std::optional<FileCipher> cipher, SetUpEncryption(container, options, sb_obj, what));
  if (cipher && options.chunk_size % kCryptBlockSize != 0) {
    return Status::InvalidArgument(fmt::format("{}: chunk size {} is not a multiple of the {}-byte encryption block",
                                               what, options.chunk_size, kCryptBlockSize));
  }
  std::optional<SuperblockRecord> superblock;
  for (int attempt = 0; attempt < 3 && !superblock; ++attempt) {
    auto value = sb_obj.Get(kSuperblockDkey, kEntryAkey, 128);
    if (!value.ok()) return value.status().WithContext(what);
    if (!value->empty()) {
      auto decoded = DecodeSuperblock(*value);
      if (!decoded.ok()) return decoded.status().WithContext(what);
      superblock = *decoded;
      break;
    }
    if (!options.create) return Status::NotFound(what + ": the container holds no file system");
    // Format: the root's record first, then the superblock, each inserted only
    // if absent, so concurrent first mounts agree on one file system.
    const client::ContainerSummary& cs = container.summary();
    SuperblockRecord fresh;
    fresh.chunk_size =
        options.chunk_size != 0 ? options.chunk_size : (cs.chunk_size != 0 ? cs.chunk_size : kDefaultChunkSize);
    fresh.file_class = options.file_class != ObjectClass{0} ? options.file_class : cs.default_object_class;
    fresh.dir_class = options.dir_class != ObjectClass{0} ? options.dir_class : cs.default_object_class;
    ROS2_RETURN_IF_ERROR(client::CheckObjectClassSupported(fresh.file_class).WithContext(what));
    ROS2_RETURN_IF_ERROR(client::CheckObjectClassSupported(fresh.dir_class).WithContext(what));
    fresh.root = RootObjectId(fresh.dir_class);
    EntryRecord root;
    root.mode = S_IFDIR | 0755;
    root.oid = fresh.root;
    root.uid = options.uid;
    root.gid = options.gid;
    root.atime = root.mtime = root.ctime = Now();
    auto root_bytes = EncodeEntry(root);
    client::UpdateArgs args;
    args.dkey = kRootDkey;
    args.akey = kEntryAkey;
    args.data = root_bytes;
    args.condition = client::Condition::kAbsent;
    Status st = sb_obj.Update(args);
    if (!st.ok() && st.code() != Status::Code::kAlreadyExists) return st.WithContext(what + ": writing the root");
    auto sb_bytes = EncodeSuperblock(fresh);
    args.dkey = kSuperblockDkey;
    args.data = sb_bytes;
    st = sb_obj.Update(args);
    if (st.ok())
      superblock = fresh;
    else if (st.code() != Status::Code::kAlreadyExists)
      return st.WithContext(what + ": writing the superblock");
  }
  if (!superblock) return Status::Busy(what + ": the superblock kept changing");
  auto root_value = sb_obj.Get(kRootDkey, kEntryAkey, 128);
  if (!root_value.ok()) return root_value.status().WithContext(what + ": reading the root");
  if (root_value->empty()) return Status::Corruption(what + ": the superblock has no root entry");
  auto root = DecodeEntry(*root_value, "the root");
  if (!root.ok()) return root.status().WithContext(what);
  if (!S_ISDIR(root->mode) || root->oid != superblock->root) {
    return Status::Corruption(what + ": the root entry is not the superblock's root directory");
  }
  if (cipher && superblock->chunk_size % kCryptBlockSize != 0) {
    return Status::InvalidArgument(fmt::format("{}: chunk size {} is not a multiple of the {}-byte encryption block",
                                               what, superblock->chunk_size, kCryptBlockSize));
  }
  auto core = std::make_shared<FilesystemCore>(container, options, *superblock, *root, std::move(cipher));
  return std::make_unique<DirectFilesystem>(std::move(core));
}

int Errno(const Status& status) {
  return status.ok() ? 0 : status.ToErrno();
}

}  // namespace ros2::dfs
