// Rebuilder (rebuilder.h): writing pulled records into this engine's shards,
// and reporting progress.
#include <cstring>
#include <future>

#include <fmt/format.h>

#include "common/hlc.h"
#include "control/rebuild_state.h"
#include "engine/rebuilder.h"

namespace ros2::engine {
namespace {

constexpr auto kApplyWait = std::chrono::seconds(60);
constexpr auto kReportEvery = std::chrono::milliseconds(500);
constexpr auto kCheckEvery = std::chrono::milliseconds(1000);
// A single value is stored at this epoch, below every write the fallback
// received itself (those carry a client's clock), so a newer value or punch
// wins over the copy whatever the order they arrive in.
constexpr Epoch kSingleCopyEpoch = 1;

struct Writes {
  std::promise<Status> done;
  int pending = 1;
  Status status;
  void Finish() {
    if (--pending == 0) done.set_value(status);
  }
};

vos::UpdateOp UpdateFor(const rpc::RebuildRecord& r) {
  vos::UpdateOp op;
  std::memcpy(&op.oid.hi, r.oid().data(), 8);
  std::memcpy(&op.oid.lo, r.oid().data() + 8, 8);
  op.dkey = r.dkey();
  op.akey = r.akey();
  op.epoch = r.array() ? r.epoch() : kSingleCopyEpoch;
  op.type = r.array() ? ValueType::kArray : ValueType::kSingle;
  op.index = r.index();
  op.record_size = r.array() ? r.record_size() : 1;
  op.data = std::span(reinterpret_cast<const std::byte*>(r.data().data()), r.data().size());
  op.csum.type = static_cast<ChecksumType>(r.csum_type());
  op.csum.chunk_size = r.csum_chunk();
  op.csum.values.assign(r.csums().begin(), r.csums().end());
  return op;
}

}  // namespace

Status Rebuilder::ApplyGroup(Target* target, const Uuid& pool, const Uuid& container,
                             std::shared_ptr<const rpc::RebuildPullBodyOut> out, std::vector<int> records) {
  for (const int i : records) {
    const rpc::RebuildRecord& r = out->records(i);
    if (r.oid().size() != 16 || r.dkey().empty() || r.akey().empty() || (r.array() && r.record_size() == 0) ||
        (r.array() && r.epoch() == 0)) {
      return Status::Protocol(fmt::format("rebuild: a malformed record for container {}", container.ToString()));
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + kApplyWait;
  while (true) {
    auto w = std::make_shared<Writes>();
    std::future<Status> done = w->done.get_future();
    target->WithShard(pool, container, true, [w, out, records](Result<vos::Vos*> v) {
      if (!v.ok() || *v == nullptr) {
        w->status = v.ok() ? Status::Busy("opening") : v.status();
        w->Finish();
        return;
      }
      for (const int i : records) {
        ++w->pending;
        (*v)->SubmitUpdate(UpdateFor(out->records(i)), [w, out](Status st) {
          if (!st.ok() && w->status.ok()) w->status = st.WithContext("rebuild: storing a pulled record");
          w->Finish();
        });
      }
      w->Finish();
    });
    if (done.wait_until(deadline) != std::future_status::ready) {
      return Status::TimedOut(fmt::format("rebuild: target {} did not store the pulled records", target->index()));
    }
    Status st = done.get();
    if (st.code() != Status::Code::kBusy || st.message() != "opening") return st;
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::TimedOut(fmt::format("rebuild: the shard of container {} on target {} did not open",
                                          container.ToString(), target->index()));
    }
    if (!Pause(std::chrono::milliseconds(20))) return Status::Cancelled("rebuild: the engine is stopping");
  }
}

Status Rebuilder::StillCurrent(const std::string& pool, const rpc::RebuildJob& job) {
  const auto now = std::chrono::steady_clock::now();
  if (now - checked_ < kCheckEvery) return Status::Ok();
  checked_ = now;
  auto current = control::LoadRebuildJob(o_.plane->store(), pool);
  if (!current.ok()) return Status::Ok();  // the store is away: go on, the next check decides
  if (!*current || (*current)->state() != control::kRebuildBusy || (*current)->map_version() != job.map_version()) {
    return Status::Cancelled(
        fmt::format("rebuild: pool {}: the job for map version {} was replaced", pool, job.map_version()));
  }
  return Status::Ok();
}

void Rebuilder::Report(const std::string& pool, const rpc::RebuildProgress& progress, bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - reported_ < kReportEvery) return;
  reported_ = now;
  rpc::RebuildProgress p = progress;
  p.set_updated_ms(HybridClock::WallMillis());
  (void)control::SaveRebuildProgress(&o_.plane->store(), pool, o_.engine.ToString(), p);
}

}  // namespace ros2::engine
