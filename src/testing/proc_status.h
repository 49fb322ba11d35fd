// A field of /proc/<pid>/status in bytes (VmSize, VmRSS, ...: the kernel
// prints them in kB), for tests that bound a process's memory. 0 when the
// process or the field is gone. Header only; any thread.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace ros2::testing {

inline uint64_t ProcStatusBytes(int pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  uint64_t kib = 0;
  while (in >> key) {
    if (key == field + ":") {
      in >> kib;
      break;
    }
  }
  return kib * 1024;
}

}  // namespace ros2::testing
