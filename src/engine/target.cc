// Target thread: lifecycle, the epoll progress loop, container shards, mailbox.
#include "engine/target.h"

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "common/log.h"
#include "engine/replica_forward.h"

namespace ros2::engine {

bool TargetEnvironment::IsDestroyed(const Uuid& pool, const Uuid& container) {
  std::lock_guard lock(destroyed_mu);
  for (const auto& [p, c] : destroyed) {
    if (p == pool && (c.IsNil() || c == container)) return true;  // a nil container stands for the whole pool
  }
  return false;
}

Target::Target(uint32_t index, TargetEnvironment* env) : index_(index), env_(env), budget_(env->limits) {}

Target::~Target() {
  Stop();
}

Status Target::Start() {
  std::promise<Status> started;
  auto result = started.get_future();
  thread_ = std::thread([this, &started] { Run(&started); });
  Status st = result.get();
  if (!st.ok() && thread_.joinable()) thread_.join();
  return st;
}

void Target::Stop() {
  if (!thread_.joinable()) return;
  stop_requested_.store(true, std::memory_order_release);
  Post([] {});  // wake the loop
  thread_.join();
}

void Target::Post(std::function<void()> fn) {
  {
    std::lock_guard lock(mailbox_mu_);
    mailbox_.push_back(std::move(fn));
  }
  mailbox_posted_.store(true, std::memory_order_release);
  if (mailbox_fd_ >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(mailbox_fd_, &one, sizeof(one));
  }
}

void Target::DestroyContainer(const Uuid& pool, const Uuid& container) {
  Post([this, pool, container] {
    RetireShards([&](const Shard& s) { return s.pool == pool && s.container == container; });
    const ShardKey key(pool, container);
    if (opening_.contains(key)) return;  // FinishOpen retires it once its files exist
    std::error_code ec;
    std::filesystem::remove_all(ShardPath(key), ec);
  });
}

void Target::DestroyPool(const Uuid& pool) {
  Post([this, pool] {
    RetireShards([&](const Shard& s) { return s.pool == pool; });
    {
      std::lock_guard lock(usage_mu_);
      usage_.erase(pool);
    }
    // Shards still being opened are retired (and deleted) by FinishOpen.
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(PoolDir(pool), ec)) {
      auto container = Uuid::Parse(entry.path().filename().string());
      if (container.ok() && opening_.contains(ShardKey(pool, *container))) continue;
      std::error_code ignored;
      std::filesystem::remove_all(entry.path(), ignored);
    }
    RemovePoolDirIfDestroyed(pool);
  });
}

void Target::RemovePoolDirIfDestroyed(const Uuid& pool) {
  if (!env_->IsDestroyed(pool, Uuid())) return;
  std::error_code ec;
  std::filesystem::remove(PoolDir(pool), ec);  // only once empty: shards still opening or closing keep it
}

uint64_t Target::UsedBytes(const Uuid& pool) const {
  std::lock_guard lock(usage_mu_);
  auto it = usage_.find(pool);
  return it == usage_.end() ? 0 : it->second;
}

void Target::Run(std::promise<Status>* started) {
  // A target that cannot start leaves nothing open behind it.
  auto fail = [&](Status st) {
    worker_.reset();
    for (int* fd : {&epoll_fd_, &mailbox_fd_}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
    started->set_value(std::move(st));
  };
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  mailbox_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || mailbox_fd_ < 0) {
    return fail(Status::FromErrno(errno, fmt::format("engine target {}: epoll/eventfd", index_)));
  }
  auto worker = env_->transport->CreateWorker(fmt::format("target-{}", index_));
  if (!worker.ok()) return fail(worker.status().WithContext(fmt::format("engine target {}", index_)));
  worker_ = std::move(*worker);
  worker_->SetReplyBatching(true);
  auto addr = worker_->address();
  address_.assign(addr.begin(), addr.end());
  AddToEpoll(worker_->event_fd());
  AddToEpoll(mailbox_fd_);
  RegisterHandlers();
  if (env_->io_stages) io_stages::t_current = &metrics_.stages;
  // Named ("ros2-target-3" in top, perf and ps -L; 15 characters at most)
  // and pinned last: the threads started on the way (the transport's cma
  // listener, started by the first handler registration) take neither.
  ::pthread_setname_np(::pthread_self(), fmt::format("ros2-target-{}", index_).c_str());
  if (!env_->target_cpus.empty()) {
    const int cpu = env_->target_cpus[index_ % env_->target_cpus.size()];
    if (Status st = transport::PinCurrentThreadToCpu(cpu); !st.ok()) {
      return fail(st.WithContext(fmt::format("engine target {}: target_cpus", index_)));
    }
  }
  started->set_value(Status::Ok());  // `started` dies with Start()'s frame after this
  Loop();
  FinishShutdown();
}

