// The shm door (docs/transport.md, "Providers"): how a client's hello
// reaches a worker on libfabric's shm provider without the client sending
// over shm first.
//
// libfabric 1.17's shm provider keys its map of peer names (an rbtree) by
// the pointer it was given, not by a copy. A peer that sends first
// introduces itself with a connection request whose name lies in an inject
// buffer of the receiver's region; that buffer returns to a LIFO free list
// right after, and the next peer's connection request is written into the
// same buffer, so the receiver's map finds the new name "already there" and
// hands the second peer the first one's slot: its hello is never delivered
// (and the first peer's ids are overwritten). A name given by fi_av_insert
// from memory that stays put (InsertAddress) never moves. So over shm the
// first message between a client and a server must go the other way: the
// client sends its hello as a datagram to the server's door, an abstract
// Unix socket named after the server's shm endpoint; the server inserts the
// client's name (kept) and acknowledges over shm, which makes its provider
// introduce the server to the client, whose map already holds the server's
// name (inserted at Connect). Neither side's map then holds a name it did
// not insert itself.
//
// The door takes hellos only; they go through HandleHello as any other
// (admission, flood bounds, the connection bound to the address the hello
// names). A process of another user can reach the door but not the shm
// region it names (created 0600), so its hello inserts nothing usable and
// is never acknowledged.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "common/log.h"
#include "transport/ofi/worker.h"

namespace ros2::transport::ofi {
namespace {

constexpr std::string_view kDoorPrefix = "ros2-ofi-door:";

// The door's abstract socket address for an shm endpoint name (the bytes of
// fi_getname, NUL-terminated or not).
Result<std::pair<sockaddr_un, socklen_t>> DoorAddress(std::span<const uint8_t> name) {
  size_t n = name.size();
  while (n > 0 && name[n - 1] == 0) --n;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (n == 0 || 1 + kDoorPrefix.size() + n > sizeof(a.sun_path)) {
    return Status::InvalidArgument(fmt::format("transport ofi: an shm endpoint name of {} bytes has no door", n));
  }
  a.sun_path[0] = '\0';  // abstract: no file, gone with the socket
  std::memcpy(a.sun_path + 1, kDoorPrefix.data(), kDoorPrefix.size());
  std::memcpy(a.sun_path + 1 + kDoorPrefix.size(), name.data(), n);
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + kDoorPrefix.size() + n);
  return std::make_pair(a, len);
}

}  // namespace

Status OfiWorker::OpenDoor(std::span<const uint8_t> own_name) {
  ROS2_ASSIGN_OR_RETURN(auto addr, DoorAddress(own_name));
  door_fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (door_fd_ < 0) return Status::FromErrno(errno, "transport ofi: the shm door's socket");
  if (bind(door_fd_, reinterpret_cast<const sockaddr*>(&addr.first), addr.second) != 0) {
    return Status::FromErrno(errno, fmt::format("transport ofi: worker '{}': binding its shm door", name_));
  }
  return Status::Ok();
}

Status OfiWorker::KnockOnDoor(std::span<const uint8_t> peer_name, std::span<const uint8_t> hello) {
  ROS2_ASSIGN_OR_RETURN(auto addr, DoorAddress(peer_name));
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "transport ofi: a socket for an shm hello");
  const ssize_t sent =
      sendto(fd, hello.data(), hello.size(), 0, reinterpret_cast<const sockaddr*>(&addr.first), addr.second);
  const int err = errno;
  close(fd);
  if (sent == static_cast<ssize_t>(hello.size())) return Status::Ok();
  return Status::Disconnected(fmt::format(
      "transport ofi: the shm hello could not be delivered ({}): the peer's worker is gone, or it does "
      "not take shm hellos by door",
      std::strerror(err)));
}

void OfiWorker::ReadDoor() {
  // A bounded number a tick: a flood waits in the socket (and beyond its
  // buffer, is dropped by the kernel), not in this worker.
  std::vector<uint8_t>& buf = door_buffer_;
  buf.resize(kRecvSize);
  for (int i = 0; i < 64; ++i) {
    const ssize_t n = recv(door_fd_, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n <= 0) return;
    std::span<const uint8_t> bytes(buf.data(), static_cast<size_t>(n));
    wire::Message msg;
    if (!wire::Decode(bytes, msg).ok() || msg.kind != wire::Kind::kHello) {
      ++stats_.malformed_messages;
      continue;
    }
    HandleHello(msg, FI_ADDR_NOTAVAIL);
  }
}

}  // namespace ros2::transport::ofi
