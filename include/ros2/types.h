// The value types of the public ROS2 API (libros2): Status and Result<T> (how
// every call reports success or failure), ObjectId with its ObjectType and
// ObjectClass, the ValueType of a stored value, the ChecksumType of a
// container's data, and the Rights bitmask.
// Self-contained: the standard library only. The internal layers (the object
// protocol, VOS) use these same definitions; none has a copy of its own.
//
// A Status is either OK or carries a Code naming the failure kind and a message
// naming the object and the cause ("vos: fetch oid=1.2 dkey='a': checksum mismatch
// in extent [0, 4096) at epoch 17"). An OK Status holds no message and costs one
// byte-sized enum plus an empty string. Result<T> holds either a T or a non-OK
// Status. Neither throws; no exception crosses a library boundary in ROS2.
//
// ObjectId layout (as in DAOS): the top 8 bits of `hi` are the object type, the
// next 8 bits the object class, the remaining 112 bits are chosen by the
// allocator of the container (a counter for DFS, anything for plain objects).
// Placement reads the class from the id, so no metadata lookup is needed on the
// data path.
//
// Thread safety: values; distinct objects may be used from distinct threads.
#pragma once

#include <cerrno>
#include <charconv>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace ros2 {

class Status {
 public:
  // Stable numbers: they travel on the wire (transport replies, gRPC details).
  enum class Code : uint8_t {
    kOk = 0,
    kNotFound = 1,
    kCorruption = 2,       // stored or transferred data failed its checksum
    kInvalidArgument = 3,  // the caller asked for something malformed
    kIOError = 4,          // the medium or the OS failed
    kNoSpace = 5,          // out of space; nothing was half-written
    kAlreadyExists = 6,
    kPermissionDenied = 7,  // authenticated but not allowed (ACL, capability rights)
    kUnauthenticated = 8,   // bad, forged, expired or revoked credentials
    kTimedOut = 9,
    kDisconnected = 10,  // the peer died or closed the connection
    kBusy = 11,
    kNotSupported = 12,
    kCancelled = 13,
    kProtocol = 14,  // a malformed or unexpected message from a peer
    kNotEmpty = 15,
    kInternal = 16,
    kNotDirectory = 17,  // a path component or the target is not a directory (POSIX namespace)
    kIsDirectory = 18,   // a directory where a file was required
    kNameTooLong = 19,
    kLoop = 20,  // too many symbolic links while resolving a path
    // The request was placed with an older pool map than the target's; the
    // client refreshes its map and resends (reserved for versioned pool maps).
    kStaleMap = 21,
  };
  // The highest code number (wire decoders refuse larger ones).
  static constexpr Code kLastCode = Code::kStaleMap;

