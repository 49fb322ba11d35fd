// Logging for every ROS2 process: spdlog underneath, one default logger.
//
// Call InitLogging() once at process start (daemons pass their configured level,
// tools default to "warn"); then use ROS2_LOG_{TRACE,DEBUG,INFO,WARN,ERROR} with
// fmt-style formatting. The level can also come from the ROS2_LOG_LEVEL
// environment variable, which wins over the argument. Thread-safe.
#pragma once

#include <string_view>

#include <spdlog/spdlog.h>

#include "common/status.h"

namespace ros2 {

// Sets the level ("trace", "debug", "info", "warn", "error", "off") and the
// pattern; `process` names the process in each line ("engine", "fuse").
Status InitLogging(std::string_view process, std::string_view level = "info");

}  // namespace ros2

#define ROS2_LOG_TRACE(...) SPDLOG_TRACE(__VA_ARGS__)
#define ROS2_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define ROS2_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define ROS2_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define ROS2_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