void Target::AddToEpoll(int fd) {
  if (fd < 0) return;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    ROS2_LOG_WARN("engine target {}: epoll add fd {}: {}", index_, fd, std::strerror(errno));
  }
}

void Target::RemoveFromEpoll(int fd) {
  if (fd >= 0) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
}

int Target::DrainMailbox() {
  // A push is visible once its flag is (the flag is set after the push, and
  // cleared here before the swap): nothing posted is left behind. The eventfd
  // is cleared where it is reported, in WaitForEvents.
  if (!mailbox_posted_.exchange(false, std::memory_order_acq_rel)) return 0;
  std::deque<std::function<void()>> work;
  {
    std::lock_guard lock(mailbox_mu_);
    work.swap(mailbox_);
  }
  for (auto& fn : work) fn();
  return static_cast<int>(work.size());
}

int Target::ProgressShards(bool hold) {
  // A shard may commit a lone group on this thread (vos.inline_commit) only
  // while no other shard has work: the thread is blocked for the WAL sync.
  size_t busy = 0;
  for (auto& [key, shard] : shards_) busy += shard->vos->in_flight() > 0 ? 1 : 0;
  for (auto& s : retiring_) busy += s->vos->in_flight() > 0 ? 1 : 0;
  auto pass = [&](vos::Vos& v) {
    v.AllowInlineCommit(busy <= 1);
    v.HoldSubmissions(hold);
    return v.Progress(false);
  };
  int events = 0;
  for (auto& [key, shard] : shards_) events += pass(*shard->vos);
  for (auto it = retiring_.begin(); it != retiring_.end();) {
    Shard& s = **it;
    events += pass(*s.vos);
    if (s.vos->in_flight() == 0) {
      RemoveFromEpoll(s.vos->event_fd());
      s.vos.reset();
      Status st = vos::Vos::Destroy(s.path);
      if (!st.ok()) ROS2_LOG_WARN("engine target {}: destroying {}: {}", index_, s.path, st.ToString());
      RemovePoolDirIfDestroyed(s.pool);  // DestroyPool leaves it to shards still opening
      it = retiring_.erase(it);
      ++events;
    } else {
      ++it;
    }
  }
  return events;
}

void Target::RetireShards(const std::function<bool(const Shard&)>& match) {
  for (auto it = shards_.begin(); it != shards_.end();) {
    if (match(*it->second)) {
      retiring_.push_back(std::move(it->second));
      it = shards_.erase(it);
    } else {
      ++it;
    }
  }
}

