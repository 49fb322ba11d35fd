// Local-cluster discovery for the tools: client options from the directory
// of a cluster that `ros2ctl cluster up --data-dir DIR` started, whose
// DIR/cluster.json names the control endpoint and the admin tenant's secret
// file. Not part of libros2 (the client library knows endpoints and secrets,
// not the CLI's files): ros2ctl, ros2-fuse, the fio engine, ros2-bench and
// the Python package link this small library (ros2_local_cluster) to accept
// --data-dir / ROS2_DATA_DIR. Free function; thread-safe.
#pragma once

#include <string_view>

#include "ros2/client.h"

namespace ros2::local_cluster {

// Completes `options` from the cluster in `data_dir`. Fills only what is
// empty (explicit settings win; the secret file only for the admin tenant and
// only when no secret is set) and turns a bare socket path into "unix:/path".
// NotFound when DIR holds no cluster.json, Corruption when it is not a JSON
// object or names no control endpoint that is needed. An empty `data_dir`
// only normalises the endpoint.
Status CompleteClientOptions(client::ClientOptions& options, std::string_view data_dir);

}  // namespace ros2::local_cluster
