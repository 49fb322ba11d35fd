#include "control/pool_map_watchers.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "common/log.h"
#include "control/control_plane.h"
#include "control/credentials.h"
#include "control/grpc_status.h"

namespace ros2::control {

// One stream. Its fields are guarded by PoolMapWatchers::Shared::mu, except
// `update`, which only the watchers' thread touches while no write is in
// flight, and `who`, set by that thread before the stream is ever sent to.
class PoolMapWatchReactor final : public grpc::ServerWriteReactor<rpc::PoolMapUpdate> {
 public:
  PoolMapWatchReactor(PoolMapWatchers* owner, grpc::CallbackServerContext* ctx, const rpc::WatchPoolMapRequest& req)
      : owner(owner), ctx(ctx), req(req), sent(req.known_version()) {}
  void OnWriteDone(bool ok) override { owner->WriteDone(this, ok); }
  void OnCancel() override { owner->Cancelled(this); }
  void OnDone() override { owner->Done(this); }

  PoolMapWatchers* owner;
  grpc::CallbackServerContext* ctx;
  rpc::WatchPoolMapRequest req;
  std::optional<Principal> who;  // once admitted
  bool counted = false;          // counted against the limits (released in Done)
  uint64_t sent;                 // the newest version sent (or the client's own)
  bool first = true;             // the first update goes out at once: it lists the endpoints
  bool queued = false;           // in Shared::pending
  bool busy = false;             // the watchers' thread works on it
  bool in_flight = false;        // a write not yet done
  bool cancelled = false;
  bool finished = false;  // Finish called (or decided): nothing else may be started
  rpc::PoolMapUpdate update;
};

struct PoolMapWatchers::Shared {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t latest = 0;   // GUARDED_BY(mu): the newest system map version published
  uint64_t handled = 0;  // GUARDED_BY(mu): the newest one every stream was queued for
  bool map_stopped = false;                                     // GUARDED_BY(mu)
  bool stop = false;                                            // GUARDED_BY(mu): the destructor
  std::set<PoolMapWatchReactor*> all;                           // GUARDED_BY(mu)
  std::vector<PoolMapWatchReactor*> pending;                    // GUARDED_BY(mu)
  std::map<std::string, uint32_t> per_tenant;                   // GUARDED_BY(mu)
  uint32_t admitted = 0;                                        // GUARDED_BY(mu)

