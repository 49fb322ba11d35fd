// Rebuild state in the management store (docs/replication.md, "Rebuild
// state"): what `pool query` shows and what the engines coordinate through.
//
//   rebuild/<pool uuid>                    rpc::RebuildJob, written by the leader
//   rebuild-progress/<pool uuid>/<engine>  rpc::RebuildProgress, written by
//                                          each engine pulling for the job
//
// A job names the map version it rebuilds for and the pool's DOWN targets;
// every engine with a live target in the pool pulls what its fallback targets
// stand in for and reports its progress under the job's version; the leader
// marks the job done (and the targets DOWNOUT) once every engine of the job
// reported done for that version. Functions of the store only; thread-safe as
// the store is.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "control/state_store.h"
#include "ros2/rebuild.pb.h"

namespace ros2::control {

inline constexpr std::string_view kRebuildIdle = "idle";
inline constexpr std::string_view kRebuildBusy = "busy";
inline constexpr std::string_view kRebuildDone = "done";
inline constexpr std::string_view kRebuildFailed = "failed";

std::string RebuildJobKey(std::string_view pool_uuid);
std::string RebuildProgressKey(std::string_view pool_uuid, std::string_view engine_uuid);

// nullopt when the pool never rebuilt.
Result<std::optional<rpc::RebuildJob>> LoadRebuildJob(const StateStore& store, std::string_view pool_uuid);
// Writes the job with `guard` (the leader key's compare) in one batch.
Status SaveRebuildJob(StateStore* store, std::string_view pool_uuid, const rpc::RebuildJob& job, StoreBatch guard);
// Every engine's progress record for the pool, by engine uuid.
Result<std::map<std::string, rpc::RebuildProgress>> LoadRebuildProgress(const StateStore& store,
                                                                        std::string_view pool_uuid);
Status SaveRebuildProgress(StateStore* store, std::string_view pool_uuid, std::string_view engine_uuid,
                           const rpc::RebuildProgress& progress);

// The job and the progress of its version summed: objects, bytes, rate, ETA.
rpc::RebuildStatus SummarizeRebuild(const std::optional<rpc::RebuildJob>& job,
                                    const std::map<std::string, rpc::RebuildProgress>& progress, uint64_t now_ms);
Result<rpc::RebuildStatus> LoadRebuildStatus(const StateStore& store, std::string_view pool_uuid, uint64_t now_ms);

// Busy naming the pool and the job when a rebuild of the pool runs: `what`
// (an exclude, drain, reintegrate) must wait for it.
Status RefuseWhileRebuilding(const StateStore& store, std::string_view pool_uuid, std::string_view what);

}  // namespace ros2::control