void Target::Loop() {
  auto last_event = std::chrono::steady_clock::now();
  io_stages::StageSet* const stages = io_stages::t_current;
  for (;;) {
    if (stages != nullptr) stages->pass_start = io_stages::NowNs();
    int events = worker_->Progress();
    // Requests came in this pass: more may follow at once, so their small
    // reads and writes may wait one pass to reach the disk together.
    events += ProgressShards(/*hold=*/events > 0);
    events += RunDeferred();
    // The replies of the storage completions just reaped leave together: one
    // message per client for all of them (Worker::SetReplyBatching).
    worker_->FlushBatches();
    events += DrainMailbox();
    const auto now = std::chrono::steady_clock::now();
    if (stop_requested_.load(std::memory_order_acquire) && !stopping_) {
      stopping_ = true;
      stop_deadline_ = now + env_->shutdown_grace;
      ROS2_LOG_INFO("engine target {}: shutting down ({} requests in flight)", index_, pending_.size());
    }
    if (stopping_) {
      // Shards still opening finish first (their parked requests are then
      // refused by Admit), so FinishShutdown does not wait on them.
      if (pending_.empty() && opening_.empty()) return;
      if (now >= stop_deadline_) {
        ROS2_LOG_WARN("engine target {}: failing {} requests still in flight after the shutdown grace", index_,
                      pending_.size() + ParkedCount());
        auto left = std::move(pending_);
        pending_.clear();
        const Status cancelled =
            Status::Cancelled(fmt::format("engine target {}: shutting down before the request finished", index_));
        for (auto& [ticket, tracked] : left) tracked.req.Reply(cancelled);
        for (auto& [key, opening] : opening_) {
          for (auto& [req, handler] : opening.parked) req.Reply(cancelled);
          opening.parked.clear();
        }
        return;
      }
    }
    if (usage_dirty_ && now - usage_refreshed_ > std::chrono::seconds(1)) RefreshUsage();
    if (now - health_refreshed_ > std::chrono::seconds(1)) RefreshHealth();
    if (!stopping_ && now >= next_aggregate_check_) MaybeAggregate(now);
    if (replica_ != nullptr) ReplicaTick(now);  // replicated objects' watermarks (replica_in_doubt.cc)
    if (events > 0) {
      last_event = now;
      continue;
    }
    const auto quiet = now - last_event;
    // A short poll first, without yielding (kSpinWithoutYield): a request or
    // a completion that follows at once is taken without a sleep and a wake.
    if (quiet < std::min<std::chrono::steady_clock::duration>(env_->spin, kSpinWithoutYield)) continue;
    const bool armed = worker_->PrepareSleep();
    if (!armed && quiet < kBusyArmLimit) {
      // Not allowed to sleep yet (UCX has work pending, see
      // Worker::PrepareSleep): let the threads we wait for run. On 2 vCPUs
      // the clients and the other target share our core. A target pinned to
      // a CPU (target_cpus) yields too: the engine cannot tell whether
      // clients or other targets were placed on the same CPU, and with
      // nothing else runnable the yield returns at once. The first refusal
      // after a wake-up is mostly UCX draining the signal that woke us, yet
      // retrying it at once instead of yielding cost qd 1 latency: the yield
      // lets the client send its next request, which the next pass then takes
      // without a sleep and a wake (docs/engine.md, "The spin").
      sched_yield();
      continue;
    }
    if (!armed) {
      // UCX keeps refusing to arm and nothing has happened for a while: what
      // is pending waits on a peer, not on us (e.g. keepalives queued for the
      // shm FIFO of an idle ros2-fuse daemon whose threads sit in read(2) on
      // /dev/fuse). Spinning here burnt a whole vCPU per target for as long
      // as such a client stayed idle; nap instead, longer the longer it lasts.
      NapWhileBusy(quiet);
      continue;
    }
    Sleep();
    last_event = std::chrono::steady_clock::now();
  }
}

int Target::PrepareShardsForSleep() {
  int ran = 0;
  for (auto& [key, shard] : shards_) ran += shard->vos->PrepareSleep();
  for (auto& shard : retiring_) ran += shard->vos->PrepareSleep();
  if (ran > 0) worker_->FlushBatches();  // the replies those callbacks gave
  return ran;
}

void Target::NapWhileBusy(std::chrono::steady_clock::duration quiet) {
  const auto nap = quiet < std::chrono::milliseconds(20)    ? std::chrono::microseconds(100)
                   : quiet < std::chrono::milliseconds(200) ? std::chrono::microseconds(1000)
                                                            : std::chrono::microseconds(10000);
  if (PrepareShardsForSleep() > 0) return;
  WaitForEvents(nap);  // wakes early for a request or a mailbox message
}

void Target::Sleep() {
  auto wait = worker_->NextDeadline(std::chrono::milliseconds(100));
  if (stopping_) wait = std::min<std::chrono::microseconds>(wait, std::chrono::milliseconds(10));
  if (usage_dirty_) wait = std::min<std::chrono::microseconds>(wait, std::chrono::milliseconds(1000));
  if (replica_ != nullptr && replica_->watermark_due) {
    wait = std::min<std::chrono::microseconds>(wait, ReplicaState::kWatermarkDelay);
  }
  if (PrepareShardsForSleep() > 0) return;
  WaitForEvents(wait);
}

