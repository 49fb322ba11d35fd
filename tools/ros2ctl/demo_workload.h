// `ros2ctl cluster demo`: proves a cluster works end to end through libros2.
// Creates (or reuses) a pool and a container, writes single values, 4 KiB and
// 1 MiB array extents to one S1 and one SX object, reads everything back,
// verifies it byte for byte, and reports counts and MiB/s. A mismatch or any
// failure is an error (non-zero exit).
#pragma once

#include <string>

#include "commands.h"

namespace ros2::ctl {

struct DemoOptions {
  std::string pool = "demo";
  std::string container = "demo";
  std::string pool_size;  // empty: the targets' capacity, at most 1 GiB
  std::string transport = "auto";
  std::string net_devices;      // client UCX_NET_DEVICES; empty: the cluster's (cluster.json), else lo
  uint32_t mib = 16;            // 1 MiB extents per object class
  uint32_t small_ios = 256;     // 4 KiB extents per object class
  uint32_t single_values = 64;  // single values per object class
  uint32_t queue_depth = 16;    // asynchronous I/Os in flight
};

Result<CommandOutput> RunDemo(CtlContext& ctx, const DemoOptions& options);

}  // namespace ros2::ctl
