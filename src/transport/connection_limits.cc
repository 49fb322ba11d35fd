// The connection limits of a serving worker (docs/transport.md, "Limits"):
// the worker-wide cap checked at every hello (evicting the oldest connection
// that proved nothing), the per-peer cap charged to proven identities only,
// and the timeout of connections that never authenticate; and the count of
// served connections by transport (the engine's ros2_engine_connections).
#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "transport/connection_auth.h"
#include "transport/worker_impl.h"

namespace ros2::transport {

// What a hello claims (its pid) charges nobody: only max_connections here;
// the per-peer limit counts proven identities (ChargeIdentity).
Status WorkerImpl::AdmitHello() {
  const TransportOptions& o = options();
  uint32_t total = 0;
  Connection* oldest = nullptr;  // unauthenticated, to make room
  for (const auto& [id, c] : connections_) {
    if (c->client_side || c->closing) continue;
    ++total;
    if (!c->authenticated && (oldest == nullptr || c->opened < oldest->opened)) oldest = c.get();
  }
  if (total < o.max_connections) return Status::Ok();
  if (oldest == nullptr) {
    return Status::Busy(fmt::format(
        "transport: refused: worker '{}' serves {} authenticated connections (max_connections)", name_, total));
  }
  ++stats_.connections_evicted;
  CloseWithReason(*oldest,
                  fmt::format("transport: closed: worker '{}' is full (max_connections {}) and this "
                              "connection never presented a valid capability",
                              name_, o.max_connections),
                  /*in_callback=*/true);
  return Status::Ok();
}

Status WorkerImpl::ChargeIdentity(Connection& conn, std::string identity) {
  uint32_t same = 0;
  for (const auto& [id, c] : connections_) {
    if (c.get() != &conn && !c->client_side && !c->closing && c->auth && c->auth->identity == identity) ++same;
  }
  return ChargePeerIdentity(*conn.auth, std::move(identity), same, options().max_connections_per_peer, name_);
}

Status ChargePeerIdentity(ConnectionAuth& auth, std::string identity, uint32_t same, uint32_t max_connections_per_peer,
                          std::string_view worker) {
  if (same >= max_connections_per_peer) {
    return Status::Busy(
        fmt::format("transport: refused: {} already has {} connections to worker '{}' "
                    "(max_connections_per_peer)",
                    identity, same, worker));
  }
  auth.identity = std::move(identity);
  return Status::Ok();
}

void WorkerImpl::ExpireUnauthenticated(Clock::time_point now) {
  const auto timeout = options().unauthenticated_timeout;
  if (timeout.count() <= 0 || now < next_auth_check_) return;
  next_auth_check_ = now + std::min<std::chrono::milliseconds>(timeout / 4, std::chrono::milliseconds(250));
  std::vector<uint64_t> expired;
  for (const auto& [id, c] : connections_) {
    if (!c->client_side && !c->authenticated && now - c->opened >= timeout) expired.push_back(id);
  }
  for (uint64_t id : expired) {
    if (Connection* c = FindConnection(id)) {
      ++stats_.connections_evicted;
      CloseWithReason(*c,
                      fmt::format("transport: closed: no request with a valid capability within {} ms of the "
                                  "hello (unauthenticated_timeout)",
                                  timeout.count()),
                      /*in_callback=*/false);
    }
  }
}

namespace {

// The slot of served_ for a connection's lanes: 2 rdma (a verbs lane), 0 shm
// (shared-memory lanes only), 1 tcp (the rest).
int8_t ServedSlot(const EndpointInfo& info) {
  const bool verbs = std::any_of(info.lanes.begin(), info.lanes.end(), [](const std::string& lane) {
    const std::string_view tl = std::string_view(lane).substr(0, lane.find('/'));
    return tl.rfind("rc", 0) == 0 || tl.rfind("dc", 0) == 0 || tl.rfind("ud", 0) == 0;
  });
  if (verbs) return 2;
  return info.IsSharedMemoryOnly() ? 0 : 1;
}

}  // namespace

void WorkerImpl::CountServed(Connection& conn, bool opened) {
  if (conn.client_side) return;
  if (opened == (conn.served_slot >= 0)) return;  // counted in once, out once
  if (opened) conn.served_slot = ServedSlot(conn.info);
  std::atomic<uint64_t>& n = served_[static_cast<size_t>(conn.served_slot)];
  const uint64_t now = n.load(std::memory_order_relaxed);
  n.store(opened ? now + 1 : now - 1, std::memory_order_relaxed);  // one writer: this worker's thread
  if (!opened) conn.served_slot = -1;
}

ServedConnections WorkerImpl::served_connections() const {
  return {served_[0].load(std::memory_order_relaxed), served_[1].load(std::memory_order_relaxed),
          served_[2].load(std::memory_order_relaxed)};
}

}  // namespace ros2::transport
