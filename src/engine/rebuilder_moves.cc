// Rebuilder (rebuilder.h): the purge before a reintegrated target catches up,
// and the reclaiming of fallback copies once it is UP (docs/replication.md,
// "Exclude, drain, reintegrate").
#include <algorithm>
#include <future>

#include <fmt/format.h>

#include "common/log.h"
#include "control/rebuild_state.h"
#include "engine/rebuilder.h"
#include "placement/placement.h"

namespace ros2::engine {
namespace {

constexpr auto kSweepWait = std::chrono::seconds(60);

bool Settled(const rpc::PoolMap& map) {
  return std::none_of(map.targets().begin(), map.targets().end(), [](const rpc::TargetInfo& t) {
    return t.state() == rpc::TARGET_DOWN || t.state() == rpc::TARGET_DRAIN || t.state() == rpc::TARGET_REINT;
  });
}

// What the purge of REINT target `global` drops: everything replicated
// (empty: whole objects) when it was DOWNOUT; back from DOWN, only the dkeys
// it is not read for, keeping those of a group with no other readable
// replica (placement reads it there: nothing holds more).
Target::SweepDrop StaleCopies(const rpc::PoolMap& map, uint32_t global) {
  if (!map.targets(int(global)).back_from_down()) return {};
  auto converted = PoolMapFromProto(map);
  if (!converted.ok()) return [](const ObjectId&, const std::string&) { return false; };
  auto placed = std::make_shared<const PoolMap>(converted->map);
  return [placed, global](const ObjectId& oid, const std::string& dkey) {
    auto places = ReplicasForDkey(*placed, oid, dkey);
    if (!places.ok()) return true;
    return std::none_of(places->begin(), places->end(),
                        [global](const ReplicaPlace& p) { return p.target == global && !p.fallback && !p.down; });
  };
}

bool Reintegrates(const rpc::RebuildJob& job) {
  return std::find(job.states().begin(), job.states().end(), rpc::TARGET_REINT) != job.states().end();
}

}  // namespace

Result<Target::SweepResult> Rebuilder::SweepTarget(const Uuid& pool, uint32_t index, const Target::SweepDrop& drop) {
  if (index >= o_.targets.size()) return Status::Protocol(fmt::format("sweep: this engine has no target {}", index));
  Target* target = o_.targets[index];
  Target::SweepResult total;
  for (const Uuid& container : target->OpenContainers(pool, std::chrono::seconds(10))) {
    auto done = std::make_shared<std::promise<Result<Target::SweepResult>>>();
    auto result = done->get_future();
    target->SweepShard(pool, container, drop, [done](Result<Target::SweepResult> r) { done->set_value(std::move(r)); });
    if (result.wait_for(kSweepWait) != std::future_status::ready) {
      return Status::TimedOut(fmt::format("sweep: target {} did not sweep container {}", index, container.ToString()));
    }
    ROS2_ASSIGN_OR_RETURN(auto r, result.get());
    total.punched += r.punched;
    total.freed += r.freed;
  }
  return total;
}

Status Rebuilder::Purge(const std::string& pool, const rpc::RebuildJob& job, const rpc::PoolMap& map) {
  ROS2_ASSIGN_OR_RETURN(Uuid pool_id, Uuid::Parse(pool));
  const std::string self = o_.engine.ToString();
  for (int i = 0; i < job.targets_size() && i < job.states_size(); ++i) {
    if (job.states(i) != rpc::TARGET_REINT || int(job.targets(i)) >= map.targets_size()) continue;
    const rpc::TargetInfo& t = map.targets(int(job.targets(i)));
    if (t.engine_uuid() != self) continue;
    ROS2_ASSIGN_OR_RETURN(auto swept, SweepTarget(pool_id, t.index(), StaleCopies(map, job.targets(i))));
    ROS2_LOG_INFO("rebuild: pool {}: target {} reintegrating: {} stale replicated objects dropped, {} bytes freed",
                  pool, t.index(), swept.punched, swept.freed);
  }
  return Status::Ok();
}

void Rebuilder::Reclaim(const std::string& pool, const rpc::RebuildJob& job) {
  if (!Reintegrates(job) || reclaimed_.contains({pool, job.map_version()})) return;
  auto map = o_.plane->catalog().PoolMapFor(pool);
  // Only under the map the job settled, or a later one, and with nothing
  // moving: a copy is dropped only where no placement still wants it.
  if (!map.ok() || map->version() < job.settled_version() || !Settled(*map)) return;
  auto converted = PoolMapFromProto(*map);
  auto pool_id = Uuid::Parse(pool);
  if (!converted.ok() || !pool_id.ok()) return;
  reclaimed_.emplace(pool, job.map_version());
  auto placed = std::make_shared<const PoolMap>(converted->map);
  Target::SweepResult total;
  for (const auto& [index, global] : LocalTargets(*converted, o_.engine.ToString())) {
    Target::SweepDrop drop = [placed, global](const ObjectId& oid, const std::string& dkey) {
      auto places = ReplicasForDkey(*placed, oid, dkey);
      if (!places.ok()) return false;
      return std::none_of(places->begin(), places->end(),
                          [global](const ReplicaPlace& p) { return p.target == global; });
    };
    auto swept = SweepTarget(*pool_id, index, drop);
    if (!swept.ok()) {
      ROS2_LOG_WARN("rebuild: pool {}: reclaiming on target {}: {}", pool, index, swept.status().ToString());
      continue;
    }
    total.punched += swept->punched;
    total.freed += swept->freed;
  }
  ROS2_LOG_INFO("rebuild: pool {}: fallback copies reclaimed: {} dkeys, {} bytes freed (map version {})", pool,
                total.punched, total.freed, map->version());
}

}  // namespace ros2::engine
