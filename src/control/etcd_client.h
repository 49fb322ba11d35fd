// EtcdClient: the etcd v3 gRPC services (KV, Lease, Watch) over a list of
// endpoints, for the etcd state store and cluster membership (docs/cluster.md).
//
// Every call goes to the current endpoint; when it is unreachable (UNAVAILABLE
// or a missed deadline) the call moves on to the next endpoint, once around the
// list. Errors name etcd and its endpoints ("etcd 127.0.0.1:2379: ..."), so a
// management call failing for want of etcd says so. Nothing here re-implements
// what etcd serves: transactions, leases and watches are etcd's.
//
//   auto etcd = EtcdClient::Connect(ParseEtcdEndpoints("etcd://127.0.0.1:2379"), {});
//   etcdserverpb::TxnRequest txn;  ...  auto resp = (*etcd)->Txn(txn);
//
// Thread-safe: calls may run concurrently from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "common/status.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace ros2::control {

// "etcd://host:port,host:port" -> {"host:port", ...}. InvalidArgument naming
// the text when the scheme is not etcd:// or an endpoint has no port.
Result<std::vector<std::string>> ParseEtcdEndpoints(std::string_view url);

// The smallest key greater than every key starting with `prefix` (a Range end).
std::string PrefixEnd(std::string_view prefix);

struct EtcdOptions {
  std::chrono::milliseconds call_timeout{2000};  // deadline of one call on one endpoint
};

class EtcdClient {
 public:
  static Result<std::unique_ptr<EtcdClient>> Connect(std::vector<std::string> endpoints, EtcdOptions options);

  Result<etcdserverpb::RangeResponse> Range(const etcdserverpb::RangeRequest& req);
  Result<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& req);
  // A lease of `ttl` seconds; returns its id.
  Result<int64_t> GrantLease(int64_t ttl_seconds);
  // Renews the lease once; returns the TTL etcd granted (0: the lease expired).
  Result<int64_t> KeepAliveOnce(int64_t lease);
  Status RevokeLease(int64_t lease);
  // (granted TTL, remaining TTL) of a lease in seconds; remaining -1: expired.
  Result<std::pair<int64_t, int64_t>> LeaseTimeToLive(int64_t lease);

  // "etcd a:1,b:2", the prefix of every error.
  const std::string& name() const { return name_; }
  const std::vector<std::string>& endpoints() const { return endpoints_; }
  std::chrono::milliseconds call_timeout() const { return options_.call_timeout; }
  // A channel to the current endpoint (for streams such as Watch).
  std::shared_ptr<grpc::Channel> CurrentChannel();
  // Moves to the next endpoint after `failed` (the index a call used), with a
  // new channel for the failed one.
  void Advance(size_t failed);
  size_t current() const { return current_.load(); }

 private:
  EtcdClient(std::vector<std::string> endpoints, EtcdOptions options);
  // Runs `call(channel, ctx)` on the current endpoint, then on the next ones
  // while the endpoint is unreachable.
  Status Call(std::string_view what,
              const std::function<grpc::Status(const std::shared_ptr<grpc::Channel>&, grpc::ClientContext*)>& call);

  std::vector<std::string> endpoints_;
  EtcdOptions options_;
  std::string name_;
  std::shared_ptr<grpc::Channel> ChannelAt(size_t at);
  std::mutex mu_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;  // GUARDED_BY(mu_)
  std::atomic<size_t> current_{0};
};

// A watch on every key under a prefix, from a revision on, delivered to a
// callback on the watch's own thread. The stream is re-opened (on any
// endpoint) after a failure, from the revision after the last event seen, so
// no event is lost while etcd keeps its history. Stop() (or the destructor)
// ends the thread.
class EtcdWatch {
 public:
  using Callback = std::function<void(const mvccpb::Event& event, int64_t revision)>;
  EtcdWatch(EtcdClient* client, std::string prefix, int64_t start_revision, Callback callback);
  ~EtcdWatch();
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;
  void Stop();

 private:
  void Run();
  EtcdClient* client_;
  std::string prefix_;
  int64_t next_revision_;
  Callback callback_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  grpc::ClientContext* ctx_ = nullptr;  // GUARDED_BY(mu_): the open stream's, to cancel it
  std::thread thread_;
};

}  // namespace ros2::control
