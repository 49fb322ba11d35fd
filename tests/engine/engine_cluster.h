// EngineCluster: the fixture of the engine integration tests — one real
// ros2-engine process in a temporary directory plus a Management client
// authenticated as the cluster's admin. Test thread only; the engine is stopped
// when the fixture goes out of scope.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "control/control_channel.h"
#include "control/management_client.h"
#include "testing/engine_process.h"

namespace ros2::testing {

struct EngineCluster {
  TempDir dir;
  std::unique_ptr<EngineProcess> engine;
  control::Credentials admin;
  std::unique_ptr<control::ManagementClient> mgmt;

  // Starts the engine in DIR/engine0 and connects. Use under ASSERT_NO_FATAL_FAILURE.
  void Start(EngineOptions options) {
    options.data_dir = dir.path() + "/engine0";
    auto e = EngineProcess::Start(options);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine = std::move(*e);
    Connect();
  }
  // (Re)connects the admin Management client, e.g. after an engine restart.
  void Connect() {
    auto secret = control::ReadSecretFile(engine->admin_secret_file());
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    admin = {"admin", *secret};
    auto channel = control::MakeControlChannel({.address = engine->control()});
    ASSERT_TRUE(channel.ok()) << channel.status().ToString();
    mgmt = std::make_unique<control::ManagementClient>(*channel, admin);
  }
};

}  // namespace ros2::testing