  // OK. User-provided (not `= default`) on purpose: value-initialising an
  // aggregate-like Status made GCC zero all 40 bytes with `rep stos` before
  // building the string, ~30 cycles on every Status::Ok().
  Status() noexcept {}
  static Status Ok() { return Status(); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status Corruption(std::string msg) { return Status(Code::kCorruption, std::move(msg)); }
  static Status InvalidArgument(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status IOError(std::string msg) { return Status(Code::kIOError, std::move(msg)); }
  static Status NoSpace(std::string msg) { return Status(Code::kNoSpace, std::move(msg)); }
  static Status AlreadyExists(std::string msg) { return Status(Code::kAlreadyExists, std::move(msg)); }
  static Status PermissionDenied(std::string msg) { return Status(Code::kPermissionDenied, std::move(msg)); }
  static Status Unauthenticated(std::string msg) { return Status(Code::kUnauthenticated, std::move(msg)); }
  static Status TimedOut(std::string msg) { return Status(Code::kTimedOut, std::move(msg)); }
  static Status Disconnected(std::string msg) { return Status(Code::kDisconnected, std::move(msg)); }
  static Status Busy(std::string msg) { return Status(Code::kBusy, std::move(msg)); }
  static Status NotSupported(std::string msg) { return Status(Code::kNotSupported, std::move(msg)); }
  static Status Cancelled(std::string msg) { return Status(Code::kCancelled, std::move(msg)); }
  static Status Protocol(std::string msg) { return Status(Code::kProtocol, std::move(msg)); }
  static Status NotEmpty(std::string msg) { return Status(Code::kNotEmpty, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }
  static Status NotDirectory(std::string msg) { return Status(Code::kNotDirectory, std::move(msg)); }
  static Status IsDirectory(std::string msg) { return Status(Code::kIsDirectory, std::move(msg)); }
  static Status NameTooLong(std::string msg) { return Status(Code::kNameTooLong, std::move(msg)); }
  static Status Loop(std::string msg) { return Status(Code::kLoop, std::move(msg)); }
  static Status StaleMap(std::string msg) { return Status(Code::kStaleMap, std::move(msg)); }

  // Maps an errno value to the closest Code; `context` names the object and the
  // operation ("open /data/target0/extents"), strerror(err) is appended.
  static Status FromErrno(int err, std::string_view context);

  // Builds a Status from a wire code; unknown numbers become kProtocol.
  static Status FromCode(uint8_t code, std::string msg);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  bool IsNotFound() const { return code_ == Code::kNotFound; }
  bool IsCorruption() const { return code_ == Code::kCorruption; }
  bool IsInvalidArgument() const { return code_ == Code::kInvalidArgument; }
  bool IsIOError() const { return code_ == Code::kIOError; }
  bool IsNoSpace() const { return code_ == Code::kNoSpace; }

  // Returns a copy whose message is "<prefix>: <message>"; OK stays OK.
  Status WithContext(std::string_view prefix) const;

  // "OK" or "<CodeName>: <message>".
  std::string ToString() const;

  // The closest errno for this status (0 for OK), for POSIX faces (DFS, FUSE).
  int ToErrno() const;

  friend bool operator==(const Status& a, const Status& b) { return a.code_ == b.code_ && a.message_ == b.message_; }

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

std::string_view CodeName(Status::Code code);

// Result<T>: a T on success, a non-OK Status on failure.
// REQUIRES: a Result is never constructed from an OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::in_place_index<1>, std::move(status)) {  // NOLINT
    if (std::get<1>(v_).ok()) v_.template emplace<1>(Status::Internal("Result built from an OK status"));
  }

  bool ok() const { return v_.index() == 0; }
  // The failure; OK when the result holds a value.
  Status status() const { return ok() ? Status::Ok() : std::get<1>(v_); }

  // REQUIRES: ok().
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

// --- objects ---

enum class ObjectType : uint8_t {
  kKeyValue = 0,   // dkey/akey/value with single values
  kArray = 1,      // byte array (DFS files)
  kDirectory = 2,  // DFS directory
  kSuperblock = 3,
};

// Object classes, named as in DAOS: "S" classes have one copy of each shard,
// "RP_<r>G<g>" classes keep r replicas of each of g groups (G1: one group,
// GX: as many groups as fit on the pool's targets, the dkey picking the
// group). A group's replicas sit on distinct engines (docs/replication.md).
// The numbers are the object id's class byte: stored on disk, never reused.
enum class ObjectClass : uint8_t {
  kS1 = 1,     // one shard on one target
  kSX = 2,     // striped over all targets of the pool: dkey picks the shard
  kRP2G1 = 3,  // two replicas, one group
  kRP3G1 = 4,  // three replicas, one group
  kRP2GX = 5,  // two replicas per group, groups over all targets: dkey picks the group
  kRP3GX = 6,  // three replicas per group, groups over all targets
};
inline constexpr ObjectClass kLastObjectClass = ObjectClass::kRP3GX;

// Copies of each shard: 1 for S1/SX, 2 or 3 for the RP classes (0 for an
// unknown class).
inline constexpr uint32_t ReplicaCount(ObjectClass oc) {
  switch (oc) {
    case ObjectClass::kS1:
    case ObjectClass::kSX: return 1;
    case ObjectClass::kRP2G1:
    case ObjectClass::kRP2GX: return 2;
    case ObjectClass::kRP3G1:
    case ObjectClass::kRP3GX: return 3;
  }
  return 0;
}
// Whether the class spreads its shards (or groups) over every target.
inline constexpr bool SpreadsOverTargets(ObjectClass oc) {
  return oc == ObjectClass::kSX || oc == ObjectClass::kRP2GX || oc == ObjectClass::kRP3GX;
}
// How many engine losses an object of the class survives (its replicas - 1):
// compared with a container's redundancy factor (property rd_fac).
inline constexpr uint32_t FailuresTolerated(ObjectClass oc) {
  return ReplicaCount(oc) == 0 ? 0 : ReplicaCount(oc) - 1;
}

std::string_view ObjectClassName(ObjectClass oc);
// "S1", "SX", "RP_2G1", "RP_3G1", "RP_2GX", "RP_3GX" (any case).
Result<ObjectClass> ParseObjectClass(std::string_view name);
// InvalidArgument naming both when objects of class `oc` survive fewer engine
// losses than a container's redundancy factor `rd_fac` asks for.
Status CheckRedundancy(ObjectClass oc, uint32_t rd_fac);

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

  // "<hi>.<lo>" in hexadecimal ("100000000000000.2a").
  std::string ToString() const {
    char buf[2 * 16 + 1];
    char* p = std::to_chars(buf, buf + 16, hi, 16).ptr;
    *p++ = '.';
    p = std::to_chars(p, buf + sizeof(buf), lo, 16).ptr;
    return std::string(buf, p);
  }
  friend auto operator<=>(const ObjectId&, const ObjectId&) = default;
};

// What an akey holds: a single value (replaced whole by each update) or an
// array of fixed-size records addressed by extents. The same numbers travel
// in the object protocol's update and fetch requests (docs/object-protocol.md)
// and are what VOS stores and enumerates.
enum class ValueType : uint8_t { kSingle = 1, kArray = 2 };

// The end-to-end checksum algorithm of a container's data (its "checksum"
// property: on means kCrc32c). The same numbers are recorded with every stored
// value and extent, so a container may change its default without rewriting data.
enum class ChecksumType : uint8_t { kNone = 0, kCrc32c = 1, kCrc64 = 2 };

// Access rights of a tenant on a pool or container: a bitmask of the kRight*
// bits. The same bits are stored in ACL entries, travel in capabilities and in
// the wire enum ros2.rpc.Right; 0 in a request means "every right the ACL grants".
using Rights = uint8_t;
inline constexpr Rights kRightRead = 1;    // fetch data, list, query
inline constexpr Rights kRightWrite = 2;   // update and punch data
inline constexpr Rights kRightCreate = 4;  // create containers in a pool
inline constexpr Rights kRightDelete = 8;  // destroy the pool or container
inline constexpr Rights kRightAdmin = 16;  // change ACLs and properties
inline constexpr Rights kAllRights = 0x1f;

}  // namespace ros2

#define ROS2_CONCAT_INNER(a, b) a##b
#define ROS2_CONCAT(a, b) ROS2_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define ROS2_RETURN_IF_ERROR(expr)       \
  do {                                   \
    ::ros2::Status ros2_st_ = (expr);    \
    if (!ros2_st_.ok()) return ros2_st_; \
  } while (0)

// Evaluates `rexpr` (a Result<T>); on failure returns its Status, otherwise
// moves the value into `lhs` (which may be a declaration: `auto x`).
#define ROS2_ASSIGN_OR_RETURN(lhs, rexpr) ROS2_ASSIGN_OR_RETURN_IMPL(ROS2_CONCAT(ros2_res_, __LINE__), lhs, rexpr)
#define ROS2_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                               \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
