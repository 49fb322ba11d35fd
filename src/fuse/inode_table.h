// InodeTable: the FUSE inode numbers a ros2-fuse mount has handed to the
// kernel, each mapped to the DFS Entry it names and the kernel's lookup count.
//
// The kernel learns an inode number from every reply that carries an entry
// (lookup, create, mkdir, mknod, symlink, readdirplus) and gives each one back
// with forget/forget_multi once it drops it; an inode stays in the table while
// its count is above zero. Numbers come from dfs::Attr::ino (stable, derived
// from the object id, so `stat` shows the same st_ino on every mount); when two
// objects would share one, the second gets the next free number above it
// instead. The root is FUSE_ROOT_ID (1) and is never forgotten.
//
// Each inode keeps the Entry of its latest lookup: a rename through this mount
// refreshes it (Refresh), so handles follow their files. Thread-safe: every
// FUSE worker thread calls it; lookups take a shared lock, changes an exclusive one.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include "ros2/dfs.h"

namespace ros2::fuse {

class InodeTable {
 public:
  static constexpr uint64_t kRootIno = 1;  // FUSE_ROOT_ID

  explicit InodeTable(dfs::Entry root);

  // Records one more kernel reference to `entry` (whose dfs::Attr::ino is
  // `suggested`) and returns the inode number to reply with. An object already
  // in the table keeps its number; its Entry is replaced by this fresher one.
  uint64_t Remember(const dfs::Entry& entry, uint64_t suggested);

  // The Entry of inode `ino`; nullopt when the kernel forgot it (or never had it).
  std::optional<dfs::Entry> Get(uint64_t ino) const;

  // Drops `nlookup` references; the inode leaves the table at zero. The root
  // and unknown numbers are ignored.
  void Forget(uint64_t ino, uint64_t nlookup);

  // Replaces the Entry of the inode holding `entry.oid` (after a rename, or a
  // chmod/chown that changed its mode or owner), without changing its count;
  // no-op when the object has no inode.
  void Refresh(const dfs::Entry& entry);

  // Inodes in the table (the root included) and the sum of their counts less
  // the root's: for tests and statistics.
  size_t size() const;
  uint64_t total_lookups() const;

 private:
  struct Node {
    dfs::Entry entry;
    uint64_t nlookup = 0;
  };

  mutable std::shared_mutex mu_;
  std::unordered_map<uint64_t, Node> nodes_;  // ino -> node
  std::map<ObjectId, uint64_t> by_oid_;       // object -> ino
};

}  // namespace ros2::fuse
