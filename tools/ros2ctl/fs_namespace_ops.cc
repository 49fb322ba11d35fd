#include "fs_namespace_ops.h"

#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "fs_stream.h"

namespace ros2::ctl {

namespace {

// Removes everything below `dir` (children first); counts removed entries.
Status RemoveTree(dfs::Filesystem& fs, const dfs::Entry& dir, const std::string& path, uint64_t& removed) {
  ROS2_ASSIGN_OR_RETURN(auto children, ReadWholeDirectory(fs, dir, path));
  for (const auto& c : children) {
    const std::string child = JoinRemotePath(path, c.name);
    if (S_ISDIR(c.mode)) {
      auto e = fs.Lookup(dir, c.name);
      if (!e.ok()) return FsError(e.status(), "rm", child);
      ROS2_RETURN_IF_ERROR(RemoveTree(fs, *e, child, removed));
      if (Status st = fs.Rmdir(dir, c.name); !st.ok()) return FsError(st, "rm", child);
    } else {
      if (Status st = fs.Unlink(dir, c.name); !st.ok()) return FsError(st, "rm", child);
    }
    ++removed;
  }
  return Status::Ok();
}

}  // namespace

Result<CommandOutput> MakeDirectory(FsSession& session, const std::string& path, bool parents, mode_t mode) {
  dfs::Filesystem& fs = session.fs();
  uint64_t created = 0;
  if (!parents) {
    if (path == "/") return FsError(Status::AlreadyExists("root"), "mkdir", path);
    ROS2_ASSIGN_OR_RETURN(dfs::Entry parent, session.LookupParent(path, "mkdir"));
    auto e = fs.Mkdir(parent, SplitRemotePath(path).second, mode);
    if (!e.ok()) return FsError(e.status(), "mkdir", path);
    created = 1;
  } else {
    auto e = fs.MkdirAll(path, mode, &created);
    if (!e.ok()) return FsError(e.status(), "mkdir", path);
  }
  return CommandOutput{created > 0 ? fmt::format("Created {}\n", path) : fmt::format("{} exists\n", path),
                       {{"path", path}, {"created", created}}};
}

Result<CommandOutput> RemovePath(FsSession& session, const std::string& path, bool recursive, bool force) {
  dfs::Filesystem& fs = session.fs();
  if (path == "/") return Status::InvalidArgument("rm '/': refusing to remove the container's root");
  ROS2_ASSIGN_OR_RETURN(dfs::Entry parent, session.LookupParent(path, "rm"));
  const std::string name = SplitRemotePath(path).second;
  auto e = fs.Lookup(parent, name);
  if (!e.ok() && e.status().IsNotFound() && force) {
    return CommandOutput{"", {{"path", path}, {"removed", 0}}};
  }
  if (!e.ok()) return FsError(e.status(), "rm", path);
  uint64_t removed = 0;
  if (e->is_dir()) {
    if (recursive) ROS2_RETURN_IF_ERROR(RemoveTree(fs, *e, path, removed));
    Status st = fs.Rmdir(parent, name);
    if (st.code() == Status::Code::kNotEmpty && !recursive) {
      return Status::NotEmpty(
          fmt::format("rm '{}': {} (use -r to remove a directory tree)", path, std::strerror(ENOTEMPTY)));
    }
    if (!st.ok()) return FsError(st, "rm", path);
  } else {
    if (Status st = fs.Unlink(parent, name); !st.ok()) return FsError(st, "rm", path);
  }
  ++removed;
  return CommandOutput{fmt::format("Removed {}{}\n", path, removed > 1 ? fmt::format(" ({} entries)", removed) : ""),
                       {{"path", path}, {"removed", removed}}};
}

Result<CommandOutput> MovePath(FsSession& session, const std::string& src, const std::string& dst) {
  dfs::Filesystem& fs = session.fs();
  if (src == "/") return Status::InvalidArgument("mv '/': the container's root cannot be moved");
  ROS2_ASSIGN_OR_RETURN(dfs::Entry src_parent, session.LookupParent(src, "mv"));
  const std::string src_name = SplitRemotePath(src).second;
  if (auto e = fs.Lookup(src_parent, src_name); !e.ok()) return FsError(e.status(), "mv", src);
  std::string target = dst;
  if (auto d = fs.LookupPath(dst); d.ok() && d->is_dir() && dst != src) target = JoinRemotePath(dst, src_name);
  if (target == src) return CommandOutput{fmt::format("{} unchanged\n", src), {{"source", src}, {"destination", src}}};
  ROS2_ASSIGN_OR_RETURN(dfs::Entry dst_parent, session.LookupParent(target, "mv"));
  Status st = fs.Rename(src_parent, src_name, dst_parent, SplitRemotePath(target).second);
  if (!st.ok()) return FsError(st, "mv", fmt::format("{}' -> '{}", src, target));
  return CommandOutput{fmt::format("Moved {} -> {}\n", src, target), {{"source", src}, {"destination", target}}};
}

Result<CommandOutput> CatPath(FsSession& session, const std::string& path, int out_fd) {
  ROS2_ASSIGN_OR_RETURN(auto ea, session.LookupWithAttr(path, "cat"));
  if (ea.first.is_dir()) return FsError(Status::IsDirectory("directory"), "cat", path);
  if (!ea.first.is_file()) return Status::InvalidArgument(fmt::format("cat '{}': not a regular file", path));
  ROS2_ASSIGN_OR_RETURN(auto streamer, FileStreamer::Create(session.client(), session.fs()));
  auto got = streamer->Read(
      ea.first, ea.second.size,
      [out_fd](uint64_t, std::span<const std::byte> data) -> Status {
        size_t done = 0;
        while (done < data.size()) {
          ssize_t n = ::write(out_fd, data.data() + done, data.size() - done);
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) return Status::FromErrno(errno, "write to stdout");
          done += static_cast<size_t>(n);
        }
        return Status::Ok();
      },
      nullptr);
  if (!got.ok()) return FsError(got.status(), "cat", path);
  return CommandOutput{"", {{"path", path}, {"bytes", *got}}};
}

}  // namespace ros2::ctl
