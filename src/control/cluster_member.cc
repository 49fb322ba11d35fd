#include "control/cluster_member.h"

#include <charconv>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/hlc.h"
#include "common/log.h"

namespace ros2::control {
namespace {

constexpr std::string_view kLeaderKey = "leader";
constexpr std::string_view kMembersPrefix = "members/";
constexpr std::string_view kEngineStatePrefix = "engine-state/";

std::chrono::milliseconds TickOf(std::chrono::seconds ttl) {
  // In milliseconds before dividing: a 3 s TTL has a 500 ms sixth, not 0 s.
  return std::min(std::chrono::milliseconds(250), std::chrono::duration_cast<std::chrono::milliseconds>(ttl) / 6);
}

int64_t SteadyNs() {
  return std::chrono::steady_clock::now().time_since_epoch().count();
}

// "up 1234" / "down 1234" -> (up, since ms).
std::pair<bool, uint64_t> ParseEngineState(const std::string& v) {
  const bool up = v.starts_with("up ");
  const size_t space = v.find(' ');
  uint64_t since = 0;
  if (space != std::string::npos) std::from_chars(v.data() + space + 1, v.data() + v.size(), since);
  return {up, since};
}

}  // namespace

ClusterMember::ClusterMember(EtcdStore* store, SystemMap* map, ClusterMemberOptions options)
    : store_(store), map_(map), options_(std::move(options)), started_ns_(SteadyNs()) {
  leader_value_ = options_.engine.ToString() + " " + options_.control_endpoint;
}

Result<std::unique_ptr<ClusterMember>> ClusterMember::Start(EtcdStore* store, SystemMap* map,
                                                            ClusterMemberOptions options) {
  if (options.engine.IsNil()) return Status::InvalidArgument("cluster member: missing engine uuid");
  if (options.ttl < std::chrono::seconds(1)) return Status::InvalidArgument("cluster member: ttl must be at least 1s");
  std::unique_ptr<ClusterMember> m(new ClusterMember(store, map, std::move(options)));
  ROS2_RETURN_IF_ERROR(m->Join());
  m->watch_ = std::make_unique<EtcdWatch>(&store->client(), store->EtcdKey(kMembersPrefix), 0,
                                          [p = m.get()](const mvccpb::Event& ev, int64_t) {
                                            if (ev.type() != mvccpb::Event::DELETE) return;
                                            std::lock_guard lock(p->mu_);
                                            p->members_changed_ = true;
                                            p->wake_.notify_all();
                                          });
  m->Campaign();
  m->RefreshPeers();
  m->thread_ = std::thread([p = m.get()] { p->Run(); });
  return m;
}

ClusterMember::~ClusterMember() {
  Stop();
}

void ClusterMember::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_.exchange(true)) return;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  if (watch_) watch_->Stop();
  // Leaving on purpose: the membership and leader keys go with the lease, so
  // the others see this engine DOWN (and elect a leader) at once.
  if (int64_t lease = lease_.load(); lease != 0) {
    if (Status st = store_->client().RevokeLease(lease); !st.ok()) {
      ROS2_LOG_WARN("cluster: engine {}: revoking its lease: {}", options_.engine.ToString(), st.ToString());
    }
  }
}

Status ClusterMember::Join() {
  ROS2_ASSIGN_OR_RETURN(int64_t lease, store_->client().GrantLease(options_.ttl.count()));
  rpc::EngineInfo info;
  info.set_uuid(options_.engine.ToString());
  info.set_address(options_.control_endpoint);
  info.set_registered_ms(HybridClock::WallMillis());
  etcdserverpb::TxnRequest txn;
  auto* member = txn.add_success()->mutable_request_put();
  member->set_key(store_->EtcdKey(MemberKey(options_.engine.ToString())));
  member->set_value(info.SerializeAsString());
  member->set_lease(lease);
  auto* state = txn.add_success()->mutable_request_put();
  state->set_key(store_->EtcdKey(std::string(kEngineStatePrefix) + options_.engine.ToString()));
  state->set_value(fmt::format("up {}", HybridClock::WallMillis()));
  ROS2_RETURN_IF_ERROR(store_->client().Txn(txn).status());
  lease_.store(lease);
  MarkRenewed();
  ROS2_LOG_INFO("cluster: engine {} joined {} with lease {:x} (TTL {} s)", options_.engine.ToString(),
                store_->Describe(), lease, options_.ttl.count());
  return Status::Ok();
}

