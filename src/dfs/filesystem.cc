// dfs::Filesystem: the public handle. Mount chooses the backend once (the
// container's mode decides) and every method hands its call to it.
#include "dfs/direct_filesystem.h"
#include "dfs/offload/agent_filesystem.h"

namespace ros2::dfs {

Filesystem::Filesystem(std::unique_ptr<FilesystemBackend> backend) : backend_(std::move(backend)) {}
Filesystem::~Filesystem() = default;

Result<std::unique_ptr<Filesystem>> Filesystem::Mount(client::Container& container, const MountOptions& options) {
  std::unique_ptr<FilesystemBackend> backend;
  if (container.offload()) {
    ROS2_ASSIGN_OR_RETURN(backend, AgentFilesystem::Mount(container, options));
  } else {
    ROS2_ASSIGN_OR_RETURN(backend, DirectFilesystem::Mount(container, options));
  }
  return std::unique_ptr<Filesystem>(new Filesystem(std::move(backend)));
}

uint64_t Filesystem::chunk_size() const {
  return backend_->chunk_size();
}
Entry Filesystem::Root() const {
  return backend_->Root();
}

Result<Entry> Filesystem::Lookup(const Entry& parent, std::string_view name) {
  return backend_->Lookup(parent, name);
}
Result<Entry> Filesystem::LookupPath(std::string_view path) {
  return backend_->LookupPath(path);
}
Result<std::pair<Entry, Attr>> Filesystem::LookupWithAttr(const Entry& parent, std::string_view name) {
  return backend_->LookupWithAttr(parent, name);
}

Result<Entry> Filesystem::Open(const Entry& parent, std::string_view name, int flags, mode_t mode, bool* created) {
  return backend_->Open(parent, name, flags, mode, created);
}
Result<Entry> Filesystem::Mkdir(const Entry& parent, std::string_view name, mode_t mode) {
  return backend_->Mkdir(parent, name, mode);
}
Result<Entry> Filesystem::MkdirAll(std::string_view path, mode_t mode, uint64_t* created) {
  return backend_->MkdirAll(path, mode, created);
}
Result<Entry> Filesystem::Symlink(const Entry& parent, std::string_view name, std::string_view target) {
  return backend_->Symlink(parent, name, target);
}
Result<Entry> Filesystem::Mknod(const Entry& parent, std::string_view name, mode_t mode, uint64_t rdev) {
  return backend_->Mknod(parent, name, mode, rdev);
}
Result<Entry> Filesystem::Link(const Entry& target, const Entry& new_parent, std::string_view new_name) {
  return backend_->Link(target, new_parent, new_name);
}
Result<std::string> Filesystem::Readlink(const Entry& link) {
  return backend_->Readlink(link);
}
Status Filesystem::Unlink(const Entry& parent, std::string_view name) {
  return backend_->Unlink(parent, name);
}
Status Filesystem::Rmdir(const Entry& parent, std::string_view name) {
  return backend_->Rmdir(parent, name);
}
Status Filesystem::Rename(const Entry& parent, std::string_view name, const Entry& new_parent,
                          std::string_view new_name, unsigned flags) {
  return backend_->Rename(parent, name, new_parent, new_name, flags);
}

Result<Attr> Filesystem::Stat(const Entry& entry) {
  return backend_->Stat(entry);
}
Result<Attr> Filesystem::SetAttr(const Entry& entry, const SetAttrArgs& args) {
  return backend_->SetAttr(entry, args);
}
Status Filesystem::Truncate(const Entry& file, uint64_t size) {
  return backend_->Truncate(file, size);
}
Result<StatFs> Filesystem::Statfs() {
  return backend_->Statfs();
}

Result<std::vector<DirEntry>> Filesystem::Readdir(const Entry& dir, DirAnchor& anchor, size_t max) {
  return backend_->Readdir(dir, anchor, max);
}

Result<uint64_t> Filesystem::Read(const Entry& file, uint64_t offset, std::span<std::byte> buffer) {
  return backend_->Read(file, offset, buffer);
}
Result<uint64_t> Filesystem::Write(const Entry& file, uint64_t offset, std::span<const std::byte> data) {
  return backend_->Write(file, offset, data);
}
Status Filesystem::Sync(const Entry& entry) {
  return backend_->Sync(entry);
}

Status Filesystem::SubmitRead(client::EventQueue& eq, const Entry& file, uint64_t offset, std::span<std::byte> buffer,
                              client::IoCallback callback) {
  return backend_->SubmitRead(eq, file, offset, buffer, std::move(callback));
}
Status Filesystem::SubmitWrite(client::EventQueue& eq, const Entry& file, uint64_t offset,
                               std::span<const std::byte> data, client::IoCallback callback) {
  return backend_->SubmitWrite(eq, file, offset, data, std::move(callback));
}

}  // namespace ros2::dfs
