#include "engine/rebuilder.h"

#include <algorithm>
#include <future>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/hlc.h"
#include "common/log.h"
#include "control/etcd_store.h"
#include "control/rebuild_state.h"

namespace ros2::engine {
namespace {

constexpr auto kTick = std::chrono::milliseconds(250);
constexpr auto kMoveSettle = std::chrono::milliseconds(500);
// A copy still running after this long gets a count beside it (the ETA).
constexpr auto kCountAfter = std::chrono::milliseconds(1000);

// The targets a job works for: DOWN (rebuild), DRAIN (drain), REINT
// (catch-up), with their states.
struct Pending {
  std::vector<uint32_t> targets;
  std::vector<int> states;
  bool any_down = false;
};

Pending PendingTargets(const rpc::PoolMap& map) {
  Pending p;
  for (int g = 0; g < map.targets_size(); ++g) {
    const rpc::TargetState s = map.targets(g).state();
    if (s != rpc::TARGET_DOWN && s != rpc::TARGET_DRAIN && s != rpc::TARGET_REINT) continue;
    p.targets.push_back(static_cast<uint32_t>(g));
    p.states.push_back(s);
    p.any_down |= s == rpc::TARGET_DOWN;
  }
  return p;
}

bool SameJob(const rpc::RebuildJob& job, const Pending& p) {
  if (std::vector<uint32_t>(job.targets().begin(), job.targets().end()) != p.targets) return false;
  if (job.states_size() == 0)
    return std::all_of(p.states.begin(), p.states.end(), [](int s) { return s == rpc::TARGET_DOWN; });
  return std::vector<int>(job.states().begin(), job.states().end()) == p.states;
}

std::string PendingKey(const std::string& pool, const Pending& p) {
  return fmt::format("{}:{}:{}", pool, fmt::join(p.targets, ","), fmt::join(p.states, ","));
}

}  // namespace

std::vector<std::string> LiveEngines(const rpc::PoolMap& map) {
  std::set<std::string> engines;
  for (const auto& t : map.targets()) {
    if (t.state() != rpc::TARGET_DOWN && t.state() != rpc::TARGET_DOWNOUT) engines.insert(t.engine_uuid());
  }
  return {engines.begin(), engines.end()};
}

std::unique_ptr<Rebuilder> Rebuilder::Start(RebuilderOptions options) {
  std::unique_ptr<Rebuilder> r(new Rebuilder(std::move(options)));
  // A job written, a progress reported: the thread looks at once instead of
  // at its next tick (the job's time counts both).
  if (auto* etcd = dynamic_cast<control::EtcdStore*>(&r->o_.plane->store()); etcd != nullptr) {
    r->watch_ = std::make_unique<control::EtcdWatch>(&etcd->client(), etcd->EtcdKey("rebuild"), 0,
                                                     [p = r.get()](const mvccpb::Event&, int64_t) { p->Poke(); });
  }
  r->thread_ = std::thread([p = r.get()] { p->Run(); });
  return r;
}

Rebuilder::~Rebuilder() {
  Stop();
}

void Rebuilder::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (watch_) watch_->Stop();
  if (thread_.joinable()) thread_.join();
}

void Rebuilder::Poke() {
  {
    std::lock_guard lock(mu_);
    poked_ = true;
  }
  wake_.notify_all();
}

bool Rebuilder::Tick(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  wake_.wait_for(lock, d, [this] { return stop_ || poked_; });
  poked_ = false;
  return !stop_;
}

bool Rebuilder::Pause(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  wake_.wait_for(lock, d, [this] { return stop_; });
  return !stop_;
}

std::vector<std::string> Rebuilder::PoolUuids() {
  std::vector<std::string> out;
  auto rows = o_.plane->store().Scan("pool/");
  if (!rows.ok()) return out;
  for (const auto& [key, value] : *rows) out.push_back(key.substr(5));
  return out;
}

void Rebuilder::Run() {
  while (Tick(kTick)) {
    control::ClusterMember* member = o_.plane->cluster();
    if (member == nullptr || member->fenced()) continue;
    for (const std::string& pool : PoolUuids()) {
      if (member->is_leader()) Lead(pool);
      Work(pool);
    }
  }
}

