// CPU pinning of the calling thread (PinCurrentThreadToCpu) and the check that
// Worker::Wait uses to decide whether it may busy-poll without yielding.
#include <sched.h>

#include <cerrno>
#include <charconv>
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

std::optional<int> ParseCpu(std::string_view text) {
  int cpu = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), cpu);
  if (ec != std::errc() || end != text.data() + text.size() || cpu < 0 || cpu >= CPU_SETSIZE) return std::nullopt;
  return cpu;
}

std::vector<int> CurrentThreadCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

Status SetCurrentThreadCpus(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE) return Status::InvalidArgument(fmt::format("transport: no CPU {}", c));
    CPU_SET(c, &set);
  }
  if (CPU_COUNT(&set) == 0) return Status::InvalidArgument("transport: an empty CPU set");
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return Status::InvalidArgument(fmt::format("transport: setting the thread's CPUs: {}", strerror(errno)));
  }
  return Status::Ok();
}

}  // namespace ros2::transport
