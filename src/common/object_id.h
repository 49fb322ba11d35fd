// ObjectId: the 128-bit identity of an object, and the object classes it encodes.
//
// Layout (as in DAOS): the top 8 bits of `hi` are the object type, the next 8
// bits the object class, the remaining 112 bits are chosen by the allocator of
// the container (a counter for DFS, anything for plain objects). Placement reads
// the class from the id, so no metadata lookup is needed on the data path.
// A value type.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "common/status.h"

namespace ros2 {

enum class ObjectType : uint8_t {
  kKeyValue = 0,  // dkey/akey/value with single values
  kArray = 1,     // byte array (DFS files)
  kDirectory = 2,  // DFS directory
  kSuperblock = 3,
};

enum class ObjectClass : uint8_t {
  kS1 = 1,     // one shard on one target
  kSX = 2,     // striped over all targets of the pool: dkey picks the shard
  kRP2G1 = 3,  // two replicas, one group (reserved: replication comes later)
  kRP3G1 = 4,  // three replicas, one group (reserved)
};

std::string_view ObjectClassName(ObjectClass oc);
Result<ObjectClass> ParseObjectClass(std::string_view name);  // "S1", "SX", "RP_2G1", "RP_3G1"

struct ObjectId {
  uint64_t hi = 0;
  uint64_t lo = 0;

  static ObjectId Make(ObjectType type, ObjectClass oc, uint64_t hi_user, uint64_t lo) {
    return ObjectId{(uint64_t{static_cast<uint8_t>(type)} << 56) | (uint64_t{static_cast<uint8_t>(oc)} << 48) |
                        (hi_user & ((uint64_t{1} << 48) - 1)),
                    lo};
  }
  ObjectType type() const { return static_cast<ObjectType>(hi >> 56); }
  ObjectClass object_class() const { return static_cast<ObjectClass>((hi >> 48) & 0xff); }

  std::string ToString() const { return fmt::format("{:x}.{:x}", hi, lo); }
  friend auto operator<=>(const ObjectId&, const ObjectId&) = default;
};

}  // namespace ros2
