#include "control/system_map.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "common/hlc.h"

namespace ros2::control {
namespace {
constexpr std::string_view kSysmapKey = "sysmap";
}  // namespace

Result<std::unique_ptr<SystemMap>> SystemMap::Load(StateStore* store) {
  std::unique_ptr<SystemMap> m(new SystemMap(store));
  auto raw = store->Get(kSysmapKey);
  if (raw.ok()) {
    if (!m->map_.ParseFromString(*raw)) return Status::Corruption("state store: the system map record does not parse");
  } else if (!raw.status().IsNotFound()) {
    return raw.status();
  }
  return m;
}

Status SystemMap::PersistLocked() {
  return store_->Put(std::string(kSysmapKey), map_.SerializeAsString());
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
  std::lock_guard<std::mutex> lock(mu_);
  rpc::PoolMap next = map_;
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
  google::protobuf::RepeatedPtrField<rpc::TargetInfo> rebuilt;
  bool placed = false;
  auto place = [&] {
    for (const auto& t : sorted) {
      rpc::TargetInfo* ti = rebuilt.Add();
      ti->set_engine_uuid(engine_id);
      ti->set_index(t.index);
      ti->set_state(rpc::TARGET_UP);
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
  next.set_version(map_.version() + 1);
  std::swap(map_, next);
  Status st = PersistLocked();
  if (!st.ok()) {
    std::swap(map_, next);  // keep memory and disk in agreement
    return st;
  }
  return map_.version();
}

Result<uint64_t> SystemMap::SetTargetState(const Uuid& engine, uint32_t index, rpc::TargetState state) {
  if (state != rpc::TARGET_UP && state != rpc::TARGET_DOWN && state != rpc::TARGET_DRAIN) {
    return Status::InvalidArgument(fmt::format("target state {}: expected UP, DOWN or DRAIN", static_cast<int>(state)));
  }
  std::string engine_id = engine.ToString();
  std::lock_guard<std::mutex> lock(mu_);
  rpc::PoolMap next = map_;
  bool engine_known = false;
  rpc::TargetInfo* target = nullptr;
  for (auto& t : *next.mutable_targets()) {
    if (t.engine_uuid() != engine_id) continue;
    engine_known = true;
    if (t.index() == index) target = &t;
  }
  if (!engine_known) return Status::NotFound(fmt::format("unknown engine {}", engine_id));
  if (target == nullptr) return Status::NotFound(fmt::format("engine {} has no target {}", engine_id, index));
  if (target->state() == state) return map_.version();
  target->set_state(state);
  next.set_version(map_.version() + 1);
  std::swap(map_, next);
  Status st = PersistLocked();
  if (!st.ok()) {
    std::swap(map_, next);
    return st;
  }
  return map_.version();
}

rpc::PoolMap SystemMap::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_;
}

uint64_t SystemMap::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.version();
}

}  // namespace ros2::control
