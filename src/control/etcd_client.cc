#include "control/etcd_client.h"

#include <fmt/format.h>

#include "common/log.h"

namespace ros2::control {
namespace {

bool Unreachable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& endpoint) {
  grpc::ChannelArguments args;
  // A returning etcd member is reconnected to within a second, not after
  // gRPC's default backoff of up to two minutes. The minimum also bounds one
  // connection attempt: shorter ones fail on a loaded machine.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Its own connections: a channel replaced after a failure (Reconnect) must
  // not get the failed connection back from gRPC's global pool.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
}

}  // namespace

Result<std::vector<std::string>> ParseEtcdEndpoints(std::string_view url) {
  constexpr std::string_view kScheme = "etcd://";
  if (!url.starts_with(kScheme)) {
    return Status::InvalidArgument(fmt::format("etcd endpoints '{}': expected etcd://host:port[,host:port...]", url));
  }
  std::vector<std::string> out;
  std::string_view rest = url.substr(kScheme.size());
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view ep = rest.substr(0, comma);
    size_t colon = ep.rfind(':');
    if (ep.empty() || colon == std::string_view::npos || colon == 0 || colon + 1 == ep.size()) {
      return Status::InvalidArgument(fmt::format("etcd endpoints '{}': '{}' is not host:port", url, ep));
    }
    out.emplace_back(ep);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (out.empty()) return Status::InvalidArgument(fmt::format("etcd endpoints '{}': no endpoint", url));
  return out;
}

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

EtcdClient::EtcdClient(std::vector<std::string> endpoints, EtcdOptions options)
    : endpoints_(std::move(endpoints)), options_(options) {
  std::string list;
  for (const auto& e : endpoints_) list += (list.empty() ? "" : ",") + e;
  name_ = "etcd " + list;
  for (const auto& e : endpoints_) channels_.push_back(MakeChannel(e));
}

Result<std::unique_ptr<EtcdClient>> EtcdClient::Connect(std::vector<std::string> endpoints, EtcdOptions options) {
  if (endpoints.empty()) return Status::InvalidArgument("etcd: no endpoint");
  if (options.call_timeout.count() <= 0) return Status::InvalidArgument("etcd: call_timeout must be positive");
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(endpoints), options));
}

std::shared_ptr<grpc::Channel> EtcdClient::CurrentChannel() {
  std::lock_guard lock(mu_);
  return channels_[current_.load() % channels_.size()];
}

std::shared_ptr<grpc::Channel> EtcdClient::ChannelAt(size_t at) {
  std::lock_guard lock(mu_);
  return channels_[at];
}

void EtcdClient::Advance(size_t failed) {
  {
    // A fresh channel for the endpoint that failed: its next use connects
    // anew instead of waiting on a connection attempt that may hang.
    std::lock_guard lock(mu_);
    channels_[failed % channels_.size()] = MakeChannel(endpoints_[failed % channels_.size()]);
  }
  size_t expected = failed;
  current_.compare_exchange_strong(expected, (failed + 1) % channels_.size());
}

Status EtcdClient::Call(
    std::string_view what,
    const std::function<grpc::Status(const std::shared_ptr<grpc::Channel>&, grpc::ClientContext*)>& call) {
  grpc::Status last;
  for (size_t tried = 0; tried < channels_.size(); ++tried) {
    const size_t at = current_.load() % channels_.size();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
    last = call(ChannelAt(at), &ctx);
    if (last.ok()) return Status::Ok();
    if (!Unreachable(last)) {
      return Status::IOError(fmt::format("{}: {}: {}", name_, what, last.error_message()));
    }
    Advance(at);
  }
  return Status::Disconnected(fmt::format("{}: {}: no etcd endpoint answered: {}", name_, what, last.error_message()));
}

Result<etcdserverpb::RangeResponse> EtcdClient::Range(const etcdserverpb::RangeRequest& req) {
  etcdserverpb::RangeResponse resp;
  ROS2_RETURN_IF_ERROR(Call("range", [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx) {
    resp.Clear();
    return etcdserverpb::KV::NewStub(ch)->Range(ctx, req, &resp);
  }));
  return resp;
}

