// PoolMap: the versioned list of a pool's targets, as clients and engines see it.
//
// A pool spans every target of every engine that joined it. Each target has a
// stable global index (its position in `targets`, never reused), the engine it
// lives on, its index inside that engine, and a state. The map's version grows
// by one on every change; a client holding an older version must refresh it
// before trusting a placement. The control plane owns the authoritative copy
// and ships it in the session reply; this is the plain in-memory form.
// A value type; safe to copy between threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ros2 {

enum class TargetState : uint8_t {
  kUp = 0,    // serving I/O
  kDown = 1,  // failed or excluded: no I/O goes there
  // Read and written as UP while its replicas are copied to the targets that
  // take its place (which take writes too); DOWNOUT once they hold them.
  kDrain = 2,
  // Was DOWN; rebuild made its data whole on the fallback targets, which are
  // then read like any replica. No I/O goes to the target itself.
  kDownOut = 3,
  // Being reintegrated: written while it catches up, read once UP. From
  // DOWNOUT it is placed as DOWNOUT (its fallbacks are read); back from DOWN
  // (TargetInfo::back_from_down) its replicas keep their slots, write-only,
  // and their groups are read from the other replicas.
  kReint = 4,
};
// DOWN or DOWNOUT: the target takes no I/O, its replicas have fallbacks.
inline bool IsOut(TargetState s) { return s == TargetState::kDown || s == TargetState::kDownOut; }
std::string_view TargetStateName(TargetState s);

// TargetInfo::host when the map does not say which host an engine runs on:
// each engine is then its own host.
inline constexpr uint32_t kUnknownHost = UINT32_MAX;

struct TargetInfo {
  uint32_t engine_rank = 0;   // index of the engine in the pool's engine list
  uint32_t engine_index = 0;  // target number inside that engine
  TargetState state = TargetState::kUp;
  // The host the engine runs on (an index shared by the engines of one host),
  // the outer fault domain of replica placement; kUnknownHost: not known.
  uint32_t host = kUnknownHost;
  // REINT back from DOWN before its rebuild: no fallback holds its copies
  // whole, so its groups are read from their other replicas (a group with no
  // other readable replica reads it: nothing holds more).
  bool back_from_down = false;
};

struct PoolMap {
  uint64_t version = 0;
  std::vector<TargetInfo> targets;  // position = global target index

  size_t size() const { return targets.size(); }
  // InvalidArgument when the map is empty or names an engine rank without targets.
  Status Validate() const;
};

}  // namespace ros2
