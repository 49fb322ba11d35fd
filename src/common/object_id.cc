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
    case ObjectClass::kRP2GX: return "RP_2GX";
    case ObjectClass::kRP3GX: return "RP_3GX";
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
  if (up == "RP_2GX") return ObjectClass::kRP2GX;
  if (up == "RP_3GX") return ObjectClass::kRP3GX;
  return Status::InvalidArgument(
      fmt::format("unknown object class '{}' (expected S1, SX, RP_2G1, RP_3G1, RP_2GX or RP_3GX)", name));
}

Status CheckRedundancy(ObjectClass oc, uint32_t rd_fac) {
  const uint32_t survives = FailuresTolerated(oc);
  if (survives >= rd_fac) return Status::Ok();
  return Status::InvalidArgument(
      fmt::format("object class {} survives {} engine loss{}, the container's redundancy factor rd_fac={} needs {}",
                  ObjectClassName(oc), survives, survives == 1 ? "" : "es", rd_fac, rd_fac));
}

}  // namespace ros2
