// AgentFilesystem: the FilesystemBackend of a container opened in offload
// mode (ClientOptions::agent_socket). ros2-agent holds the mount for this
// process's tenant; each method is one entry (or, for large I/O, a few) on
// the rings of the client's agent session (client/offload/host_session.h,
// docs/agent.md). Results and errors are the agent's DirectFilesystem's.
// Thread-safe: the session is.
#pragma once

#include <memory>

#include "client/offload/host_session.h"
#include "dfs/filesystem_backend.h"

namespace ros2::dfs {

class AgentFilesystem final : public FilesystemBackend {
 public:
  // Asks the agent to mount the container (pool and container by the labels
  // the handles were opened with). MountOptions' uid/gid are the caller's own.
  static Result<std::unique_ptr<AgentFilesystem>> Mount(client::Container& container, const MountOptions& options);
  AgentFilesystem(std::shared_ptr<agent::HostSession> session, const agent::OffloadMount& mount);
  // Unmounts at the agent (best effort: the agent drops it with the session anyway).
  ~AgentFilesystem() override;

  uint64_t chunk_size() const override { return chunk_size_; }
  Entry Root() const override { return root_; }

  Result<Entry> Lookup(const Entry& parent, std::string_view name) override;
  Result<Entry> LookupPath(std::string_view path) override;
  Result<std::pair<Entry, Attr>> LookupWithAttr(const Entry& parent, std::string_view name) override;

  Result<Entry> Open(const Entry& parent, std::string_view name, int flags, mode_t mode, bool* created) override;
  Result<Entry> Mkdir(const Entry& parent, std::string_view name, mode_t mode) override;
  Result<Entry> MkdirAll(std::string_view path, mode_t mode, uint64_t* created) override;
  Result<Entry> Symlink(const Entry& parent, std::string_view name, std::string_view target) override;
  Result<Entry> Mknod(const Entry& parent, std::string_view name, mode_t mode, uint64_t rdev) override;
  Result<Entry> Link(const Entry& target, const Entry& new_parent, std::string_view new_name) override;
  Result<std::string> Readlink(const Entry& link) override;
  Status Unlink(const Entry& parent, std::string_view name) override;
  Status Rmdir(const Entry& parent, std::string_view name) override;
  Status Rename(const Entry& parent, std::string_view name, const Entry& new_parent, std::string_view new_name,
                unsigned flags) override;

  Result<Attr> Stat(const Entry& entry) override;
  Result<Attr> SetAttr(const Entry& entry, const SetAttrArgs& args) override;
  Status Truncate(const Entry& file, uint64_t size) override;
  Result<StatFs> Statfs() override;

  Result<std::vector<DirEntry>> Readdir(const Entry& dir, DirAnchor& anchor, size_t max) override;

  Result<uint64_t> Read(const Entry& file, uint64_t offset, std::span<std::byte> buffer) override;
  Result<uint64_t> Write(const Entry& file, uint64_t offset, std::span<const std::byte> data) override;
  Status Sync(const Entry& entry) override;

  // An entry in flight at the agent, completed by eq's Poll/Wait (bounced
  // through the arena when the buffer lies outside it); when it cannot be
  // one (empty, larger than one entry may span, no arena room), the blocking
  // call, whose result eq completes.
  Status SubmitRead(client::EventQueue& eq, const Entry& file, uint64_t offset, std::span<std::byte> buffer,
                    client::IoCallback callback) override;
  Status SubmitWrite(client::EventQueue& eq, const Entry& file, uint64_t offset, std::span<const std::byte> data,
                     client::IoCallback callback) override;

 private:
  Status SubmitIo(client::EventQueue& eq, const Entry& file, uint64_t offset, std::byte* data, uint64_t length,
                  bool read, client::IoCallback callback);

  std::shared_ptr<agent::HostSession> session_;
  uint32_t index_ = 0;  // the agent's mount index
  Entry root_;
  uint64_t chunk_size_ = 0;
};

}  // namespace ros2::dfs
