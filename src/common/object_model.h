// The vocabulary of the object data model that the object protocol (obj), VOS
// and the client share, defined once here and used by each of them as it is:
//
//   ValueType  — single value or array (public: ros2/types.h)
//   Checksums  — chunked checksums over a byte range (common/checksum.h)
//   PunchScope — what a punch removes: the object, one dkey or one akey
//   ListAnchor — resumable enumeration position within one target
//
// The numbers of PunchScope are the object protocol's (docs/object-protocol.md);
// VOS does not store them (a punch tombstone's key names its scope,
// docs/vos.md), so they appear on the wire only.
//
// Value types; safe from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "common/checksum.h"
#include "ros2/types.h"

namespace ros2 {

enum class PunchScope : uint8_t { kObject = 1, kDkey = 2, kAkey = 3 };

// Resumable enumeration position within one target (VOS's listing, the
// object protocol's list request and reply). Start with a default one, pass
// back what the previous page returned unchanged, stop at `eof`. The position
// is the lister's own encoding (the last key returned), opaque to everyone
// else.
struct ListAnchor {
  std::string position;
  bool eof = false;
  friend bool operator==(const ListAnchor&, const ListAnchor&) = default;
};

}  // namespace ros2
