#include "engine/rebuild_service.h"

#include <fmt/format.h>
#include <grpcpp/client_context.h>

#include "common/hlc.h"
#include "common/log.h"
#include "control/control_channel.h"
#include "control/grpc_status.h"

namespace ros2::engine {
namespace {

constexpr std::string_view kRequestLabel = "ros2 rebuild pull";
constexpr std::string_view kAnswerLabel = "ros2 rebuild pull answer";
constexpr size_t kNonceSize = 16;
constexpr uint64_t kSkewMs = 30'000;
constexpr int kMaxAnswerBytes = 64 << 20;

std::span<const uint8_t> Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

Result<std::string> MacOf(const control::HmacSha256& key, std::string_view label, std::string_view nonce,
                          std::string_view body) {
  std::string data;
  data.reserve(label.size() + nonce.size() + body.size());
  data.append(label).append(nonce).append(body);
  ROS2_ASSIGN_OR_RETURN(control::Sha256Digest mac, key.Compute(Bytes(data)));
  return std::string(reinterpret_cast<const char*>(mac.data()), mac.size());
}

}  // namespace

Result<control::HmacSha256> RebuildPullKey(const control::Aes256Key& cluster_key) {
  ROS2_ASSIGN_OR_RETURN(control::HmacSha256 root, control::HmacSha256::Create(cluster_key));
  ROS2_ASSIGN_OR_RETURN(control::Sha256Digest derived, root.Compute(Bytes("ros2 rebuild pull key")));
  return control::HmacSha256::Create(derived);
}

Result<rpc::RebuildPullBody> RebuildPullService::Authenticate(const rpc::RebuildPullRequest& req) {
  ROS2_ASSIGN_OR_RETURN(std::string mac, MacOf(key_, kRequestLabel, "", req.body()));
  if (!control::ConstantTimeEqual(mac, req.mac())) {
    return Status::Unauthenticated("rebuild pull: the request fails its MAC (only engines of the cluster may pull)");
  }
  rpc::RebuildPullBody body;
  if (!body.ParseFromString(req.body())) return Status::Protocol("rebuild pull: the request body does not parse");
  if (body.nonce().size() != kNonceSize) {
    return Status::InvalidArgument(
        fmt::format("rebuild pull: nonce of {} bytes, expected {}", body.nonce().size(), kNonceSize));
  }
  const uint64_t now = HybridClock::WallMillis();
  const uint64_t skew = now > body.wall_ms() ? now - body.wall_ms() : body.wall_ms() - now;
  if (skew > kSkewMs) {
    return Status::Unauthenticated(
        fmt::format("rebuild pull: the request's time is {} ms from this engine's (at most {})", skew, kSkewMs));
  }
  std::lock_guard lock(mu_);
  std::erase_if(seen_, [now](const auto& entry) { return entry.second < now; });
  if (!seen_.emplace(body.nonce(), now + 2 * kSkewMs).second) {
    return Status::Unauthenticated("rebuild pull: a replayed request (its nonce was used)");
  }
  return body;
}

grpc::Status RebuildPullService::Pull(grpc::ServerContext* /*ctx*/, const rpc::RebuildPullRequest* req,
                                      rpc::RebuildPullResponse* resp) {
  auto body = Authenticate(*req);
  if (!body.ok()) {
    ROS2_LOG_WARN("{}", body.status().ToString());
    return control::ToGrpcStatus(body.status());
  }
  RebuildScan scan;
  auto pool = Uuid::Parse(body->pool_uuid());
  if (!pool.ok()) return control::ToGrpcStatus(pool.status().WithContext("rebuild pull: pool"));
  scan.pool = *pool;
  auto map = PoolMapFromProto(body->map());
  if (!map.ok()) return control::ToGrpcStatus(map.status().WithContext("rebuild pull"));
  scan.map = std::move(*map);
  for (const auto& [index, global] : LocalTargets(scan.map, body->requester_engine())) {
    scan.requester_targets.insert(global);
  }
  scan.cursor = body->cursor();
  scan.max_bytes = body->max_bytes() == 0 ? (1 << 20) : std::min<uint64_t>(body->max_bytes(), kMaxAnswerBytes / 2);
  scan.count_only = body->count_only();
  scan.stride = std::max<uint32_t>(body->stride(), 1);
  scan.part = body->part();
  scan.data_plane = body->data_plane();
  if (scan.part >= scan.stride) {
    return control::ToGrpcStatus(Status::InvalidArgument(
        fmt::format("rebuild pull: part {} of a stride of {}", scan.part, scan.stride)));
  }
  auto out = source_->Scan(scan);
  if (!out.ok()) return control::ToGrpcStatus(out.status());
  std::string serialized = out->SerializeAsString();
  auto mac = MacOf(key_, kAnswerLabel, body->nonce(), serialized);
  if (!mac.ok()) return control::ToGrpcStatus(mac.status());
  resp->set_body(std::move(serialized));
  resp->set_mac(std::move(*mac));
  return grpc::Status::OK;
}

Result<rpc::RebuildPullRequest> RebuildPeers::Sign(rpc::RebuildPullBody* body) const {
  std::string nonce(kNonceSize, '\0');
  ROS2_RETURN_IF_ERROR(control::RandomBytes(std::span(reinterpret_cast<uint8_t*>(nonce.data()), nonce.size())));
  body->set_nonce(nonce);
  body->set_wall_ms(HybridClock::WallMillis());
  rpc::RebuildPullRequest req;
  req.set_body(body->SerializeAsString());
  ROS2_ASSIGN_OR_RETURN(std::string mac, MacOf(key_, kRequestLabel, "", req.body()));
  req.set_mac(std::move(mac));
  return req;
}

Result<std::shared_ptr<grpc::Channel>> RebuildPeers::ChannelTo(const std::string& endpoint) {
  std::lock_guard lock(mu_);
  auto it = channels_.find(endpoint);
  if (it != channels_.end()) return it->second;
  const bool local = endpoint.starts_with("unix:") || endpoint.starts_with("/");
  ROS2_ASSIGN_OR_RETURN(auto channel, control::MakeControlChannel({.address = endpoint,
                                                                   .tls_root_cert_path = local ? "" : tls_ca_,
                                                                   .max_receive_bytes = kMaxAnswerBytes}));
  channels_[endpoint] = channel;
  return channel;
}

Result<rpc::RebuildPullBodyOut> RebuildPeers::Pull(const std::string& endpoint, rpc::RebuildPullBody body,
                                                   std::chrono::milliseconds timeout) {
  ROS2_ASSIGN_OR_RETURN(auto channel, ChannelTo(endpoint));
  ROS2_ASSIGN_OR_RETURN(rpc::RebuildPullRequest req, Sign(&body));
  rpc::RebuildPullResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  grpc::Status st = rpc::ClusterRebuild::NewStub(channel)->Pull(&ctx, req, &resp);
  if (!st.ok()) return control::FromGrpcStatus(st, "ClusterRebuild.Pull " + endpoint);
  ROS2_ASSIGN_OR_RETURN(std::string mac, MacOf(key_, kAnswerLabel, body.nonce(), resp.body()));
  if (!control::ConstantTimeEqual(mac, resp.mac())) {
    return Status::Unauthenticated(fmt::format("rebuild pull: the answer of {} fails its MAC", endpoint));
  }
  rpc::RebuildPullBodyOut out;
  if (!out.ParseFromString(resp.body())) {
    return Status::Protocol(fmt::format("rebuild pull: the answer of {} does not parse", endpoint));
  }
  return out;
}

}  // namespace ros2::engine
