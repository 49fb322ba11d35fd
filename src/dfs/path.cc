// Path and name checks (see path.h).
#include "dfs/path.h"

#include <fmt/format.h>

#include "ros2/dfs.h"

namespace ros2::dfs {

Status ValidateName(std::string_view name) {
  if (name.empty()) return Status::InvalidArgument("dfs: empty entry name");
  if (name.size() > kMaxNameLength) {
    return Status::NameTooLong(
        fmt::format("dfs: entry name of {} bytes exceeds the limit of {}", name.size(), kMaxNameLength));
  }
  if (name == "." || name == "..") return Status::InvalidArgument(fmt::format("dfs: '{}' is not an entry name", name));
  if (name.find('/') != std::string_view::npos || name.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument("dfs: entry name contains '/' or NUL");
  }
  return Status::Ok();
}

Result<std::vector<std::string_view>> SplitPath(std::string_view path) {
  if (path.empty()) return Status::InvalidArgument("dfs: empty path");
  if (path.size() > kMaxPathLength) {
    return Status::NameTooLong(
        fmt::format("dfs: path of {} bytes exceeds the limit of {}", path.size(), kMaxPathLength));
  }
  if (path.front() != '/') return Status::InvalidArgument(fmt::format("dfs: path '{}' is not absolute", path));
  if (path.find('\0') != std::string_view::npos) return Status::InvalidArgument("dfs: path contains NUL");
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string_view::npos) next = path.size();
    std::string_view part = path.substr(pos, next - pos);
    pos = next + 1;
    if (part.empty() || part == ".") continue;
    if (part.size() > kMaxNameLength) {
      return Status::NameTooLong(
          fmt::format("dfs: path component of {} bytes exceeds the limit of {}", part.size(), kMaxNameLength));
    }
    parts.push_back(part);
  }
  return parts;
}

}  // namespace ros2::dfs