std::chrono::milliseconds ClusterMember::Tick() const {
  return TickOf(options_.ttl);
}

void ClusterMember::MarkRenewed() {
  renewed_ns_.store(SteadyNs());
  hold_until_ns_.store(0);
  if (options_.fence_deadline_ns != nullptr) options_.fence_deadline_ns->store(WritesUntilNs(), std::memory_order_relaxed);
}

int64_t ClusterMember::WritesUntilNs() const {
  const int64_t half_ttl = std::chrono::duration_cast<std::chrono::nanoseconds>(options_.ttl).count() / 2;
  return std::max(renewed_ns_.load() + half_ttl, hold_until_ns_.load());
}

StoreBatch ClusterMember::LeaderGuard() const {
  StoreBatch guard;
  guard.Require(std::string(kLeaderKey), leader_value_);
  return guard;
}

bool ClusterMember::fenced() const {
  return SteadyNs() > WritesUntilNs();
}

bool ClusterMember::held() const {
  const int64_t half_ttl = std::chrono::duration_cast<std::chrono::nanoseconds>(options_.ttl).count() / 2;
  const int64_t now = SteadyNs();
  return now > renewed_ns_.load() + half_ttl && now <= hold_until_ns_.load();
}

uint64_t ClusterMember::lease_age_ms() const {
  return static_cast<uint64_t>(std::max<int64_t>(0, SteadyNs() - renewed_ns_.load())) / 1'000'000;
}

void ClusterMember::NoteEtcd(bool ok) {
  etcd_ok_.store(ok);
  etcd_attempt_ns_.store(SteadyNs());
}

void ClusterMember::DescribeLiveness(rpc::PeerLivenessBody* body) const {
  body->set_engine_uuid(options_.engine.ToString());
  body->set_etcd_reachable(etcd_ok_.load());
  body->set_last_attempt_age_ms(static_cast<uint64_t>(std::max<int64_t>(0, SteadyNs() - etcd_attempt_ns_.load())) /
                                1'000'000);
  body->set_lease_age_ms(lease_age_ms());
}

std::string ClusterMember::leader_endpoint() const {
  std::lock_guard lock(mu_);
  return leader_endpoint_;
}

void ClusterMember::Renew() {
  auto ttl = store_->client().KeepAliveOnce(lease_.load());
  NoteEtcd(ttl.ok());
  if (ttl.ok() && *ttl > 0) {
    MarkRenewed();
    if (fenced_logged_.exchange(false)) {
      ROS2_LOG_WARN("cluster: engine {}: lease renewed again; acknowledging writes", options_.engine.ToString());
    }
    return;
  }
  if (!ttl.ok()) {
    ROS2_LOG_DEBUG("cluster: engine {}: lease renewal failed: {}", options_.engine.ToString(), ttl.status().ToString());
    return;
  }
  // Expired: etcd removed the membership (the leader marks this engine DOWN).
  ROS2_LOG_WARN("cluster: engine {}: lease {:x} expired; joining again", options_.engine.ToString(), lease_.load());
  leader_.store(false);
  if (Status st = Join(); !st.ok()) {
    ROS2_LOG_WARN("cluster: engine {}: rejoin failed: {}", options_.engine.ToString(), st.ToString());
    return;
  }
  fenced_logged_.store(false);
  if (options_.rejoin) {
    if (Status st = options_.rejoin(); !st.ok()) {
      ROS2_LOG_WARN("cluster: engine {}: re-registering targets: {}", options_.engine.ToString(), st.ToString());
    }
  }
}

