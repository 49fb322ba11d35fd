// RunFiPingpong: runs libfabric's fi_pingpong (package libfabric-bin) as a
// server and a client process on loopback and returns the client's figures:
// the libfabric baseline that `ros2-bench transport --provider ofi` sits
// beside, as ucx_perftest is UCX's.
//
// Both run `-e rdm -d <domain>` with the provider by name (`tcp;ofi_rxm` on
// domain `lo`, or `shm`) and one transfer size; the client connects to
// 127.0.0.1. fi_pingpong sends `size` bytes and waits for `size` bytes back,
// one at a time: its usec/xfer is half the round trip, its MB/sec the bytes of
// both directions over the time (10^6 bytes a MB). Blocking; call from one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace ros2::bench {

struct FiPingpongJob {
  std::string provider = "tcp;ofi_rxm";  // -p
  std::string domain = "lo";             // -d ("" leaves it to fi_getinfo)
  uint64_t size = 4096;                  // -S
  uint64_t iterations = 10000;           // -I
  std::vector<std::string> server_launcher;
  std::vector<std::string> client_launcher;
  double timeout_s = 120;
};

struct FiPingpongResult {
  uint64_t iterations = 0;
  double rtt_us = 0;    // 2 x usec/xfer
  double bw_mib_s = 0;  // fi_pingpong's MB/sec in MiB/s
  std::string command;
};

Result<FiPingpongResult> RunFiPingpong(const FiPingpongJob& job);

// Parses fi_pingpong's result line (the line after the "bytes #sent ..." header).
Result<FiPingpongResult> ParseFiPingpongOutput(const std::string& text);

}  // namespace ros2::bench
