// DirectFilesystem: the DFS client proper, the FilesystemBackend of a
// direct-mode mount (and of every mount ros2-agent holds for its tenants).
// Its methods are written once, over the FilesystemCore's record operations:
// names in namespace_ops.cc, attributes in attr_ops.cc, directory pages in
// readdir.cc, data in data_io.cc (encrypted_io.cc for encrypted containers).
// Thread-safe: see FilesystemCore.
#pragma once

#include <memory>

#include "dfs/filesystem_backend.h"
#include "dfs/filesystem_core.h"

namespace ros2::dfs {

// The default arguments are the public API's (its methods call one another).
class DirectFilesystem final : public FilesystemBackend {
 public:
  // Formats (MountOptions::create) or opens the container's superblock.
  static Result<std::unique_ptr<DirectFilesystem>> Mount(client::Container& container, const MountOptions& options);
  explicit DirectFilesystem(std::shared_ptr<FilesystemCore> core) : core_(std::move(core)) {}

  uint64_t chunk_size() const override { return core_->chunk_size(); }
  Entry Root() const override { return core_->Root(); }

  Result<Entry> Lookup(const Entry& parent, std::string_view name) override;
  Result<Entry> LookupPath(std::string_view path) override;
  Result<std::pair<Entry, Attr>> LookupWithAttr(const Entry& parent, std::string_view name) override;

  Result<Entry> Open(const Entry& parent, std::string_view name, int flags, mode_t mode = 0644,
                     bool* created = nullptr) override;
  Result<Entry> Mkdir(const Entry& parent, std::string_view name, mode_t mode = 0755) override;
  Result<Entry> MkdirAll(std::string_view path, mode_t mode = 0755, uint64_t* created = nullptr) override;
  Result<Entry> Symlink(const Entry& parent, std::string_view name, std::string_view target) override;
  Result<Entry> Mknod(const Entry& parent, std::string_view name, mode_t mode, uint64_t rdev = 0) override;
  Result<Entry> Link(const Entry& target, const Entry& new_parent, std::string_view new_name) override;
  Result<std::string> Readlink(const Entry& link) override;
  Status Unlink(const Entry& parent, std::string_view name) override;
  Status Rmdir(const Entry& parent, std::string_view name) override;
  Status Rename(const Entry& parent, std::string_view name, const Entry& new_parent, std::string_view new_name,
                unsigned flags = 0) override;

  Result<Attr> Stat(const Entry& entry) override;
  Result<Attr> SetAttr(const Entry& entry, const SetAttrArgs& args) override;
  Status Truncate(const Entry& file, uint64_t size) override;
  Result<StatFs> Statfs() override;

  Result<std::vector<DirEntry>> Readdir(const Entry& dir, DirAnchor& anchor, size_t max) override;

  Result<uint64_t> Read(const Entry& file, uint64_t offset, std::span<std::byte> buffer) override;
  Result<uint64_t> Write(const Entry& file, uint64_t offset, std::span<const std::byte> data) override;
  Status Sync(const Entry& entry) override;

  Status SubmitRead(client::EventQueue& eq, const Entry& file, uint64_t offset, std::span<std::byte> buffer,
                    client::IoCallback callback) override;
  Status SubmitWrite(client::EventQueue& eq, const Entry& file, uint64_t offset, std::span<const std::byte> data,
                     client::IoCallback callback) override;

 private:
  Result<Attr> StatSlow(const Entry& entry);  // record, then size: for non-files and odd cases
  std::shared_ptr<FilesystemCore> core_;
};

}  // namespace ros2::dfs
