#include "engine/rebuild_source.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <future>
#include <memory>

#include <fmt/format.h>

#include "placement/placement.h"
#include "vos/keys.h"

namespace ros2::engine {
namespace {

constexpr auto kTargetWait = std::chrono::seconds(20);
constexpr size_t kBatchDkeys = 64;     // dkeys copied per batch
constexpr size_t kBatchVisits = 1024;  // objects and dkeys looked at per batch
constexpr size_t kSingleGuess = 4096;  // first buffer of a single value (larger ones are read again)
constexpr size_t kDkeysAhead = 32;     // dkeys listed per enumeration of an object

std::string OidBytes(const ObjectId& oid) {
  std::string out(16, '\0');
  std::memcpy(out.data(), &oid.hi, 8);
  std::memcpy(out.data() + 8, &oid.lo, 8);
  return out;
}

ObjectId OidFrom(const std::string& bytes) {
  ObjectId oid;
  if (bytes.size() == 16) {
    std::memcpy(&oid.hi, bytes.data(), 8);
    std::memcpy(&oid.lo, bytes.data() + 8, 8);
  }
  return oid;
}

// The requester's fallbacks among `places` when `self` is the first readable
// copy (the one source of the dkey); empty otherwise.
std::vector<uint32_t> FallbacksFor(std::span<const ReplicaPlace> places, uint32_t self,
                                   const std::set<uint32_t>& requester) {
  std::vector<uint32_t> out;
  auto source =
      std::find_if(places.begin(), places.end(), [](const ReplicaPlace& p) { return !p.down && !p.fallback; });
  if (source == places.end() || source->target != self) return out;
  for (const auto& p : places) {
    if (p.fallback && requester.contains(p.target)) out.push_back(p.target);
  }
  return out;
}

bool ObjectConcerns(const ObjectLayout& layout, uint32_t self, const std::set<uint32_t>& requester) {
  for (uint32_t g = 0; g < layout.groups; ++g) {
    if (!FallbacksFor(GroupCopies(layout, g), self, requester).empty()) return true;
  }
  return false;
}

// What one batch gathers on the target thread; read by the waiting thread
// once `done` is set (every callback has run).
struct Batch {
  std::promise<Status> done;
  int pending = 1;  // the enumeration itself, then one per fetch in flight
  Status status;
  std::deque<rpc::RebuildRecord> records;
  std::deque<std::vector<std::byte>> buffers;
  std::deque<std::vector<uint32_t>> targets;  // the fallbacks each record goes to
  std::vector<uint64_t> sizes;
  std::vector<size_t> refetch;  // singles larger than their first buffer
  uint64_t bytes = 0;
  uint64_t objects = 0;
  bool count_only = false;
  bool data_plane = false;     // array extents as remote records (RebuildScan::data_plane)
  uint32_t source_target = 0;  // the global index of the target scanned

