#include "client/pool_map_watch.h"

#include <pthread.h>

#include <csignal>

#include <algorithm>
#include <condition_variable>
#include <set>

#include <fmt/format.h>

#include "common/log.h"

namespace ros2::client {
namespace {

std::shared_ptr<grpc::Channel> MakeWatchChannel(const std::string& endpoint) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
}

bool Refused(const grpc::Status& st) {
  switch (st.error_code()) {
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::UNIMPLEMENTED: return true;
    default: return false;
  }
}

// Every live watch of the process, for the fork handlers. Leaked: usable
// until the process ends, and in a forked child.
struct Registry {
  std::mutex mu;
  std::set<PoolMapWatch*> watches;  // GUARDED_BY(mu)
  std::atomic<uint64_t> streams_opened{0};
};
Registry& Watches() {
  static auto* registry = new Registry;
  return *registry;
}

}  // namespace

PoolMapWatchCounts PoolMapWatchesOfProcess() {
  Registry& r = Watches();
  std::lock_guard lock(r.mu);
  return {r.watches.size(), r.streams_opened.load()};
}

void PoolMapWatchesBeforeFork() {
  Registry& r = Watches();
  r.mu.lock();  // held across fork(): no watch starts or goes meanwhile
  for (auto* w : r.watches) w->Suspend();
}

void PoolMapWatchesAfterForkParent() {
  Registry& r = Watches();
  for (auto* w : r.watches) w->Resume();
  r.mu.unlock();
}

void PoolMapWatchesAfterForkChild() {
  Registry& r = Watches();
  // The watches stay suspended: their pools belong to the parent, and the
  // child never destroys them (ros2._ros2 abandons the parent's handles).
  r.watches.clear();
  r.mu.unlock();  // locked by this thread's copy in the parent
}

PoolMapWatch::PoolMapWatch(PoolMapWatchOptions options) : options_(std::move(options)) {
  endpoints_.push_back(options_.control);
  channels_.push_back(options_.first);
  std::lock_guard registered(Watches().mu);
  Watches().watches.insert(this);
  StartThread();
}

void PoolMapWatch::StartThread() {
  // The watch's thread (and the gRPC threads it starts) takes no
  // process-directed signal: those belong to the application's own threads
  // (a FUSE mount ends on SIGTERM only when one of its workers takes it).
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  thread_ = std::thread([this] { Run(); });
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

PoolMapWatch::~PoolMapWatch() {
  Stop();
}

void PoolMapWatch::Stop() {
  {
    std::lock_guard registered(Watches().mu);
    Watches().watches.erase(this);
  }
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    if (ctx_ != nullptr) ctx_->TryCancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PoolMapWatch::Suspend() {
  {
    std::lock_guard lock(mu_);
    suspended_ = true;
    if (ctx_ != nullptr) ctx_->TryCancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PoolMapWatch::Resume() {
  {
    std::lock_guard lock(mu_);
    suspended_ = false;
    if (stop_) return;
  }
  if (thread_.joinable()) thread_.join();
  StartThread();
}

std::shared_ptr<grpc::Channel> PoolMapWatch::ChannelFor(size_t at) {
  std::lock_guard lock(mu_);
  at %= endpoints_.size();
  if (!channels_[at]) channels_[at] = MakeWatchChannel(endpoints_[at]);
  return channels_[at];
}

void PoolMapWatch::Learn(const rpc::PoolMapUpdate& update) {
  std::lock_guard lock(mu_);
  for (const auto& e : update.control_endpoints()) {
    if (std::find(endpoints_.begin(), endpoints_.end(), e) != endpoints_.end()) continue;
    endpoints_.push_back(e);
    channels_.push_back(nullptr);
  }
}

grpc::Status PoolMapWatch::StreamOnce(size_t at) {
  auto stub = rpc::Session::NewStub(ChannelFor(at));
  grpc::ClientContext ctx;
  control::AttachCredentials(&ctx, options_.credentials);
  {
    std::lock_guard lock(mu_);
    if (stop_ || suspended_) return grpc::Status::CANCELLED;
    ctx_ = &ctx;
  }
  rpc::WatchPoolMapRequest req;
  req.set_pool(options_.pool);
  req.set_known_version(options_.known_version());
  auto reader = stub->WatchPoolMap(&ctx, req);
  opened_.fetch_add(1, std::memory_order_relaxed);
  Watches().streams_opened.fetch_add(1, std::memory_order_relaxed);
  rpc::PoolMapUpdate update;
  while (reader->Read(&update)) {
    Learn(update);
    auto snapshot = MakeMapSnapshot(update.map());
    if (!snapshot.ok()) {
      ROS2_LOG_WARN("libros2: pool {}: a watched map does not convert: {}", options_.label,
                    snapshot.status().ToString());
      continue;
    }
    received_.fetch_add(1, std::memory_order_relaxed);
    options_.apply(std::move(*snapshot));
  }
  grpc::Status st = reader->Finish();
  std::lock_guard lock(mu_);
  ctx_ = nullptr;
  return st;
}

void PoolMapWatch::Run() {
  size_t at = 0;
  std::chrono::milliseconds pause{100};
  for (;;) {
    const auto started = std::chrono::steady_clock::now();
    grpc::Status st = StreamOnce(at);
    std::unique_lock lock(mu_);
    if (stop_ || suspended_) return;
    // A stream that lived a while ended because its engine went away: try
    // the next one soon. Quick failures back off.
    if (std::chrono::steady_clock::now() - started > std::chrono::seconds(5)) pause = std::chrono::milliseconds(100);
    const auto wait = Refused(st) ? std::chrono::milliseconds(5000) : pause;
    ROS2_LOG_DEBUG("libros2: pool {}: map watch on {} ended ({}); next try in {} ms", options_.label,
                   endpoints_[at % endpoints_.size()], st.error_message(), wait.count());
    at = (at + 1) % endpoints_.size();
    cv_.wait_for(lock, wait, [this] { return stop_ || suspended_; });
    if (stop_ || suspended_) return;
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
}

}  // namespace ros2::client
