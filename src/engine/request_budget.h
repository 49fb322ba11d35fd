// Request limits of an engine and the in-flight budget that enforces them.
//
// EngineLimits holds the `limits:` keys of engine.yaml (docs/engine.md,
// "Limits"): how far ahead of wall time a client epoch may run, the largest
// update or fetch, and how many bytes and requests one client connection and
// one target may have in flight. The bytes are those the target allocates for
// a request (its data buffer), reserved before the allocation and released
// with the reply; a request counts from its admission until its reply.
//
// InFlightBudget keeps those counts for one target, per transport connection
// (IncomingRequest::connection_id) and in total. A reservation over a limit is
// refused with Busy naming the limit; the client may retry once its earlier
// requests completed. Owned by a Target and used only from its thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>
#include <unordered_map>

#include "common/status.h"

namespace ros2::engine {

struct EngineLimits {
  // A client epoch (update or punch) whose wall-clock part is more than this
  // ahead of the engine's wall clock is refused.
  std::chrono::milliseconds max_epoch_drift{10'000};
  // Largest update (data bytes) or fetch (buffer bytes) one request may ask
  // for; at most the VOS limit of 1 GiB.
  uint64_t max_io_size = uint64_t{1} << 30;
  uint64_t connection_bytes_in_flight = uint64_t{1} << 30;
  uint64_t connection_requests_in_flight = 8192;
  uint64_t target_bytes_in_flight = uint64_t{2} << 30;
  uint64_t target_requests_in_flight = 32768;
};

class InFlightBudget {
 public:
  explicit InFlightBudget(const EngineLimits& limits) : limits_(limits) {}

  // Counts one request of `bytes` for `connection`; Busy (nothing counted)
  // when that would exceed a connection or target limit.
  Status Reserve(uint64_t connection, uint64_t bytes);
  // Gives back what Reserve counted for the same request.
  void Release(uint64_t connection, uint64_t bytes);

  uint64_t bytes() const { return total_.bytes; }
  uint64_t requests() const { return total_.requests; }
  uint64_t connection_bytes(uint64_t connection) const;
  size_t connections() const { return connections_.size(); }

 private:
  struct Usage {
    uint64_t bytes = 0;
    uint64_t requests = 0;
  };
  const EngineLimits limits_;
  std::unordered_map<uint64_t, Usage> connections_;  // only connections with something in flight
  Usage total_;
};

}  // namespace ros2::engine
