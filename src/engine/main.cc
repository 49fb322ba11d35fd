// ros2-engine: the storage server daemon. Reads its configuration (YAML file,
// embedded defaults, command-line overrides), starts the Engine, prints the
// ready line, and shuts down cleanly on SIGTERM or SIGINT (exit 0). Started as
// root, it switches to its dedicated user first (LeaveRoot).
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <iostream>
#include <utility>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/daemon.h"
#include "common/log.h"
#include "engine/engine.h"

namespace {

int Fail(const ros2::Status& st) { return ros2::StartupFailure("ros2-engine", st); }

// Started as root: hands the data directory to process.user, switches to it
// keeping process.capabilities, and checks that user reaches every path the
// engine opens later (docs/security.md, "Privileges"). Runs before any thread
// starts. Returns what happened, for the log.
ros2::Result<std::string> LeaveRoot(const ros2::engine::EngineConfig& config) {
  return ros2::LeaveRoot(
      config.process, "ros2-engine",
      [&](const ros2::ServiceUser& user) {
        return ros2::GiveDirectoryTo(config.data_dir, 0700, user).WithContext("engine: data_dir");
      },
      [&](const ros2::ServiceUser& user) -> ros2::Status {
        ROS2_RETURN_IF_ERROR(ros2::CheckAccessAsUser(config.data_dir, R_OK | W_OK | X_OK, "engine: data_dir", user));
        if (config.control.join.empty()) {
          const std::string socket = ros2::engine::ControlSocketAddress(config).substr(5);  // after "unix:"
          ROS2_RETURN_IF_ERROR(ros2::CheckAccessAsUser(std::filesystem::path(socket).parent_path().string(),
                                                       W_OK | X_OK, "engine: control.socket's directory", user));
        }
        const auto& c = config.control;
        for (const auto& [key, path] :
             {std::pair<const char*, const std::string&>{"control.join_secret_file", c.join_secret_file},
              {"control.tls_cert", c.tls_cert},
              {"control.tls_key", c.tls_key},
              {"control.tls_ca", c.tls_ca}}) {
          if (!path.empty()) {
            ROS2_RETURN_IF_ERROR(ros2::CheckAccessAsUser(path, R_OK, fmt::format("engine: {}", key), user));
          }
        }
        return ros2::Status::Ok();
      });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ros2-engine: the ROS2 storage server"};
  std::string provider;
  std::string config_path, data_dir, storage_class, transport_kind, listen, join, join_secret, log_level;
  uint32_t targets = 0;
  app.add_option("-c,--config", config_path, "YAML configuration file")->check(CLI::ExistingFile);
  app.add_option("-d,--data-dir", data_dir, "data directory (overrides data_dir)");
  app.add_option("-t,--targets", targets, "number of targets (overrides targets)");
  app.add_option("--class", storage_class, "storage class of container shards: nvme | ram (overrides vos.class)");
  app.add_option("--transport", transport_kind, "auto | tcp | shm | rdma (overrides transport.kind)");
  app.add_option("--provider", provider, "ucx | ofi (overrides transport.provider)");
  app.add_option("--listen", listen, "extra TCP control listener host:port (overrides control.listen)");
  app.add_option("--join", join, "management endpoint to register with (overrides control.join)");
  app.add_option("--join-secret-file", join_secret, "admin secret of the joined endpoint");
  app.add_option("--log-level", log_level, "trace | debug | info | warn | error");
  CLI11_PARSE(app, argc, argv);

  ros2::engine::EngineConfig config = ros2::engine::DefaultEngineConfig();
  if (!config_path.empty()) {
    auto loaded = ros2::engine::LoadEngineConfig(config_path);
    if (!loaded.ok()) return Fail(loaded.status());
    config = std::move(*loaded);
  }
  if (!data_dir.empty()) config.data_dir = data_dir;
  if (targets != 0) config.targets = targets;
  if (!storage_class.empty()) {
    auto c = ros2::vos::ParseStorageClass(storage_class);
    if (!c.ok()) return Fail(c.status().WithContext("--class"));
    config.vos.storage_class = *c;
  }
  if (!transport_kind.empty()) {
    auto k = ros2::transport::ParseTransportKind(transport_kind);
    if (!k.ok()) return Fail(k.status().WithContext("--transport"));
    config.transport.kind = *k;
  }
  if (!provider.empty()) {
    auto p = ros2::transport::ParseProvider(provider);
    if (!p.ok()) return Fail(p.status().WithContext("--provider"));
    config.transport.provider = *p;
  }
  if (!listen.empty()) config.control.listen = listen;
  if (!join.empty()) config.control.join = join;
  if (!join_secret.empty()) config.control.join_secret_file = join_secret;
  if (!log_level.empty()) config.log_level = log_level;
  if (auto st = ros2::engine::FinalizeEngineConfig(&config); !st.ok()) return Fail(st);
  auto identity = LeaveRoot(config);
  if (!identity.ok()) return Fail(identity.status());
  if (auto st = ros2::InitLogging("ros2-engine", config.log_level); !st.ok()) return Fail(st);
  if (!identity->empty()) ROS2_LOG_INFO("ros2-engine: {}", *identity);

  // Block the stop signals in every thread; main waits for them with sigwait.
  sigset_t stop_signals = ros2::BlockStopSignals();

  auto engine = ros2::engine::Engine::Start(config);
  if (!engine.ok()) return Fail(engine.status());
  std::cout << (*engine)->ReadyLine() << std::endl;

  int sig = 0;
  sigwait(&stop_signals, &sig);
  ROS2_LOG_INFO("ros2-engine: {} received, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*engine)->Shutdown();
  return 0;
}
