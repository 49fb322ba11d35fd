#include "fuse/inode_table.h"

#include <mutex>

namespace ros2::fuse {

InodeTable::InodeTable(dfs::Entry root) {
  by_oid_[root.oid] = kRootIno;
  nodes_.emplace(kRootIno, Node{std::move(root), 1});
}

uint64_t InodeTable::Remember(const dfs::Entry& entry, uint64_t suggested) {
  std::unique_lock lock(mu_);
  auto known = by_oid_.find(entry.oid);
  if (known != by_oid_.end()) {
    Node& node = nodes_.at(known->second);
    if (known->second != kRootIno) node.entry = entry;
    ++node.nlookup;
    return known->second;
  }
  // 0 is no inode and 1 the root's: probe upwards (wrapping past them) for a free number.
  uint64_t ino = suggested;
  while (ino <= kRootIno || nodes_.contains(ino)) ++ino;
  nodes_.emplace(ino, Node{entry, 1});
  by_oid_[entry.oid] = ino;
  return ino;
}

std::optional<dfs::Entry> InodeTable::Get(uint64_t ino) const {
  std::shared_lock lock(mu_);
  auto it = nodes_.find(ino);
  if (it == nodes_.end()) return std::nullopt;
  return it->second.entry;
}

void InodeTable::Forget(uint64_t ino, uint64_t nlookup) {
  if (ino == kRootIno) return;
  std::unique_lock lock(mu_);
  auto it = nodes_.find(ino);
  if (it == nodes_.end()) return;
  if (it->second.nlookup > nlookup) {
    it->second.nlookup -= nlookup;
    return;
  }
  by_oid_.erase(it->second.entry.oid);
  nodes_.erase(it);
}

void InodeTable::Refresh(const dfs::Entry& entry) {
  std::unique_lock lock(mu_);
  auto known = by_oid_.find(entry.oid);
  if (known == by_oid_.end()) return;
  nodes_.at(known->second).entry = entry;
}

size_t InodeTable::size() const {
  std::shared_lock lock(mu_);
  return nodes_.size();
}

uint64_t InodeTable::total_lookups() const {
  std::shared_lock lock(mu_);
  uint64_t sum = 0;
  for (const auto& [ino, node] : nodes_) {
    if (ino != kRootIno) sum += node.nlookup;
  }
  return sum;
}

}  // namespace ros2::fuse
