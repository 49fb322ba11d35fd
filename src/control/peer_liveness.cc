#include "control/peer_liveness.h"

#include <future>

#include <fmt/format.h>
#include <grpcpp/client_context.h>

#include "control/control_channel.h"
#include "control/grpc_status.h"

namespace ros2::control {
namespace {

constexpr std::string_view kMacLabel = "ros2 peer liveness";
constexpr size_t kNonceSize = 16;

std::span<const uint8_t> Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

Result<std::string> MacOf(const HmacSha256& key, std::string_view nonce, std::string_view body) {
  std::string data;
  data.reserve(kMacLabel.size() + nonce.size() + body.size());
  data.append(kMacLabel).append(nonce).append(body);
  ROS2_ASSIGN_OR_RETURN(Sha256Digest mac, key.Compute(Bytes(data)));
  return std::string(reinterpret_cast<const char*>(mac.data()), mac.size());
}

}  // namespace

Result<HmacSha256> PeerLivenessKey(const Aes256Key& cluster_key) {
  ROS2_ASSIGN_OR_RETURN(HmacSha256 root, HmacSha256::Create(cluster_key));
  ROS2_ASSIGN_OR_RETURN(Sha256Digest derived, root.Compute(Bytes("ros2 peer liveness key")));
  return HmacSha256::Create(derived);
}

grpc::Status PeerLivenessService::Liveness(grpc::ServerContext* /*ctx*/, const rpc::PeerLivenessRequest* req,
                                           rpc::PeerLivenessResponse* resp) {
  if (req->nonce().size() != kNonceSize) {
    return ToGrpcStatus(Status::InvalidArgument(
        fmt::format("peer liveness: nonce of {} bytes, expected {}", req->nonce().size(), kNonceSize)));
  }
  rpc::PeerLivenessBody body;
  if (!state_(&body)) return ToGrpcStatus(Status::Disconnected("peer liveness: this engine has not joined the cluster"));
  std::string serialized = body.SerializeAsString();
  auto mac = MacOf(key_, req->nonce(), serialized);
  if (!mac.ok()) return ToGrpcStatus(mac.status());
  resp->set_body(std::move(serialized));
  resp->set_mac(std::move(*mac));
  return grpc::Status::OK;
}

Result<std::shared_ptr<grpc::Channel>> PeerProber::ChannelTo(const std::string& endpoint) {
  std::lock_guard lock(mu_);
  auto it = channels_.find(endpoint);
  if (it != channels_.end()) return it->second;
  const bool local = endpoint.starts_with("unix:") || endpoint.starts_with("/");
  ROS2_ASSIGN_OR_RETURN(auto channel,
                        MakeControlChannel({.address = endpoint, .tls_root_cert_path = local ? "" : tls_ca_}));
  channels_[endpoint] = channel;
  return channel;
}

Result<rpc::PeerLivenessBody> PeerProber::AskOne(const std::string& engine,
                                                 const std::shared_ptr<grpc::Channel>& channel,
                                                 std::chrono::system_clock::time_point deadline) {
  std::string nonce(kNonceSize, '\0');
  ROS2_RETURN_IF_ERROR(RandomBytes(std::span(reinterpret_cast<uint8_t*>(nonce.data()), nonce.size())));
  rpc::PeerLivenessRequest req;
  req.set_nonce(nonce);
  rpc::PeerLivenessResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline);
  grpc::Status st = rpc::ClusterPeer::NewStub(channel)->Liveness(&ctx, req, &resp);
  if (!st.ok()) return FromGrpcStatus(st, "ClusterPeer.Liveness");
  ROS2_ASSIGN_OR_RETURN(std::string mac, MacOf(key_, nonce, resp.body()));
  if (!ConstantTimeEqual(mac, resp.mac())) {
    return Status::Unauthenticated(fmt::format("peer liveness: engine {}'s answer fails its MAC", engine));
  }
  rpc::PeerLivenessBody body;
  if (!body.ParseFromString(resp.body())) {
    return Status::Protocol(fmt::format("peer liveness: engine {}'s answer does not parse", engine));
  }
  if (body.engine_uuid() != engine) {
    return Status::Protocol(
        fmt::format("peer liveness: asked engine {}, engine {} answered", engine, body.engine_uuid()));
  }
  return body;
}

std::vector<PeerAnswer> PeerProber::Ask(const std::map<std::string, std::string>& peers,
                                        std::chrono::milliseconds deadline) {
  const auto until = std::chrono::system_clock::now() + deadline;
  std::vector<PeerAnswer> answers;
  std::vector<std::future<Result<rpc::PeerLivenessBody>>> pending;
  for (const auto& [engine, endpoint] : peers) {
    answers.push_back({engine, Status::Disconnected("not asked")});
    auto channel = ChannelTo(endpoint);
    if (!channel.ok()) {
      pending.emplace_back();
      answers.back().body = channel.status();
      continue;
    }
    pending.push_back(std::async(std::launch::async, [this, engine = engine, ch = *channel, until] {
      return AskOne(engine, ch, until);
    }));
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    if (pending[i].valid()) answers[i].body = pending[i].get();
  }
  return answers;
}

}  // namespace ros2::control
