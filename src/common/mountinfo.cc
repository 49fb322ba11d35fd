#include "common/mountinfo.h"

#include <fstream>
#include <sstream>

namespace ros2 {

std::optional<std::string> MountedFsType(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::optional<std::string> type;
  std::string line;
  while (std::getline(in, line)) {
    // "36 35 98:0 /mnt1 /mnt/point rw,noatime master:1 - fuse.ros2 ros2 rw":
    // the mount point is the fifth field, the type follows the " - ".
    std::istringstream fields(line);
    std::string id, parent, dev, root, mount_point;
    fields >> id >> parent >> dev >> root >> mount_point;
    if (mount_point != path) continue;
    const size_t sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::istringstream rest(line.substr(sep + 3));
    std::string fs_type;
    if (rest >> fs_type) type = fs_type;
  }
  return type;
}

}  // namespace ros2
