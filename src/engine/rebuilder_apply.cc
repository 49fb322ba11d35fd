// Rebuilder (rebuilder.h): writing pulled records into this engine's shards,
// and reporting progress.
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>

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

void ReadBuffers::Free::operator()(std::byte* p) const {
  std::free(p);
}

std::shared_ptr<std::byte> ReadBuffers::Take(size_t size) {
  constexpr size_t kRound = size_t{1} << 20;
  size = (std::max<size_t>(size, 1) + kRound - 1) / kRound * kRound;
  std::unique_ptr<std::byte, Free> p;
  size_t capacity = size;
  {
    std::lock_guard lock(mu_);
    auto best = spare_.end();
    for (auto it = spare_.begin(); it != spare_.end(); ++it) {
      if (it->first >= size && (best == spare_.end() || it->first < best->first)) best = it;
    }
    if (best != spare_.end()) {
      capacity = best->first;
      p = std::move(best->second);
      spare_.erase(best);
    }
  }
  if (p == nullptr) p.reset(static_cast<std::byte*>(std::aligned_alloc(4096, size)));
  if (p == nullptr) return nullptr;
  return std::shared_ptr<std::byte>(p.release(), [self = shared_from_this(), capacity](std::byte* q) {
    std::lock_guard lock(self->mu_);
    if (self->spare_.size() < kKept) {
      self->spare_.emplace_back(capacity, std::unique_ptr<std::byte, Free>(q));
    } else {
      std::free(q);
    }
  });
}

struct Rebuilder::Fetched {
  std::shared_ptr<std::byte> buffer;
  // By record: its bytes in `buffer` and their checksums.
  std::map<int, std::pair<std::span<const std::byte>, rpc::RebuildReadChecksums>> records;
  // The reads in flight (one per source target) and the records each names.
  std::vector<std::pair<std::future<Result<rpc::RebuildReadBody>>, std::vector<int>>> reads;
};

Result<std::shared_ptr<Rebuilder::Fetched>> Rebuilder::StartReads(Target* target, const Uuid& pool,
                                                                  const Uuid& container, const ConvertedPoolMap& map,
                                                                  const std::vector<std::string>& addresses,
                                                                  const rpc::RebuildPullBodyOut& out,
                                                                  const std::vector<int>& records) {
  auto f = std::make_shared<Fetched>();
  std::map<uint32_t, std::vector<int>> by_source;  // source target (global) -> records
  uint64_t total = 0;
  for (const int i : records) {
    const rpc::RebuildRecord& r = out.records(i);
    if (!r.remote()) continue;
    if (r.source_target() >= map.map.targets.size() || r.source_target() >= addresses.size() ||
        addresses[r.source_target()].empty()) {
      return Status::Protocol(fmt::format("rebuild: a record read from target {}, which has no worker address in the map",
                                          r.source_target()));
    }
    by_source[r.source_target()].push_back(i);
    total += r.count() * r.record_size();
  }
  if (by_source.empty()) return f;
  f->buffer = buffers_->Take(total);
  if (f->buffer == nullptr) return Status::NoSpace(fmt::format("rebuild: no memory for a read of {} bytes", total));
  uint64_t at = 0;
  for (auto& [source, indexes] : by_source) {
    Target::RebuildRead read;
    read.address = addresses[source];
    read.request.set_pool_uuid(pool.ToString());
    read.request.set_container(container.ToString());
    read.request.set_target(map.map.targets[source].engine_index);
    const uint64_t start = at;
    for (const int i : indexes) {
      const rpc::RebuildRecord& r = out.records(i);
      rpc::RebuildReadExtent* e = read.request.add_extents();
      e->set_oid(r.oid());
      e->set_dkey(r.dkey());
      e->set_akey(r.akey());
      e->set_index(r.index());
      e->set_count(r.count());
      e->set_record_size(r.record_size());
      e->set_single(!r.array());
      const uint64_t n = r.count() * r.record_size();
      f->records[i].first = std::span<const std::byte>(f->buffer.get() + at, n);
      at += n;
    }
    read.dst = std::span(f->buffer.get() + start, at - start);
    auto promise = std::make_shared<std::promise<Result<rpc::RebuildReadBody>>>();
    f->reads.emplace_back(promise->get_future(), std::move(indexes));
    // The buffer stays alive until the transport is done with it.
    read.done = [promise, keep = f->buffer](Result<rpc::RebuildReadBody> r) { promise->set_value(std::move(r)); };
    target->ReadForRebuild(std::move(read));
  }
  return f;
}

