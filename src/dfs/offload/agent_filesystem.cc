#include "dfs/offload/agent_filesystem.h"

#include <cstring>

#include <fmt/format.h>

#include "client/offload/agent_queue.h"

namespace ros2::dfs {

Result<std::unique_ptr<AgentFilesystem>> AgentFilesystem::Mount(client::Container& container,
                                                                const MountOptions& options) {
  const client::OffloadLink* link = client::OffloadAccess::LinkOf(container);
  if (link == nullptr) return Status::InvalidArgument("dfs mount through the agent: a direct-mode container");
  auto mounted = link->session->Mount(link->pool, link->container, options);
  if (!mounted.ok()) {
    return mounted.status().WithContext(
        fmt::format("dfs mount of container {} in pool {} through the agent", link->container, link->pool));
  }
  return std::make_unique<AgentFilesystem>(link->session, *mounted);
}

AgentFilesystem::AgentFilesystem(std::shared_ptr<agent::HostSession> session, const agent::OffloadMount& mount)
    : session_(std::move(session)), index_(mount.index), root_(mount.root), chunk_size_(mount.chunk_size) {}

AgentFilesystem::~AgentFilesystem() {
  (void)session_->Unmount(index_);
}

Result<Entry> AgentFilesystem::Lookup(const Entry& parent, std::string_view name) {
  return session_->Lookup(index_, parent, name);
}
Result<Entry> AgentFilesystem::LookupPath(std::string_view path) {
  return session_->LookupPath(index_, path);
}
Result<std::pair<Entry, Attr>> AgentFilesystem::LookupWithAttr(const Entry& parent, std::string_view name) {
  return session_->LookupWithAttr(index_, parent, name);
}
Result<Entry> AgentFilesystem::Open(const Entry& parent, std::string_view name, int flags, mode_t mode, bool* created) {
  return session_->Open(index_, parent, name, flags, mode, created);
}
Result<Entry> AgentFilesystem::Mkdir(const Entry& parent, std::string_view name, mode_t mode) {
  return session_->Mkdir(index_, parent, name, mode);
}
Result<Entry> AgentFilesystem::MkdirAll(std::string_view path, mode_t mode, uint64_t* created) {
  return session_->MkdirAll(index_, path, mode, created);
}
Result<Entry> AgentFilesystem::Symlink(const Entry& parent, std::string_view name, std::string_view target) {
  return session_->Symlink(index_, parent, name, target);
}
Result<Entry> AgentFilesystem::Mknod(const Entry& parent, std::string_view name, mode_t mode, uint64_t rdev) {
  return session_->Mknod(index_, parent, name, mode, rdev);
}
Result<Entry> AgentFilesystem::Link(const Entry& target, const Entry& new_parent, std::string_view new_name) {
  return session_->Link(index_, target, new_parent, new_name);
}
Result<std::string> AgentFilesystem::Readlink(const Entry& link) {
  return session_->Readlink(index_, link);
}
Status AgentFilesystem::Unlink(const Entry& parent, std::string_view name) {
  return session_->Unlink(index_, parent, name);
}
Status AgentFilesystem::Rmdir(const Entry& parent, std::string_view name) {
  return session_->Rmdir(index_, parent, name);
}
Status AgentFilesystem::Rename(const Entry& parent, std::string_view name, const Entry& new_parent,
                               std::string_view new_name, unsigned flags) {
  return session_->Rename(index_, parent, name, new_parent, new_name, flags);
}
Result<Attr> AgentFilesystem::Stat(const Entry& entry) {
  return session_->Stat(index_, entry);
}
Result<Attr> AgentFilesystem::SetAttr(const Entry& entry, const SetAttrArgs& args) {
  return session_->SetAttr(index_, entry, args);
}
Status AgentFilesystem::Truncate(const Entry& file, uint64_t size) {
  return session_->Truncate(index_, file, size);
}
Result<StatFs> AgentFilesystem::Statfs() {
  return session_->Statfs(index_);
}
Result<std::vector<DirEntry>> AgentFilesystem::Readdir(const Entry& dir, DirAnchor& anchor, size_t max) {
  return session_->Readdir(index_, dir, anchor, max);
}
Result<uint64_t> AgentFilesystem::Read(const Entry& file, uint64_t offset, std::span<std::byte> buffer) {
  return session_->Read(index_, file, offset, buffer);
}
Result<uint64_t> AgentFilesystem::Write(const Entry& file, uint64_t offset, std::span<const std::byte> data) {
  return session_->Write(index_, file, offset, data);
}
Status AgentFilesystem::Sync(const Entry& entry) {
  return session_->Sync(index_, entry);
}

Status AgentFilesystem::SubmitRead(client::EventQueue& eq, const Entry& file, uint64_t offset,
                                   std::span<std::byte> buffer, client::IoCallback callback) {
  return SubmitIo(eq, file, offset, buffer.data(), buffer.size(), true, std::move(callback));
}
Status AgentFilesystem::SubmitWrite(client::EventQueue& eq, const Entry& file, uint64_t offset,
                                    std::span<const std::byte> data, client::IoCallback callback) {
  return SubmitIo(eq, file, offset, const_cast<std::byte*>(data.data()), data.size(), false, std::move(callback));
}

Status AgentFilesystem::SubmitIo(client::EventQueue& eq, const Entry& file, uint64_t offset, std::byte* data,
                                 uint64_t length, bool read, client::IoCallback callback) {
  if (!callback) return Status::InvalidArgument(read ? "dfs read: empty callback" : "dfs write: empty callback");
  const uint64_t chunks = file.chunk_size == 0 ? 1 : length / file.chunk_size + 2;
  const bool in_arena = session_->InArena(data, length);
  agent::ArenaBuffer bounce;
  if (length > 0 && chunks < agent::kMaxChunksPerIo && !in_arena) {
    auto b = session_->Allocate(length);
    if (b.ok()) bounce = *b;
  }
  if (length == 0 || chunks >= agent::kMaxChunksPerIo || (!in_arena && !bounce)) {
    // Empty, larger than one entry may span, or no arena room: the blocking
    // call (which splits and bounces as it must), completed by the queue.
    auto n = read ? Read(file, offset, {data, length}) : Write(file, offset, {data, length});
    return client::OffloadAccess::CompleteLater(eq, n, std::move(callback));
  }
  // In flight at the agent: the queue's Poll/Wait reaps the completion.
  agent::IoRequest req;
  req.kind = read ? agent::RingOp::kRead : agent::RingOp::kWrite;
  req.mount = index_;
  req.file = &file;
  req.offset = offset;
  req.buffer = {data, length};
  if (bounce) {
    if (!read) std::memcpy(bounce.data, data, length);
    req.buffer = {bounce.data, length};
  }
  Status st = client::OffloadAccess::SubmitIo(eq, req, bounce, data, std::move(callback));
  if (!st.ok()) {
    if (bounce) session_->Free(bounce);
    return st.WithContext(fmt::format("dfs {} of '{}' through the agent", read ? "read" : "write", file.name));
  }
  return Status::Ok();
}

}  // namespace ros2::dfs
