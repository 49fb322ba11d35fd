// The engine-to-engine rebuild pull (proto/ros2/rebuild.proto,
// docs/replication.md "Rebuild", docs/security.md): the ClusterRebuild gRPC
// service that answers a pull from this engine's shards (RebuildSource), and
// RebuildPeers, which makes such pulls.
//
// Authentication: engines hold the cluster key (cluster_key_file); clients do
// not. A request carries HMAC-SHA256(rebuild key, label || body) where the
// body holds a fresh 16-byte nonce and the wall time, the rebuild key being
// HMAC-SHA256(cluster key, "ros2 rebuild pull key"). The service refuses a
// request whose MAC fails (Unauthenticated), whose time is more than 30 s
// from its own, or whose nonce it has seen within that window (a replay).
// The answer carries a MAC over the request's nonce and the answer's body,
// which the puller checks. Over TCP the channel is TLS with the cluster CA
// (control.tls_ca), as forwarded management calls are.
//
// Both classes are thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/channel.h>

#include "common/status.h"
#include "control/crypto.h"
#include "engine/rebuild_source.h"
#include "ros2/rebuild.grpc.pb.h"

namespace ros2::engine {

Result<control::HmacSha256> RebuildPullKey(const control::Aes256Key& cluster_key);

class RebuildPullService final : public rpc::ClusterRebuild::Service {
 public:
  RebuildPullService(control::HmacSha256 key, RebuildSource* source) : key_(std::move(key)), source_(source) {}

  grpc::Status Pull(grpc::ServerContext* ctx, const rpc::RebuildPullRequest* req,
                    rpc::RebuildPullResponse* resp) override;

 private:
  // The body of an authentic, fresh request: its MAC, time and nonce checked.
  Result<rpc::RebuildPullBody> Authenticate(const rpc::RebuildPullRequest& req);

  control::HmacSha256 key_;
  RebuildSource* source_;
  std::mutex mu_;
  std::map<std::string, uint64_t> seen_;  // GUARDED_BY(mu_): nonce -> wall ms it expires
};

class RebuildPeers {
 public:
  // `tls_ca`: PEM roots for TCP endpoints; Unix sockets need none.
  RebuildPeers(control::HmacSha256 key, std::string tls_ca) : key_(std::move(key)), tls_ca_(std::move(tls_ca)) {}

  // One pull from the engine at `endpoint` (its control endpoint), `body`'s
  // nonce and time filled in here. Unauthenticated when the answer's MAC fails.
  Result<rpc::RebuildPullBodyOut> Pull(const std::string& endpoint, rpc::RebuildPullBody body,
                                       std::chrono::milliseconds timeout);

  // The request a pull sends (tests call the service with it).
  Result<rpc::RebuildPullRequest> Sign(rpc::RebuildPullBody* body) const;

 private:
  Result<std::shared_ptr<grpc::Channel>> ChannelTo(const std::string& endpoint);

  control::HmacSha256 key_;
  std::string tls_ca_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_;  // GUARDED_BY(mu_)
};

}  // namespace ros2::engine