Status Rebuilder::FinishReads(Target* target, Fetched* f) {
  const auto deadline = std::chrono::steady_clock::now() + kApplyWait;
  for (auto& [future, indexes] : f->reads) {
    if (future.wait_until(deadline) != std::future_status::ready) {
      return Status::TimedOut(fmt::format("rebuild: target {} did not read from the source", target->index()));
    }
    // Only a reply that opened under the read key (its nonce, checksums and
    // bytes authenticated) gets here; anything else fails the batch before a
    // byte of it is stored.
    ROS2_ASSIGN_OR_RETURN(rpc::RebuildReadBody body, future.get());
    for (size_t k = 0; k < indexes.size(); ++k) {
      auto& [data, csum] = f->records[indexes[k]];
      csum = std::move(*body.mutable_extents(static_cast<int>(k)));
      if (csum.size() > data.size()) return Status::Protocol("rebuild read: a value larger than its buffer");
      data = data.first(csum.size());
    }
  }
  f->reads.clear();
  return Status::Ok();
}

Result<std::shared_ptr<Rebuilder::Prepared>> Rebuilder::Prepare(const Uuid& pool, const ConvertedPoolMap& map,
                                                                 const std::vector<std::string>& addresses,
                                                                 rpc::RebuildPullBodyOut out, bool count_only) {
  auto p = std::make_shared<Prepared>();
  p->out = std::make_shared<const rpc::RebuildPullBodyOut>(std::move(out));
  if (count_only) return p;
  const rpc::RebuildPullBodyOut& o = *p->out;
  std::map<std::pair<uint32_t, std::string>, std::vector<int>> groups;  // (target index, container) -> records
  for (int i = 0; i < o.records_size(); ++i) {
    const rpc::RebuildRecord& r = o.records(i);
    if (r.fallback_target() >= map.map.targets.size()) {
      return Status::Protocol(fmt::format("rebuild: a record for target {} beyond the map", r.fallback_target()));
    }
    if (r.oid().size() != 16 || r.dkey().empty() || r.akey().empty() || (r.array() && r.record_size() == 0) ||
        (r.array() && r.epoch() == 0) || (r.remote() && (r.count() == 0 || r.record_size() == 0))) {
      return Status::Protocol(fmt::format("rebuild: a malformed record for container {}", r.container()));
    }
    groups[{map.map.targets[r.fallback_target()].engine_index, r.container()}].push_back(i);
  }
  for (auto& [key, records] : groups) {
    if (key.first >= o_.targets.size()) return Status::Protocol("rebuild: a record for a target this engine lacks");
    ROS2_ASSIGN_OR_RETURN(Uuid container, Uuid::Parse(key.second));
    Prepared::Group g{o_.targets[key.first], container, std::move(records), nullptr};
    ROS2_ASSIGN_OR_RETURN(g.fetched, StartReads(g.target, pool, container, map, addresses, o, g.records));
    p->groups.push_back(std::move(g));
  }
  for (auto& g : p->groups) ROS2_RETURN_IF_ERROR(FinishReads(g.target, g.fetched.get()));
  return p;
}

Status Rebuilder::Store(const Uuid& pool, const Prepared& prepared) {
  const std::shared_ptr<const rpc::RebuildPullBodyOut>& out = prepared.out;
  for (const Prepared::Group& g : prepared.groups) {
    const auto deadline = std::chrono::steady_clock::now() + kApplyWait;
    while (true) {
      auto w = std::make_shared<Writes>();
      std::future<Status> done = w->done.get_future();
      g.target->WithShard(pool, g.container, true,
                          [w, out, records = g.records, fetched = g.fetched](Result<vos::Vos*> v) {
        if (!v.ok() || *v == nullptr) {
          w->status = v.ok() ? Status::Busy("opening") : v.status();
          w->Finish();
          return;
        }
        for (const int i : records) {
          ++w->pending;
          vos::UpdateOp op = UpdateFor(out->records(i));
          if (auto it = fetched->records.find(i); it != fetched->records.end()) {
            op.data = it->second.first;
            op.csum.type = static_cast<ChecksumType>(it->second.second.csum_type());
            op.csum.chunk_size = it->second.second.csum_chunk();
            op.csum.values.assign(it->second.second.csums().begin(), it->second.second.csums().end());
          }
          (*v)->SubmitUpdate(op, [w, out, fetched](Status st) {
            if (!st.ok() && w->status.ok()) w->status = st.WithContext("rebuild: storing a pulled record");
            w->Finish();
          });
        }
        w->Finish();
      });
      if (done.wait_until(deadline) != std::future_status::ready) {
        return Status::TimedOut(fmt::format("rebuild: target {} did not store the pulled records", g.target->index()));
      }
      Status st = done.get();
      if (st.code() != Status::Code::kBusy || st.message() != "opening") {
        ROS2_RETURN_IF_ERROR(st);
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return Status::TimedOut(fmt::format("rebuild: the shard of container {} on target {} did not open",
                                            g.container.ToString(), g.target->index()));
      }
      if (!Pause(std::chrono::milliseconds(20))) return Status::Cancelled("rebuild: the engine is stopping");
    }
  }
  return Status::Ok();
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