void ClusterMember::Campaign() {
  etcdserverpb::TxnRequest txn;
  const std::string key = store_->EtcdKey(kLeaderKey);
  auto* cmp = txn.add_compare();
  cmp->set_key(key);
  cmp->set_target(etcdserverpb::Compare::CREATE);
  cmp->set_result(etcdserverpb::Compare::EQUAL);
  cmp->set_create_revision(0);
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(leader_value_);
  put->set_lease(lease_.load());
  txn.add_failure()->mutable_request_range()->set_key(key);
  auto resp = store_->client().Txn(txn);
  NoteEtcd(resp.ok());
  if (!resp.ok()) return;  // keep the last view; the next tick renews (or holds, or fences)
  std::string holder = leader_value_;
  if (!resp->succeeded()) {
    const auto& range = resp->responses(0).response_range();
    holder = range.kvs_size() > 0 ? range.kvs(0).value() : std::string();
  }
  const bool mine = holder == leader_value_;
  store_->SetLeaderGuard(std::string(kLeaderKey), mine ? std::optional<std::string>(leader_value_) : std::nullopt);
  if (mine != leader_.exchange(mine)) {
    ROS2_LOG_INFO("cluster: engine {} {} the leader", options_.engine.ToString(), mine ? "is now" : "is no longer");
  }
  std::lock_guard lock(mu_);
  const size_t space = holder.find(' ');
  leader_endpoint_ = space == std::string::npos ? std::string() : holder.substr(space + 1);
}

void ClusterMember::MarkExpiredDown() {
  if (!leader_.load() || fenced()) return;
  auto members = store_->Scan(kMembersPrefix);
  if (!members.ok()) return;
  std::set<std::string> alive;
  for (const auto& [key, value] : *members) alive.insert(key.substr(kMembersPrefix.size()));
  const rpc::PoolMap sys = map_->Snapshot();
  // An engine this one never saw as a member is left alone for 2 x TTL
  // after this one started: at a cold start of the whole cluster, the
  // engines last up (UP in the map) get that long to come back UP; marked
  // DOWN they would come back stale (REINT) and be copied again.
  bool starting = false;
  {
    const int64_t two_ttl = 2 * std::chrono::duration_cast<std::chrono::nanoseconds>(options_.ttl).count();
    std::lock_guard lock(mu_);
    for (const std::string& e : alive) seen_members_.insert(e);
    starting = SteadyNs() - started_ns_ < two_ttl;
  }
  for (const auto& e : sys.engines()) {
    if (alive.count(e.uuid()) != 0) continue;
    if (starting) {
      std::lock_guard lock(mu_);
      if (!seen_members_.contains(e.uuid())) continue;
    }
    bool any_up = false;
    for (const auto& t : sys.targets()) any_up |= t.engine_uuid() == e.uuid() && t.state() != rpc::TARGET_DOWN && t.state() != rpc::TARGET_DOWNOUT;
    if (!any_up) continue;
    auto uuid = Uuid::Parse(e.uuid());
    if (!uuid.ok()) continue;
    StoreBatch guard;
    guard.Require(std::string(kLeaderKey), leader_value_);  // a deposed leader cannot write
    guard.Put(std::string(kEngineStatePrefix) + e.uuid(), fmt::format("down {}", HybridClock::WallMillis()));
    auto version = map_->SetEngineState(*uuid, rpc::TARGET_DOWN, guard);
    if (version.ok()) {
      ROS2_LOG_WARN("cluster: engine {}: lease expired; its targets are DOWN (map version {}) at wall ms {}", e.uuid(),
                    *version, HybridClock::WallMillis());
    } else {
      ROS2_LOG_WARN("cluster: marking engine {} DOWN: {}", e.uuid(), version.status().ToString());
      if (version.status().code() == Status::Code::kBusy) leader_.store(false);
    }
  }
}