void Rebuilder::Lead(const std::string& pool) {
  auto map = o_.plane->catalog().PoolMapFor(pool);
  if (!map.ok()) return;
  auto job = control::LoadRebuildJob(o_.plane->store(), pool);
  if (!job.ok()) return;
  const Pending pending = PendingTargets(*map);
  if (*job && (*job)->state() == control::kRebuildBusy) {
    if (SameJob(**job, pending)) return FinishJob(pool, **job, *map);
    // The set changed under the job: another failure (a new job now) or
    // engines back UP (nothing left to rebuild for them).
    rpc::RebuildJob ended = **job;
    ended.set_state(std::string(control::kRebuildFailed));
    ended.set_finished_ms(HybridClock::WallMillis());
    ended.set_error(fmt::format("the pool's DOWN, DRAIN and REINT targets changed from [{}] to [{}] (map version {})",
                                fmt::join(ended.targets(), ","), fmt::join(pending.targets, ","), map->version()));
    if (!pending.targets.empty()) return StartJob(pool, *map, pending.targets, pending.states);
    (void)control::SaveRebuildJob(&o_.plane->store(), pool, ended, o_.plane->cluster()->LeaderGuard());
    return;
  }
  if (pending.targets.empty()) return;
  if (*job && SameJob(**job, pending)) {
    return;  // failed for this very set: an administrator's exclude or reintegrate moves on
  }
  // A failure waits `delay` (the engine may come back); a drain or a
  // reintegration, an administrator's request, waits until the set has not
  // changed for kMoveSettle (the per-target changes of one command, one job).
  const auto now = std::chrono::steady_clock::now();
  auto it = down_since_.emplace(PendingKey(pool, pending), now).first;
  if (now - it->second < (pending.any_down ? o_.config.delay : kMoveSettle)) return;
  down_since_.erase(it);
  StartJob(pool, *map, pending.targets, pending.states);
}

void Rebuilder::StartJob(const std::string& pool, const rpc::PoolMap& map, const std::vector<uint32_t>& targets,
                         const std::vector<int>& states) {
  rpc::RebuildJob job;
  job.set_state(std::string(control::kRebuildBusy));
  job.set_map_version(map.version());
  for (uint32_t t : targets) job.add_targets(t);
  for (int s : states) job.add_states(static_cast<rpc::TargetState>(s));
  job.set_started_ms(HybridClock::WallMillis());
  for (const std::string& e : LiveEngines(map)) job.add_engines(e);
  Status st = control::SaveRebuildJob(&o_.plane->store(), pool, job, o_.plane->cluster()->LeaderGuard());
  if (st.ok()) {
    ROS2_LOG_WARN("rebuild: pool {}: targets [{}] in states [{}]; rebuild started for map version {} by {} engine(s)",
                  pool, fmt::join(targets, ","), fmt::join(states, ","), map.version(), job.engines_size());
  } else {
    ROS2_LOG_WARN("rebuild: pool {}: cannot start: {}", pool, st.ToString());
  }
}

void Rebuilder::FinishJob(const std::string& pool, rpc::RebuildJob job, const rpc::PoolMap& map) {
  auto progress = control::LoadRebuildProgress(o_.plane->store(), pool);
  if (!progress.ok()) return;
  std::string failed;
  for (const std::string& e : job.engines()) {
    auto it = progress->find(e);
    if (it == progress->end() || it->second.map_version() != job.map_version()) return;
    if (!it->second.error().empty()) failed = fmt::format("engine {}: {}", e, it->second.error());
    if (failed.empty() && !it->second.done()) return;
  }
  job.set_finished_ms(HybridClock::WallMillis());
  if (!failed.empty()) {
    job.set_state(std::string(control::kRebuildFailed));
    job.set_error(failed);
    ROS2_LOG_WARN("rebuild: pool {}: failed: {}", pool, failed);
  } else {
    // DOWN and DRAIN: their data is whole elsewhere (DOWNOUT); REINT: caught up (UP).
    std::vector<control::SystemMap::TargetMove> moves;
    for (int i = 0; i < job.targets_size(); ++i) {
      const rpc::TargetInfo& t = map.targets(int(job.targets(i)));
      const rpc::TargetState from = i < job.states_size() ? job.states(i) : rpc::TARGET_DOWN;
      moves.push_back(
          {t.engine_uuid(), t.index(), from, from == rpc::TARGET_REINT ? rpc::TARGET_UP : rpc::TARGET_DOWNOUT});
    }
    auto version = o_.plane->system_map().SettleTargets(moves, o_.plane->cluster()->LeaderGuard());
    if (!version.ok()) {
      ROS2_LOG_WARN("rebuild: pool {}: settling the targets: {}", pool, version.status().ToString());
      return;
    }
    job.set_state(std::string(control::kRebuildDone));
    job.set_settled_version(*version);
    ROS2_LOG_WARN("rebuild: pool {}: done in {} ms; targets [{}] settled (map version {})", pool,
                  job.finished_ms() - job.started_ms(), fmt::join(job.targets(), ","), *version);
  }
  (void)control::SaveRebuildJob(&o_.plane->store(), pool, job, o_.plane->cluster()->LeaderGuard());
}

