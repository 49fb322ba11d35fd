// FilesystemBackend: the one interface a mounted dfs::Filesystem does its work
// through, chosen once at mount. Two implementations:
//   DirectFilesystem (direct_filesystem.h) — the DFS client itself: records
//     and chunks on the container's objects through libros2;
//   AgentFilesystem (offload/agent_filesystem.h) — offload mode: every call
//     is an entry on the rings of this process's ros2-agent session, which
//     runs a DirectFilesystem for the tenant (docs/agent.md).
// Each method has the contract of the Filesystem method of the same name
// (include/ros2/dfs.h). Thread-safe as Filesystem is.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ros2/client.h"
#include "ros2/dfs.h"

namespace ros2::dfs {

class FilesystemBackend {
 public:
  virtual ~FilesystemBackend() = default;

  virtual uint64_t chunk_size() const = 0;
  virtual Entry Root() const = 0;

  virtual Result<Entry> Lookup(const Entry& parent, std::string_view name) = 0;
  virtual Result<Entry> LookupPath(std::string_view path) = 0;
  virtual Result<std::pair<Entry, Attr>> LookupWithAttr(const Entry& parent, std::string_view name) = 0;

  virtual Result<Entry> Open(const Entry& parent, std::string_view name, int flags, mode_t mode, bool* created) = 0;
  virtual Result<Entry> Mkdir(const Entry& parent, std::string_view name, mode_t mode) = 0;
  virtual Result<Entry> MkdirAll(std::string_view path, mode_t mode, uint64_t* created) = 0;
  virtual Result<Entry> Symlink(const Entry& parent, std::string_view name, std::string_view target) = 0;
  virtual Result<Entry> Mknod(const Entry& parent, std::string_view name, mode_t mode, uint64_t rdev) = 0;
  virtual Result<Entry> Link(const Entry& target, const Entry& new_parent, std::string_view new_name) = 0;
  virtual Result<std::string> Readlink(const Entry& link) = 0;
  virtual Status Unlink(const Entry& parent, std::string_view name) = 0;
  virtual Status Rmdir(const Entry& parent, std::string_view name) = 0;
  virtual Status Rename(const Entry& parent, std::string_view name, const Entry& new_parent, std::string_view new_name,
                        unsigned flags) = 0;

  virtual Result<Attr> Stat(const Entry& entry) = 0;
  virtual Result<Attr> SetAttr(const Entry& entry, const SetAttrArgs& args) = 0;
  virtual Status Truncate(const Entry& file, uint64_t size) = 0;
  virtual Result<StatFs> Statfs() = 0;

  virtual Result<std::vector<DirEntry>> Readdir(const Entry& dir, DirAnchor& anchor, size_t max) = 0;

  virtual Result<uint64_t> Read(const Entry& file, uint64_t offset, std::span<std::byte> buffer) = 0;
  virtual Result<uint64_t> Write(const Entry& file, uint64_t offset, std::span<const std::byte> data) = 0;
  virtual Status Sync(const Entry& entry) = 0;

  virtual Status SubmitRead(client::EventQueue& eq, const Entry& file, uint64_t offset, std::span<std::byte> buffer,
                            client::IoCallback callback) = 0;
  virtual Status SubmitWrite(client::EventQueue& eq, const Entry& file, uint64_t offset,
                             std::span<const std::byte> data, client::IoCallback callback) = 0;
};

}  // namespace ros2::dfs
