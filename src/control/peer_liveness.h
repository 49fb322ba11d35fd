// Engine-to-engine liveness questions of a cluster on etcd (docs/cluster.md,
// "etcd wholly down"). An engine whose etcd lease renewal fails asks every
// other engine, through the ClusterPeer service (proto/ros2/mgmt.proto),
// whether it reaches etcd; ClusterMember decides from the answers whether it
// may go on acknowledging writes.
//
// The question is not authenticated by tenant (that needs etcd, which may be
// the thing that is down). Instead each answer carries an HMAC-SHA256 of the
// asker's fresh nonce and the answer's body under a key derived from the
// cluster key (cluster_key_file, the same on every engine): an answer that
// was forged, replayed or altered is counted as no answer.
//
// PeerLivenessService is owned by the ControlPlane and called by gRPC threads;
// PeerProber is owned by ClusterMember and called from its thread. Both are
// thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/channel.h>

#include "common/status.h"
#include "control/crypto.h"
#include "ros2/mgmt.grpc.pb.h"

namespace ros2::control {

// The MAC key of liveness answers: HMAC-SHA256(cluster key, a fixed label),
// so the cluster key itself signs nothing but its own purpose.
Result<HmacSha256> PeerLivenessKey(const Aes256Key& cluster_key);

class PeerLivenessService final : public rpc::ClusterPeer::Service {
 public:
  // `state` fills what this engine knows of itself; it returns false while
  // the engine has not joined the cluster (the call then fails Unavailable).
  PeerLivenessService(HmacSha256 key, std::function<bool(rpc::PeerLivenessBody*)> state)
      : key_(std::move(key)), state_(std::move(state)) {}

  grpc::Status Liveness(grpc::ServerContext* ctx, const rpc::PeerLivenessRequest* req,
                        rpc::PeerLivenessResponse* resp) override;

 private:
  HmacSha256 key_;
  std::function<bool(rpc::PeerLivenessBody*)> state_;
};

struct PeerAnswer {
  std::string engine_uuid;  // who was asked
  Result<rpc::PeerLivenessBody> body = Status::Disconnected("not asked");
};

class PeerProber {
 public:
  // `tls_ca`: PEM roots for peers reached over TCP (empty: insecure TCP);
  // Unix-socket endpoints are reached without TLS.
  PeerProber(HmacSha256 key, std::string tls_ca) : key_(std::move(key)), tls_ca_(std::move(tls_ca)) {}

  // Asks every (engine uuid -> control endpoint) at once and waits at most
  // `deadline` for all. An answer whose MAC does not verify, or that names
  // another engine, is an error.
  std::vector<PeerAnswer> Ask(const std::map<std::string, std::string>& peers, std::chrono::milliseconds deadline);

 private:
  Result<std::shared_ptr<grpc::Channel>> ChannelTo(const std::string& endpoint);
  Result<rpc::PeerLivenessBody> AskOne(const std::string& engine, const std::shared_ptr<grpc::Channel>& channel,
                                       std::chrono::system_clock::time_point deadline);

  HmacSha256 key_;
  std::string tls_ca_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_;  // GUARDED_BY(mu_)
};

}  // namespace ros2::control
