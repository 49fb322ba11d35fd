// RangeSet: a set of byte ranges [begin, end), kept as disjoint coalesced runs.
// The VOS uses it for the parts of a growing data file known to be written
// (docs/vos.md, "Durability"). Not thread-safe; the owner's thread only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>

namespace ros2::vos {

class RangeSet {
 public:
  // Adds [begin, end), merging with touching or overlapping runs.
  void Add(uint64_t begin, uint64_t end) {
    if (begin >= end) return;
    auto it = runs_.upper_bound(begin);
    if (it != runs_.begin()) {
      auto prev = std::prev(it);
      if (prev->second >= begin) {
        begin = prev->first;
        end = std::max(end, prev->second);
        it = runs_.erase(prev);
      }
    }
    while (it != runs_.end() && it->first <= end) {
      end = std::max(end, it->second);
      it = runs_.erase(it);
    }
    runs_.emplace(begin, end);
  }
  // True when [begin, end) lies inside one run.
  bool Contains(uint64_t begin, uint64_t end) const {
    auto it = runs_.upper_bound(begin);
    if (it == runs_.begin()) return false;
    --it;
    return it->first <= begin && end <= it->second;
  }
  // The end of the run that starts at 0 once the ranges `extra` (sorted by
  // begin) were added; the set itself is not changed.
  template <typename Ranges>
  uint64_t PrefixEndWith(const Ranges& extra) const {
    uint64_t end = 0;
    auto it = runs_.begin();
    auto x = extra.begin();
    for (bool grew = true; grew;) {
      grew = false;
      for (; it != runs_.end() && it->first <= end; ++it, grew = true) end = std::max(end, it->second);
      for (; x != extra.end() && x->first <= end; ++x, grew = true) end = std::max(end, x->second);
    }
    return end;
  }
  size_t runs() const { return runs_.size(); }

 private:
  std::map<uint64_t, uint64_t> runs_;  // begin -> end
};

}  // namespace ros2::vos
