// TombstoneLog: the engine's durable record of destroyed pools and containers,
// so that a shard of a destroyed container is never recreated — not by a
// capability that is still unexpired, not after a restart, not on an engine
// that learned of the destruction from another engine's management endpoint.
//
// Format: a text file <data_dir>/destroyed.log, one line per destruction,
// "<pool uuid> <container uuid>" or "<pool uuid> -" for a whole pool. Appends
// are written with O_APPEND and fdatasync'd before the destruction is applied;
// a torn last line (crash mid-append) is ignored on load and overwritten by
// the next append's leading newline. Container and pool UUIDs are never
// reused, so the log only grows (by ~74 bytes per destruction).
//
// Thread-safe: Append may be called from any thread (gRPC hooks, the joined
// engine's sync thread).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/uuid.h"

namespace ros2::engine {

class TombstoneLog {
 public:
  // Opens (creating if needed) the log at `path` and returns its entries; a nil
  // container stands for the whole pool.
  static Result<std::pair<TombstoneLog, std::vector<std::pair<Uuid, Uuid>>>> Open(const std::string& path);

  TombstoneLog(TombstoneLog&& other) noexcept;
  TombstoneLog& operator=(TombstoneLog&& other) noexcept;
  TombstoneLog(const TombstoneLog&) = delete;
  TombstoneLog& operator=(const TombstoneLog&) = delete;
  ~TombstoneLog();

  // Appends one destruction durably (container nil: the whole pool).
  Status Append(const Uuid& pool, const Uuid& container);

  const std::string& path() const { return path_; }

 private:
  TombstoneLog(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
  std::unique_ptr<std::mutex> mu_ = std::make_unique<std::mutex>();
};

}  // namespace ros2::engine
