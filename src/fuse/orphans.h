// OpenFiles: the DFS objects a ros2-fuse mount has open, and those among them
// whose last name was removed while they were open (orphans).
//
// POSIX keeps a file usable after its last name is gone until its last close,
// and fstat then shows a link count of 0. The DFS removes a file's object with
// its last name, so the mount keeps an orphan alive with a hard link of its
// own: `/.ros2-orphans/<object id>` (kOrphanDirectory, hidden from lookup and
// readdir of this mount), made before the user's name goes and removed at the
// orphan's last close. getattr subtracts that link (docs/fuse.md, "Files
// removed while open"). A mount that dies with orphans leaves their links
// behind in that directory. Thread-safe (every FUSE worker thread calls it).
#pragma once

#include <map>
#include <mutex>
#include <string_view>

#include "ros2/dfs.h"

namespace ros2::fuse {

// The hidden directory under the root that holds the orphans' links.
inline constexpr std::string_view kOrphanDirectory = ".ros2-orphans";

class OpenFiles {
 public:
  // A handle of `oid` was opened.
  void Opened(const ObjectId& oid);
  // A handle of `oid` was released; true when that was the last handle of an
  // orphan (the caller removes its link).
  bool Closed(const ObjectId& oid);
  bool AnyOpen() const;
  bool IsOpen(const ObjectId& oid) const;
  // `oid` (open) lost its last name: its link in kOrphanDirectory keeps it.
  void MakeOrphan(const ObjectId& oid);
  bool IsOrphan(const ObjectId& oid) const;

 private:
  struct State {
    int handles = 0;
    bool orphan = false;
  };
  mutable std::mutex mu_;
  std::map<ObjectId, State> files_;
};

}  // namespace ros2::fuse
