#include "common/log.h"
#include "common/library_logging.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace ros2 {

namespace {

std::atomic<bool> initialized{false};  // InitLogging or InitLibraryLogging ran

// The level from $ROS2_LOG, else $ROS2_LOG_LEVEL, else `fallback`: the
// variable wins over a process's configured level too.
std::string LevelFromEnv(std::string_view fallback) {
  for (const char* name : {"ROS2_LOG", "ROS2_LOG_LEVEL"}) {
    if (const char* env = std::getenv(name); env != nullptr && *env != '\0') return env;
  }
  return std::string(fallback);
}

Status Apply(std::string_view process, const std::string& lvl) {
  auto parsed = spdlog::level::from_str(lvl);
  // from_str returns "off" for unknown names; accept only a real "off".
  if (parsed == spdlog::level::off && lvl != "off") {
    return Status::InvalidArgument(
        fmt::format("unknown log level '{}' (expected trace, debug, info, warn, error or off)", lvl));
  }
  initialized.store(true);
  spdlog::drop(std::string(process));  // a second call replaces the logger of that name
  auto logger = spdlog::stderr_color_mt(std::string(process));
  spdlog::set_default_logger(logger);
  spdlog::set_pattern(fmt::format("%Y-%m-%dT%H:%M:%S.%e %^%l%$ {}[%P:%t] %v", process));
  spdlog::set_level(parsed);
  return Status::Ok();
}

}  // namespace

void InitLibraryLogging() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (initialized.load()) return;  // the process chose its level
    // An unknown level in ROS2_LOG leaves the library at warn.
    if (!Apply("ros2", LevelFromEnv("warn")).ok()) (void)Apply("ros2", "warn");
  });
}

Status InitLogging(std::string_view process, std::string_view level) {
  return Apply(process, LevelFromEnv(level));
}

}  // namespace ros2