void Rebuilder::Work(const std::string& pool) {
  auto job = control::LoadRebuildJob(o_.plane->store(), pool);
  if (!job.ok() || !*job) return;
  const std::string self = o_.engine.ToString();
  const auto& engines = (*job)->engines();
  if (std::find(engines.begin(), engines.end(), self) == engines.end()) return;
  if ((*job)->state() == control::kRebuildDone) return Reclaim(pool, **job);
  if ((*job)->state() != control::kRebuildBusy) return;
  if (!finished_.emplace(pool, (*job)->map_version()).second) return;
  const auto start = std::chrono::steady_clock::now();
  Status st = PullJob(pool, **job);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  if (st.ok()) {
    ROS2_LOG_INFO("rebuild: pool {}: this engine's pulls done in {} ms", pool, ms.count());
  } else {
    ROS2_LOG_WARN("rebuild: pool {}: this engine's pulls ended after {} ms: {}", pool, ms.count(), st.ToString());
  }
}

Status Rebuilder::PullJob(const std::string& pool, const rpc::RebuildJob& job) {
  rpc::RebuildProgress progress;
  progress.set_map_version(job.map_version());
  Report(pool, progress, true);
  auto map = o_.plane->catalog().PoolMapFor(pool);
  Status st = map.status();
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  if (st.ok()) st = Purge(pool, job, *map);
  const auto purged = Clock::now();
  // The count (the ETA's total) runs beside the copy rather than before it,
  // and only once the copy has run for kCountAfter: it walks the same dkeys
  // on the same target threads as the copy, so a rebuild short enough to need
  // no ETA does not pay for it. A copy that ends first stops it; the copy's
  // own figures are then the totals.
  std::future<Status> counted;
  std::promise<void> copy_ended;
  std::atomic<bool> copy_over{false};
  auto count_end = purged;
  if (st.ok()) {
    counted = std::async(std::launch::async, [&, copy_end = copy_ended.get_future()] {
      Status c = Status::Ok();
      if (copy_end.wait_for(kCountAfter) != std::future_status::ready) {
        c = PullAll(pool, job, *map, true, &progress, &copy_over);
      }
      {
        std::lock_guard lock(progress_mu_);
        count_end = Clock::now();
        if (!c.ok()) return c;
        if (copy_over) {
          progress.set_objects_total(progress.objects_done());
          progress.set_bytes_total(progress.bytes_done());
        }
        progress.set_counted(true);
      }
      std::lock_guard io(etcd_mu_);
      Report(pool, Progress(progress), true);
      return c;
    });
    st = PullAll(pool, job, *map, false, &progress, nullptr);
    copy_over = true;
    copy_ended.set_value();
  }
  const auto copied = Clock::now();
  if (counted.valid()) {
    Status c = counted.get();
    if (st.ok()) st = c;
  }
  auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  ROS2_LOG_INFO("rebuild: pool {}: purge {} ms, count {} ms, copy {} ms ({} bytes)", pool, ms(purged - start),
                ms(count_end - purged), ms(copied - purged), progress.bytes_done());
  if (st.code() == Status::Code::kCancelled) return st;  // a newer job replaces this one
  if (st.ok())
    progress.set_done(true);
  else
    progress.set_error(st.ToString());
  progress.set_updated_ms(HybridClock::WallMillis());
  Report(pool, progress, true);
  return st;
}

}  // namespace ros2::engine
