#include "vos/visibility.h"

#include <algorithm>

namespace ros2::vos {

std::vector<VisiblePiece> ResolveVisible(std::vector<ExtentCandidate> candidates, uint64_t lo, uint64_t hi) {
  std::vector<VisiblePiece> pieces;
  ResolveVisibleInto(candidates, lo, hi, &pieces);
  return pieces;
}

void ResolveVisibleInto(std::vector<ExtentCandidate>& candidates, uint64_t lo, uint64_t hi,
                        std::vector<VisiblePiece>* pieces) {
  pieces->clear();
  // One version (a read inside what one write wrote, the common case): its
  // overlap with [lo, hi), without the interval map.
  if (candidates.size() == 1) {
    const ExtentCandidate& c = candidates.front();
    const uint64_t b = std::max(c.begin, lo);
    const uint64_t e = std::min(c.end, hi);
    if (b < e) pieces->push_back(VisiblePiece{b, e, c.id});
    return;
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const ExtentCandidate& a, const ExtentCandidate& b) { return a.epoch > b.epoch; });
  std::map<uint64_t, uint64_t> covered;  // begin -> end, disjoint and coalesced
  for (const ExtentCandidate& c : candidates) {
    uint64_t b = std::max(c.begin, lo);
    uint64_t e = std::min(c.end, hi);
    if (b >= e) continue;
    // Walk the covered intervals that touch [b, e); the gaps are this candidate's.
    auto it = covered.upper_bound(b);
    if (it != covered.begin() && std::prev(it)->second >= b) --it;
    uint64_t pos = b;
    uint64_t merged_begin = b;
    uint64_t merged_end = e;
    while (it != covered.end() && it->first <= e) {
      if (it->first > pos) pieces->push_back({pos, it->first, c.id});
      pos = std::max(pos, it->second);
      merged_begin = std::min(merged_begin, it->first);
      merged_end = std::max(merged_end, it->second);
      it = covered.erase(it);
    }
    if (pos < e) pieces->push_back({pos, e, c.id});
    covered.emplace(merged_begin, merged_end);
    if (covered.size() == 1 && covered.begin()->first <= lo && covered.begin()->second >= hi) break;
  }
  std::sort(pieces->begin(), pieces->end(),
            [](const VisiblePiece& a, const VisiblePiece& b) { return a.begin < b.begin; });
}

void PunchIndex::Add(std::string_view scope, Epoch epoch) {
  auto it = by_scope_.find(scope);
  if (it == by_scope_.end()) it = by_scope_.emplace(std::string(scope), std::vector<Epoch>{}).first;
  auto& v = it->second;
  auto pos = std::lower_bound(v.begin(), v.end(), epoch);
  if (pos == v.end() || *pos != epoch) v.insert(pos, epoch);
}

void PunchIndex::Remove(std::string_view scope, Epoch epoch) {
  auto it = by_scope_.find(scope);
  if (it == by_scope_.end()) return;
  auto& v = it->second;
  auto pos = std::lower_bound(v.begin(), v.end(), epoch);
  if (pos != v.end() && *pos == epoch) v.erase(pos);
  if (v.empty()) by_scope_.erase(it);
}

Epoch PunchIndex::LatestOn(std::string_view scope, Epoch at) const {
  auto it = by_scope_.find(scope);
  if (it == by_scope_.end()) return 0;
  const auto& v = it->second;
  auto pos = std::upper_bound(v.begin(), v.end(), at);
  return pos == v.begin() ? 0 : *std::prev(pos);
}

Epoch PunchIndex::LatestCovering(std::string_view akey_scope, size_t dkey_scope_len, Epoch at) const {
  if (by_scope_.empty()) return 0;
  return std::max({LatestOn(akey_scope.substr(0, 16), at), LatestOn(akey_scope.substr(0, dkey_scope_len), at),
                   LatestOn(akey_scope, at)});
}

std::vector<std::pair<std::string, Epoch>> PunchIndex::All() const {
  std::vector<std::pair<std::string, Epoch>> out;
  for (const auto& [scope, epochs] : by_scope_) {
    for (Epoch e : epochs) out.emplace_back(scope, e);
  }
  return out;
}

}  // namespace ros2::vos
