#include "engine/request_budget.h"

#include <algorithm>

#include <fmt/format.h>

namespace ros2::engine {

Status InFlightBudget::Reserve(uint64_t connection, uint64_t bytes) {
  auto it = connections_.find(connection);
  const Usage mine = it == connections_.end() ? Usage{} : it->second;
  if (mine.requests + 1 > limits_.connection_requests_in_flight) {
    return Status::Busy(
        fmt::format("this connection has {} requests in flight (limits.connection_requests_in_flight "
                    "{}); retry once some completed",
                    mine.requests, limits_.connection_requests_in_flight));
  }
  if (mine.bytes + bytes > limits_.connection_bytes_in_flight) {
    return Status::Busy(
        fmt::format("this connection has {} bytes in flight and asks for {} more "
                    "(limits.connection_bytes_in_flight {}); retry once some completed",
                    mine.bytes, bytes, limits_.connection_bytes_in_flight));
  }
  if (total_.requests + 1 > limits_.target_requests_in_flight) {
    return Status::Busy(fmt::format("the target has {} requests in flight (limits.target_requests_in_flight {})",
                                    total_.requests, limits_.target_requests_in_flight));
  }
  if (total_.bytes + bytes > limits_.target_bytes_in_flight) {
    return Status::Busy(
        fmt::format("the target has {} bytes in flight and a request asks for {} more "
                    "(limits.target_bytes_in_flight {})",
                    total_.bytes, bytes, limits_.target_bytes_in_flight));
  }
  Usage& u = connections_[connection];
  u.bytes += bytes;
  u.requests += 1;
  total_.bytes += bytes;
  total_.requests += 1;
  return Status::Ok();
}

void InFlightBudget::Release(uint64_t connection, uint64_t bytes) {
  auto it = connections_.find(connection);
  if (it == connections_.end()) return;
  it->second.bytes -= std::min(it->second.bytes, bytes);
  it->second.requests -= std::min<uint64_t>(it->second.requests, 1);
  total_.bytes -= std::min(total_.bytes, bytes);
  total_.requests -= std::min<uint64_t>(total_.requests, 1);
  if (it->second.requests == 0) connections_.erase(it);
}

uint64_t InFlightBudget::connection_bytes(uint64_t connection) const {
  auto it = connections_.find(connection);
  return it == connections_.end() ? 0 : it->second.bytes;
}

}  // namespace ros2::engine
