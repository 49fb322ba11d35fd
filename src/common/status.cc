#include "common/status.h"

#include <cstring>

#include <fmt/format.h>

namespace ros2 {

std::string_view CodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk: return "OK";
    case Status::Code::kNotFound: return "NotFound";
    case Status::Code::kCorruption: return "Corruption";
    case Status::Code::kInvalidArgument: return "InvalidArgument";
    case Status::Code::kIOError: return "IOError";
    case Status::Code::kNoSpace: return "NoSpace";
    case Status::Code::kAlreadyExists: return "AlreadyExists";
    case Status::Code::kPermissionDenied: return "PermissionDenied";
    case Status::Code::kUnauthenticated: return "Unauthenticated";
    case Status::Code::kTimedOut: return "TimedOut";
    case Status::Code::kDisconnected: return "Disconnected";
    case Status::Code::kBusy: return "Busy";
    case Status::Code::kNotSupported: return "NotSupported";
    case Status::Code::kCancelled: return "Cancelled";
    case Status::Code::kProtocol: return "Protocol";
    case Status::Code::kNotEmpty: return "NotEmpty";
    case Status::Code::kInternal: return "Internal";
    case Status::Code::kNotDirectory: return "NotDirectory";
    case Status::Code::kIsDirectory: return "IsDirectory";
    case Status::Code::kNameTooLong: return "NameTooLong";
    case Status::Code::kLoop: return "Loop";
    case Status::Code::kStaleMap: return "StaleMap";
  }
  return "Unknown";
}

Status Status::FromErrno(int err, std::string_view context) {
  std::string msg = fmt::format("{}: {}", context, std::strerror(err));
  switch (err) {
    case 0: return Status::Internal(fmt::format("{}: errno 0 reported as a failure", context));
    case ENOENT: return NotFound(std::move(msg));
    case EEXIST: return AlreadyExists(std::move(msg));
    case ENOSPC:
    case EDQUOT: return NoSpace(std::move(msg));
    case ENOTDIR: return NotDirectory(std::move(msg));
    case EISDIR: return IsDirectory(std::move(msg));
    case ENAMETOOLONG: return NameTooLong(std::move(msg));
    case ELOOP: return Loop(std::move(msg));
    case EINVAL:
    case EBADF: return InvalidArgument(std::move(msg));
    case EACCES:
    case EPERM: return PermissionDenied(std::move(msg));
    case ETIMEDOUT: return TimedOut(std::move(msg));
    case ECONNRESET:
    case ECONNREFUSED:
    case EPIPE:
    case ENOTCONN: return Disconnected(std::move(msg));
    case EBUSY:
    case EAGAIN: return Busy(std::move(msg));
    case ENOTSUP: return NotSupported(std::move(msg));
    case ECANCELED: return Cancelled(std::move(msg));
    case ENOTEMPTY: return NotEmpty(std::move(msg));
    case EBADMSG:
    case EILSEQ: return Corruption(std::move(msg));
    default: return IOError(std::move(msg));
  }
}

Status Status::FromCode(uint8_t code, std::string msg) {
  if (code == 0) return Status::Ok();
  if (code > static_cast<uint8_t>(kLastCode)) {
    return Protocol(fmt::format("unknown status code {}: {}", code, msg));
  }
  return Status(static_cast<Code>(code), std::move(msg));
}

Status Status::WithContext(std::string_view prefix) const {
  if (ok()) return *this;
  return Status(code_, fmt::format("{}: {}", prefix, message_));
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return fmt::format("{}: {}", CodeName(code_), message_);
}

int Status::ToErrno() const {
  switch (code_) {
    case Code::kOk: return 0;
    case Code::kNotFound: return ENOENT;
    case Code::kCorruption: return EIO;
    case Code::kInvalidArgument: return EINVAL;
    case Code::kIOError: return EIO;
    case Code::kNoSpace: return ENOSPC;
    case Code::kAlreadyExists: return EEXIST;
    case Code::kPermissionDenied: return EACCES;
    case Code::kUnauthenticated: return EACCES;
    case Code::kTimedOut: return ETIMEDOUT;
    case Code::kDisconnected: return ENOTCONN;
    case Code::kBusy: return EBUSY;
    case Code::kNotSupported: return ENOTSUP;
    case Code::kCancelled: return ECANCELED;
    case Code::kProtocol: return EPROTO;
    case Code::kNotEmpty: return ENOTEMPTY;
    case Code::kInternal: return EIO;
    case Code::kNotDirectory: return ENOTDIR;
    case Code::kIsDirectory: return EISDIR;
    case Code::kNameTooLong: return ENAMETOOLONG;
    case Code::kLoop: return ELOOP;
    case Code::kStaleMap: return ESTALE;
  }
  return EIO;
}

}  // namespace ros2
