// PoolMapWatchers: the server side of Session.WatchPoolMap (docs/cluster.md,
// "How clients learn new maps") on gRPC's callback API, so that an open watch
// holds no thread of the engine.
//
// Each stream is a reactor (a grpc::ServerWriteReactor) that holds no thread
// between writes. One thread of this object does the work that may block on
// the state store: it authenticates a new stream's tenant, checks its read
// right on the pool and sends the current map at once; then, whenever a newer
// system map is published (SystemMap::AddListener), it sends every idle
// stream of a pool whose map is newer than the one that stream last sent
// (rights checked again, once per tenant and pool per pass). A stream whose
// write is still in flight gets the newest map when that write completes. A
// stream whose tenant lost its right or was deleted ends with that error.
//
// Limits: an open watch costs memory (its call's buffers) and a store read per
// map change, so an engine serves at most kMaxWatchesPerTenant watches a tenant
// and kMaxWatches in all; the next is refused with Busy (gRPC UNAVAILABLE)
// naming both limits.
//
// SystemMap::StopWaiters (the services are stopping) ends every stream with OK
// at once, and refuses new ones, so clients move to another engine.
//
// Owned by SessionService. Thread-safe; the destructor joins the thread (every
// stream must have ended before: the gRPC server is shut down first).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "ros2/session.grpc.pb.h"

namespace ros2::control {

class ControlPlane;
class PoolMapWatchReactor;

class PoolMapWatchers {
 public:
  static constexpr uint32_t kMaxWatchesPerTenant = 128;
  static constexpr uint32_t kMaxWatches = 4096;

  explicit PoolMapWatchers(ControlPlane* plane);
  ~PoolMapWatchers();
  PoolMapWatchers(const PoolMapWatchers&) = delete;
  PoolMapWatchers& operator=(const PoolMapWatchers&) = delete;

  // A reactor for a new stream (gRPC owns it; it deletes itself once done).
  grpc::ServerWriteReactor<rpc::PoolMapUpdate>* Open(grpc::CallbackServerContext* ctx,
                                                     const rpc::WatchPoolMapRequest* req);
  // Streams open now (admitted or awaiting admission).
  size_t open_streams() const;

 private:
  friend class PoolMapWatchReactor;
  struct Shared;  // what the map's listener reaches (it may outlive this object)

  void Run();
  // The reactor's callbacks (on gRPC's threads).
  void WriteDone(PoolMapWatchReactor* r, bool ok);
  void Cancelled(PoolMapWatchReactor* r);
  void Done(PoolMapWatchReactor* r);
  // On this object's thread: admit, send or end one stream.
  struct PassCache;
  void Serve(PoolMapWatchReactor* r, PassCache* cache);
  grpc::Status Admit(PoolMapWatchReactor* r);

  ControlPlane* plane_;
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace ros2::control
