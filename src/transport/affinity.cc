// CPU pinning of the calling thread (PinCurrentThreadToCpu) and the check that
// Worker::Wait uses to decide whether it may busy-poll without yielding.
#include <sched.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "transport/transport.h"

namespace ros2::transport {

Status PinCurrentThreadToCpu(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return Status::InvalidArgument(fmt::format("transport: no CPU {}", cpu));
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return Status::InvalidArgument(fmt::format("transport: pinning the thread to CPU {}: {}", cpu, strerror(errno)));
  }
  return Status::Ok();
}

bool CurrentThreadPinnedToOneCpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return false;
  return CPU_COUNT(&set) == 1;
}

}  // namespace ros2::transport
