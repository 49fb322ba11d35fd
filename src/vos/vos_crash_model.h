// The workload of the VOS crash test: every update is a pure function of its
// epoch, so the parent can rebuild exactly what the killed child wrote.
// Test code only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vos/vos.h"

namespace ros2::vos::testing {

struct CrashOp {
  ObjectId oid;
  std::string dkey;
  std::string akey;
  ValueType type = ValueType::kSingle;
  uint64_t index = 0;
  uint32_t record_size = 1;
  std::vector<std::byte> data;

  UpdateOp ToUpdate(Epoch epoch) const;
  uint64_t count() const { return data.size() / record_size; }
};

// The update the crash workload performs at `epoch`: single values and array
// extents, inline and extent-store sized, overlapping within a few akeys.
CrashOp MakeCrashOp(Epoch epoch);

}  // namespace ros2::vos::testing
