// ExtentCache: the committed array extents of recently fetched akeys, in memory.
//
// A fetch of an array plans from the akey's extents: per size class, the
// extents that start in (lo - 2^c, hi). Seeking RocksDB for them costs one
// iterator seek per class, and after many small overwrites those seeks
// dominated a 4 KiB fetch (skip-list and block searches over hundreds of
// thousands of keys). The cache holds, per akey, the same extents in the same
// order as RocksDB's extent keys (size class, start, newest first) with their
// decoded records, so a plan is a few in-memory lookups. It mirrors RocksDB:
// an akey is loaded whole from RocksDB on a miss, every committed extent of a
// cached akey is added after its commit, and aggregation and failed commits
// drop the akey (it reloads on its next fetch). Bounded by an estimate of its
// memory; the least recently used akeys go first. Owned by the VOS; target
// thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "common/hlc.h"
#include "vos/records.h"

namespace ros2::vos {

// An extent's place in its akey: RocksDB's extent key order.
struct ExtentSlot {
  uint8_t size_class = 0;
  uint64_t index = 0;
  Epoch epoch = 0;
  friend bool operator<(const ExtentSlot& a, const ExtentSlot& b) {
    if (a.size_class != b.size_class) return a.size_class < b.size_class;
    if (a.index != b.index) return a.index < b.index;
    return a.epoch > b.epoch;  // newest first
  }
};

// One cached extent: its record with every chunk checksum decoded
// (rec.inline_data is empty; inline data lives in `inline_data`).
struct CachedExtent {
  ValueRecord rec;
  std::string inline_data;
};

class ExtentCache {
 public:
  using Extents = std::map<ExtentSlot, CachedExtent>;

  explicit ExtentCache(size_t budget_bytes) : budget_(budget_bytes) {}
  ExtentCache(const ExtentCache&) = delete;
  ExtentCache& operator=(const ExtentCache&) = delete;

  // The akey's extents, or nullptr when it is not cached; a hit makes it the most recently used.
  const Extents* Find(std::string_view akey_scope);
  // Caches a freshly loaded akey (all its committed extents), evicting others to stay in budget.
  // Returns the cached extents, or nullptr when the akey alone exceeds the budget's share.
  const Extents* Insert(std::string_view akey_scope, Extents extents);
  // Adds (or replaces) one committed extent when its akey is cached.
  void Add(std::string_view akey_scope, const ExtentSlot& slot, CachedExtent extent);
  // Forgets an akey (its next fetch reloads it from RocksDB).
  void Erase(std::string_view akey_scope);
  // Remembers that an akey could not be cached (too large, or a record that
  // does not decode), so fetches stop trying to load it until Erase().
  void MarkUncacheable(std::string_view akey_scope);
  bool IsUncacheable(std::string_view akey_scope) const { return uncacheable_.find(akey_scope) != uncacheable_.end(); }

  size_t akeys() const { return by_scope_.size(); }
  size_t bytes() const { return bytes_; }
  // The most extents one akey may have to be cached.
  static constexpr size_t kMaxExtentsPerAkey = size_t{1} << 16;

 private:
  struct Akey {
    Extents extents;
    size_t bytes = 0;
    std::list<std::string>::iterator lru;  // position in lru_
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  static size_t Cost(const CachedExtent& e);
  void EvictToBudget();

  size_t budget_;
  size_t bytes_ = 0;
  std::list<std::string> lru_;  // akey scopes, most recently used first
  std::unordered_map<std::string, Akey, StringHash, std::equal_to<>> by_scope_;
  std::unordered_set<std::string, StringHash, std::equal_to<>> uncacheable_;  // bounded: cleared when large
};

}  // namespace ros2::vos
