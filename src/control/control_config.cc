#include "control/control_config.h"

#include <fmt/format.h>

#include "common/config.h"

namespace ros2::control {

Status ApplyControlConfig(const YAML::Node& node, std::string_view where, ControlConfig* out) {
  if (!node || node.IsNull()) return Status::Ok();
  if (!node.IsMap()) return Status::InvalidArgument(fmt::format("{}: expected a map", where));
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>("");
    if (key != "address" && key != "tls_cert" && key != "tls_key" && key != "capability_lifetime" &&
        key != "pbkdf2_iterations") {
      return Status::InvalidArgument(fmt::format(
          "{}: unknown key '{}' (known: address, tls_cert, tls_key, capability_lifetime, pbkdf2_iterations)", where,
          key));
    }
  }
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "address", &out->listen.address));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "tls_cert", &out->listen.tls_cert_path));
  ROS2_RETURN_IF_ERROR(ReadString(node, where, "tls_key", &out->listen.tls_key_path));
  if (out->listen.tls_cert_path.empty() != out->listen.tls_key_path.empty()) {
    return Status::InvalidArgument(fmt::format("{}: give both tls_cert and tls_key, or neither", where));
  }
  std::chrono::milliseconds lifetime = std::chrono::duration_cast<std::chrono::milliseconds>(out->capability_lifetime);
  ROS2_RETURN_IF_ERROR(ReadDuration(node, where, "capability_lifetime", &lifetime));
  if (lifetime < std::chrono::seconds(1)) {
    return Status::InvalidArgument(fmt::format("{}.capability_lifetime: must be at least 1s", where));
  }
  out->capability_lifetime = std::chrono::duration_cast<std::chrono::seconds>(lifetime);
  uint64_t iterations = out->pbkdf2_iterations;
  ROS2_RETURN_IF_ERROR(ReadUint(node, where, "pbkdf2_iterations", &iterations));
  if (iterations < 1000 || iterations > 10'000'000) {
    return Status::InvalidArgument(
        fmt::format("{}.pbkdf2_iterations: {} is outside [1000, 10000000]", where, iterations));
  }
  out->pbkdf2_iterations = static_cast<uint32_t>(iterations);
  return Status::Ok();
}

}  // namespace ros2::control