void ClusterMember::RefreshPeers() {
  auto members = store_->Scan(kMembersPrefix);
  NoteEtcd(members.ok());
  if (!members.ok()) return;
  std::map<std::string, std::string> endpoints;
  for (const auto& [key, value] : *members) {
    rpc::EngineInfo info;
    if (info.ParseFromString(value) && !info.address().empty()) endpoints[info.uuid()] = info.address();
  }
  std::lock_guard lock(mu_);
  for (const auto& [uuid, endpoint] : endpoints) seen_members_.insert(uuid);
  peer_endpoints_ = std::move(endpoints);
}

Status ClusterMember::PeersConfirmEtcdDown() {
  if (!options_.peers) return Status::Busy("no peer to ask");
  // The hold must end within a TTL of etcd's return (see docs/cluster.md):
  // TTL/4 of hold, a tick between questions, two to ask, two of staleness.
  if (std::chrono::duration_cast<std::chrono::milliseconds>(options_.ttl) / 4 + 5 * Tick() >= options_.ttl) {
    return Status::Busy(fmt::format("a {} s TTL is too short to hold", options_.ttl.count()));
  }
  const std::string self = options_.engine.ToString();
  const rpc::PoolMap sys = map_->Snapshot();
  // Every other engine that could act on the map once etcd serves it: each the
  // map has UP, and each that held a membership lease at the last read of
  // members/ (an engine the map has DOWN that joined again, or a new one).
  std::map<std::string, std::string> ask;
  std::set<std::string> engines;  // the map's and the members', for the majority
  {
    std::lock_guard lock(mu_);
    for (const auto& e : sys.engines()) {
      engines.insert(e.uuid());
      bool up = false;
      for (const auto& t : sys.targets()) up |= t.engine_uuid() == e.uuid() && t.state() != rpc::TARGET_DOWN && t.state() != rpc::TARGET_DOWNOUT;
      if (!up || e.uuid() == self) continue;
      auto it = peer_endpoints_.find(e.uuid());
      if (it == peer_endpoints_.end()) return Status::Busy(fmt::format("engine {} is UP, its endpoint unknown", e.uuid()));
      ask[e.uuid()] = it->second;
    }
    for (const auto& [uuid, endpoint] : peer_endpoints_) {
      engines.insert(uuid);
      if (uuid != self) ask[uuid] = endpoint;
    }
  }
  const auto tick = Tick();
  size_t agree = 1;  // this engine
  for (const PeerAnswer& a : options_.peers->Ask(ask, 2 * tick)) {
    if (!a.body.ok()) return Status::Busy(fmt::format("engine {} did not answer: {}", a.engine_uuid, a.body.status().ToString()));
    // An answer counts only if the peer's last etcd call failed and is recent:
    // a peer that reaches etcd (or whose view is stale) may see the map change.
    if (a.body->etcd_reachable()) return Status::Busy(fmt::format("engine {} reaches etcd", a.engine_uuid));
    if (a.body->last_attempt_age_ms() > static_cast<uint64_t>(2 * tick.count())) {
      return Status::Busy(fmt::format("engine {} has not tried etcd for {} ms", a.engine_uuid,
                                      a.body->last_attempt_age_ms()));
    }
    ++agree;
  }
  if (2 * agree <= std::max<size_t>(engines.size(), 1)) {
    return Status::Busy(fmt::format("only {} of the cluster's {} engines answered", agree, engines.size()));
  }
  return Status::Ok();
}

