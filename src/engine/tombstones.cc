#include "engine/tombstones.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace ros2::engine {

Result<std::pair<TombstoneLog, std::vector<std::pair<Uuid, Uuid>>>> TombstoneLog::Open(const std::string& path) {
  std::vector<std::pair<Uuid, Uuid>> entries;
  {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string pool_text, container_text;
      if (!(fields >> pool_text >> container_text)) continue;  // blank or torn line
      auto pool = Uuid::Parse(pool_text);
      if (!pool.ok()) continue;  // torn line: the crash hit this append before its fdatasync
      Uuid container;
      if (container_text != "-") {
        auto c = Uuid::Parse(container_text);
        if (!c.ok()) continue;
        container = *c;
      }
      entries.emplace_back(*pool, container);
    }
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, fmt::format("engine: open tombstone log {}", path));
  return std::make_pair(TombstoneLog(path, fd), std::move(entries));
}

TombstoneLog::TombstoneLog(TombstoneLog&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), mu_(std::move(other.mu_)) {}

TombstoneLog& TombstoneLog::operator=(TombstoneLog&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    mu_ = std::move(other.mu_);
  }
  return *this;
}

TombstoneLog::~TombstoneLog() {
  if (fd_ >= 0) ::close(fd_);
}

Status TombstoneLog::Append(const Uuid& pool, const Uuid& container) {
  if (fd_ < 0) return Status::Internal(fmt::format("engine: tombstone log {} is not open", path_));
  // The leading newline ends a line torn by an earlier crash, so it cannot
  // swallow this one; the loader skips the empty line it may leave.
  const std::string line =
      fmt::format("\n{} {}\n", pool.ToString(), container.IsNil() ? std::string("-") : container.ToString());
  std::lock_guard lock(*mu_);
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, fmt::format("engine: append to tombstone log {}", path_));
    done += static_cast<size_t>(n);
  }
  if (::fdatasync(fd_) != 0) return Status::FromErrno(errno, fmt::format("engine: fdatasync {}", path_));
  return Status::Ok();
}

}  // namespace ros2::engine
