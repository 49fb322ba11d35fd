// Visibility rules shared by fetch, enumeration and aggregation.
//
// ResolveVisible decides, for overlapping array extents, which extent owns each
// record: the newest epoch wins per record (ties: the candidate listed first).
// PunchIndex keeps every punch tombstone in memory (loaded from RocksDB at open)
// and answers "the newest punch at or below epoch E covering this akey". A
// version at epoch v is visible at E when v <= E and v > that punch epoch.
// Owned by the VOS; target thread only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/hlc.h"

namespace ros2::vos {

struct ExtentCandidate {
  uint64_t begin = 0;  // first record
  uint64_t end = 0;    // one past the last record
  Epoch epoch = 0;
  size_t id = 0;  // caller's handle
};

struct VisiblePiece {
  uint64_t begin = 0;
  uint64_t end = 0;
  size_t id = 0;
};

// The visible pieces of `candidates` within [lo, hi), in index order; records
// no candidate covers are absent (holes).
std::vector<VisiblePiece> ResolveVisible(std::vector<ExtentCandidate> candidates, uint64_t lo, uint64_t hi);
// The same into `pieces` (cleared first), reordering `candidates`: for a
// caller that keeps both vectors' memory from one call to the next.
void ResolveVisibleInto(std::vector<ExtentCandidate>& candidates, uint64_t lo, uint64_t hi,
                        std::vector<VisiblePiece>* pieces);

class PunchIndex {
 public:
  void Add(std::string_view scope, Epoch epoch);
  void Remove(std::string_view scope, Epoch epoch);
  // The newest punch at or below `at` on `scope` exactly (0 when none).
  Epoch LatestOn(std::string_view scope, Epoch at) const;
  // The newest punch at or below `at` covering an akey: on its object (the
  // first 16 bytes of the scope), its dkey (the first dkey_scope_len bytes) or itself.
  Epoch LatestCovering(std::string_view akey_scope, size_t dkey_scope_len, Epoch at) const;
  bool empty() const { return by_scope_.empty(); }
  std::vector<std::pair<std::string, Epoch>> All() const;

 private:
  std::map<std::string, std::vector<Epoch>, std::less<>> by_scope_;  // epochs ascending
};

}  // namespace ros2::vos
