#include "fs_transfer.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/config.h"
#include "fs_stream.h"

namespace ros2::ctl {

namespace {

using Clock = std::chrono::steady_clock;
constexpr mode_t kPermissionBits = 07777;

// Owns one local file descriptor.
class LocalFd {
 public:
  explicit LocalFd(int fd) : fd_(fd) {}
  ~LocalFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  LocalFd(const LocalFd&) = delete;
  LocalFd& operator=(const LocalFd&) = delete;
  int get() const { return fd_; }
  // Closes now and reports a failed close (a delayed write error).
  int Close() {
    int rc = ::close(std::exchange(fd_, -1));
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// The last component of a local path ("a/b/" -> "b"); for ".", ".." or "/"
// the name of the directory they stand for.
std::string LocalBaseName(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  std::string name = p.substr(p.rfind('/') == std::string::npos ? 0 : p.rfind('/') + 1);
  if (name.empty() || name == "." || name == "..") {
    std::error_code ec;
    auto abs = std::filesystem::weakly_canonical(std::filesystem::absolute(p, ec), ec);
    name = abs.filename().string();
  }
  return name;
}

std::string JoinLocalPath(const std::string& dir, std::string_view name) {
  if (!dir.empty() && dir.back() == '/') return dir + std::string(name);
  return dir + "/" + std::string(name);
}

Result<std::string> ReadLocalLink(const std::string& path) {
  std::vector<char> buf(256);
  while (true) {
    ssize_t n = ::readlink(path.c_str(), buf.data(), buf.size());
    if (n < 0) return LocalError(errno, "readlink", path);
    if (static_cast<size_t>(n) < buf.size()) return std::string(buf.data(), static_cast<size_t>(n));
    buf.resize(buf.size() * 2);
  }
}

std::string ModeNote(uint64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// ---------------------------------------------------------------------------
// put

struct LocalItem {
  std::string local;
  std::string remote;
  struct stat st {};
};

Status WalkLocal(const std::string& local, const std::string& remote, bool recursive, std::vector<LocalItem>& out) {
  LocalItem item{local, remote, {}};
  if (::lstat(local.c_str(), &item.st) != 0) return LocalError(errno, "put", local);
  const bool is_dir = S_ISDIR(item.st.st_mode);
  if (is_dir && !recursive) {
    return Status::IsDirectory(
        fmt::format("put '{}': {} (use -r to copy a directory tree)", local, std::strerror(EISDIR)));
  }
  out.push_back(item);
  if (!is_dir) return Status::Ok();
  DIR* d = ::opendir(local.c_str());
  if (d == nullptr) return LocalError(errno, "put", local);
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* de = ::readdir(d)) {
    std::string_view n = de->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  const int err = errno;
  ::closedir(d);
  if (err != 0) return LocalError(err, "put", local);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    ROS2_RETURN_IF_ERROR(WalkLocal(JoinLocalPath(local, n), JoinRemotePath(remote, n), recursive, out));
  }
  return Status::Ok();
}

class Putter {
 public:
  Putter(FsSession& s, FileStreamer& streamer, TransferProgress& progress, TransferSummary& sum)
      : s_(s), fs_(s.fs()), streamer_(streamer), progress_(progress), sum_(sum) {}

  Status Run(const std::vector<LocalItem>& plan) {
    for (const auto& item : plan) {
      const auto& [dir, name] = SplitRemotePath(item.remote);
      if (item.remote == "/") {  // merging a tree into the root
        dirs_["/"] = fs_.Root();
        ++sum_.directories;
        continue;
      }
      auto parent = dirs_.find(dir);
      if (parent == dirs_.end()) {
        ROS2_ASSIGN_OR_RETURN(dfs::Entry p, s_.LookupParent(item.remote, "put"));
        parent = dirs_.emplace(dir, std::move(p)).first;
      }
      const mode_t mode = item.st.st_mode;
      if (S_ISDIR(mode)) {
        ROS2_RETURN_IF_ERROR(PutDirectory(parent->second, name, item));
      } else if (S_ISREG(mode)) {
        ROS2_RETURN_IF_ERROR(PutFile(parent->second, name, item));
      } else if (S_ISLNK(mode)) {
        ROS2_RETURN_IF_ERROR(PutSymlink(parent->second, name, item));
      } else {
        std::fprintf(stderr, "ros2ctl: put: skipping '%s' (not a regular file, directory or symlink)\n",
                     item.local.c_str());
        ++sum_.skipped;
      }
    }
    // Directory modes last, deepest first: a read-only directory was
    // writable while it was being filled.
    for (auto it = dir_modes_.rbegin(); it != dir_modes_.rend(); ++it) {
      ROS2_RETURN_IF_ERROR(SetMode(it->first, it->second.first, it->second.second));
    }
    return Status::Ok();
  }

 private:
  Status SetMode(const dfs::Entry& e, mode_t mode, const std::string& path) {
    dfs::SetAttrArgs args;
    args.mask = dfs::kSetMode;
    args.mode = mode & kPermissionBits;
    auto r = fs_.SetAttr(e, args);
    return r.ok() ? Status::Ok() : FsError(r.status(), "chmod", path);
  }

  Status PutDirectory(const dfs::Entry& parent, const std::string& name, const LocalItem& item) {
    auto e = fs_.Mkdir(parent, name, (item.st.st_mode & kPermissionBits) | 0700);
    if (!e.ok() && e.status().code() == Status::Code::kAlreadyExists) {
      e = fs_.Lookup(parent, name);
      if (e.ok() && !e->is_dir()) return FsError(Status::NotDirectory("exists"), "put", item.remote);
    }
    if (!e.ok()) return FsError(e.status(), "mkdir", item.remote);
    dirs_[item.remote] = *e;
    dir_modes_.emplace_back(*e, std::make_pair(item.st.st_mode, item.remote));
    ++sum_.directories;
    return Status::Ok();
  }

  Status PutFile(const dfs::Entry& parent, const std::string& name, const LocalItem& item) {
    LocalFd fd(::open(item.local.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return LocalError(errno, "put", item.local);
    const int flags = O_CREAT | O_TRUNC | O_WRONLY;
    const mode_t mode = (item.st.st_mode & kPermissionBits) | 0600;
    auto file = fs_.Open(parent, name, flags, mode);
    if (!file.ok() && file.status().code() == Status::Code::kPermissionDenied) {
      // An existing read-only file: make it writable for the copy (its mode
      // is set to the source's afterwards).
      auto old = fs_.Lookup(parent, name);
      if (old.ok() && old->is_file()) {
        ROS2_RETURN_IF_ERROR(SetMode(*old, old->mode | 0600, item.remote));
        file = fs_.Open(parent, name, flags, mode);
      }
    }
    if (!file.ok()) return FsError(file.status(), "put", item.remote);
    const uint64_t size = static_cast<uint64_t>(item.st.st_size);
    const int local_fd = fd.get();
    Status st = streamer_.Write(
        *file, size,
        [local_fd](uint64_t offset, std::span<std::byte> buf) -> Result<size_t> {
          size_t done = 0;
          while (done < buf.size()) {
            ssize_t n = ::pread(local_fd, buf.data() + done, buf.size() - done, static_cast<off_t>(offset + done));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) return Status::FromErrno(errno, "read");
            if (n == 0) break;
            done += static_cast<size_t>(n);
          }
          return done;
        },
        &progress_);
    if (!st.ok()) return FsError(st, "put", fmt::format("{}' -> '{}", item.local, item.remote));
    ROS2_RETURN_IF_ERROR(SetMode(*file, item.st.st_mode, item.remote));
    ++sum_.files;
    sum_.bytes += size;
    progress_.FileDone();
    return Status::Ok();
  }

  Status PutSymlink(const dfs::Entry& parent, const std::string& name, const LocalItem& item) {
    ROS2_ASSIGN_OR_RETURN(std::string target, ReadLocalLink(item.local));
    auto link = fs_.Symlink(parent, name, target);
    if (!link.ok() && link.status().code() == Status::Code::kAlreadyExists) {
      auto old = fs_.Lookup(parent, name);
      if (old.ok() && old->is_dir()) return FsError(Status::IsDirectory("exists"), "put", item.remote);
      Status rm = fs_.Unlink(parent, name);
      if (!rm.ok()) return FsError(rm, "put", item.remote);
      link = fs_.Symlink(parent, name, target);
    }
    if (!link.ok()) return FsError(link.status(), "symlink", item.remote);
    ++sum_.symlinks;
    return Status::Ok();
  }

  FsSession& s_;
  dfs::Filesystem& fs_;
  FileStreamer& streamer_;
  TransferProgress& progress_;
  TransferSummary& sum_;
  std::unordered_map<std::string, dfs::Entry> dirs_;
  std::vector<std::pair<dfs::Entry, std::pair<mode_t, std::string>>> dir_modes_;
};

// ---------------------------------------------------------------------------
// get

struct RemoteItem {
  dfs::Entry entry;
  dfs::Attr attr;
  std::string remote;
  std::string local;
};

Status WalkRemote(dfs::Filesystem& fs, const dfs::Entry& entry, const dfs::Attr& attr, const std::string& remote,
                  const std::string& local, bool recursive, std::vector<RemoteItem>& out) {
  const bool is_dir = S_ISDIR(attr.mode);
  if (is_dir && !recursive) {
    return Status::IsDirectory(
        fmt::format("get '{}': {} (use -r to copy a directory tree)", remote, std::strerror(EISDIR)));
  }
  out.push_back(RemoteItem{entry, attr, remote, local});
  if (!is_dir) return Status::Ok();
  ROS2_ASSIGN_OR_RETURN(auto children, ReadWholeDirectory(fs, entry, remote));
  for (const auto& c : children) {
    const std::string child_remote = JoinRemotePath(remote, c.name);
    auto ea = fs.LookupWithAttr(entry, c.name);
    if (!ea.ok()) return FsError(ea.status(), "get", child_remote);
    ROS2_RETURN_IF_ERROR(
        WalkRemote(fs, ea->first, ea->second, child_remote, JoinLocalPath(local, c.name), recursive, out));
  }
  return Status::Ok();
}

class Getter {
 public:
  Getter(dfs::Filesystem& fs, FileStreamer& streamer, TransferProgress& progress, TransferSummary& sum)
      : fs_(fs), streamer_(streamer), progress_(progress), sum_(sum) {}

  Status Run(const std::vector<RemoteItem>& plan) {
    std::vector<const RemoteItem*> dirs;
    for (const auto& item : plan) {
      const mode_t mode = item.attr.mode;
      if (S_ISDIR(mode)) {
        ROS2_RETURN_IF_ERROR(GetDirectory(item));
        dirs.push_back(&item);
      } else if (S_ISREG(mode)) {
        ROS2_RETURN_IF_ERROR(GetFile(item));
      } else if (S_ISLNK(mode)) {
        ROS2_RETURN_IF_ERROR(GetSymlink(item));
      } else {
        std::fprintf(stderr, "ros2ctl: get: skipping '%s' (not a regular file, directory or symlink)\n",
                     item.remote.c_str());
        ++sum_.skipped;
      }
    }
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
      if (::chmod((*it)->local.c_str(), (*it)->attr.mode & kPermissionBits) != 0) {
        return LocalError(errno, "chmod", (*it)->local);
      }
    }
    return Status::Ok();
  }

 private:
  Status GetDirectory(const RemoteItem& item) {
    if (::mkdir(item.local.c_str(), 0700) != 0) {
      const int err = errno;
      struct stat st {};
      if (err != EEXIST) return LocalError(err, "mkdir", item.local);
      if (::stat(item.local.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        return LocalError(ENOTDIR, "get", item.local);
      }
      // An existing directory is filled; make sure we can write into it.
      if (::chmod(item.local.c_str(), st.st_mode | 0700) != 0) return LocalError(errno, "chmod", item.local);
    }
    ++sum_.directories;
    return Status::Ok();
  }

  Status GetFile(const RemoteItem& item) {
    LocalFd fd(::open(item.local.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (fd.get() < 0) return LocalError(errno, "get", item.local);
    const int local_fd = fd.get();
    auto got = streamer_.Read(
        item.entry, item.attr.size,
        [local_fd](uint64_t offset, std::span<const std::byte> data) -> Status {
          size_t done = 0;
          while (done < data.size()) {
            ssize_t n = ::pwrite(local_fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) return Status::FromErrno(errno, "write");
            done += static_cast<size_t>(n);
          }
          return Status::Ok();
        },
        &progress_);
    if (!got.ok()) return FsError(got.status(), "get", fmt::format("{}' -> '{}", item.remote, item.local));
    if (::fchmod(local_fd, item.attr.mode & kPermissionBits) != 0) return LocalError(errno, "chmod", item.local);
    if (int err = fd.Close(); err != 0) return LocalError(err, "close", item.local);
    ++sum_.files;
    sum_.bytes += *got;
    progress_.FileDone();
    return Status::Ok();
  }

  Status GetSymlink(const RemoteItem& item) {
    auto target = fs_.Readlink(item.entry);
    if (!target.ok()) return FsError(target.status(), "readlink", item.remote);
    struct stat st {};
    if (::lstat(item.local.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) return LocalError(EISDIR, "get", item.local);
      if (::unlink(item.local.c_str()) != 0) return LocalError(errno, "get", item.local);
    }
    if (::symlink(target->c_str(), item.local.c_str()) != 0) return LocalError(errno, "symlink", item.local);
    ++sum_.symlinks;
    return Status::Ok();
  }

  dfs::Filesystem& fs_;
  FileStreamer& streamer_;
  TransferProgress& progress_;
  TransferSummary& sum_;
};

template <typename Item>
std::pair<uint64_t, uint64_t> PlanTotals(const std::vector<Item>& plan, uint64_t (*size_of)(const Item&)) {
  uint64_t bytes = 0, files = 0;
  for (const auto& i : plan) {
    uint64_t s = size_of(i);
    if (s != UINT64_MAX) {
      bytes += s;
      ++files;
    }
  }
  return {bytes, files};
}

}  // namespace

std::string TransferSummary::ToText(std::string_view verb) const {
  std::string what = ModeNote(files, "file", "files");
  if (directories > 0) what += ", " + ModeNote(directories, "directory", "directories");
  if (symlinks > 0) what += ", " + ModeNote(symlinks, "symlink", "symlinks");
  if (skipped > 0) what += fmt::format(", {} skipped", skipped);
  const double rate = seconds > 0 ? static_cast<double>(bytes) / seconds : 0;
  return fmt::format("{} {} -> {}: {}, {} in {:.2f} s ({}/s)\n", verb, source, destination, what, FormatSize(bytes),
                     seconds, FormatSize(static_cast<uint64_t>(rate)));
}

nlohmann::json TransferSummary::ToJson() const {
  return {{"source", source},     {"destination", destination}, {"files", files}, {"directories", directories},
          {"symlinks", symlinks}, {"skipped", skipped},         {"bytes", bytes}, {"seconds", seconds}};
}

Result<TransferSummary> PutPath(FsSession& session, const std::string& local, const std::string& remote,
                                const TransferOptions& options) {
  const auto t0 = Clock::now();
  ROS2_ASSIGN_OR_RETURN(std::string dest, NormalizeRemotePath(remote));
  auto existing = session.fs().LookupPath(dest);
  if (existing.ok() && existing->is_dir()) {
    dest = JoinRemotePath(dest, LocalBaseName(local));
  } else if (!existing.ok() && !existing.status().IsNotFound()) {
    return FsError(existing.status(), "put", dest);
  }
  std::vector<LocalItem> plan;
  ROS2_RETURN_IF_ERROR(WalkLocal(local, dest, options.recursive, plan));
  auto [bytes, files] = PlanTotals<LocalItem>(plan, [](const LocalItem& i) -> uint64_t {
    return S_ISREG(i.st.st_mode) ? static_cast<uint64_t>(i.st.st_size) : UINT64_MAX;
  });
  TransferSummary sum;
  sum.source = local;
  sum.destination = dest;
  ROS2_ASSIGN_OR_RETURN(auto streamer, FileStreamer::Create(session.client(), session.fs()));
  TransferProgress progress(options.progress, bytes, files);
  Putter putter(session, *streamer, progress, sum);
  ROS2_RETURN_IF_ERROR(putter.Run(plan));
  progress.Finish();
  sum.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return sum;
}

Result<TransferSummary> GetPath(FsSession& session, const std::string& remote, const std::string& local,
                                const TransferOptions& options) {
  const auto t0 = Clock::now();
  ROS2_ASSIGN_OR_RETURN(std::string src, NormalizeRemotePath(remote));
  ROS2_ASSIGN_OR_RETURN(auto top, session.LookupWithAttr(src, "get"));
  std::string dest = local;
  struct stat st {};
  if (::stat(local.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && src != "/") {
    dest = JoinLocalPath(local, SplitRemotePath(src).second);
  }
  std::vector<RemoteItem> plan;
  ROS2_RETURN_IF_ERROR(WalkRemote(session.fs(), top.first, top.second, src, dest, options.recursive, plan));
  auto [bytes, files] = PlanTotals<RemoteItem>(
      plan, [](const RemoteItem& i) -> uint64_t { return S_ISREG(i.attr.mode) ? i.attr.size : UINT64_MAX; });
  TransferSummary sum;
  sum.source = src;
  sum.destination = dest;
  ROS2_ASSIGN_OR_RETURN(auto streamer, FileStreamer::Create(session.client(), session.fs()));
  TransferProgress progress(options.progress, bytes, files);
  Getter getter(session.fs(), *streamer, progress, sum);
  ROS2_RETURN_IF_ERROR(getter.Run(plan));
  progress.Finish();
  sum.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return sum;
}

}  // namespace ros2::ctl
