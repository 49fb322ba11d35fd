#include "common/log.h"

#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace ros2 {

Status InitLogging(std::string_view process, std::string_view level) {
  std::string lvl(level);
  if (const char* env = std::getenv("ROS2_LOG_LEVEL"); env != nullptr && *env != '\0') lvl = env;
  auto parsed = spdlog::level::from_str(lvl);
  // from_str returns "off" for unknown names; accept only a real "off".
  if (parsed == spdlog::level::off && lvl != "off") {
    return Status::InvalidArgument(
        fmt::format("unknown log level '{}' (expected trace, debug, info, warn, error or off)", lvl));
  }
  auto logger = spdlog::stderr_color_mt(std::string(process));
  spdlog::set_default_logger(logger);
  spdlog::set_pattern(fmt::format("%Y-%m-%dT%H:%M:%S.%e %^%l%$ {}[%P:%t] %v", process));
  spdlog::set_level(parsed);
  return Status::Ok();
}

}  // namespace ros2
