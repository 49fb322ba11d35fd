#include "fuse/orphans.h"

namespace ros2::fuse {

void OpenFiles::Opened(const ObjectId& oid) {
  std::lock_guard<std::mutex> lock(mu_);
  ++files_[oid].handles;
}

bool OpenFiles::Closed(const ObjectId& oid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(oid);
  if (it == files_.end() || --it->second.handles > 0) return false;
  const bool orphan = it->second.orphan;
  files_.erase(it);
  return orphan;
}

bool OpenFiles::AnyOpen() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !files_.empty();
}

bool OpenFiles::IsOpen(const ObjectId& oid) const {
  std::lock_guard<std::mutex> lock(mu_);
  return files_.contains(oid);
}

void OpenFiles::MakeOrphan(const ObjectId& oid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(oid);
  if (it != files_.end()) it->second.orphan = true;
}

bool OpenFiles::IsOrphan(const ObjectId& oid) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(oid);
  return it != files_.end() && it->second.orphan;
}

}  // namespace ros2::fuse
