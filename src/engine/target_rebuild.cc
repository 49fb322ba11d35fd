// Target's rebuild entry points (target.h): the rebuild source reads shards
// and the puller writes them on the target thread, like any request.
#include <memory>

#include "engine/target.h"
#include "ros2/types.h"

namespace ros2::engine {

void Target::WithShard(const Uuid& pool, const Uuid& container, bool open, std::function<void(Result<vos::Vos*>)> fn) {
  Post([this, pool, container, open, fn = std::move(fn)] {
    auto shard = ShardFor(pool, container, open);
    if (!shard.ok()) {
      fn(shard.status());
      return;
    }
    if (*shard == nullptr) {
      fn(static_cast<vos::Vos*>(nullptr));
      return;
    }
    (*shard)->aggregate_pending = true;  // a rebuild write counts as a write for aggregation
    (*shard)->last_write = std::chrono::steady_clock::now();
    fn((*shard)->vos.get());
  });
}

std::vector<Uuid> Target::OpenContainers(const Uuid& pool, std::chrono::milliseconds wait) {
  auto done = std::make_shared<std::promise<std::vector<Uuid>>>();
  std::future<std::vector<Uuid>> result = done->get_future();
  Post([this, pool, done] {
    std::vector<Uuid> out;
    for (const auto& [key, shard] : shards_) {
      if (key.first == pool) out.push_back(key.second);
    }
    done->set_value(std::move(out));
  });
  if (result.wait_for(wait) != std::future_status::ready) return {};
  return result.get();
}

namespace {

constexpr size_t kSweepList = 256;

struct Sweep {
  int pending = 1;  // the enumeration, then one per punch in flight
  Status status;
  Target::SweepResult result;
  std::function<void()> finish;  // runs once every punch completed
  void Done() {
    if (--pending != 0) return;
    auto f = std::move(finish);  // it holds this sweep: released once it ran
    f();
  }
};

void Punch(vos::Vos* v, const std::shared_ptr<Sweep>& s, vos::PunchOp op) {
  ++s->pending;
  ++s->result.punched;
  v->SubmitPunch(op, [s](Status st) {
    if (!st.ok() && s->status.ok()) s->status = st.WithContext("sweep: punching a copy no longer placed here");
    s->Done();
  });
}

// Every replicated object of the shard (whole, or the dkeys `drop` names).
Status Enumerate(vos::Vos* v, const std::shared_ptr<Sweep>& s, const Target::SweepDrop& drop, Epoch epoch) {
  ListAnchor objects;
  while (!objects.eof) {
    ROS2_ASSIGN_OR_RETURN(auto oids, v->ListObjects(kEpochMax, &objects, kSweepList));
    for (const ObjectId& oid : oids) {
      if (ReplicaCount(oid.object_class()) < 2) continue;
      if (!drop) {
        Punch(v, s, vos::PunchOp{PunchScope::kObject, oid, {}, {}, epoch});
        continue;
      }
      ListAnchor dkeys;
      while (!dkeys.eof) {
        ROS2_ASSIGN_OR_RETURN(auto names, v->ListDkeys(oid, kEpochMax, &dkeys, kSweepList));
        for (const std::string& dkey : names) {
          if (drop(oid, dkey)) Punch(v, s, vos::PunchOp{PunchScope::kDkey, oid, dkey, {}, epoch});
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace

void Target::SweepShard(const Uuid& pool, const Uuid& container, SweepDrop drop,
                        std::function<void(Result<SweepResult>)> done) {
  Post([this, pool, container, drop = std::move(drop), done = std::move(done)] {
    auto shard = ShardFor(pool, container, false);
    if (!shard.ok() || *shard == nullptr) {
      done(shard.ok() ? Status::Busy("sweep: the shard is not open") : shard.status());
      return;
    }
    vos::Vos* v = (*shard)->vos.get();
    auto s = std::make_shared<Sweep>();
    s->finish = [this, s, pool, container, done] {
      // After the punches' callbacks: aggregate from the loop, not inside one.
      Post([this, s, pool, container, done] {
        if (!s->status.ok()) return done(s->status);
        auto again = ShardFor(pool, container, false);
        if (!again.ok() || *again == nullptr) return done(Status::Busy("sweep: the shard closed"));
        if (s->result.punched > 0) s->result.freed = AggregateShard(**again, "sweep");
        done(s->result);
      });
    };
    Status st = Enumerate(v, s, drop, v->HighestEpoch());
    if (!st.ok() && s->status.ok()) s->status = st;
    s->Done();
  });
}

}  // namespace ros2::engine
