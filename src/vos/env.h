// Env: the file-layer seam of the VOS, in the spirit of LevelDB's Env.
//
// Every operation the VOS performs on its data file or block device goes
// through an Env: opening, synchronous reads and writes, fdatasync, size, and
// directory housekeeping. Asynchronous I/O is issued through io_uring on the
// File's descriptor, and each completion's result is passed through
// File::FilterAsyncResult, so a test Env (FaultInjectionEnv) can fail, shorten
// or refuse any write, synchronous or not. RocksDB's own files use RocksDB's Env.
// Env::Default() is a process-wide PosixEnv; it creates files 0600 and
// directories 0700. Envs and Files are thread-safe:
// the VOS commit thread calls File::Sync while the target thread submits I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/status.h"

namespace ros2::vos {

enum class IoKind : uint8_t { kRead, kWrite };

class File {
 public:
  virtual ~File() = default;
  // Reads exactly buf.size() bytes at `offset`; IOError on failure or EOF.
  virtual Status Read(uint64_t offset, std::span<std::byte> buf) = 0;
  // One write attempt; returns the bytes written (may be short), or the error
  // (NoSpace for ENOSPC, IOError otherwise).
  virtual Result<size_t> Write(uint64_t offset, std::span<const std::byte> data) = 0;
  // fdatasync.
  virtual Status Sync() = 0;
  // Allocates [offset, offset + len) without writing it (fallocate, growing
  // the file when the range ends past its size): NoSpace for ENOSPC.
  virtual Status Allocate(uint64_t offset, uint64_t len) = 0;
  // Size in bytes (of a block device: its capacity).
  virtual Result<uint64_t> Size() = 0;
  // The descriptor for io_uring, or -1 when the file has none.
  virtual int fd() const = 0;
  // True when opened with O_DIRECT (buffers, offsets and lengths must be aligned).
  virtual bool direct() const = 0;
  // Sees the result of every asynchronous I/O on this file (bytes or -errno) and
  // returns the result the VOS should act on. The default passes it through.
  virtual int FilterAsyncResult(IoKind /*kind*/, uint64_t /*offset*/, size_t /*len*/, int result) { return result; }
};

struct FileOptions {
  bool create = false;        // create when missing
  bool direct = false;        // O_DIRECT; falls back to buffered I/O where unsupported (tmpfs): see File::direct()
  bool block_device = false;  // the path is a block device (never created or truncated)
};

class Env {
 public:
  virtual ~Env() = default;
  static Env* Default();

  virtual Result<std::unique_ptr<File>> OpenFile(const std::string& path, const FileOptions& options) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  virtual Status CreateDirs(const std::string& path) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;  // OK when missing
  virtual Status RemoveAll(const std::string& path) = 0;   // recursive; OK when missing
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  virtual Status SyncDir(const std::string& path) = 0;
};

// The real OS: pread/pwrite/fdatasync on POSIX descriptors.
class PosixEnv : public Env {
 public:
  Result<std::unique_ptr<File>> OpenFile(const std::string& path, const FileOptions& options) override;
  bool FileExists(const std::string& path) override;
  Status CreateDirs(const std::string& path) override;
  Status RemoveFile(const std::string& path) override;
  Status RemoveAll(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status SyncDir(const std::string& path) override;
};

// Creates `path` and its missing parents with mode 0700 (existing ones are
// left as they are); OK when it exists as a directory.
Status CreatePrivateDirs(const std::string& path);

}  // namespace ros2::vos
