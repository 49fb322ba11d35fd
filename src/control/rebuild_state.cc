#include "control/rebuild_state.h"

#include <fmt/format.h>

namespace ros2::control {

std::string RebuildJobKey(std::string_view pool_uuid) {
  return fmt::format("rebuild/{}", pool_uuid);
}

std::string RebuildProgressKey(std::string_view pool_uuid, std::string_view engine_uuid) {
  return fmt::format("rebuild-progress/{}/{}", pool_uuid, engine_uuid);
}

Result<std::optional<rpc::RebuildJob>> LoadRebuildJob(const StateStore& store, std::string_view pool_uuid) {
  auto raw = store.Get(RebuildJobKey(pool_uuid));
  if (!raw.ok()) {
    if (raw.status().IsNotFound()) return std::optional<rpc::RebuildJob>();
    return raw.status();
  }
  rpc::RebuildJob job;
  if (!job.ParseFromString(*raw)) {
    return Status::Corruption(fmt::format("rebuild record of pool {} does not parse", pool_uuid));
  }
  return std::optional<rpc::RebuildJob>(std::move(job));
}

Status SaveRebuildJob(StateStore* store, std::string_view pool_uuid, const rpc::RebuildJob& job, StoreBatch guard) {
  guard.Put(RebuildJobKey(pool_uuid), job.SerializeAsString());
  return store->Write(guard);
}

Result<std::map<std::string, rpc::RebuildProgress>> LoadRebuildProgress(const StateStore& store,
                                                                        std::string_view pool_uuid) {
  const std::string prefix = RebuildProgressKey(pool_uuid, "");
  ROS2_ASSIGN_OR_RETURN(auto rows, store.Scan(prefix));
  std::map<std::string, rpc::RebuildProgress> out;
  for (const auto& [key, value] : rows) {
    rpc::RebuildProgress p;
    if (!p.ParseFromString(value)) {
      return Status::Corruption(fmt::format("rebuild progress record {} does not parse", key));
    }
    out[key.substr(prefix.size())] = std::move(p);
  }
  return out;
}

Status SaveRebuildProgress(StateStore* store, std::string_view pool_uuid, std::string_view engine_uuid,
                           const rpc::RebuildProgress& progress) {
  return store->Put(RebuildProgressKey(pool_uuid, engine_uuid), progress.SerializeAsString());
}

rpc::RebuildStatus SummarizeRebuild(const std::optional<rpc::RebuildJob>& job,
                                    const std::map<std::string, rpc::RebuildProgress>& progress, uint64_t now_ms) {
  rpc::RebuildStatus s;
  if (!job) {
    s.set_state(std::string(kRebuildIdle));
    return s;
  }
  s.set_state(job->state());
  s.set_map_version(job->map_version());
  *s.mutable_targets() = job->targets();
  s.set_started_ms(job->started_ms());
  s.set_finished_ms(job->finished_ms());
  s.set_error(job->error());
  s.set_engines_total(static_cast<uint32_t>(job->engines_size()));
  bool all_counted = true;
  for (const std::string& engine : job->engines()) {
    auto it = progress.find(engine);
    if (it == progress.end() || it->second.map_version() != job->map_version()) {
      all_counted = false;
      continue;
    }
    const rpc::RebuildProgress& p = it->second;
    s.set_objects_done(s.objects_done() + p.objects_done());
    s.set_bytes_done(s.bytes_done() + p.bytes_done());
    s.set_objects_total(s.objects_total() + p.objects_total());
    s.set_bytes_total(s.bytes_total() + p.bytes_total());
    all_counted &= p.counted();
    if (p.done()) s.set_engines_done(s.engines_done() + 1);
  }
  if (!all_counted) {
    s.set_objects_total(0);
    s.set_bytes_total(0);
  }
  const uint64_t end = job->finished_ms() != 0 ? job->finished_ms() : now_ms;
  if (end > job->started_ms())
    s.set_bytes_per_second(double(s.bytes_done()) * 1000.0 / double(end - job->started_ms()));
  if (job->state() == kRebuildBusy && all_counted && s.bytes_per_second() > 0 && s.bytes_total() > s.bytes_done()) {
    s.set_eta_ms(uint64_t(double(s.bytes_total() - s.bytes_done()) * 1000.0 / s.bytes_per_second()));
  }
  return s;
}

Result<rpc::RebuildStatus> LoadRebuildStatus(const StateStore& store, std::string_view pool_uuid, uint64_t now_ms) {
  ROS2_ASSIGN_OR_RETURN(auto job, LoadRebuildJob(store, pool_uuid));
  std::map<std::string, rpc::RebuildProgress> progress;
  if (job) {
    ROS2_ASSIGN_OR_RETURN(progress, LoadRebuildProgress(store, pool_uuid));
  }
  return SummarizeRebuild(job, progress, now_ms);
}

Status RefuseWhileRebuilding(const StateStore& store, std::string_view pool_uuid, std::string_view what) {
  ROS2_ASSIGN_OR_RETURN(auto job, LoadRebuildJob(store, pool_uuid));
  if (job && job->state() == kRebuildBusy) {
    return Status::Busy(
        fmt::format("{} refused: a rebuild of pool {} runs (map version {}); wait for it "
                    "(ros2ctl pool rebuild wait)",
                    what, pool_uuid, job->map_version()));
  }
  return Status::Ok();
}

}  // namespace ros2::control
