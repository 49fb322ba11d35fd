// Encoding and validating decoding of the replicated update messages
// (replica_rpc.h).
#include "object/replica_rpc.h"

#include <cstring>
#include <string_view>

#include <fmt/format.h>

namespace ros2::obj {
namespace {

void Le(std::vector<uint8_t>& out, uint64_t v, int width) {
  for (int i = 0; i < width; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void Append(std::vector<uint8_t>& out, std::span<const uint8_t> bytes) {
  out.insert(out.end(), bytes.begin(), bytes.end());
}

// Bounds-checked little-endian reads; errors name the message and the field.
class In {
 public:
  In(std::span<const uint8_t> bytes, std::string_view what) : bytes_(bytes), what_(what) {}
  Status Fail(std::string_view field, std::string_view why) const {
    return Status::Protocol(fmt::format("{}: {}: {}", what_, field, why));
  }
  Status Le(std::string_view field, int width, uint64_t* v) {
    if (bytes_.size() - pos_ < static_cast<size_t>(width)) return Fail(field, "truncated");
    *v = 0;
    for (int i = 0; i < width; ++i) *v |= uint64_t{bytes_[pos_ + static_cast<size_t>(i)]} << (8 * i);
    pos_ += static_cast<size_t>(width);
    return Status::Ok();
  }
  Status Raw(std::string_view field, size_t n, std::span<const uint8_t>* out) {
    if (bytes_.size() - pos_ < n)
      return Fail(field, fmt::format("{} bytes announced, {} left", n, bytes_.size() - pos_));
    *out = bytes_.subspan(pos_, n);
    pos_ += n;
    return Status::Ok();
  }
  Status End() const {
    if (pos_ != bytes_.size()) return Fail("end", fmt::format("{} trailing bytes", bytes_.size() - pos_));
    return Status::Ok();
  }

 private:
  std::span<const uint8_t> bytes_;
  std::string_view what_;
  size_t pos_ = 0;
};

Status ReadHead(In& in, Opcode* op, std::vector<uint8_t>* body, uint8_t* flags) {
  uint64_t v = 0;
  ROS2_RETURN_IF_ERROR(in.Le("version", 1, &v));
  if (v != kProtocolVersion) return in.Fail("version", fmt::format("{} (this build speaks {})", v, kProtocolVersion));
  ROS2_RETURN_IF_ERROR(in.Le("opcode", 2, &v));
  if (v != static_cast<uint16_t>(Opcode::kUpdate) && v != static_cast<uint16_t>(Opcode::kPunch)) {
    return in.Fail("opcode", fmt::format("{:#06x} is neither update nor punch", v));
  }
  *op = static_cast<Opcode>(v);
  if (flags != nullptr) {
    ROS2_RETURN_IF_ERROR(in.Le("flags", 1, &v));
    if ((v & ~uint64_t{kForwardDecided | kForwardWatermark | kForwardAbort}) != 0)
      return in.Fail("flags", fmt::format("unknown bits {:#04x}", v));
    *flags = static_cast<uint8_t>(v);
  }
  ROS2_RETURN_IF_ERROR(in.Le("request size", 4, &v));
  std::span<const uint8_t> raw;
  ROS2_RETURN_IF_ERROR(in.Raw("request", v, &raw));
  body->assign(raw.begin(), raw.end());
  return Status::Ok();
}

void AppendPeers(std::vector<uint8_t>& out, const std::vector<ReplicaPeer>& peers) {
  out.push_back(static_cast<uint8_t>(peers.size()));
  for (const auto& p : peers) {
    Le(out, p.target, 4);
    Le(out, p.address.size(), 2);
    Append(out, {reinterpret_cast<const uint8_t*>(p.address.data()), p.address.size()});
  }
}

Status ReadPeers(In& in, size_t limit, std::vector<ReplicaPeer>* peers) {
  uint64_t n = 0;
  ROS2_RETURN_IF_ERROR(in.Le("peers", 1, &n));
  if (n > limit) return in.Fail("peers", fmt::format("{} exceeds the limit of {}", n, limit));
  for (uint64_t i = 0; i < n; ++i) {
    ReplicaPeer p;
    uint64_t v = 0;
    ROS2_RETURN_IF_ERROR(in.Le("peer target", 4, &v));
    p.target = static_cast<uint32_t>(v);
    ROS2_RETURN_IF_ERROR(in.Le("peer address size", 2, &v));
    if (v == 0 || v > kMaxPeerAddress) {
      return in.Fail("peer address", fmt::format("{} bytes (1 .. {} allowed)", v, kMaxPeerAddress));
    }
    std::span<const uint8_t> raw;
    ROS2_RETURN_IF_ERROR(in.Raw("peer address", v, &raw));
    p.address.assign(reinterpret_cast<const char*>(raw.data()), raw.size());
    peers->push_back(std::move(p));
  }
  return Status::Ok();
}

}  // namespace

std::vector<uint8_t> Encode(const LeaderRequest& m) {
  std::vector<uint8_t> out;
  out.reserve(16 + m.body.size() + m.peers.size() * 512);
  out.push_back(kProtocolVersion);
  Le(out, static_cast<uint16_t>(m.op), 2);
  Le(out, m.body.size(), 4);
  Append(out, m.body);
  AppendPeers(out, m.peers);
  return out;
}

std::vector<uint8_t> Encode(const ForwardRequest& m) {
  std::vector<uint8_t> out;
  out.reserve(48 + m.body.size() + m.group.size() * 512);
  out.push_back(kProtocolVersion);
  Le(out, static_cast<uint16_t>(m.op), 2);
  out.push_back(m.flags);
  Le(out, m.body.size(), 4);
  Append(out, m.body);
  AppendPeers(out, m.group);
  Le(out, m.seq, 8);
  Le(out, m.watermark, 8);
  Append(out, m.mac);
  return out;
}

Result<LeaderRequest> DecodeLeaderRequest(std::span<const uint8_t> bytes) {
  In in(bytes, "leader request");
  LeaderRequest m;
  ROS2_RETURN_IF_ERROR(ReadHead(in, &m.op, &m.body, nullptr));
  ROS2_RETURN_IF_ERROR(ReadPeers(in, kMaxReplicaPeers, &m.peers));
  ROS2_RETURN_IF_ERROR(in.End());
  return m;
}

Result<ForwardRequest> DecodeForwardRequest(std::span<const uint8_t> bytes) {
  In in(bytes, "forward request");
  ForwardRequest m;
  ROS2_RETURN_IF_ERROR(ReadHead(in, &m.op, &m.body, &m.flags));
  ROS2_RETURN_IF_ERROR(ReadPeers(in, kMaxReplicaPeers + 1, &m.group));
  ROS2_RETURN_IF_ERROR(in.Le("seq", 8, &m.seq));
  ROS2_RETURN_IF_ERROR(in.Le("watermark", 8, &m.watermark));
  if ((m.flags & kForwardWatermark) != 0 && (!m.body.empty() || m.group.empty())) {
    return in.Fail("flags", "a watermark carries no request and names its leader");
  }
  if ((m.flags & kForwardAbort) != 0 &&
      ((m.flags & kForwardWatermark) != 0 || m.body.empty() || m.group.empty() || m.seq == 0)) {
    return in.Fail("flags", "an abort carries the request it takes back, its leader and its position");
  }
  std::span<const uint8_t> mac;
  ROS2_RETURN_IF_ERROR(in.Raw("mac", m.mac.size(), &mac));
  std::memcpy(m.mac.data(), mac.data(), mac.size());
  ROS2_RETURN_IF_ERROR(in.End());
  return m;
}

std::vector<uint8_t> ForwardMacInput(const ForwardRequest& m, std::span<const uint8_t> capability) {
  static constexpr std::string_view kLabel = "ros2 replica forward";
  std::vector<uint8_t> out;
  out.reserve(kLabel.size() + 16 + m.body.size() + capability.size());
  Append(out, {reinterpret_cast<const uint8_t*>(kLabel.data()), kLabel.size()});
  Le(out, static_cast<uint16_t>(m.op), 2);
  out.push_back(m.flags);
  Le(out, m.body.size(), 4);
  Append(out, m.body);
  AppendPeers(out, m.group);
  Le(out, m.seq, 8);
  Le(out, m.watermark, 8);
  Le(out, capability.size(), 4);
  Append(out, capability);
  return out;
}

}  // namespace ros2::obj
