// FileStreamer: moves the bytes of one DFS file at a time in large blocks with
// several asynchronous requests in flight (Filesystem::SubmitRead/SubmitWrite
// on one event queue), which is what makes `ros2ctl fs put|get|cat` of a big
// file fast: the engine works on the next blocks while the local side reads or
// writes the previous ones. Write() pulls the bytes from a source callback in
// file order; Read() hands them to a sink callback in file order (a sink may
// write to a pipe). Buffers are allocated on first use, registered with the
// transport, and reused for every file of a transfer. Owned by one command,
// used from the thread that created it (the event queue is bound to it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "fs_progress.h"
#include "ros2/client.h"
#include "ros2/dfs.h"

namespace ros2::ctl {

// Fills `buffer` with the bytes at `offset` of the source; returns how many
// (fewer only at the source's end).
using ByteSource = std::function<Result<size_t>(uint64_t offset, std::span<std::byte> buffer)>;
// Takes the bytes at `offset` of the file.
using ByteSink = std::function<Status(uint64_t offset, std::span<const std::byte> data)>;

struct StreamOptions {
  uint64_t block_size = 0;  // bytes per request; 0: the file system's chunk size, at least 1 MiB
  uint32_t depth = 8;       // requests in flight
};

class FileStreamer {
 public:
  static Result<std::unique_ptr<FileStreamer>> Create(client::Client& client, dfs::Filesystem& fs,
                                                      const StreamOptions& options = {});
  ~FileStreamer();
  FileStreamer(const FileStreamer&) = delete;
  FileStreamer& operator=(const FileStreamer&) = delete;

  // Writes bytes [0, size) of `file` from `source`. A source that ends early
  // is an IOError (the local file shrank while being copied). Returns when
  // every request completed; the first failure is returned.
  Status Write(const dfs::Entry& file, uint64_t size, const ByteSource& source, TransferProgress* progress);
  // Reads bytes [0, size) of `file` into `sink`, in order; stops early at the
  // file's end (it shrank since its size was taken). Returns the bytes passed on.
  Result<uint64_t> Read(const dfs::Entry& file, uint64_t size, const ByteSink& sink, TransferProgress* progress);

  uint64_t block_size() const { return block_size_; }

 private:
  struct Slot {
    std::vector<std::byte> buffer;
    uint64_t offset = 0;
    uint64_t length = 0;
    bool done = false;
    client::IoResult result;
  };
  FileStreamer(client::Client& client, dfs::Filesystem& fs, std::unique_ptr<client::EventQueue> eq, uint64_t block_size,
               uint32_t depth);
  // A free slot with a buffer of block_size_ bytes (made on first use).
  size_t TakeSlot();
  // Lets completions run: returns once at least one callback ran since the
  // last call, or after a short bounded wait.
  void WaitForCompletions();

  client::Client& client_;
  dfs::Filesystem& fs_;
  std::unique_ptr<client::EventQueue> eq_;
  uint64_t block_size_;
  uint32_t depth_;
  std::vector<Slot> slots_;
  std::vector<size_t> free_;
  size_t in_flight_ = 0;
};

}  // namespace ros2::ctl
