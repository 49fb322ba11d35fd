#include "fs_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "common/config.h"

namespace ros2::ctl {

namespace {

constexpr auto kRedrawEvery = std::chrono::milliseconds(250);
constexpr auto kAutoDelay = std::chrono::milliseconds(500);
constexpr int kBarWidth = 24;

std::string FormatEta(double seconds) {
  if (seconds < 0 || seconds > 99 * 3600) return "--:--";
  auto s = static_cast<uint64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

TransferProgress::TransferProgress(ProgressMode mode, uint64_t total_bytes, uint64_t total_files)
    : enabled_(mode == ProgressMode::kAlways || (mode == ProgressMode::kAuto && ::isatty(STDERR_FILENO) == 1)),
      total_bytes_(total_bytes),
      total_files_(total_files) {
  if (mode == ProgressMode::kAlways) last_draw_ = start_ - kRedrawEvery;  // the first update draws at once
  if (mode == ProgressMode::kAuto) last_draw_ = start_ + kAutoDelay - kRedrawEvery;
}

void TransferProgress::AddBytes(uint64_t n) {
  bytes_ += n;
  MaybeDraw(false);
}

void TransferProgress::FileDone() {
  ++files_;
  MaybeDraw(false);
}

std::string TransferProgress::Line() const {
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(bytes_) / elapsed : 0;
  const double fraction =
      total_bytes_ > 0 ? std::min(1.0, static_cast<double>(bytes_) / static_cast<double>(total_bytes_)) : 1.0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::string bar = std::string(static_cast<size_t>(filled), '#') + std::string(kBarWidth - filled, '.');
  const double eta = rate > 0 ? static_cast<double>(total_bytes_ - std::min(bytes_, total_bytes_)) / rate : -1;
  std::string line = fmt::format("[{}] {:3.0f}% {} / {}  {}/s  ETA {}", bar, fraction * 100, FormatSize(bytes_),
                                 FormatSize(total_bytes_), FormatSize(static_cast<uint64_t>(rate)),
                                 finished_ ? FormatEta(0) : FormatEta(eta));
  if (total_files_ > 1) line += fmt::format("  {}/{} files", files_, total_files_);
  return line;
}

void TransferProgress::MaybeDraw(bool force) {
  if (!enabled_) return;
  const auto now = Clock::now();
  if (!force && now - last_draw_ < kRedrawEvery) return;
  last_draw_ = now;
  // Pad so that a shorter line fully covers the previous one.
  std::fprintf(stderr, "\r%-100s", Line().c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void TransferProgress::Finish() {
  if (finished_) return;
  finished_ = true;
  if (!enabled_) return;
  // kAuto: a transfer that ended before the delay printed nothing and stays silent.
  if (drawn_ || Clock::now() - start_ >= kAutoDelay || last_draw_ <= start_) MaybeDraw(true);
  if (drawn_) std::fputc('\n', stderr);
}

}  // namespace ros2::ctl