void Target::WaitForEvents(std::chrono::microseconds wait) {
  // Microsecond timeouts: the worker asks for short naps while transfers are in
  // flight (Worker::NextDeadline), which a millisecond epoll_wait would round up.
  const timespec timeout{static_cast<time_t>(wait.count() / 1000000), static_cast<long>(wait.count() % 1000000) * 1000};
  epoll_event events[8];
  const int n = ::epoll_pwait2(epoll_fd_, events, 8, &timeout, nullptr);
  for (int i = 0; i < n; ++i) {
    if (events[i].data.fd != mailbox_fd_) continue;
    uint64_t count = 0;
    [[maybe_unused]] ssize_t r = ::read(mailbox_fd_, &count, sizeof(count));  // the loop then drains the mailbox
  }
}

int Target::RunDeferred() {
  if (deferred_.empty()) return 0;
  std::vector<std::function<void()>> run;
  run.swap(deferred_);
  for (auto& fn : run) fn();
  return static_cast<int>(run.size());
}

uint64_t Target::AggregateShard(Shard& shard, std::string_view why) {
  const auto start = std::chrono::steady_clock::now();
  shard.last_aggregate = start;
  // Below an operation that may still be taken back; what it leaves is
  // for a later pass.
  const Epoch upto = AggregationBound(shard);
  shard.aggregate_pending = upto != kEpochMax;
  auto stats = shard.vos->Aggregate(upto);
  if (!stats.ok()) {
    ROS2_LOG_WARN("engine target {}: aggregating shard {} ({}): {}", index_, shard.path, why,
                  stats.status().ToString());
    return 0;
  }
  if (stats->versions_removed > 0) {
    usage_dirty_ = true;
    ROS2_LOG_DEBUG(
        "engine target {}: aggregated shard {} ({}): {} versions, {} bytes freed in {} us", index_, shard.path, why,
        stats->versions_removed, stats->bytes_freed,
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count());
  }
  return stats->bytes_freed + stats->inline_bytes_freed;
}

uint64_t Target::AggregatePoolShards(const Uuid& pool, std::string_view why) {
  uint64_t freed = 0;
  for (auto& [key, shard] : shards_) {
    if (shard->pool == pool) freed += AggregateShard(*shard, why);
  }
  return freed;
}

void Target::MaybeAggregate(std::chrono::steady_clock::time_point now) {
  next_aggregate_check_ = now + std::chrono::seconds(1);
  for (auto& [key, shard] : shards_) {
    if (!shard->aggregate_pending || now - shard->last_aggregate < kAggregateInterval) continue;
    const bool quiet = now - shard->last_write >= kAggregateQuiet;
    // Pressure is the pool's: its space on this engine, shared by its shards.
    const auto budget = env_->pools.Budget(shard->pool);
    const bool pressed =
        budget->limit() != vos::SpaceBudget::kUnlimited &&
        static_cast<double>(budget->used()) >= kAggregatePressure * static_cast<double>(budget->limit());
    if (quiet || pressed) AggregateShard(*shard, quiet ? "quiet" : "space pressure");
  }
}

void Target::RefreshUsage() {
  std::map<Uuid, uint64_t> usage;
  for (auto& [key, shard] : shards_) {
    vos::SpaceInfo space = shard->vos->Space();
    usage[shard->pool] += space.data_used + space.metadata_bytes;
  }
  {
    std::lock_guard lock(usage_mu_);
    for (auto& [pool, bytes] : usage) usage_[pool] = bytes;
  }
  usage_dirty_ = false;
  usage_refreshed_ = std::chrono::steady_clock::now();
}

void Target::RefreshHealth() {
  vos::HealthInfo sum;
  for (auto& [key, shard] : shards_) {
    const vos::HealthInfo h = shard->vos->Health();
    sum.write_stops += h.write_stops;
    sum.write_slowdowns += h.write_slowdowns;
    sum.running_compactions += h.running_compactions;
    sum.pending_compaction_bytes += h.pending_compaction_bytes;
    sum.uring_submits += h.uring_submits;
    sum.uring_sqes += h.uring_sqes;
  }
  metrics_.write_stops.Set(sum.write_stops);
  metrics_.write_slowdowns.Set(sum.write_slowdowns);
  metrics_.running_compactions.Set(sum.running_compactions);
  metrics_.pending_compaction_bytes.Set(sum.pending_compaction_bytes);
  metrics_.uring_submits.Set(sum.uring_submits);
  metrics_.uring_sqes.Set(sum.uring_sqes);
  health_refreshed_ = std::chrono::steady_clock::now();
}