  void Fail(const Status& why) {
    if (status.ok()) status = why;
  }
  void Finish() {
    if (--pending == 0) done.set_value(status);
  }
};

void SubmitRead(vos::Vos* v, const std::shared_ptr<Batch>& b, size_t i) {
  const rpc::RebuildRecord& rec = b->records[i];
  vos::FetchOp op;
  op.oid = OidFrom(rec.oid());
  op.dkey = rec.dkey();
  op.akey = rec.akey();
  op.type = rec.array() ? ValueType::kArray : ValueType::kSingle;
  op.index = rec.index();
  op.record_size = rec.array() ? rec.record_size() : 1;
  op.count = rec.array() ? b->buffers[i].size() / rec.record_size() : 0;
  op.buffer = std::span(b->buffers[i]);
  ++b->pending;
  v->SubmitFetch(op, [b, i](Result<vos::FetchResult> r) {
    if (!r.ok()) {
      b->Fail(r.status().WithContext("rebuild: reading " + OidFrom(b->records[i].oid()).ToString()));
    } else {
      rpc::RebuildRecord& rec = b->records[i];
      b->sizes[i] = r->size;
      if (!rec.array() && r->size > b->buffers[i].size()) {
        if (b->count_only) {
          b->bytes += r->size;
        } else if (b->data_plane) {
          // The puller reads the value itself over the data plane.
          b->bytes += r->size;
          rec.set_remote(true);
          rec.set_count(r->size);
          rec.set_record_size(1);
          rec.set_source_target(b->source_target);
        } else {
          b->refetch.push_back(i);
        }
      } else {
        if (!rec.array()) b->bytes += r->size;
        rec.set_csum_type(static_cast<uint32_t>(r->csum.type));
        rec.set_csum_chunk(r->csum.chunk_size);
        rec.clear_csums();
        for (uint64_t c : r->csum.values) rec.add_csums(c);
      }
    }
    b->Finish();
  });
}

void AddRecord(vos::Vos* v, const std::shared_ptr<Batch>& b, rpc::RebuildRecord rec, uint64_t buffer_bytes,
               const std::vector<uint32_t>& fallbacks) {
  const size_t i = b->records.size();
  b->records.push_back(std::move(rec));
  b->buffers.emplace_back(buffer_bytes);
  b->targets.push_back(fallbacks);
  b->sizes.push_back(0);
  SubmitRead(v, b, i);
}

// Every visible version of one akey: its array extents, or its single value.
Status CollectAkey(vos::Vos* v, const std::shared_ptr<Batch>& b, const ObjectId& oid, const std::string& dkey,
                   const std::string& akey, const std::vector<uint32_t>& fallbacks) {
  std::vector<vos::ExtentInfo> extents;
  ListAnchor anchor;
  while (!anchor.eof) {
    auto more = v->ListExtents(oid, dkey, akey, kEpochMax, &anchor, 1024);
    if (!more.ok()) {
      extents.clear();  // a single-value akey
      break;
    }
    extents.insert(extents.end(), more->begin(), more->end());
  }
  rpc::RebuildRecord base;
  base.set_oid(OidBytes(oid));
  base.set_dkey(dkey);
  base.set_akey(akey);
  if (extents.empty()) {
    // Over the data plane a single's first read only learns its size.
    AddRecord(v, b, base, b->count_only || b->data_plane ? 0 : kSingleGuess, fallbacks);
    return Status::Ok();
  }
  for (const auto& e : extents) {
    const uint64_t bytes = e.count * e.record_size;
    b->bytes += bytes;
    if (b->count_only) continue;
    rpc::RebuildRecord rec = base;
    rec.set_array(true);
    rec.set_index(e.index);
    rec.set_record_size(e.record_size);
    rec.set_epoch(e.epoch);
    if (b->data_plane) {
      // The puller reads the extent itself over the data plane.
      rec.set_remote(true);
      rec.set_count(e.count);
      rec.set_source_target(b->source_target);
      b->records.push_back(std::move(rec));
      b->buffers.emplace_back();
      b->targets.push_back(fallbacks);
      b->sizes.push_back(0);
      continue;
    }
    AddRecord(v, b, std::move(rec), bytes, fallbacks);
  }
  return Status::Ok();
}

Status CollectDkey(vos::Vos* v, const std::shared_ptr<Batch>& b, const ObjectId& oid, const std::string& dkey,
                   const std::vector<uint32_t>& fallbacks) {
  ListAnchor anchor;
  while (!anchor.eof) {
    ROS2_ASSIGN_OR_RETURN(auto akeys, v->ListAkeys(oid, dkey, kEpochMax, &anchor, 256));
    for (const auto& akey : akeys) ROS2_RETURN_IF_ERROR(CollectAkey(v, b, oid, dkey, akey, fallbacks));
  }
  return Status::Ok();
}

// Which part of a strided scan a dkey or an object (`hash`) belongs to.
uint32_t PartOf(uint64_t hash, const RebuildScan* scan) {
  if (scan->stride <= 1) return scan->part;
  hash ^= hash >> 33;
  hash *= 0xff51afd7ed558ccdULL;
  hash ^= hash >> 33;
  return static_cast<uint32_t>(hash % scan->stride);
}

struct BatchScope {
  const RebuildScan* scan;
  uint32_t self;  // the global index of the target scanned
  std::set<uint32_t> requester;
};

// The enumeration of one batch (on the target thread): advances `cursor`.
void RunBatch(vos::Vos* v, const BatchScope& s, const std::shared_ptr<Batch>& b, rpc::RebuildCursor* cursor,
              bool* container_done) {
  ListAnchor objects{cursor->object_anchor(), false};
  ListAnchor dkeys{cursor->dkey_anchor(), false};
  bool have_oid = !cursor->oid().empty();
  ObjectId oid = OidFrom(cursor->oid());
  bool matched = cursor->object_matched();
  size_t visits = 0, copied = 0;
  const PoolMap& map = s.scan->map.map;
  // The object's dkeys are listed kDkeysAhead at a time (one enumeration, not
  // one per dkey); `resume` is the anchor just after the last one looked at,
  // where the cursor resumes when the batch ends before `ahead` is used up.
  std::deque<std::string> ahead;
  std::string resume = dkeys.position;
  while (visits++ < kBatchVisits && copied < kBatchDkeys && (b->count_only || b->bytes < s.scan->max_bytes)) {
    if (!have_oid) {
      auto listed = v->ListObjects(kEpochMax, &objects, 1);
      if (!listed.ok()) return b->Fail(listed.status());
      if (listed->empty()) {
        *container_done = true;
        break;
      }
      oid = listed->front();
      auto layout = ComputeLayout(map, oid);
      if (!layout.ok() || !layout->replicated() || !ObjectConcerns(*layout, s.self, s.requester)) continue;
      have_oid = true;
      matched = false;
      dkeys = ListAnchor{};
      ahead.clear();
      resume.clear();
    }
    if (ahead.empty()) {
      auto listed = v->ListDkeys(oid, kEpochMax, &dkeys, kDkeysAhead);
      if (!listed.ok()) return b->Fail(listed.status());
      if (listed->empty()) {
        b->objects += matched && PartOf(oid.lo ^ oid.hi, s.scan) == s.scan->part ? 1 : 0;
        have_oid = matched = false;
        continue;
      }
      ahead.assign(std::make_move_iterator(listed->begin()), std::make_move_iterator(listed->end()));
    }
    const std::string dkey = std::move(ahead.front());
    ahead.pop_front();
    resume = vos::keys::TreeKey(vos::keys::DkeyScope(oid, dkey));  // as ListDkeys leaves its anchor
    // A dkey of another part is placed only while it can still decide whether
    // this part counts the object (the object is this part's, and none of its
    // dkeys matched yet): the other parts walk the same dkeys.
    const bool mine = PartOf(std::hash<std::string>{}(dkey) ^ oid.lo ^ oid.hi, s.scan) == s.scan->part;
    if (!mine && (matched || PartOf(oid.lo ^ oid.hi, s.scan) != s.scan->part)) continue;
    auto places = ReplicasForDkey(map, oid, dkey);
    if (!places.ok()) continue;
    auto fallbacks = FallbacksFor(*places, s.self, s.requester);
    if (fallbacks.empty()) continue;
    matched = true;
    if (!mine) continue;
    ++copied;
    Status st = CollectDkey(v, b, oid, dkey, fallbacks);
    if (!st.ok()) return b->Fail(st);
  }
  cursor->set_object_anchor(objects.position);
  cursor->set_oid(have_oid ? OidBytes(oid) : std::string());
  cursor->set_dkey_anchor(have_oid ? (ahead.empty() ? dkeys.position : resume) : std::string());
  cursor->set_object_matched(have_oid && matched);
}

Status Await(std::future<Status>& f, std::string_view what) {
  if (f.wait_for(kTargetWait) != std::future_status::ready) {
    return Status::TimedOut(fmt::format("rebuild: {}: the target thread did not answer", what));
  }
  return f.get();
}

}  // namespace

std::vector<std::pair<uint32_t, uint32_t>> LocalTargets(const ConvertedPoolMap& map, const std::string& engine) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  auto it = std::find(map.engine_uuids.begin(), map.engine_uuids.end(), engine);
  if (it == map.engine_uuids.end()) return out;
  const auto rank = static_cast<uint32_t>(it - map.engine_uuids.begin());
  for (uint32_t g = 0; g < map.map.targets.size(); ++g) {
    const TargetInfo& t = map.map.targets[g];
    if (t.engine_rank == rank && !IsOut(t.state)) out.emplace_back(t.engine_index, g);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status RebuildSource::ScanBatch(const RebuildScan& scan, uint32_t engine_index, uint32_t global, const Uuid& container,
                                rpc::RebuildCursor* cursor, rpc::RebuildPullBodyOut* out, bool* container_done) {
  auto b = std::make_shared<Batch>();
  b->count_only = scan.count_only;
  b->data_plane = scan.data_plane;
  b->source_target = global;
  BatchScope scope{&scan, global, scan.requester_targets};
  std::future<Status> done = b->done.get_future();
  Target* target = targets_[engine_index];
  target->WithShard(scan.pool, container, false, [b, scope, cursor, container_done](Result<vos::Vos*> v) {
    if (!v.ok() || *v == nullptr) {
      b->Fail(v.ok() ? Status::Busy("rebuild: the shard is not open") : v.status());
    } else {
      RunBatch(*v, scope, b, cursor, container_done);
    }
    b->Finish();
  });
  ROS2_RETURN_IF_ERROR(Await(done, "scanning"));
  if (!b->refetch.empty()) {
    // Singles larger than their first buffer: read again at their size.
    auto again = std::make_shared<Batch>();
    std::future<Status> redone = again->done.get_future();
    target->WithShard(scan.pool, container, false, [b, again](Result<vos::Vos*> v) {
      if (!v.ok() || *v == nullptr) {
        again->Fail(v.ok() ? Status::Busy("rebuild: the shard is not open") : v.status());
      } else {
        again->records = b->records;
        again->targets = b->targets;
        again->sizes = b->sizes;
        for (size_t i = 0; i < b->records.size(); ++i) again->buffers.emplace_back();
        for (size_t i : b->refetch) {
          again->buffers[i].resize(b->sizes[i]);
          SubmitRead(*v, again, i);
        }
      }
      again->Finish();
    });
    ROS2_RETURN_IF_ERROR(Await(redone, "reading large values"));
    for (size_t i : b->refetch) {
      if (again->sizes[i] > again->buffers[i].size()) {
        return Status::Busy("rebuild: a value grew while it was read; the pull is retried");
      }
      b->records[i] = again->records[i];
      b->buffers[i] = std::move(again->buffers[i]);
      b->sizes[i] = again->sizes[i];
    }
    b->bytes += again->bytes;
  }
  out->set_objects(out->objects() + b->objects);
  out->set_bytes(out->bytes() + b->bytes);
  if (scan.count_only) return Status::Ok();
  for (size_t i = 0; i < b->records.size(); ++i) {
    rpc::RebuildRecord& rec = b->records[i];
    rec.set_container(container.ToString());
    const size_t n = std::min<uint64_t>(b->sizes[i], b->buffers[i].size());
    rec.set_data(reinterpret_cast<const char*>(b->buffers[i].data()), n);
    b->buffers[i] = {};
    const std::vector<uint32_t>& targets = b->targets[i];
    for (size_t k = 0; k < targets.size(); ++k) {
      rpc::RebuildRecord* copy = out->add_records();
      if (k + 1 == targets.size()) {
        *copy = std::move(rec);  // the last fallback takes the record, the others a copy
      } else {
        *copy = rec;
      }
      copy->set_fallback_target(targets[k]);
    }
  }
  return Status::Ok();
}

uint64_t ClientRequests(const std::vector<Target*>& targets) {
  uint64_t n = 0;
  for (const Target* t : targets) n += t->metrics().requests_started.Read();
  return n;
}

Result<rpc::RebuildPullBodyOut> RebuildSource::Scan(const RebuildScan& scan) {
  rpc::RebuildPullBodyOut out;
  out.set_client_requests(ClientRequests(targets_));
  rpc::RebuildCursor cursor = scan.cursor;
  for (const auto& [index, global] : LocalTargets(scan.map, engine_.ToString())) {
    if (cursor.done() || index < cursor.target() || index >= targets_.size()) continue;
    if (index > cursor.target()) {
      cursor = rpc::RebuildCursor();
      cursor.set_target(index);
    }
    std::vector<Uuid> containers = targets_[index]->OpenContainers(scan.pool, std::chrono::seconds(10));
    std::sort(containers.begin(), containers.end(),
              [](const Uuid& a, const Uuid& b) { return a.ToString() < b.ToString(); });
    for (const Uuid& c : containers) {
      const std::string name = c.ToString();
      if (name < cursor.container()) continue;
      if (name != cursor.container()) {
        const uint32_t t = cursor.target();
        cursor = rpc::RebuildCursor();
        cursor.set_target(t);
        cursor.set_container(name);
      }
      bool container_done = false;
      while (!container_done) {
        ROS2_RETURN_IF_ERROR(ScanBatch(scan, index, global, c, &cursor, &out, &container_done));
        if (out.bytes() >= scan.max_bytes) {
          *out.mutable_cursor() = cursor;
          return out;
        }
      }
    }
  }
  cursor.set_done(true);
  *out.mutable_cursor() = cursor;
  return out;
}

}  // namespace ros2::engine
