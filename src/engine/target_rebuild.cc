// Target's rebuild entry points (target.h): the rebuild source reads shards
// and the puller writes them on the target thread, like any request.
#include <memory>

#include "engine/target.h"

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

}  // namespace ros2::engine