void ClusterMember::HoldOrFence() {
  leader_.store(false);
  Status confirmed = PeersConfirmEtcdDown();
  if (confirmed.ok()) {
    const int64_t quarter = std::chrono::duration_cast<std::chrono::nanoseconds>(options_.ttl).count() / 4;
    hold_until_ns_.store(SteadyNs() + quarter);
    if (options_.fence_deadline_ns != nullptr) {
      options_.fence_deadline_ns->store(WritesUntilNs(), std::memory_order_relaxed);
    }
    if (held() && !held_logged_.exchange(true)) {
      ROS2_LOG_WARN("cluster: engine {}: etcd unreachable for {} ms, and from every engine the map has UP: HELD, "
                    "acknowledging writes under the last map",
                    options_.engine.ToString(), lease_age_ms());
    }
  } else {
    std::lock_guard lock(mu_);
    fence_reason_ = confirmed.message();
  }
  if (fenced() && !fenced_logged_.exchange(true)) {
    held_logged_.store(false);
    std::string reason;
    {
      std::lock_guard lock(mu_);
      reason = fence_reason_;
    }
    // When writes stopped: the data path refuses them from WritesUntilNs() on,
    // which may be earlier than this line (the thread waits on etcd calls).
    const int64_t late_ms = std::max<int64_t>(0, SteadyNs() - WritesUntilNs()) / 1'000'000;
    ROS2_LOG_ERROR(
        "cluster: engine {}: lease not renewed for {} ms (over half its {} s TTL) and no hold ({}): FENCED, "
        "refusing writes since wall ms {} until etcd answers again",
        options_.engine.ToString(), lease_age_ms(), options_.ttl.count(), reason,
        static_cast<int64_t>(HybridClock::WallMillis()) - late_ms);
  }
}

void ClusterMember::Run() {
  const auto tick = Tick();
  const auto renew_every = std::chrono::duration_cast<std::chrono::milliseconds>(options_.ttl) / 3;
  auto last_renew = std::chrono::steady_clock::now();
  while (!stop_.load()) {
    {
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, tick, [&] { return stop_.load() || members_changed_; });
      members_changed_ = false;
    }
    if (stop_.load()) break;
    const auto now = std::chrono::steady_clock::now();
    // While etcd fails, renew at every tick rather than every ttl/3.
    if (now - last_renew >= renew_every || !etcd_ok_.load()) {
      Renew();
      last_renew = now;
    }
    if (!etcd_ok_.load()) {
      HoldOrFence();
      continue;
    }
    held_logged_.store(false);
    // Each step stops the tick once etcd fails: on a cut link every call
    // waits out its deadline on every endpoint, and the next tick must renew
    // (or hold, or log the fence) rather than wait on more of them.
    Campaign();
    if (etcd_ok_.load()) RefreshPeers();
    if (etcd_ok_.load()) MarkExpiredDown();
    if (etcd_ok_.load() && options_.on_tick) options_.on_tick();
  }
}

Result<std::vector<MemberState>> ClusterMember::Members() {
  etcdserverpb::RangeRequest req;
  req.set_key(store_->EtcdKey(kMembersPrefix));
  req.set_range_end(PrefixEnd(store_->EtcdKey(kMembersPrefix)));
  ROS2_ASSIGN_OR_RETURN(auto members, store_->client().Range(req));
  ROS2_ASSIGN_OR_RETURN(auto states, store_->Scan(kEngineStatePrefix));
  auto leader = store_->Get(kLeaderKey);
  std::map<std::string, MemberState> out;
  for (const auto& [key, value] : states) {
    MemberState& m = out[key.substr(kEngineStatePrefix.size())];
    m.engine_uuid = key.substr(kEngineStatePrefix.size());
    std::tie(std::ignore, m.since_ms) = ParseEngineState(value);
  }
  const rpc::PoolMap sys = map_->Snapshot();
  for (const auto& e : sys.engines()) out[e.uuid()].engine_uuid = e.uuid();
  for (const auto& kv : members.kvs()) {
    rpc::EngineInfo info;
    if (!info.ParseFromString(kv.value())) continue;
    MemberState& m = out[info.uuid()];
    m.engine_uuid = info.uuid();
    m.endpoint = info.address();
    m.up = true;
    m.leader = leader.ok() && leader->starts_with(info.uuid() + " ");
    auto ttl = store_->client().LeaseTimeToLive(kv.lease());
    if (ttl.ok()) std::tie(m.lease_ttl_s, m.lease_remaining_s) = *ttl;
  }
  std::vector<MemberState> list;
  for (auto& [id, m] : out) list.push_back(std::move(m));
  return list;
}

}  // namespace ros2::control
