// Files removed while open: the orphan links of a mount (orphans.h).
#include <cerrno>

#include "common/log.h"
#include "fuse/fuse_filesystem.h"

namespace ros2::fuse {

bool FuseFilesystem::IsOrphanDirectory(const dfs::Entry& parent, std::string_view name) const {
  return name == kOrphanDirectory && parent.oid == fs_.Root().oid;
}

Result<std::optional<dfs::Entry>> FuseFilesystem::OrphanDirectory(bool create) {
  std::lock_guard<std::mutex> lock(orphan_dir_mu_);
  if (orphan_dir_) return orphan_dir_;
  // Absent at the first look: not looked up again until this mount makes it
  // (the root's getattr asks on every call).
  if (orphan_dir_absent_ && !create) return std::optional<dfs::Entry>();
  auto found = fs_.Lookup(fs_.Root(), kOrphanDirectory);
  if (found.ok()) {
    orphan_dir_ = *found;
    return orphan_dir_;
  }
  if (!found.status().IsNotFound()) return found.status();
  orphan_dir_absent_ = true;
  if (!create) return std::optional<dfs::Entry>();
  auto made = fs_.Mkdir(fs_.Root(), kOrphanDirectory, 0700);
  if (!made.ok() && made.status().code() == Status::Code::kAlreadyExists) made = fs_.Lookup(fs_.Root(), kOrphanDirectory);
  if (!made.ok()) return made.status().WithContext("ros2-fuse: the orphan directory");
  orphan_dir_ = *made;
  return orphan_dir_;
}

Status FuseFilesystem::UnlinkKeepingOpenFile(const dfs::Entry& parent, std::string_view name) {
  if (open_files_.AnyOpen()) {
    auto found = fs_.LookupWithAttr(parent, name);
    if (found.ok() && found->first.is_file() && found->second.nlink == 1 && open_files_.IsOpen(found->first.oid)) {
      ROS2_ASSIGN_OR_RETURN(std::optional<dfs::Entry> orphans, OrphanDirectory(true));
      auto linked = fs_.Link(found->first, *orphans, found->first.oid.ToString());
      if (!linked.ok() && linked.status().code() != Status::Code::kAlreadyExists) return linked.status();
      open_files_.MakeOrphan(found->first.oid);
    }
  }
  return fs_.Unlink(parent, name);
}

void FuseFilesystem::DropOrphan(const dfs::Entry& entry) {
  auto orphans = OrphanDirectory(false);
  Status s = !orphans.ok() ? orphans.status()
             : !*orphans   ? Status::NotFound("no orphan directory")
                           : fs_.Unlink(**orphans, entry.oid.ToString());
  if (!s.ok()) {
    ROS2_LOG_WARN("ros2-fuse: the orphan link of '{}' ({}) was not removed: {}", entry.name, entry.oid.ToString(),
                  s.ToString());
  }
}

}  // namespace ros2::fuse
