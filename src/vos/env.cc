#include "vos/env.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "common/log.h"

namespace ros2::vos {
namespace {

// An open POSIX descriptor; closes it on destruction.
class PosixFile final : public File {
 public:
  PosixFile(std::string path, int fd, bool direct) : path_(std::move(path)), fd_(fd), direct_(direct) {}
  ~PosixFile() override { ::close(fd_); }
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;

  Status Read(uint64_t offset, std::span<std::byte> buf) override {
    size_t done = 0;
    while (done < buf.size()) {
      ssize_t n = ::pread(fd_, buf.data() + done, buf.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno(errno, fmt::format("vos: read {} at {}", path_, offset + done));
      if (n == 0)
        return Status::IOError(fmt::format("vos: read {} at {}: unexpected end of file", path_, offset + done));
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  Result<size_t> Write(uint64_t offset, std::span<const std::byte> data) override {
    while (true) {
      ssize_t n = ::pwrite(fd_, data.data(), data.size(), static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno(errno, fmt::format("vos: write {} at {}", path_, offset));
      return static_cast<size_t>(n);
    }
  }

  Status Sync() override {
    if (::fdatasync(fd_) != 0) return Status::FromErrno(errno, fmt::format("vos: fdatasync {}", path_));
    return Status::Ok();
  }

  Status Allocate(uint64_t offset, uint64_t len) override {
    while (::fallocate(fd_, 0, static_cast<off_t>(offset), static_cast<off_t>(len)) != 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, fmt::format("vos: fallocate {} bytes at {} in {}", len, offset, path_));
    }
    return Status::Ok();
  }

  Result<uint64_t> Size() override {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return Status::FromErrno(errno, fmt::format("vos: stat {}", path_));
    if (S_ISBLK(st.st_mode)) {
      uint64_t bytes = 0;
      if (::ioctl(fd_, BLKGETSIZE64, &bytes) != 0) {
        return Status::FromErrno(errno, fmt::format("vos: BLKGETSIZE64 {}", path_));
      }
      return bytes;
    }
    return static_cast<uint64_t>(st.st_size);
  }

  int fd() const override { return fd_; }
  bool direct() const override { return direct_; }

 private:
  std::string path_;
  int fd_;
  bool direct_;
};

Status FromErrorCode(const std::error_code& ec, std::string_view context) {
  return Status::FromErrno(ec.value(), context);
}

// Data files and directories are the owner's alone: extents and small values
// must not be readable around the capabilities (docs/vos.md, "Files").
constexpr mode_t kFileMode = 0600;
constexpr mode_t kDirMode = 0700;

}  // namespace

Env* Env::Default() {
  static PosixEnv env;
  return &env;
}

Result<std::unique_ptr<File>> PosixEnv::OpenFile(const std::string& path, const FileOptions& options) {
  int flags = O_RDWR | O_CLOEXEC;
  if (options.create && !options.block_device) flags |= O_CREAT;
  bool direct = options.direct;
  int fd = ::open(path.c_str(), flags | (direct ? O_DIRECT : 0), kFileMode);
  if (fd < 0 && direct && errno == EINVAL) {
    // tmpfs and a few others refuse O_DIRECT: buffered I/O keeps them usable.
    ROS2_LOG_WARN("vos: {} does not support O_DIRECT; using buffered I/O", path);
    direct = false;
    fd = ::open(path.c_str(), flags, kFileMode);
  }
  if (fd < 0) return Status::FromErrno(errno, fmt::format("vos: open {}", path));
  return std::unique_ptr<File>(std::make_unique<PosixFile>(path, fd, direct));
}

bool PosixEnv::FileExists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

Status PosixEnv::CreateDirs(const std::string& path) {
  return CreatePrivateDirs(path);
}

Status CreatePrivateDirs(const std::string& path) {
  // Every missing component is made 0700 (std::filesystem would use 0777 less the umask).
  std::filesystem::path partial;
  for (const auto& part : std::filesystem::path(path)) {
    partial /= part;
    if (part.empty() || part == "/" || part == "." || part == "..") continue;
    if (::mkdir(partial.c_str(), kDirMode) == 0 || errno == EEXIST) continue;
    return Status::FromErrno(errno, fmt::format("create directory {}", partial.string()));
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno(errno, fmt::format("create directory {}", path));
  if (!S_ISDIR(st.st_mode)) return Status::IOError(fmt::format("create directory {}: not a directory", path));
  return Status::Ok();
}

Status PosixEnv::RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Status::FromErrno(errno, fmt::format("vos: remove {}", path));
  }
  return Status::Ok();
}

Status PosixEnv::RemoveAll(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return FromErrorCode(ec, fmt::format("vos: remove {}", path));
  return Status::Ok();
}

Status PosixEnv::Rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return Status::FromErrno(errno, fmt::format("vos: rename {} to {}", from, to));
  }
  return Status::Ok();
}

Status PosixEnv::SyncDir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, fmt::format("vos: open directory {}", path));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return Status::FromErrno(err, fmt::format("vos: fsync directory {}", path));
  return Status::Ok();
}

}  // namespace ros2::vos
