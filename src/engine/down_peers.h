// DownPeerWatch: closes a leader's forward endpoints to targets the pool map
// marks DOWN or DOWNOUT (docs/replication.md, "Update protocol"), as a
// client's map watch closes its own (client/resend.cc, AbandonPeers). A host
// cut off without a reset never fails a call by itself: without this, a
// forward to it would wait out the forward timeout (the lease TTL) even after
// the map marked it DOWN.
//
// A thread that waits for each newer system map (pool maps are views of it),
// reads it, and posts to every target (Target::SetMapPeers), whenever either
// changes, the worker addresses of its DOWN and DOWNOUT targets and the
// (target index, worker address) pair of every target it lists: a leader
// forwards only to those (a client names a group's copies, and an engine
// must not connect wherever a client says). Owned by the
// Engine; Stop() (or the destructor) joins the thread, before the targets stop.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "control/system_map.h"
#include "engine/target.h"

namespace ros2::engine {

class DownPeerWatch {
 public:
  // `map` and `targets` outlive the watch.
  static std::unique_ptr<DownPeerWatch> Start(control::SystemMap* map, std::vector<Target*> targets);
  ~DownPeerWatch();
  DownPeerWatch(const DownPeerWatch&) = delete;
  DownPeerWatch& operator=(const DownPeerWatch&) = delete;
  void Stop();

  // The worker addresses of the map's DOWN and DOWNOUT targets, sorted.
  static std::vector<std::string> DownAddresses(const rpc::PoolMap& map);
  // Every target of the map as (index inside its engine, worker address), sorted.
  static std::vector<std::pair<uint32_t, std::string>> Members(const rpc::PoolMap& map);

 private:
  DownPeerWatch(control::SystemMap* map, std::vector<Target*> targets) : map_(map), targets_(std::move(targets)) {}
  void Run();

  control::SystemMap* map_;
  std::vector<Target*> targets_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ros2::engine
