// What is mounted where, from /proc/self/mountinfo.
#pragma once

#include <optional>
#include <string>

namespace ros2 {

// The file-system type ("ext4", "fuse.ros2", ...) of the mount whose mount
// point is exactly `path`, or nullopt when nothing is mounted there. With
// several mounts stacked on `path`, the last (visible) one.
std::optional<std::string> MountedFsType(const std::string& path);

}  // namespace ros2
