#include "engine/down_peers.h"

#include <algorithm>
#include <chrono>

#include "common/log.h"

namespace ros2::engine {

std::unique_ptr<DownPeerWatch> DownPeerWatch::Start(control::SystemMap* map, std::vector<Target*> targets) {
  std::unique_ptr<DownPeerWatch> w(new DownPeerWatch(map, std::move(targets)));
  w->thread_ = std::thread([p = w.get()] { p->Run(); });
  return w;
}

DownPeerWatch::~DownPeerWatch() {
  Stop();
}

void DownPeerWatch::Stop() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

std::vector<std::string> DownPeerWatch::DownAddresses(const rpc::PoolMap& map) {
  std::vector<std::string> out;
  for (const auto& t : map.targets()) {
    if (t.state() == rpc::TARGET_DOWN || t.state() == rpc::TARGET_DOWNOUT) out.push_back(t.worker_address());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::pair<uint32_t, std::string>> DownPeerWatch::Members(const rpc::PoolMap& map) {
  std::vector<std::pair<uint32_t, std::string>> out;
  for (const auto& t : map.targets()) {
    if (!t.worker_address().empty()) out.emplace_back(t.index(), t.worker_address());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void DownPeerWatch::Run() {
  // Bounds how long Stop() waits (the map's waiters are woken for good only
  // at the engine's shutdown).
  constexpr auto kWait = std::chrono::milliseconds(200);
  uint64_t known = 0;
  std::vector<std::string> posted;
  std::vector<std::pair<uint32_t, std::string>> posted_members;
  while (!stop_.load(std::memory_order_acquire)) {
    const uint64_t version = map_->WaitNewer(known, kWait);
    if (version == known || map_->stopped()) {
      if (map_->stopped()) std::this_thread::sleep_for(kWait);
      continue;
    }
    rpc::PoolMap snapshot = map_->Snapshot();
    known = std::max(version, snapshot.version());
    std::vector<std::string> down = DownAddresses(snapshot);
    auto members = Members(snapshot);
    if (down == posted && members == posted_members) continue;
    ROS2_LOG_DEBUG("engine: map version {}: {} target(s), {} address(es) DOWN; closing forwards to those", known,
                   members.size(), down.size());
    for (Target* t : targets_) t->Post([t, down, members] { t->SetMapPeers(down, members); });
    posted = std::move(down);
    posted_members = std::move(members);
  }
}

}  // namespace ros2::engine
