#include "placement/placement.h"

#include <algorithm>

#include <fmt/format.h>

namespace ros2 {

uint32_t JumpConsistentHash(uint64_t key, uint32_t buckets) {
  // Each step jumps forward to the next bucket count at which the key would move;
  // the linear congruential step is the one from the paper.
  int64_t b = -1, j = 0;
  while (j < static_cast<int64_t>(buckets)) {
    b = j;
    key = key * 2862933555777941757ULL + 1;
    j = static_cast<int64_t>(static_cast<double>(b + 1) *
                             (static_cast<double>(1LL << 31) / static_cast<double>((key >> 33) + 1)));
  }
  return static_cast<uint32_t>(b);
}

namespace {

// The 64-bit finaliser of MurmurHash3 (fmix64): spreads every input bit over
// every output bit, so sequential ids and short keys land far apart.
uint64_t Mix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

}  // namespace

uint64_t PlacementHash(std::string_view bytes) {
  // FNV-1a over the bytes, then a full-avalanche mix: FNV alone leaves the high
  // bits of short keys (8-byte chunk indices) poorly mixed.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return Mix64(h ^ bytes.size());
}

uint64_t PlacementHash(const ObjectId& oid) {
  return Mix64(oid.hi ^ Mix64(oid.lo));
}

namespace {

constexpr uint32_t kNoTarget = UINT32_MAX;

// Groups of the class over n targets: SX one per target, GX as many as fit
// (at least one), everything else one.
uint32_t GroupCount(ObjectClass oc, uint32_t n, uint32_t replicas) {
  if (oc == ObjectClass::kSX) return n;
  if (SpreadsOverTargets(oc)) return std::max<uint32_t>(1, n / replicas);
  return 1;
}

// The host of target t; an engine whose host is unknown is a host of its own.
uint64_t HostOf(const PoolMap& map, uint32_t t) {
  const TargetInfo& info = map.targets[t];
  return info.host == kUnknownHost ? (uint64_t{1} << 32) | info.engine_rank : info.host;
}

bool Contains(const std::vector<uint32_t>& v, uint32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The object's order of the pool's targets, rotated to start at group
// `group`'s first slot (group * replicas): rendezvous order, the highest
// Mix64(oid, target) score first, ties broken by the lower index. Groups
// start `replicas` apart in one order, so the groups of a GX object cover the
// targets rather than each landing at random.
std::vector<uint32_t> RankTargets(const PoolMap& map, const ObjectId& oid, uint32_t group, uint32_t replicas) {
  const uint64_t base = PlacementHash(oid);
  const auto n = static_cast<uint32_t>(map.targets.size());
  std::vector<std::pair<uint64_t, uint32_t>> scored(n);
  for (uint32_t t = 0; t < n; ++t) scored[t] = {Mix64(base ^ Mix64(t)), t};
  std::sort(scored.begin(), scored.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  const uint64_t start = uint64_t{group} * replicas % n;
  std::vector<uint32_t> ranked(n);
  for (uint32_t i = 0; i < n; ++i) ranked[i] = scored[(start + i) % n].second;
  return ranked;
}

// The best-ranked target not in `taken` and not `out` whose fault domain none
// of `members` uses: first a distinct host and engine, then a distinct
// engine, then any distinct target. kNoTarget when none is left.
template <typename Out>
uint32_t PickDistinct(const PoolMap& map, const std::vector<uint32_t>& ranked, const std::vector<uint32_t>& members,
                      const std::vector<uint32_t>& taken, Out out) {
  for (int pass = 0; pass < 3; ++pass) {
    for (uint32_t t : ranked) {
      if (Contains(taken, t) || out(t)) continue;
      bool distinct = true;
      for (uint32_t m : members) {
        bool same_engine = map.targets[m].engine_rank == map.targets[t].engine_rank;
        if ((pass == 0 && (same_engine || HostOf(map, m) == HostOf(map, t))) || (pass == 1 && same_engine)) {
          distinct = false;
          break;
        }
      }
      if (distinct) return t;
    }
  }
  return kNoTarget;
}

// Fallbacks for the DOWNOUT members of `ideal` (into `places`), chosen as
// when their rebuild ended: against the fault domains of the members that are
// not DOWNOUT, skipping the targets `out` says; each chosen one joins
// `members` and `taken`. `state(t)` is the state placement gives target t.
template <typename State, typename Out>
void DownOutFallbacks(const PoolMap& map, const std::vector<uint32_t>& ranked, const std::vector<uint32_t>& ideal,
                      State state, Out out, std::vector<ReplicaPlace>* places, std::vector<uint32_t>* members,
                      std::vector<uint32_t>* taken) {
  for (size_t j = 0; j < ideal.size(); ++j) {
    if (state(ideal[j]) != TargetState::kDownOut) continue;
    uint32_t f = PickDistinct(map, ranked, *members, *taken, out);
    if (f == kNoTarget) {
      (*places)[j] = ReplicaPlace{ideal[j], false, true};
      continue;
    }
    (*places)[j] = ReplicaPlace{f, false, false};
    members->push_back(f);
    taken->push_back(f);
  }
}

// The r slots of one replicated group under `state` (see the header): the
// ideal members, then a fallback for each DOWNOUT one and then for each DOWN
// one. A DOWNOUT replica's fallback is a full copy (not flagged) when it is
// the target its rebuild filled: the one chosen with only the DOWNOUT targets
// out (the map as it was when the rebuild ended). When a later failure took
// that target, the new one is a plain fallback until its own rebuild ends.
template <typename State>
std::vector<ReplicaPlace> GroupSlots(const PoolMap& map, const std::vector<uint32_t>& ranked,
                                     const std::vector<uint32_t>& ideal, State state) {
  const size_t r = ideal.size();
  std::vector<ReplicaPlace> places(r);
  std::vector<uint32_t> members, taken = ideal;
  bool any_downout = false;
  for (size_t j = 0; j < r; ++j) {
    places[j].target = ideal[j];
    any_downout |= state(ideal[j]) == TargetState::kDownOut;
    if (state(ideal[j]) != TargetState::kDownOut) members.push_back(ideal[j]);
  }
  auto now_out = [&state](uint32_t t) { return IsOut(state(t)); };
  if (any_downout) {
    std::vector<ReplicaPlace> rebuilt = places;
    std::vector<uint32_t> rebuilt_members = members, rebuilt_taken = taken;
    DownOutFallbacks(
        map, ranked, ideal, state, [&state](uint32_t t) { return state(t) == TargetState::kDownOut; }, &rebuilt,
        &rebuilt_members, &rebuilt_taken);
    DownOutFallbacks(map, ranked, ideal, state, now_out, &places, &members, &taken);
    for (size_t j = 0; j < r; ++j) {
      if (state(ideal[j]) != TargetState::kDownOut || places[j].down) continue;
      places[j].fallback = rebuilt[j].down || rebuilt[j].target != places[j].target;
    }
  }
  // DOWN members: against every member not out and the DOWNOUT fallbacks.
  std::erase_if(members, [&](uint32_t t) { return now_out(t); });
  for (size_t j = 0; j < r; ++j) {
    if (state(ideal[j]) != TargetState::kDown) continue;
    uint32_t f = PickDistinct(map, ranked, members, taken, now_out);
    if (f == kNoTarget) {
      places[j].down = true;
      continue;
    }
    places[j] = ReplicaPlace{f, true, false};
    members.push_back(f);
    taken.push_back(f);
  }
  return places;
}

bool Listed(const std::vector<ReplicaPlace>& places, uint32_t t) {
  return std::any_of(places.begin(), places.end(), [t](const ReplicaPlace& p) { return p.target == t; });
}

// REINT back from DOWN (TargetInfo::back_from_down) keeps its slot: no
// fallback holds its copy whole. The slot is written, not read, unless no
// other slot of the group is readable (then nothing holds more than it).
void WriteOnlyBackFromDown(const PoolMap& map, std::vector<ReplicaPlace>* places) {
  auto back = [&map](const ReplicaPlace& p) {
    return map.targets[p.target].state == TargetState::kReint && map.targets[p.target].back_from_down;
  };
  const bool other_readable = std::any_of(places->begin(), places->end(), [&](const ReplicaPlace& p) {
    return !p.down && !p.fallback && !back(p);
  });
  if (!other_readable) return;
  for (ReplicaPlace& p : *places) {
    if (back(p)) p.fallback = true;
  }
}

// The copies of one replicated group: its r slots, then the write-only
// copies of a move in progress (flagged `fallback`). A DRAIN member keeps its
// slot (read and written) and its future DOWNOUT fallback, the slot it gets
// once DRAIN becomes DOWNOUT, is written too. A REINT member is placed as
// DOWNOUT (its fallback is read) and written too, as the copy it becomes once
// UP; one back from DOWN keeps its slot, written only (WriteOnlyBackFromDown).
std::vector<ReplicaPlace> ReplicatedGroup(const PoolMap& map, const ObjectId& oid, uint32_t group, uint32_t r) {
  const std::vector<uint32_t> ranked = RankTargets(map, oid, group, r);
  std::vector<uint32_t> ideal;
  auto none = [](uint32_t) { return false; };
  for (uint32_t j = 0; j < r; ++j) ideal.push_back(PickDistinct(map, ranked, ideal, ideal, none));
  bool draining = false, reintegrating = false;
  for (uint32_t t : ideal) {
    draining |= map.targets[t].state == TargetState::kDrain;
    reintegrating |= map.targets[t].state == TargetState::kReint;
  }
  auto placed = [&map](uint32_t t) {
    const TargetInfo& info = map.targets[t];
    if (info.state == TargetState::kReint) return info.back_from_down ? TargetState::kUp : TargetState::kDownOut;
    return info.state == TargetState::kDrain ? TargetState::kUp : info.state;
  };
  std::vector<ReplicaPlace> places = GroupSlots(map, ranked, ideal, placed);
  if (!draining && !reintegrating) return places;
  WriteOnlyBackFromDown(map, &places);
  if (draining) {
    auto drained = [&map](uint32_t t) {
      const TargetInfo& info = map.targets[t];
      if (info.state == TargetState::kReint && info.back_from_down) return TargetState::kUp;
      return info.state == TargetState::kReint || info.state == TargetState::kDrain ? TargetState::kDownOut
                                                                                     : info.state;
    };
    const std::vector<ReplicaPlace> after = GroupSlots(map, ranked, ideal, drained);
    for (uint32_t j = 0; j < r; ++j) {
      if (map.targets[ideal[j]].state != TargetState::kDrain || after[j].down || Listed(places, after[j].target)) {
        continue;
      }
      places.push_back(ReplicaPlace{after[j].target, true, false});
    }
  }
  for (uint32_t j = 0; j < r; ++j) {
    if (map.targets[ideal[j]].state == TargetState::kReint && !Listed(places, ideal[j])) {
      places.push_back(ReplicaPlace{ideal[j], true, false});
    }
  }
  return places;
}

Status CheckPlaceable(const PoolMap& map, const ObjectId& oid) {
  if (map.targets.empty()) {
    return Status::InvalidArgument(
        fmt::format("placement of {}: pool map v{} has no targets", oid.ToString(), map.version));
  }
  const ObjectClass oc = oid.object_class();
  if (ReplicaCount(oc) == 0) {
    return Status::InvalidArgument(
        fmt::format("placement of {}: unknown object class {}", oid.ToString(), static_cast<int>(oc)));
  }
  if (ReplicaCount(oc) > map.targets.size()) {
    return Status::InvalidArgument(fmt::format("placement of {}: class {} needs {} targets, pool has {}",
                                               oid.ToString(), ObjectClassName(oc), ReplicaCount(oc),
                                               map.targets.size()));
  }
  return Status::Ok();
}

// The copies of group `group`. REQUIRES: CheckPlaceable(map, oid) is OK.
std::vector<ReplicaPlace> GroupPlaces(const PoolMap& map, const ObjectId& oid, uint32_t group) {
  const ObjectClass oc = oid.object_class();
  const uint32_t r = ReplicaCount(oc);
  if (r > 1) return ReplicatedGroup(map, oid, group, r);
  const auto n = static_cast<uint32_t>(map.targets.size());
  const uint32_t home = JumpConsistentHash(PlacementHash(oid), n);
  const uint32_t t = (home + group) % n;
  return {ReplicaPlace{t, false, IsOut(map.targets[t].state)}};
}

uint32_t DkeyGroup(uint32_t groups, std::string_view dkey) {
  return groups <= 1 ? 0 : JumpConsistentHash(PlacementHash(dkey), groups);
}

std::string DescribePlaces(const PoolMap& map, const std::vector<ReplicaPlace>& places) {
  std::string out;
  for (const auto& p : places) {
    const TargetInfo& info = map.targets[p.target];
    out += fmt::format("{}target {} (engine {}, index {}){}", out.empty() ? "" : ", ", p.target, info.engine_rank,
                       info.engine_index,
                       p.down       ? " DOWN"
                       : p.fallback ? " fallback"
                                    : "");
  }
  return out;
}

}  // namespace

Result<ObjectLayout> ComputeLayout(const PoolMap& map, const ObjectId& oid) {
  ROS2_RETURN_IF_ERROR(CheckPlaceable(map, oid));
  const ObjectClass oc = oid.object_class();
  ObjectLayout layout;
  layout.replicas = ReplicaCount(oc);
  layout.groups = GroupCount(oc, static_cast<uint32_t>(map.targets.size()), layout.replicas);
  layout.places.reserve(size_t{layout.groups} * layout.replicas);
  for (uint32_t g = 0; g < layout.groups; ++g) {
    auto group = GroupPlaces(map, oid, g);
    layout.places.insert(layout.places.end(), group.begin(), group.begin() + layout.replicas);
    if (group.size() > layout.replicas) {
      layout.extra.resize(layout.groups);
      layout.extra[g].assign(group.begin() + layout.replicas, group.end());
    }
  }
  return layout;
}

std::vector<ReplicaPlace> GroupCopies(const ObjectLayout& layout, uint32_t group) {
  std::vector<ReplicaPlace> out(layout.places.begin() + size_t{group} * layout.replicas,
                                layout.places.begin() + size_t{group + 1} * layout.replicas);
  if (group < layout.extra.size()) out.insert(out.end(), layout.extra[group].begin(), layout.extra[group].end());
  return out;
}

uint32_t GroupForDkey(const ObjectLayout& layout, std::string_view dkey) {
  return DkeyGroup(layout.groups, dkey);
}

Result<std::vector<ReplicaPlace>> ReplicasForDkey(const PoolMap& map, const ObjectId& oid, std::string_view dkey) {
  ROS2_RETURN_IF_ERROR(CheckPlaceable(map, oid));
  const ObjectClass oc = oid.object_class();
  const uint32_t groups = GroupCount(oc, static_cast<uint32_t>(map.targets.size()), ReplicaCount(oc));
  return GroupPlaces(map, oid, DkeyGroup(groups, dkey));
}

Result<std::vector<uint32_t>> ReadTargets(const PoolMap& map, const ObjectId& oid, std::string_view dkey) {
  ROS2_ASSIGN_OR_RETURN(auto places, ReplicasForDkey(map, oid, dkey));
  std::vector<uint32_t> out;
  for (const auto& p : places) {
    if (!p.down && !p.fallback) out.push_back(p.target);
  }
  if (out.empty()) {
    return Status::NotFound(fmt::format("object {}: no copy of the dkey's shard is readable in pool map v{} ({})",
                                        oid.ToString(), map.version, DescribePlaces(map, places)));
  }
  return out;
}

Result<std::vector<uint32_t>> WriteTargets(const PoolMap& map, const ObjectId& oid, std::string_view dkey) {
  ROS2_ASSIGN_OR_RETURN(auto places, ReplicasForDkey(map, oid, dkey));
  // Copies that hold the data first, fallbacks after: the first is the
  // update's leader, which decides conditions, and a fallback holds nothing
  // older than the failure it stands in for.
  std::vector<uint32_t> out;
  for (const auto& p : places) {
    if (!p.down && !p.fallback) out.push_back(p.target);
  }
  for (const auto& p : places) {
    if (!p.down && p.fallback) out.push_back(p.target);
  }
  if (out.empty()) {
    return Status::NotFound(fmt::format("object {}: no copy of the dkey's shard is writable in pool map v{} ({})",
                                        oid.ToString(), map.version, DescribePlaces(map, places)));
  }
  return out;
}

Result<uint32_t> ReadTarget(const PoolMap& map, const ObjectId& oid, std::string_view dkey, uint32_t replica,
                            uint32_t first) {
  const ObjectClass oc = oid.object_class();
  if (ReplicaCount(oc) != 1) {
    ROS2_ASSIGN_OR_RETURN(auto targets, ReadTargets(map, oid, dkey));
    if (replica >= targets.size()) {
      return Status::NotFound(fmt::format("object {}: no replica left to read after {} tried", oid.ToString(), replica));
    }
    return targets[(first % targets.size() + replica) % targets.size()];
  }
  // A group of one, as GroupPlaces computes it, without the vectors.
  ROS2_RETURN_IF_ERROR(CheckPlaceable(map, oid));
  const auto n = static_cast<uint32_t>(map.targets.size());
  const uint32_t group = DkeyGroup(GroupCount(oc, n, 1), dkey);
  const uint32_t t = (JumpConsistentHash(PlacementHash(oid), n) + group) % n;
  if (map.targets[t].state == TargetState::kDown) {
    return Status::NotFound(fmt::format("object {}: no copy of the dkey's shard is readable in pool map v{} ({})",
                                        oid.ToString(), map.version,
                                        DescribePlaces(map, {ReplicaPlace{t, false, true}})));
  }
  if (replica > 0) {
    return Status::NotFound(fmt::format("object {}: no replica left to read after {} tried", oid.ToString(), replica));
  }
  return t;
}

Result<uint32_t> TargetForDkey(const PoolMap& map, const ObjectId& oid, std::string_view dkey) {
  ROS2_ASSIGN_OR_RETURN(auto places, ReplicasForDkey(map, oid, dkey));
  for (const auto& p : places) {
    if (!p.down && !p.fallback) return p.target;
  }
  const TargetInfo& info = map.targets[places[0].target];
  return Status::NotFound(
      fmt::format("object {} dkey shard is on target {} (engine {}, index {}), which is DOWN in pool map v{}",
                  oid.ToString(), places[0].target, info.engine_rank, info.engine_index, map.version));
}

}  // namespace ros2
