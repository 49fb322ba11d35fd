#include "control/system_map.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "common/hlc.h"

namespace ros2::control {
namespace {
constexpr std::string_view kSysmapKey = "sysmap";

// Whether a target of another engine than `engine_id` takes writes (UP,
// DRAIN or REINT): while one does, a target that is DOWN misses them.
bool OthersWritten(const rpc::PoolMap& map, const std::string& engine_id) {
  return std::any_of(map.targets().begin(), map.targets().end(), [&](const rpc::TargetInfo& t) {
    return t.engine_uuid() != engine_id &&
           (t.state() == rpc::TARGET_UP || t.state() == rpc::TARGET_DRAIN || t.state() == rpc::TARGET_REINT);
  });
}

// The states the targets of a registering engine come back in, by index
// (with back_from_down), for those that do not come back UP
// (docs/replication.md, "Target states"):
//  - DOWNOUT, DRAIN and REINT keep theirs: only `pool reintegrate` and the
//    rebuild's end change them;
//  - DOWN becomes REINT back from DOWN when another engine's target takes
//    writes: the writes made while it was DOWN went to the others, so it is
//    caught up before it is read. When none does (every other target is
//    out: a cold start of a cluster whose engines the map has all DOWN), no
//    write was acknowledged without it, and it comes back UP.
std::map<uint32_t, std::pair<rpc::TargetState, bool>> ReturningStates(const rpc::PoolMap& map,
                                                                       const std::string& engine_id) {
  std::map<uint32_t, std::pair<rpc::TargetState, bool>> kept;
  const bool others_written = OthersWritten(map, engine_id);
  for (const auto& t : map.targets()) {
    if (t.engine_uuid() != engine_id) continue;
    if (t.state() == rpc::TARGET_DOWNOUT || t.state() == rpc::TARGET_DRAIN || t.state() == rpc::TARGET_REINT) {
      kept[t.index()] = {t.state(), t.state() == rpc::TARGET_REINT && t.back_from_down()};
    } else if (t.state() == rpc::TARGET_DOWN && others_written) {
      kept[t.index()] = {rpc::TARGET_REINT, true};
    }
  }
  return kept;
}

}  // namespace

Result<std::unique_ptr<SystemMap>> SystemMap::Load(StateStore* store) {
  std::unique_ptr<SystemMap> m(new SystemMap(store));
  auto raw = store->Get(kSysmapKey);
  if (raw.ok()) {
    if (!m->map_.ParseFromString(*raw)) return Status::Corruption("state store: the system map record does not parse");
  } else if (!raw.status().IsNotFound()) {
    return raw.status();
  }
  m->published_ = m->map_.version();
  return m;
}

Result<uint64_t> SystemMap::Mutate(const std::function<Result<bool>(rpc::PoolMap*)>& change, const StoreBatch& guard) {
  std::unique_lock<std::mutex> lock(mu_);
  for (int attempt = 0;; ++attempt) {
    std::optional<std::string> raw;
    rpc::PoolMap current = map_;
    if (store_->shared()) {
      auto stored = store_->Get(kSysmapKey);
      if (stored.ok()) {
        raw = *stored;
        if (!current.ParseFromString(*raw))
          return Status::Corruption("state store: the system map record does not parse");
      } else if (stored.status().IsNotFound()) {
        current.Clear();
      } else {
        return stored.status();
      }
    } else if (map_.version() != 0 || map_.targets_size() != 0) {
      raw = map_.SerializeAsString();
    }
    rpc::PoolMap next = current;
    ROS2_ASSIGN_OR_RETURN(bool changed, change(&next));
    if (!changed) {
      map_ = current;
      return current.version();
    }
    next.set_version(current.version() + 1);
    StoreBatch b = guard;
    if (store_->shared()) b.Require(std::string(kSysmapKey), raw);
    b.Put(std::string(kSysmapKey), next.SerializeAsString());
    Status st = store_->Write(b);
    // A compare failed: another engine changed the map (retry on the new
    // one) or the guard no longer holds (the caller's to report).
    if (st.code() == Status::Code::kBusy && attempt < 20 && store_->shared()) {
      auto again = store_->Get(kSysmapKey);
      if (!again.ok() || !raw || *again != *raw) continue;
    }
    ROS2_RETURN_IF_ERROR(st);
    map_ = std::move(next);
    const uint64_t version = map_.version();
    lock.unlock();
    Publish(version);
    return version;
  }
}

Result<uint64_t> SystemMap::RegisterEngine(const EngineRegistration& reg) {
  if (reg.engine.IsNil()) return Status::InvalidArgument("register engine: missing engine_uuid");
  if (reg.targets.empty()) {
    return Status::InvalidArgument(fmt::format("register engine {}: no targets", reg.engine.ToString()));
  }
  std::set<uint32_t> seen;
  for (const auto& t : reg.targets) {
    if (!seen.insert(t.index).second) {
      return Status::InvalidArgument(
          fmt::format("register engine {}: target index {} appears twice", reg.engine.ToString(), t.index));
    }
    if (t.worker_address.empty()) {
      return Status::InvalidArgument(
          fmt::format("register engine {}: target {} has no worker_address", reg.engine.ToString(), t.index));
    }
  }
  std::string engine_id = reg.engine.ToString();
  return Mutate(
      [&](rpc::PoolMap* map) -> Result<bool> {
        rpc::PoolMap& next = *map;
        rpc::EngineInfo* engine = nullptr;
        for (auto& e : *next.mutable_engines()) {
          if (e.uuid() == engine_id) engine = &e;
        }
        if (engine == nullptr) {
          engine = next.add_engines();
          engine->set_uuid(engine_id);
        }
        engine->set_address(reg.address);
        engine->set_capacity_bytes(reg.capacity_bytes);
        engine->set_registered_ms(HybridClock::WallMillis());
        engine->set_target_count(static_cast<uint32_t>(reg.targets.size()));

        // Rebuild the flat target list: other engines' targets keep their positions,
        // this engine's targets are (re)placed at the position of its first target,
        // or appended when it is new.
        std::vector<TargetRegistration> sorted = reg.targets;
        std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
        std::map<uint32_t, std::pair<rpc::TargetState, bool>> kept = ReturningStates(next, engine_id);
        google::protobuf::RepeatedPtrField<rpc::TargetInfo> rebuilt;
        bool placed = false;
        auto place = [&] {
          for (const auto& t : sorted) {
            rpc::TargetInfo* ti = rebuilt.Add();
            ti->set_engine_uuid(engine_id);
            ti->set_index(t.index);
            const auto k = kept.find(t.index);
            ti->set_state(k != kept.end() ? k->second.first : rpc::TARGET_UP);
            ti->set_back_from_down(k != kept.end() && k->second.second);
            ti->set_worker_address(t.worker_address);
            ti->set_capacity_bytes(t.capacity_bytes);
          }
          placed = true;
        };
        for (const auto& t : next.targets()) {
          if (t.engine_uuid() == engine_id) {
            if (!placed) place();
            continue;
          }
          *rebuilt.Add() = t;
        }
        if (!placed) place();
        next.mutable_targets()->Swap(&rebuilt);
        return true;
      },
      StoreBatch());
}

Result<uint64_t> SystemMap::SetTargetState(const Uuid& engine, uint32_t index, rpc::TargetState state) {
  if (state != rpc::TARGET_UP && state != rpc::TARGET_DOWN && state != rpc::TARGET_DRAIN) {
    return Status::InvalidArgument(fmt::format("target state {}: expected UP, DOWN or DRAIN", static_cast<int>(state)));
  }
  std::string engine_id = engine.ToString();
  return Mutate(
      [&](rpc::PoolMap* next) -> Result<bool> {
        bool engine_known = false;
        rpc::TargetInfo* target = nullptr;
        for (auto& t : *next->mutable_targets()) {
          if (t.engine_uuid() != engine_id) continue;
          engine_known = true;
          if (t.index() == index) target = &t;
        }
        if (!engine_known) return Status::NotFound(fmt::format("unknown engine {}", engine_id));
        if (target == nullptr) return Status::NotFound(fmt::format("engine {} has no target {}", engine_id, index));
        if (state == rpc::TARGET_UP && target->state() == rpc::TARGET_DOWN) {
          return Status::Busy(fmt::format(
              "target {} of engine {} is DOWN and its data not rebuilt elsewhere yet: wait for the rebuild (ros2ctl "
              "pool rebuild wait), then reintegrate",
              index, engine_id));
        }
        // REINT is read only once caught up: UP or DRAIN now would serve
        // its stale copies. Only an exclude (DOWN) takes it out meanwhile.
        if (state != rpc::TARGET_DOWN && target->state() == rpc::TARGET_REINT) {
          return Status::Busy(fmt::format(
              "target {} of engine {} is REINT, catching up: it becomes UP by itself once it holds every copy "
              "(ros2ctl pool rebuild wait)",
              index, engine_id));
        }
        // Back from DOWNOUT: written at once, read only once caught up (REINT).
        if (state == rpc::TARGET_UP && target->state() == rpc::TARGET_DOWNOUT) state = rpc::TARGET_REINT;
        if (target->state() == state) return false;
        target->set_state(state);
        target->set_back_from_down(false);
        return true;
      },
      StoreBatch());
}

Result<uint64_t> SystemMap::SetEngineState(const Uuid& engine, rpc::TargetState state, const StoreBatch& guard) {
  std::string engine_id = engine.ToString();
  return Mutate(
      [&](rpc::PoolMap* next) -> Result<bool> {
        bool changed = false;
        for (auto& t : *next->mutable_targets()) {
          if (t.engine_uuid() != engine_id || t.state() == state) continue;
          t.set_state(state);
          t.set_back_from_down(false);
          changed = true;
        }
        return changed;
      },
      guard);
}

Result<uint64_t> SystemMap::SettleTargets(const std::vector<TargetMove>& moves, const StoreBatch& guard) {
  return Mutate(
      [&](rpc::PoolMap* next) -> Result<bool> {
        bool changed = false;
        for (auto& t : *next->mutable_targets()) {
          for (const TargetMove& m : moves) {
            if (t.engine_uuid() == m.engine && t.index() == m.index && t.state() == m.from) {
              t.set_state(m.to);
              t.set_back_from_down(false);
              changed = true;
            }
          }
        }
        return changed;
      },
      guard);
}

rpc::PoolMap SystemMap::Snapshot() const {
  rpc::PoolMap out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (store_->shared()) {
      auto stored = store_->Get(kSysmapKey);
      rpc::PoolMap read;
      if (stored.ok() && read.ParseFromString(*stored)) map_ = std::move(read);
    }
    out = map_;
  }
  Publish(out.version());
  return out;
}

