// ConnectedContainer: the set-up the tests of the client stack share: a
// libros2 Client connected to a cluster's control plane with the admin
// secret, one of its pools and one container of that pool. ClientOptionsFor
// gives the options for a TestCluster and a transport name; a transport named
// "offload-<transport>" connects through the cluster's ros2-agent (offload
// mode, TestCluster started with --agent). Test-only, header-only (the test
// links ros2_client); one thread.
#pragma once

#include <memory>
#include <string>

#include "ros2/client.h"

namespace ros2::testing {

struct ConnectedContainer {
  std::unique_ptr<client::Client> client;
  std::unique_ptr<client::Pool> pool;
  std::unique_ptr<client::Container> cont;
};

// Options for a client of `cluster` (a TestCluster, test_cluster.h) over
// `transport` (see above).
template <typename Cluster>
client::ClientOptions ClientOptionsFor(const Cluster& cluster, const std::string& transport) {
  client::ClientOptions o;
  o.control = cluster.control();
  o.secret_file = cluster.admin_secret_file();
  o.transport = transport;
  if (transport.starts_with("offload-")) {  // the same calls, run by ros2-agent
    o.agent_socket = cluster.agent_socket();
    o.transport = "auto";
  }
  return o;
}

// Connects with `options`, then pool `pool` and container `cont`; the first
// failure, named.
inline Result<ConnectedContainer> ConnectContainer(const client::ClientOptions& options, const std::string& pool,
                                                   const std::string& cont) {
  ConnectedContainer c;
  auto client = client::Client::Connect(options);
  if (!client.ok()) return client.status().WithContext("connect to " + options.control);
  c.client = std::move(*client);
  auto p = c.client->ConnectPool(pool);
  if (!p.ok()) return p.status().WithContext("connect pool " + pool);
  c.pool = std::move(*p);
  auto k = c.pool->OpenContainer(cont);
  if (!k.ok()) return k.status().WithContext("open container " + cont);
  c.cont = std::move(*k);
  return c;
}

}  // namespace ros2::testing
