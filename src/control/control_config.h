// ControlConfig: the "control" section of an engine's YAML configuration.
//
//   control:
//     address: unix:/var/lib/ros2/control.sock   # or host:port; default: unix:<data_dir>/control.sock
//     tls_cert: /etc/ros2/control.crt            # TLS when both are given
//     tls_key: /etc/ros2/control.key
//     capability_lifetime: 60m                   # ms, s or m; default 60m
//     pbkdf2_iterations: 10000
//
// ApplyControlConfig fills a ControlConfig from such a node; errors name the
// key (through the common config helpers). Free functions; thread-safe.
#pragma once

#include <string_view>

#include <yaml-cpp/yaml.h>

#include "common/status.h"
#include "control/control_plane.h"
#include "control/control_server.h"

namespace ros2::control {

struct ControlConfig {
  ListenOptions listen;
  std::chrono::seconds capability_lifetime{3600};
  uint32_t pbkdf2_iterations = 10000;
};

// `node` is the "control" map (absent or null: defaults). `where` names it in
// errors ("engine.yaml: control").
Status ApplyControlConfig(const YAML::Node& node, std::string_view where, ControlConfig* out);

}  // namespace ros2::control
