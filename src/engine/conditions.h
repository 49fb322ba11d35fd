// Condition checks of conditional updates and punches (obj::kFlagIfAbsent,
// kFlagIfPresent), shared by the plain handlers (object_handlers.cc) and the
// leader of a replicated object (replica_forward.cc). Target thread only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/object_id.h"
#include "common/status.h"
#include "vos/vos.h"

namespace ros2::engine {

// Whether `akey` of `dkey` has a visible value now (punched keys do not).
Result<bool> AkeyVisible(vos::Vos& vos, const ObjectId& oid, const std::string& dkey, const std::string& akey);
// Whether `dkey` has any visible akey now.
Result<bool> DkeyVisible(vos::Vos& vos, const ObjectId& oid, const std::string& dkey);
// OK to proceed, or the refusal (AlreadyExists, NotFound) naming `what`.
Status CheckCondition(uint8_t flags, Result<bool> visible, std::string_view what);

}  // namespace ros2::engine
