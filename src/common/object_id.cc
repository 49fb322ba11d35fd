#include "common/object_id.h"

#include <algorithm>
#include <cctype>

namespace ros2 {

std::string_view ObjectClassName(ObjectClass oc) {
  switch (oc) {
    case ObjectClass::kS1: return "S1";
    case ObjectClass::kSX: return "SX";
    case ObjectClass::kRP2G1: return "RP_2G1";
    case ObjectClass::kRP3G1: return "RP_3G1";
  }
  return "unknown";
}

Result<ObjectClass> ParseObjectClass(std::string_view name) {
  std::string up(name);
  std::transform(up.begin(), up.end(), up.begin(), [](unsigned char c) { return std::toupper(c); });
  if (up == "S1") return ObjectClass::kS1;
  if (up == "SX") return ObjectClass::kSX;
  if (up == "RP_2G1") return ObjectClass::kRP2G1;
  if (up == "RP_3G1") return ObjectClass::kRP3G1;
  return Status::InvalidArgument(fmt::format("unknown object class '{}' (expected S1, SX, RP_2G1 or RP_3G1)", name));
}

}  // namespace ros2
