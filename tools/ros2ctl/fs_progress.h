// TransferProgress: the progress line of `ros2ctl fs put|get` on stderr —
// bytes done of the total, percentage, rate and ETA, and files done — redrawn
// in place at most four times a second. In kAuto mode it appears only when
// stderr is a terminal and the transfer has run for more than half a second
// (short transfers print nothing); kAlways draws regardless (--progress, for
// logs and tests), kOff never (--quiet). Owned by the transfer; one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ros2::ctl {

enum class ProgressMode { kAuto, kAlways, kOff };

class TransferProgress {
 public:
  TransferProgress(ProgressMode mode, uint64_t total_bytes, uint64_t total_files);
  ~TransferProgress() { Finish(); }
  TransferProgress(const TransferProgress&) = delete;
  TransferProgress& operator=(const TransferProgress&) = delete;

  void AddBytes(uint64_t n);
  void FileDone();
  // Draws the final state and ends the line (when anything was drawn).
  void Finish();

  // The line as drawn (no carriage return), for tests and the final draw.
  std::string Line() const;

 private:
  using Clock = std::chrono::steady_clock;
  void MaybeDraw(bool force);

  bool enabled_;
  bool drawn_ = false;
  bool finished_ = false;
  uint64_t total_bytes_;
  uint64_t total_files_;
  uint64_t bytes_ = 0;
  uint64_t files_ = 0;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_{};
};

}  // namespace ros2::ctl
