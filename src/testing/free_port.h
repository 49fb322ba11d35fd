// A TCP port on 127.0.0.1 that was free a moment ago, for servers a test
// starts that cannot report the port they bound (etcd, a metrics endpoint
// given a fixed address, Prometheus). Part of the harness library
// (ros2_harness, docs/testing.md).
#pragma once

#include "common/status.h"

namespace ros2::testing {

// The kernel's pick for port 0 on 127.0.0.1, released before returning: a
// race with other processes is possible but rare.
Result<int> FreeLoopbackPort();

}  // namespace ros2::testing
