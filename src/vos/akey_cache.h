// AkeyCache: the committed metadata of recently used akeys, in memory: the
// akey header and, for arrays, the extents. One entry per akey, so a fetch
// finds both with one hash lookup of its scope.
//
// The header fixes an akey's type and record size and says which extent size
// classes it uses; every fetch and update reads it. A fetch of an array then
// plans from the akey's extents: per size class, the extents that start in
// (lo - 2^c, hi). Seeking RocksDB for them costs one iterator seek per class,
// and after many small overwrites those seeks dominated a 4 KiB fetch
// (skip-list and block searches over hundreds of thousands of keys). An entry
// holds the same extents in the same order as RocksDB's extent keys (size
// class, start, newest first) with their decoded records, so a plan is a few
// in-memory lookups.
//
// It mirrors RocksDB: a header is set when read from RocksDB or after its
// batch committed; an akey's extents are loaded whole from RocksDB on a miss,
// every committed extent of a loaded akey is added after its commit, and
// aggregation and failed commits drop what they may have changed (it reloads
// on its next use). An akey whose extents cannot be cached is marked so until
// its extents are dropped. Bounded by an estimate of its memory; eviction is
// second-chance (CLOCK): a hit only sets the entry's referenced bit, and the
// eviction sweep gives a referenced entry one more pass before dropping it.
// Owned by the VOS; target thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>

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

class AkeyCache {
 public:
  using Extents = std::map<ExtentSlot, CachedExtent>;

  // One akey's entry. A pointer to it stays valid until the next call that
  // takes another akey (FindOrAdd, or a setter on another entry, may evict
  // this one) or drops this one; never across a completion.
  class Akey {
   public:
    // The committed header, or nullptr when it is not cached.
    const AkeyHeader* header() const { return has_header_ ? &header_ : nullptr; }
    // The committed extents, or nullptr when they are not loaded.
    const Extents* extents() const { return state_ == ExtentState::kLoaded ? &extents_ : nullptr; }
    // The extents could not be cached (too many, too large, or a record that does not decode).
    bool uncacheable() const { return state_ == ExtentState::kUncacheable; }

   private:
    friend class AkeyCache;
    enum class ExtentState : uint8_t { kNotLoaded, kLoaded, kUncacheable };
    AkeyHeader header_;
    bool has_header_ = false;
    bool referenced_ = false;  // hit since the eviction sweep last passed it
    ExtentState state_ = ExtentState::kNotLoaded;
    Extents extents_;
    size_t bytes_ = 0;  // the entry's estimated memory, extents included
    std::list<Akey*>::iterator clock_;
    const std::string* scope_ = nullptr;  // the map's key
  };

  explicit AkeyCache(size_t budget_bytes) : budget_(budget_bytes) {}
  AkeyCache(const AkeyCache&) = delete;
  AkeyCache& operator=(const AkeyCache&) = delete;

  // The akey's entry, or nullptr; a hit marks it referenced.
  Akey* Find(std::string_view akey_scope);
  // The akey's entry, created empty when absent (other entries may be evicted).
  Akey& FindOrAdd(std::string_view akey_scope);

  void SetHeader(Akey& akey, const AkeyHeader& h);
  // Caches a freshly loaded akey's committed extents (all of them). Returns
  // them, or nullptr (the akey marked uncacheable) when the akey alone would
  // take more than a quarter of the budget.
  const Extents* SetExtents(Akey& akey, Extents extents);
  void MarkUncacheable(Akey& akey);
  // Adds (or replaces) one committed extent when the akey's extents are loaded.
  void AddExtent(Akey& akey, const ExtentSlot& slot, CachedExtent extent);

  // Forget what RocksDB may have changed: the extents (loaded or marked
  // uncacheable), the header, or the whole entry. The next use reloads.
  void DropExtents(std::string_view akey_scope);
  void DropHeader(std::string_view akey_scope);
  void Erase(std::string_view akey_scope);

  size_t akeys() const { return by_scope_.size(); }
  size_t bytes() const { return bytes_; }
  // The most extents one akey may have to be cached.
  static constexpr size_t kMaxExtentsPerAkey = size_t{1} << 16;

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  static size_t Cost(const CachedExtent& e);
  static size_t EntryCost(std::string_view akey_scope);
  void ClearExtents(Akey& akey);
  // Drops the entry when it holds nothing (no header, extents not loaded nor marked).
  void EraseIfEmpty(Akey& akey);
  void EraseEntry(Akey& akey);
  // Evicts entries until within budget; never `keep`, which the caller holds.
  void EvictToBudget(const Akey* keep);

  size_t budget_;
  size_t bytes_ = 0;
  std::list<Akey*> clock_;  // eviction order: the sweep takes from the back, moves survivors to the front
  std::unordered_map<std::string, Akey, StringHash, std::equal_to<>> by_scope_;
};

}  // namespace ros2::vos