  void Queue(PoolMapWatchReactor* r) {  // REQUIRES: mu held
    if (r->queued || r->finished) return;
    r->queued = true;
    pending.push_back(r);
    cv.notify_all();
  }
};

// Per pass of the watchers' thread: one store read per tenant and pool, and
// one list of endpoints.
struct PoolMapWatchers::PassCache {
  std::map<std::pair<std::string, std::string>, Result<Catalog::PoolAccess>> access;
  std::optional<std::vector<std::string>> endpoints;
};

PoolMapWatchers::PoolMapWatchers(ControlPlane* plane) : plane_(plane), shared_(std::make_shared<Shared>()) {
  std::weak_ptr<Shared> weak = shared_;
  SystemMap& map = plane_->system_map();
  map.AddListener([weak](uint64_t version) {
    auto s = weak.lock();
    if (!s) return;
    std::lock_guard lock(s->mu);
    s->latest = std::max(s->latest, version);
    s->cv.notify_all();
  });
  map.AddStopListener([weak] {
    auto s = weak.lock();
    if (!s) return;
    std::lock_guard lock(s->mu);
    s->map_stopped = true;
    s->cv.notify_all();
  });
  {
    std::lock_guard lock(shared_->mu);
    shared_->latest = std::max(shared_->latest, map.known_version());
    shared_->handled = shared_->latest;
    shared_->map_stopped = shared_->map_stopped || map.stopped();
  }
  thread_ = std::thread([this] { Run(); });
}

PoolMapWatchers::~PoolMapWatchers() {
  {
    std::lock_guard lock(shared_->mu);
    shared_->stop = true;
    if (!shared_->all.empty()) {
      ROS2_LOG_ERROR("control: {} pool map watch streams still open at shutdown", shared_->all.size());
    }
  }
  shared_->cv.notify_all();
  if (thread_.joinable()) thread_.join();
}

grpc::ServerWriteReactor<rpc::PoolMapUpdate>* PoolMapWatchers::Open(grpc::CallbackServerContext* ctx,
                                                                    const rpc::WatchPoolMapRequest* req) {
  auto* r = new PoolMapWatchReactor(this, ctx, *req);
  std::lock_guard lock(shared_->mu);
  shared_->all.insert(r);
  shared_->Queue(r);
  return r;
}

size_t PoolMapWatchers::open_streams() const {
  std::lock_guard lock(shared_->mu);
  return shared_->all.size();
}

void PoolMapWatchers::WriteDone(PoolMapWatchReactor* r, bool ok) {
  bool finish = false;
  {
    std::lock_guard lock(shared_->mu);
    r->in_flight = false;
    if (!ok || r->cancelled || shared_->map_stopped) {
      finish = !r->finished;
      r->finished = true;
    } else if (shared_->latest > r->sent) {
      shared_->Queue(r);
    }
  }
  if (finish) r->Finish(grpc::Status::OK);  // the client went away, or this engine stops
}

void PoolMapWatchers::Cancelled(PoolMapWatchReactor* r) {
  bool finish = false;
  {
    std::lock_guard lock(shared_->mu);
    r->cancelled = true;
    if (!r->in_flight && !r->busy && !r->finished) {
      r->finished = true;
      finish = true;
    }
  }
  if (finish) r->Finish(grpc::Status::CANCELLED);
}

void PoolMapWatchers::Done(PoolMapWatchReactor* r) {
  {
    std::lock_guard lock(shared_->mu);
    shared_->all.erase(r);
    std::erase(shared_->pending, r);
    if (r->counted) {
      --shared_->admitted;
      auto it = shared_->per_tenant.find(r->who->name);
      if (it != shared_->per_tenant.end() && --it->second == 0) shared_->per_tenant.erase(it);
    }
  }
  delete r;
}

grpc::Status PoolMapWatchers::Admit(PoolMapWatchReactor* r) {
  auto who = AuthenticateCall(*r->ctx, plane_->tenants());
  if (!who.ok()) return ToGrpcStatus(who.status());
  if (r->req.pool().empty()) return ToGrpcStatus(Status::InvalidArgument("watch pool map: no pool named"));
  std::lock_guard lock(shared_->mu);
  uint32_t& mine = shared_->per_tenant[who->name];
  if (mine >= kMaxWatchesPerTenant || shared_->admitted >= kMaxWatches) {
    std::string message =
        fmt::format("watch pool map: tenant '{}' holds {} watches and this engine {} (limits {} a tenant, {} in all)",
                    who->name, mine, shared_->admitted, kMaxWatchesPerTenant, kMaxWatches);
    if (mine == 0) shared_->per_tenant.erase(who->name);
    return ToGrpcStatus(Status::Busy(message));
  }
  ++mine;
  ++shared_->admitted;
  r->who = std::move(*who);
  r->counted = true;
  return grpc::Status::OK;
}

void PoolMapWatchers::Serve(PoolMapWatchReactor* r, PassCache* cache) {
  grpc::Status end;
  bool finish = false;
  bool write = false;
  if (!r->who) {
    end = Admit(r);
    finish = !end.ok();
  }
  if (!finish) {
    // The rights are checked again for every map sent: a tenant that lost its
    // read right (or was deleted) stops getting maps.
    auto key = std::make_pair(r->who->uuid.ToString(), r->req.pool());
    auto it = cache->access.find(key);
    if (it == cache->access.end()) {
      it = cache->access.emplace(key, plane_->catalog().AccessPool(*r->who, r->req.pool(), kRightRead)).first;
    }
    if (!it->second.ok()) {
      ROS2_LOG_DEBUG("control: Session.WatchPoolMap ended: {}", it->second.status().ToString());
      end = ToGrpcStatus(it->second.status());
      finish = true;
    } else if (r->first || it->second->map.version() > r->sent) {
      r->update.Clear();
      *r->update.mutable_map() = it->second->map;
      if (!cache->endpoints) {
        cache->endpoints.emplace();
        if (ClusterMember* member = plane_->cluster(); member != nullptr) {
          if (auto members = member->Members(); members.ok()) {
            for (const auto& m : *members) {
              if (m.up && !m.endpoint.empty()) cache->endpoints->push_back(m.endpoint);
            }
          }
        }
      }
      for (const auto& e : *cache->endpoints) r->update.add_control_endpoints(e);
      write = true;
    }
  }
  {
    std::lock_guard lock(shared_->mu);
    r->busy = false;
    if (!finish && (r->cancelled || shared_->map_stopped)) {
      finish = true;
      write = false;
      end = r->cancelled ? grpc::Status::CANCELLED : grpc::Status::OK;
    }
    if (finish) {
      r->finished = true;
    } else if (write) {
      r->in_flight = true;
      r->first = false;
      r->sent = std::max(r->sent, r->update.map().version());
    }
  }
  if (finish) {
    r->Finish(end);
  } else if (write) {
    r->StartWrite(&r->update);
  }
}

void PoolMapWatchers::Run() {
  bool stop_handled = false;  // the idle streams were ended when the map stopped
  for (;;) {
    std::vector<PoolMapWatchReactor*> work;
    std::vector<PoolMapWatchReactor*> end;  // idle streams of a stopping engine
    {
      std::unique_lock lock(shared_->mu);
      shared_->cv.wait(lock, [&] {
        return shared_->stop || !shared_->pending.empty() || shared_->latest > shared_->handled ||
               (shared_->map_stopped && !stop_handled);
      });
      if (shared_->stop) return;
      if (shared_->latest > shared_->handled) {
        shared_->handled = shared_->latest;
        for (auto* r : shared_->all) {
          if (!r->in_flight) shared_->Queue(r);
        }
      }
      if (shared_->map_stopped && !stop_handled) {
        stop_handled = true;
        for (auto* r : shared_->all) {
          if (r->finished || r->in_flight || r->busy) continue;  // WriteDone ends the ones in flight
          r->finished = true;
          end.push_back(r);
        }
      }
      for (auto* r : shared_->pending) {
        r->queued = false;
        if (r->finished || r->in_flight) continue;  // WriteDone queues it again if need be
        r->busy = true;
        work.push_back(r);
      }
      shared_->pending.clear();
    }
    for (auto* r : end) r->Finish(grpc::Status::OK);
    PassCache cache;
    for (auto* r : work) Serve(r, &cache);
  }
}

}  // namespace ros2::control
