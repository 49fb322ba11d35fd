// RunUcxPerftest: runs ucx_perftest (package ucx-utils) as a server and a client
// process on loopback and returns the client's final figures.
//
// Both processes get the same UCX environment (UCX_TLS, UCX_NET_DEVICES, ...), so
// the baseline runs over exactly the transports the ROS2 transport selected. The
// server is started first on a free port; the client connects to 127.0.0.1, runs
// the test and prints its final line (-f), which is parsed here. Latency tests
// (*_lat) report ONE-WAY latency (round trip / 2) in microseconds; callers that
// compare with a round trip must double it. Bandwidth is in MiB/s (UCX's "MB/s"
// is 2^20 bytes per second). Blocking; call from one thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace ros2::bench {

struct PerftestJob {
  std::string test = "ucp_am_lat";                       // -t: ucp_am_lat, ucp_am_bw, tag_lat, ucp_put_bw, ...
  uint64_t size = 4096;                                  // -s: message size in bytes
  uint64_t iterations = 100000;                          // -n
  uint64_t warmup = 1000;                                // -w
  std::vector<std::pair<std::string, std::string>> env;  // e.g. {"UCX_TLS","tcp,self"}
  std::vector<std::string> extra;                        // more client+server arguments
  std::vector<std::string> server_launcher;              // runs the server through it, e.g. {"taskset", "-c", "1"}
  std::vector<std::string> client_launcher;              // same for the client
  double timeout_s = 120;
};

struct PerftestResult {
  uint64_t iterations = 0;
  double lat_us_typical = 0;  // the percentile column (-R, default 50), one way for *_lat tests
  double lat_us_avg = 0;
  double bw_mib_s = 0;  // overall bandwidth
  double msg_rate = 0;  // overall messages per second
  std::string command;
};

Result<PerftestResult> RunUcxPerftest(const PerftestJob& job);

// Parses the final line of `ucx_perftest -f` output (exposed for reuse and tests).
Result<PerftestResult> ParsePerftestOutput(const std::string& text);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0 and closed).
Result<int> PickFreeTcpPort();

}  // namespace ros2::bench
