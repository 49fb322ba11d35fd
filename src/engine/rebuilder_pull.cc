// Rebuilder (rebuilder.h): the pulls of one pass, from every source at once,
// each stream's next batch pulled and its data read while the last one is
// stored, and the pauses that leave client I/O its share.
#include <atomic>
#include <future>

#include <fmt/format.h>

#include "common/log.h"
#include "engine/rebuilder.h"

namespace ros2::engine {
namespace {

constexpr auto kPullTimeout = std::chrono::seconds(30);
// The data an answer names (a dkey is never split). Each stream holds at most
// two answers with their data (one being stored, the next being pulled and
// read), so a pass holds about 2 x kWorkers x this (48 MiB) in reused buffers,
// and one answer ahead (records without data, but for a pull from the engine
// itself).
constexpr uint64_t kBatchBytes = 4 << 20;
constexpr uint64_t kCountBytes = 32 << 20;
// A copy pulls from each source in this many parts side by side (each its
// own cursor); at most kWorkers parts of a pass are in flight.
constexpr uint32_t kParts = 3;
constexpr size_t kWorkers = 6;
// Once a stream saw client requests, every stream of the pass works one batch
// at a time and pauses for this long after the last sighting.
constexpr auto kClientHold = std::chrono::seconds(1);

}  // namespace

// What the source threads of one pass share.
struct Rebuilder::PullPass {
  std::string pool;
  Uuid pool_id;
  const rpc::RebuildJob* job = nullptr;
  ConvertedPoolMap map;
  bool count_only = false;
  rpc::RebuildProgress* progress = nullptr;  // GUARDED_BY(progress_mu_)
  std::map<std::string, std::string> endpoints;
  std::vector<std::string> addresses;       // worker address by global target index (the data plane's)
  const std::atomic<bool>* stop = nullptr;  // set: the streams end after their current answer
  std::atomic<bool> failed{false};          // a source failed: the others stop
  std::atomic<int> first_failed{-1};        // the index of the source that failed first
  // Held by a source thread for a batch and its pause while clients are
  // active, so then the engine does one batch at a time, as the share needs.
  std::mutex throttle;
  // When a stream last saw client requests (steady clock, ns; 0: never).
  std::atomic<int64_t> clients_seen_ns{0};
};

Status Rebuilder::PullAll(const std::string& pool, const rpc::RebuildJob& job, const rpc::PoolMap& map, bool count_only,
                          rpc::RebuildProgress* progress, const std::atomic<bool>* stop) {
  PullPass pass;
  ROS2_ASSIGN_OR_RETURN(pass.map, PoolMapFromProto(map));
  ROS2_ASSIGN_OR_RETURN(pass.pool_id, Uuid::Parse(pool));
  pass.pool = pool;
  pass.job = &job;
  pass.count_only = count_only;
  pass.progress = progress;
  pass.stop = stop;
  for (const auto& t : map.targets()) pass.addresses.push_back(t.worker_address());
  const std::string self = o_.engine.ToString();
  const size_t local_targets = LocalTargets(pass.map, self).size();
  if (local_targets == 0) return Status::Ok();  // no fallback here
  ROS2_ASSIGN_OR_RETURN(auto members, o_.plane->store().Scan("members/"));
  for (const auto& [key, value] : members) {
    rpc::EngineInfo info;
    if (info.ParseFromString(value)) pass.endpoints[key.substr(8)] = info.address();
  }
  rpc::RebuildPullBody body;
  body.set_pool_uuid(pool);
  body.set_map_version(map.version());
  body.set_requester_engine(self);
  *body.mutable_map() = map;
  // A count's answers carry no data: each counts up to kCountBytes.
  body.set_max_bytes(count_only ? kCountBytes : kBatchBytes);
  body.set_count_only(count_only);
  // Array extents come over the data plane (Target::ReadForRebuild); a pull
  // from this engine itself reads them in the scan.
  body.set_data_plane(true);
  // The streams: a count walks each source whole; a copy walks each source
  // in kParts parts, kWorkers streams at a time.
  const uint32_t parts = count_only ? 1 : kParts;
  std::vector<std::pair<std::string, uint32_t>> streams;  // (source, part)
  for (const std::string& source : LiveEngines(map)) {
    // A dkey's source copy and its fallback are distinct targets of its
    // group, so this engine is its own source only with two targets or more;
    // with one, its own streams would walk every dkey of it on the target
    // thread for nothing, just when the remote scans start.
    if (source == self && local_targets < 2) continue;
    if (source != self && !pass.endpoints.contains(source)) {
      return Status::Disconnected(fmt::format("rebuild: source engine {} is not a member", source));
    }
    for (uint32_t p = 0; p < parts; ++p) streams.emplace_back(source, p);
  }
  std::vector<Status> results(streams.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < streams.size() && !pass.failed; i = next++) {
      rpc::RebuildPullBody b = body;
      b.set_stride(parts);
      b.set_part(streams[i].second);
      results[i] = PullSource(&pass, streams[i].first, std::move(b));
      if (results[i].ok()) continue;
      int none = -1;
      pass.first_failed.compare_exchange_strong(none, static_cast<int>(i));
      pass.failed = true;
    }
  };
  std::vector<std::future<void>> workers;
  for (size_t w = 0; w < std::min(kWorkers, streams.size()); ++w) {
    workers.push_back(std::async(std::launch::async, worker));
  }
  for (auto& w : workers) w.get();
  // The first failure, not the other streams' stops because of it.
  return pass.first_failed < 0 ? Status::Ok() : results[static_cast<size_t>(pass.first_failed.load())];
}