Result<etcdserverpb::TxnResponse> EtcdClient::Txn(const etcdserverpb::TxnRequest& req) {
  etcdserverpb::TxnResponse resp;
  ROS2_RETURN_IF_ERROR(Call("txn", [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx) {
    resp.Clear();
    return etcdserverpb::KV::NewStub(ch)->Txn(ctx, req, &resp);
  }));
  return resp;
}

Result<int64_t> EtcdClient::GrantLease(int64_t ttl_seconds) {
  etcdserverpb::LeaseGrantRequest req;
  req.set_ttl(ttl_seconds);
  etcdserverpb::LeaseGrantResponse resp;
  ROS2_RETURN_IF_ERROR(Call("lease grant", [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx) {
    return etcdserverpb::Lease::NewStub(ch)->LeaseGrant(ctx, req, &resp);
  }));
  if (!resp.error().empty()) return Status::IOError(fmt::format("{}: lease grant: {}", name_, resp.error()));
  return resp.id();
}

Result<int64_t> EtcdClient::KeepAliveOnce(int64_t lease) {
  etcdserverpb::LeaseKeepAliveRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseKeepAliveResponse resp;
  ROS2_RETURN_IF_ERROR(
      Call("lease keep-alive", [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx) {
        auto stub = etcdserverpb::Lease::NewStub(ch);
        auto stream = stub->LeaseKeepAlive(ctx);
        if (!stream->Write(req) || !stream->Read(&resp)) {
          stream->WritesDone();
          grpc::Status st = stream->Finish();
          return st.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "keep-alive stream closed") : st;
        }
        stream->WritesDone();
        ctx->TryCancel();
        stream->Finish();
        return grpc::Status::OK;
      }));
  return resp.ttl();
}

Status EtcdClient::RevokeLease(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseRevokeResponse resp;
  return Call("lease revoke", [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx) {
    return etcdserverpb::Lease::NewStub(ch)->LeaseRevoke(ctx, req, &resp);
  });
}

Result<std::pair<int64_t, int64_t>> EtcdClient::LeaseTimeToLive(int64_t lease) {
  etcdserverpb::LeaseTimeToLiveRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseTimeToLiveResponse resp;
  ROS2_RETURN_IF_ERROR(
      Call("lease time-to-live", [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx) {
        return etcdserverpb::Lease::NewStub(ch)->LeaseTimeToLive(ctx, req, &resp);
      }));
  return std::make_pair(resp.grantedttl(), resp.ttl());
}

EtcdWatch::EtcdWatch(EtcdClient* client, std::string prefix, int64_t start_revision, Callback callback)
    : client_(client), prefix_(std::move(prefix)), next_revision_(start_revision), callback_(std::move(callback)) {
  thread_ = std::thread([this] { Run(); });
}

EtcdWatch::~EtcdWatch() {
  Stop();
}

void EtcdWatch::Stop() {
  stop_.store(true);
  {
    std::lock_guard lock(mu_);
    if (ctx_ != nullptr) ctx_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

void EtcdWatch::Run() {
  while (!stop_.load()) {
    const size_t at = client_->current();
    auto channel = client_->CurrentChannel();
    grpc::ClientContext ctx;
    {
      std::lock_guard lock(mu_);
      if (stop_.load()) return;
      ctx_ = &ctx;
    }
    auto stub = etcdserverpb::Watch::NewStub(channel);
    auto stream = stub->Watch(&ctx);
    etcdserverpb::WatchRequest req;
    auto* create = req.mutable_create_request();
    create->set_key(prefix_);
    create->set_range_end(PrefixEnd(prefix_));
    create->set_start_revision(next_revision_);
    etcdserverpb::WatchResponse resp;
    bool ok = stream->Write(req);
    while (ok && stream->Read(&resp)) {
      if (resp.compact_revision() > 0) {
        ROS2_LOG_WARN("{}: watch of '{}' compacted at {}; resuming there", client_->name(), prefix_,
                      resp.compact_revision());
        next_revision_ = resp.compact_revision();
        break;
      }
      for (const auto& ev : resp.events()) {
        next_revision_ = ev.kv().mod_revision() + 1;
        callback_(ev, ev.kv().mod_revision());
      }
    }
    ctx.TryCancel();
    stream->Finish();
    {
      std::lock_guard lock(mu_);
      ctx_ = nullptr;
    }
    if (stop_.load()) return;
    client_->Advance(at);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace ros2::control