void SystemMap::Observe(const rpc::PoolMap& map) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (map.version() <= map_.version()) return;
    map_ = map;
  }
  Publish(map.version());
}

uint64_t SystemMap::known_version() const {
  std::lock_guard<std::mutex> lock(publish_mu_);
  return published_;
}

void SystemMap::AddListener(std::function<void(uint64_t)> listener) {
  std::lock_guard<std::mutex> lock(publish_mu_);
  listeners_.push_back(std::move(listener));
}

void SystemMap::Publish(uint64_t version) const {
  std::vector<std::function<void(uint64_t)>> listeners;
  {
    std::lock_guard<std::mutex> lock(publish_mu_);
    if (version <= published_) return;
    published_ = version;
    listeners = listeners_;
  }
  published_cv_.notify_all();
  for (const auto& l : listeners) l(version);
}

uint64_t SystemMap::WaitNewer(uint64_t known, std::chrono::milliseconds max_wait) const {
  std::unique_lock<std::mutex> lock(publish_mu_);
  published_cv_.wait_for(lock, max_wait, [&] { return published_ > known || stopped_; });
  return published_;
}

void SystemMap::AddStopListener(std::function<void()> listener) {
  {
    std::lock_guard<std::mutex> lock(publish_mu_);
    if (!stopped_) {
      stop_listeners_.push_back(std::move(listener));
      return;
    }
  }
  listener();
}

void SystemMap::StopWaiters() {
  std::vector<std::function<void()>> listeners;
  {
    std::lock_guard<std::mutex> lock(publish_mu_);
    if (!stopped_) listeners = stop_listeners_;
    stopped_ = true;
  }
  published_cv_.notify_all();
  for (const auto& l : listeners) l();
}

bool SystemMap::stopped() const {
  std::lock_guard<std::mutex> lock(publish_mu_);
  return stopped_;
}

uint64_t SystemMap::version() const {
  return Snapshot().version();
}

}  // namespace ros2::control