bool Rebuilder::ClientsActive(uint64_t source_count, ClientsSeen* seen) {
  const uint64_t local = ClientRequests(o_.targets);
  const bool active = local != seen->local || (seen->source && *seen->source != source_count);
  seen->local = local;
  seen->source = source_count;
  return active;
}

Status Rebuilder::PullSource(PullPass* pass, const std::string& source, rpc::RebuildPullBody body) {
  using Clock = std::chrono::steady_clock;
  const std::string endpoint = pass->endpoints[source];
  // A copy asks for the answer after this one as soon as this one (and so
  // its cursor) arrives, while this one's data is read: the source's scan
  // of the next batch overlaps the read of this one instead of following
  // it. Not while clients are active (then one batch at a time), nor in a
  // count. At most one answer ahead (on the data plane it names the
  // records without their data).
  std::atomic<bool> scan_ahead{!pass->count_only};
  std::future<Result<rpc::RebuildPullBodyOut>> ahead;
  // An answer and, for a copy, its data read over the data plane: the next
  // one is prepared while this one is stored. Runs for one batch at a time.
  auto pull = [this, pass, source, endpoint, &scan_ahead,
               &ahead](const rpc::RebuildPullBody& b) -> Result<std::shared_ptr<Prepared>> {
    ROS2_ASSIGN_OR_RETURN(rpc::RebuildPullBodyOut out, ahead.valid() ? ahead.get() : PullFrom(source, endpoint, b));
    if (scan_ahead && !out.cursor().done()) {
      rpc::RebuildPullBody after = b;
      *after.mutable_cursor() = out.cursor();
      ahead = std::async(std::launch::async, [this, source, endpoint, after = std::move(after)] {
        return PullFrom(source, endpoint, after);
      });
    }
    return Prepare(pass->pool_id, pass->map, pass->addresses, std::move(out), pass->count_only);
  };
  const uint32_t share = o_.config.client_share_percent;
  ClientsSeen seen{ClientRequests(o_.targets), std::nullopt};
  bool throttled = false;  // clients were active during the last batch
  std::future<Result<std::shared_ptr<Prepared>>> next;
  auto start = Clock::now();
  std::unique_lock throttle(pass->throttle, std::defer_lock);
  // Where the time went (logged at the end): waiting for answers, writing
  // them, pausing for clients.
  Clock::duration waited{}, applied{}, paused{};
  int batches = 0, throttled_batches = 0;
  uint64_t moved = 0, inline_bytes = 0;  // all bytes, and those inside the answers
  auto log = [&] {
    if (moved == 0) return;
    auto ms = [](Clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
    ROS2_LOG_INFO(
        "rebuild: pool {}: {} from {} (part {}/{}): {} bytes ({} in the answers, the rest over the data plane) in {} "
        "batches ({} throttled), waited {} ms, wrote {} ms, paused {} ms",
        pass->pool, pass->count_only ? "count" : "copy", source, body.part(), std::max<uint32_t>(body.stride(), 1),
        moved, inline_bytes, batches, throttled_batches, ms(waited), ms(applied), ms(paused));
  };
  Result<std::shared_ptr<Prepared>> prepared = pull(body);
  waited += Clock::now() - start;
  while (true) {
    if (!prepared.ok()) return prepared.status();
    ++batches;
    if (pass->failed) return Status::Cancelled("rebuild: another source failed");
    const rpc::RebuildPullBodyOut& out = *(*prepared)->out;
    const bool more = !out.cursor().done() && (pass->stop == nullptr || !*pass->stop);
    *body.mutable_cursor() = out.cursor();
    // Unthrottled, the next batch is pulled and its data read while this one
    // is stored.
    if (more && !throttled) next = std::async(std::launch::async, pull, body);
    const uint64_t objects = out.objects(), bytes = out.bytes(), clients = out.client_requests();
    moved += bytes;
    for (const auto& r : out.records()) inline_bytes += r.data().size();
    const auto apply_start = Clock::now();
    if (!pass->count_only) ROS2_RETURN_IF_ERROR(Store(pass->pool_id, **prepared));
    applied += Clock::now() - apply_start;
    {
      std::lock_guard lock(progress_mu_);
      rpc::RebuildProgress* p = pass->progress;
      if (pass->count_only) {
        p->set_objects_total(p->objects_total() + objects);
        p->set_bytes_total(p->bytes_total() + bytes);
      } else {
        p->set_objects_done(p->objects_done() + objects);
        p->set_bytes_done(p->bytes_done() + bytes);
      }
    }
    // The report and the job check (etcd, each at most every so often) by
    // one stream at a time and outside progress_mu_: a slow etcd call holds
    // up the stream making it, while the others go on and skip their turn.
    if (std::unique_lock io(etcd_mu_, std::try_to_lock); io.owns_lock()) {
      if (!pass->count_only) Report(pass->pool, Progress(*pass->progress), false);
      ROS2_RETURN_IF_ERROR(StillCurrent(pass->pool, *pass->job));
    }
    if (!pass->count_only) {
      // While clients use this engine or the source, the batch's time t is
      // followed by a pause of t x share / (100 - share), one batch at a
      // time across the sources; otherwise no pause.
      const int64_t now = Clock::now().time_since_epoch().count();
      if (ClientsActive(clients, &seen)) pass->clients_seen_ns = now;
      const int64_t seen_ns = pass->clients_seen_ns;
      throttled = share > 0 && seen_ns != 0 && Clock::duration(now - seen_ns) < kClientHold;
      scan_ahead = !throttled;
      if (throttled) {
        ++throttled_batches;
        const auto took = Clock::now() - start;
        paused += took * share / (100 - share);
        if (!Pause(std::chrono::duration_cast<std::chrono::milliseconds>(took * share / (100 - share)))) {
          return Status::Cancelled("rebuild: the engine is stopping");
        }
      }
      if (throttle.owns_lock()) throttle.unlock();
    }
    if (!more) {
      log();
      return Status::Ok();
    }
    if (throttled && !pass->count_only) throttle.lock();
    start = Clock::now();
    prepared = next.valid() ? next.get() : pull(body);
    waited += Clock::now() - start;
  }
}

rpc::RebuildProgress Rebuilder::Progress(const rpc::RebuildProgress& progress) {
  std::lock_guard lock(progress_mu_);
  return progress;
}

Result<rpc::RebuildPullBodyOut> Rebuilder::PullFrom(const std::string& source, const std::string& endpoint,
                                                    const rpc::RebuildPullBody& body) {
  if (source != o_.engine.ToString()) return o_.peers->Pull(endpoint, body, kPullTimeout);
  RebuildScan scan;
  ROS2_ASSIGN_OR_RETURN(scan.pool, Uuid::Parse(body.pool_uuid()));
  ROS2_ASSIGN_OR_RETURN(scan.map, PoolMapFromProto(body.map()));
  for (const auto& [index, global] : LocalTargets(scan.map, source)) scan.requester_targets.insert(global);
  scan.cursor = body.cursor();
  scan.max_bytes = std::max<uint64_t>(body.max_bytes(), 1);
  scan.count_only = body.count_only();
  scan.stride = std::max<uint32_t>(body.stride(), 1);
  scan.part = body.part();
  return o_.source->Scan(scan);
}

}  // namespace ros2::engine
