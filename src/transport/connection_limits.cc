// The connection limits of a serving worker (docs/transport.md, "Limits"):
// the worker-wide cap checked at every hello (evicting the oldest connection
// that proved nothing), the per-peer cap charged to proven identities only,
// and the timeout of connections that never authenticate.
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
  if (same >= options().max_connections_per_peer) {
    return Status::Busy(
        fmt::format("transport: refused: {} already has {} connections to worker '{}' "
                    "(max_connections_per_peer)",
                    identity, same, name_));
  }
  conn.auth->identity = std::move(identity);
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

}  // namespace ros2::transport