void Target::FinishShutdown() {
  // Let the last replies leave before the worker goes away.
  const auto flush_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  while (std::chrono::steady_clock::now() < flush_until) {
    if (worker_->Progress() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // An open outlasting the grace: wait for its thread; the shard it posted is
  // closed with the mailbox below.
  for (auto& [key, opening] : opening_) {
    if (opening.thread.joinable()) opening.thread.join();
  }
  opening_.clear();
  {
    std::lock_guard lock(mailbox_mu_);
    mailbox_.clear();
  }
  RefreshUsage();
  for (auto& [key, shard] : shards_) {
    Status st = shard->vos->Sync();
    if (!st.ok()) ROS2_LOG_WARN("engine target {}: sync {}: {}", index_, shard->path, st.ToString());
  }
  shards_.clear();
  retiring_.clear();
  pending_.clear();
  replica_.reset();  // its endpoints before their worker
  worker_.reset();
  ::close(epoll_fd_);
  ::close(mailbox_fd_);
  epoll_fd_ = -1;
  ROS2_LOG_INFO("engine target {}: stopped", index_);
}

Result<Target::Shard*> Target::ShardFor(const Uuid& pool, const Uuid& container, bool open) {
  const uint64_t destroyed_version = env_->destroyed_version.load(std::memory_order_acquire);
  if (destroyed_version != destroyed_seen_) {
    // A container or pool was destroyed: retire its open shards before the
    // mailbox message that deletes them arrives, so no request uses them.
    destroyed_seen_ = destroyed_version;
    RetireShards([this](const Shard& s) { return env_->IsDestroyed(s.pool, s.container); });
  }
  auto key = std::make_pair(pool, container);
  auto it = shards_.find(key);
  if (it != shards_.end()) return it->second.get();
  if (env_->IsDestroyed(pool, container)) {
    return Status::NotFound(fmt::format("engine target {}: container {} of pool {} was destroyed", index_,
                                        container.ToString(), pool.ToString()));
  }
  if (open && !opening_.contains(key)) {
    // A target the pool's map (resolved a moment ago) does not list: refused
    // at once, without a thread and a control-plane call per request.
    auto layout = env_->pools.RecentLayout(pool, kLayoutReuse);
    if (layout && !layout->HasTarget(index_)) {
      return Status::PermissionDenied(NotInPoolMessage(index_, env_->engine_id, pool, *layout));
    }
    StartOpen(key);
  }
  return nullptr;
}

Result<Target::Shard*> Target::OpenShard(const Uuid& pool, const Uuid& container) {
  ROS2_ASSIGN_OR_RETURN(Shard * shard, ShardFor(pool, container, /*open=*/false));
  if (shard == nullptr) {
    return Status::NotFound(
        fmt::format("engine target {}: the shard of container {} is not open", index_, container.ToString()));
  }
  return shard;
}

std::string Target::PoolDir(const Uuid& pool) const {
  return fmt::format("{}/targets/{}/{}", env_->data_dir, index_, pool.ToString());
}

std::string Target::ShardPath(const ShardKey& key) const {
  return PoolDir(key.first) + "/" + key.second.ToString();
}

namespace {

// The extent address space of a shard: whatever the pool's share on this
// engine could put in one shard, with room for fragmentation. It costs
// nothing (the data file grows on demand; the ram class maps it with
// MAP_NORESERVE); the pool budget is what bounds the space.
uint64_t ShardAddressSpace(uint64_t local_share) {
  constexpr uint64_t kMin = uint64_t{1} << 30;
  constexpr uint64_t kMax = (uint64_t{16} << 40) - (uint64_t{1} << 30);  // below ext4's largest file
  const uint64_t want = local_share > kMax ? kMax : local_share + local_share / 4;
  return std::clamp<uint64_t>(want, kMin, kMax) / 4096 * 4096;
}

}  // namespace

Result<vos::VosOptions> Target::ShardOptions(const ShardKey& key) {
  vos::VosOptions options = env_->vos_template;
  options.path = ShardPath(key);
  if (!env_->resolve_pool) {
    return Status::Busy(fmt::format("engine target {}: still starting (no control plane to size pools yet)", index_));
  }
  const Uuid& pool = key.first;
  auto layout = env_->resolve_pool(pool);
  if (!layout.ok())
    return layout.status().WithContext(fmt::format("engine target {}: pool {}", index_, pool.ToString()));
  env_->pools.SetLayout(pool, *layout);
  if (!layout->HasTarget(index_)) {
    return Status::PermissionDenied(NotInPoolMessage(index_, env_->engine_id, pool, *layout));
  }
  options.budget = env_->pools.Budget(pool);
  options.data_size = ShardAddressSpace(layout->LocalShare());
  return options;
}

void Target::StartOpen(const ShardKey& key) {
  Opening& opening = opening_[key];
  opening.thread = std::thread([this, key] {
    // Not on this target's CPU: the store's own threads (its commit thread,
    // and RocksDB's pool when this is the first store) start from here.
    if (!env_->target_cpus.empty() && !env_->process_cpus.empty()) {
      (void)transport::SetCurrentThreadCpus(env_->process_cpus);
    }
    ::pthread_setname_np(::pthread_self(), fmt::format("ros2-open-{}", index_).c_str());
    auto options = ShardOptions(key);
    auto vos = std::make_shared<Result<std::unique_ptr<vos::Vos>>>(
        options.ok() ? vos::Vos::Open(*options) : Result<std::unique_ptr<vos::Vos>>(options.status()));
    // Every later epoch exceeds what the shard holds, even after the wall
    // clock stepped back across a restart (docs/engine.md, "Epochs").
    if (vos->ok()) env_->clock->Update((**vos)->HighestEpoch());
    Post([this, key, vos] { FinishOpen(key, std::move(*vos)); });
  });
}

std::future<void> Target::ReopenShards() {
  auto done = std::make_shared<std::promise<std::future<void>>>();
  auto result = done->get_future();
  Post([this, done] {
    reopened_ = std::promise<void>();
    done->set_value(reopened_.get_future());
    std::error_code ec;
    for (const auto& pool_dir :
         std::filesystem::directory_iterator(env_->data_dir + "/targets/" + std::to_string(index_), ec)) {
      auto pool = Uuid::Parse(pool_dir.path().filename().string());
      if (!pool.ok()) continue;
      std::error_code ec2;
      for (const auto& shard_dir : std::filesystem::directory_iterator(pool_dir.path(), ec2)) {
        auto container = Uuid::Parse(shard_dir.path().filename().string());
        if (!container.ok() || env_->IsDestroyed(*pool, *container)) continue;
        const ShardKey key(*pool, *container);
        if (shards_.contains(key) || stopping_) continue;
        reopening_.insert(key);
        if (!opening_.contains(key)) StartOpen(key);
      }
    }
    if (reopening_.empty()) reopened_.set_value();
  });
  return result.get();
}

void Target::FinishOpen(const ShardKey& key, Result<std::unique_ptr<vos::Vos>> vos) {
  if (reopening_.erase(key) != 0 && reopening_.empty()) reopened_.set_value();
  auto node = opening_.extract(key);
  if (node.empty()) return;
  Opening& opening = node.mapped();
  if (opening.thread.joinable()) opening.thread.join();  // it posted this as its last act
  const auto& [pool, container] = key;
  const std::string path = ShardPath(key);
  if (!vos.ok()) {
    // Not remembered: the next request for the container tries again.
    Status st = vos.status().WithContext(fmt::format("engine target {}: open shard {}", index_, path));
    ROS2_LOG_ERROR("{}", st.ToString());
    if (env_->IsDestroyed(pool, container)) {
      // What the failed open left of a destroyed container's shard.
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
      RemovePoolDirIfDestroyed(pool);
    }
    for (auto& [req, handler] : opening.parked) req.Reply(st);
    return;
  }
  auto shard = std::make_unique<Shard>();
  shard->pool = pool;
  shard->container = container;
  shard->path = path;
  shard->vos = std::move(*vos);
  AddToEpoll(shard->vos->event_fd());
  if (env_->IsDestroyed(pool, container)) {
    // Destroyed while it opened (DestroyContainer/DestroyPool left the files to
    // this): retire it, which deletes them.
    retiring_.push_back(std::move(shard));
  } else {
    ROS2_LOG_INFO("engine target {}: opened shard of container {} ({})", index_, container.ToString(),
                  vos::StorageClassName(env_->vos_template.storage_class));
    {
      std::lock_guard lock(env_->opened_mu);
      env_->opened.emplace(pool, container);
    }
    shards_.emplace(key, std::move(shard));
  }
  // In arrival order; a destroyed container's requests get NotFound from Admit.
  for (auto& [req, handler] : opening.parked) {
    dispatching_ = handler;
    (this->*handler)(std::move(req));
  }
  dispatching_ = nullptr;
}

void Target::Park(transport::IncomingRequest req, const obj::RequestHeader& header) {
  auto it = opening_.find(std::make_pair(header.pool, header.container));
  if (it == opening_.end() || dispatching_ == nullptr) {
    // Cannot happen: Admit returns nullptr only with the opening started.
    return req.Reply(Status::Internal(fmt::format("engine target {}: no shard opening to wait for", index_)));
  }
  if (ParkedCount() >= env_->limits.target_requests_in_flight) {
    return req.Reply(Status::Busy(fmt::format(
        "engine target {}: {} requests already wait for shards being opened (limits.target_requests_in_flight)", index_,
        ParkedCount())));
  }
  it->second.parked.emplace_back(std::move(req), dispatching_);
}

size_t Target::ParkedCount() const {
  size_t n = 0;
  for (const auto& [key, opening] : opening_) n += opening.parked.size();
  return n;
}

void Target::PrepareShard(const Uuid& pool, const Uuid& container) {
  Post([this, pool, container] {
    if (!stopping_) (void)ShardFor(pool, container, /*open=*/true);
  });
}

Result<uint64_t> Target::Track(const transport::IncomingRequest& req, uint64_t bytes) {
  const uint64_t connection = req.connection_id();
  Status st = budget_.Reserve(connection, bytes);
  if (!st.ok()) {
    metrics_.Refuse(Refusal::kBudget);
    return st.WithContext(fmt::format("engine target {}: {} refused", index_, obj::OpcodeName(req.opcode())));
  }
  uint64_t ticket = next_ticket_++;
  const uint16_t opcode = req.opcode();
  // A replicated update or punch (leader or forward, replica_forward.cc)
  // counts as what it wraps: an update carries data, a punch none.
  const bool replica =
      opcode == static_cast<uint16_t>(obj::Opcode::kLeader) || opcode == static_cast<uint16_t>(obj::Opcode::kForward);
  const OpKind replica_kind = bytes > 0 ? OpKind::kUpdate : OpKind::kPunch;
  const OpKind kind = opcode == static_cast<uint16_t>(obj::Opcode::kUpdate)  ? OpKind::kUpdate
                      : opcode == static_cast<uint16_t>(obj::Opcode::kFetch) ? OpKind::kFetch
                      : opcode == static_cast<uint16_t>(obj::Opcode::kPunch) ? OpKind::kPunch
                      : replica                                              ? replica_kind
                                                                             : OpKind::kEnumerate;
  pending_.emplace(ticket, Tracked{req, Reservation{connection, bytes, kind, kind == OpKind::kUpdate ? bytes : 0,
                                                    std::chrono::steady_clock::now()}});
  metrics_.requests_started.Add();
  metrics_.bytes_reserved.Add(bytes);
  return ticket;
}

void Target::Finish(uint64_t ticket, const Status& status, std::span<const uint8_t> payload) {
  auto it = pending_.find(ticket);
  if (it == pending_.end()) return;  // already failed by the shutdown
  transport::IncomingRequest req = std::move(it->second.req);
  const Reservation res = it->second.res;
  pending_.erase(it);
  budget_.Release(res.connection, res.bytes);
  TargetMetrics::Op& op = metrics_.Of(res.kind);
  op.completed.Add();
  op.latency.Observe(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - res.start).count()));
  if (status.ok()) {
    op.bytes.Add(res.moved);
  } else {
    op.failed.Add();
    if (status.code() == Status::Code::kNoSpace) metrics_.Refuse(Refusal::kSpace);
    if (status.IsCorruption() && res.kind == OpKind::kFetch) metrics_.checksum_errors.Add();
  }
  metrics_.requests_finished.Add();
  metrics_.bytes_released.Add(res.bytes);
  req.Reply(status, status.ok() ? payload : std::span<const uint8_t>{});
}

void Target::SetMovedBytes(uint64_t ticket, uint64_t bytes) {
  if (auto r = pending_.find(ticket); r != pending_.end()) r->second.res.moved = bytes;
}

}  // namespace ros2::engine
