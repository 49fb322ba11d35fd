// RocksDB key encoding of the VOS (docs/vos.md, "Key schema").
//
// Every key starts with one prefix byte naming its family. Keys of the object
// tree ('T') are order-preserving: objects sort by (hi, lo) big-endian, dkeys and
// akeys by their bytes (escaped so that a shorter key sorts before its
// extensions), single-value versions newest first (inverted epoch), array
// extents by start index then newest first. Free functions on byte strings;
// thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/hlc.h"
#include "common/object_id.h"
#include "common/status.h"

namespace ros2::vos::keys {

inline constexpr char kTree = 'T';      // T scope kind ...: the object tree
inline constexpr char kPunch = 'P';     // P scope epoch: punch tombstones
inline constexpr char kAlloc = 'A';     // A offset: extent-store allocations
inline constexpr char kSnapshot = 'N';  // N epoch: snapshots
inline constexpr char kMeta = 'M';      // M name: store-wide metadata (format, data size)
inline constexpr char kCheck = 'C';     // C group: extents whose durability rides on a WAL sync (checked at open)
inline constexpr char kDecided = 'D';   // D akey-scope: the decided transaction of a conditional operation

// Record kinds after an akey scope.
inline constexpr char kHeaderKind = 'h';  // the akey header (type, record size, longest extent)
inline constexpr char kSingleKind = 'v';  // a single-value version
inline constexpr char kExtentKind = 'x';  // an array extent

void AppendU64(std::string* out, uint64_t v);  // big-endian
uint64_t ReadU64(std::string_view in);         // REQUIRES: in.size() >= 8
// Appends `key` with 0x00 escaped as 00 FF and the terminator 00 01.
void AppendEscaped(std::string* out, std::string_view key);
// Consumes one escaped key from the front of *in; false when malformed.
bool ConsumeEscaped(std::string_view* in, std::string* out);

// Scopes name the target of a punch and prefix the tree keys below them.
std::string ObjectScope(const ObjectId& oid);
std::string DkeyScope(const ObjectId& oid, std::string_view dkey);
// DkeyScope(oid, dkey).size(), without building it.
size_t DkeyScopeSize(std::string_view dkey);
std::string AkeyScope(const ObjectId& oid, std::string_view dkey, std::string_view akey);
// AkeyScope into `out`, reusing its memory (the fetch path's, with no allocation).
void AssignAkeyScope(const ObjectId& oid, std::string_view dkey, std::string_view akey, std::string* out);

std::string TreeKey(std::string_view scope);  // 'T' + scope: prefix of everything below the scope
std::string HeaderKey(std::string_view akey_scope);
std::string SingleKey(std::string_view akey_scope, Epoch epoch);
// Extents are filed by size class, c = bit_width(count - 1), so that an extent
// of class c is at most ExtentClassBound(c) = 2^c records long: a fetch of
// [lo, hi) scans, per class the akey uses, only starts in (lo - 2^c, hi).
inline constexpr int kMaxSizeClass = 63;  // the last class holds everything longer than 2^62 records
uint8_t ExtentSizeClass(uint64_t count);  // REQUIRES: count > 0
uint64_t ExtentClassBound(uint8_t size_class);
std::string ExtentClassPrefix(std::string_view akey_scope, uint8_t size_class);
std::string ExtentKey(std::string_view akey_scope, uint8_t size_class, uint64_t index, Epoch epoch);
std::string PunchKey(std::string_view scope, Epoch epoch);
std::string AllocKey(uint64_t offset);
std::string SnapshotKey(Epoch epoch);
std::string MetaKey(std::string_view name);
std::string CheckKey(uint64_t group);
// 'D' + the akey scope of (oid, dkey, akey); akey may be empty (a dkey punch).
std::string DecidedKey(const ObjectId& oid, std::string_view dkey, std::string_view akey);

// The smallest key greater than every key that starts with `prefix` ("" when
// there is none: the prefix is all 0xFF).
std::string PrefixSuccessor(std::string_view prefix);

// A decoded tree key.
struct ParsedTreeKey {
  ObjectId oid;
  std::string dkey;
  std::string akey;
  char kind = 0;
  uint8_t size_class = 0;     // kExtentKind
  uint64_t index = 0;         // kExtentKind
  Epoch epoch = 0;            // kSingleKind, kExtentKind
  size_t dkey_scope_len = 0;  // bytes of the key up to the end of the escaped dkey (excluding 'T')
  size_t akey_scope_len = 0;  // ... up to the end of the escaped akey (excluding 'T')
};
// Parses a 'T' key; Corruption when malformed. Keys that stop after the oid or
// the dkey are malformed (no such keys are written).
Result<ParsedTreeKey> ParseTreeKey(std::string_view key);

}  // namespace ros2::vos::keys
