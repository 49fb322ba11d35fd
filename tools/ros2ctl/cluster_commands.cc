// cluster up|down|status|demo: a local single-node cluster in a data directory.
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "demo_workload.h"
#include "format.h"
#include "host_cluster.h"
#include "local_cluster.h"
#include "metrics/exporter.h"
#include "transport/transport.h"

namespace ros2::ctl {

namespace {

struct ClusterArgs {
  ClusterUpOptions up;
  int hosts = 0;  // > 0: `cluster up --hosts N` (host_cluster.h)
  bool etcd = false;
  std::string etcd_binary;
  int timeout_s = 60;
  bool force = false;
  DemoOptions demo;
};

Status RequireDataDir(const CtlContext& ctx, std::string_view cmd) {
  if (ctx.options().data_dir.empty()) {
    return Status::InvalidArgument(fmt::format("cluster {}: --data-dir DIR is required", cmd));
  }
  return Status::Ok();
}

Result<CommandOutput> HostsUp(const CtlContext& ctx, const ClusterArgs& a) {
  HostClusterOptions o;
  o.data_dir = ctx.options().data_dir;
  o.hosts = a.hosts;
  o.targets = a.up.targets;
  o.storage_class = a.up.storage_class;
  o.transport = a.up.transport;
  o.engine_binary = a.up.engine_binary;
  o.ready_timeout = std::chrono::seconds(a.timeout_s);
  o.etcd = a.etcd;
  o.etcd_binary = a.etcd_binary;
  ROS2_ASSIGN_OR_RETURN(HostClusterInfo info, HostClusterUp(o));
  std::string human =
      fmt::format("{} hosts up in {} (bridge {}); management on host1: {} and {} (TLS, CA {})\n", info.hosts.size(),
                  info.data_dir, info.bridge, info.control, info.listen, info.tls_ca);
  for (const HostInfo& h : info.hosts) {
    human += fmt::format("  {}  {:<12} netns {}  engine pid {}{}\n", h.hostname, h.address, h.netns, h.engine_pid,
                         h.etcd_pid ? fmt::format("  etcd {} (pid {})", h.etcd_client, h.etcd_pid) : "");
  }
  human += fmt::format("Run a program in a host: ros2ctl --data-dir {} cluster exec 1 -- COMMAND...\n", info.data_dir);
  return CommandOutput{human, info.ToJson()};
}

Result<CommandOutput> HostsStatus(CtlContext& ctx) {
  ROS2_ASSIGN_OR_RETURN(HostClusterInfo info, HostClusterStatus(ctx.options().data_dir));
  nlohmann::json j = info.ToJson();
  std::vector<std::vector<std::string>> rows;
  for (const HostInfo& h : info.hosts) {
    rows.push_back({h.hostname, h.address, h.link_up ? "up" : "down (partitioned)", h.init_pid ? "running" : "gone",
                    h.engine_pid ? std::to_string(h.engine_pid) : "-", h.etcd_pid ? std::to_string(h.etcd_pid) : "-"});
  }
  std::string human = Table({"HOST", "ADDRESS", "LINK", "HOST INIT", "ENGINE", "ETCD"}, rows);
  auto mgmt = ctx.Management();
  auto st = mgmt.ok() ? (*mgmt)->GetEngineStatus() : Result<rpc::EngineStatus>(mgmt.status());
  if (st.ok()) {
    j["engine_status"] = EngineStatusToJson(*st);
    human += EngineStatusToText(*st);
  } else {
    j["engine_status_error"] = st.status().ToString();
    human += "host1's management service: " + st.status().ToString() + "\n";
  }
  return CommandOutput{human, j};
}

}  // namespace

void AddClusterCommands(CLI::App& app, CtlContext& ctx, CommandRunner* selected) {
  CLI::App* cluster = app.add_subcommand("cluster", "Start, stop and inspect a local single-node cluster");
  cluster->require_subcommand(1);
  auto a = std::make_shared<ClusterArgs>();

  CLI::App* up =
      cluster->add_subcommand("up", "Start ros2-engine in the background for --data-dir and wait until ready");
  up->add_option("--targets,-n", a->up.targets, "Number of targets (engine threads)")->capture_default_str();
  up->add_option("--class", a->up.storage_class, "Storage class of the targets: nvme or ram")
      ->check(CLI::IsMember({"nvme", "ram"}))
      ->capture_default_str();
  up->add_option("--transport", a->up.transport, "Data-plane transport: tcp, shm or auto")
      ->check(CLI::IsMember({"tcp", "shm", "auto"}))
      ->capture_default_str();
  up->add_option("--provider", a->up.provider, "Data-plane fabric library: ucx or ofi (libfabric)")
      ->check(CLI::IsMember({"ucx", "ofi"}))
      ->capture_default_str();
  // Accepted for old scripts and ignored: capacity comes from each pool's size.
  up->add_option("--shard-size", a->up.shard_size, "Ignored (a pool's size is its capacity)")->group("");
  up->add_option("--target-cpus", a->up.target_cpus,
                 "CPUs to pin the targets to, comma-separated (target i on the i-th, cycling); default: unpinned")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return transport::ParseCpu(text) ? std::string() : "'" + text + "' is not a CPU number";
          },
          "CPU,..."));
  up->add_option("--engine", a->up.engine_binary, "Path of the ros2-engine binary");
  up->add_option("--listen", a->up.listen,
                 "Also serve the control plane on TCP host:port, with TLS (a CA and an engine certificate are made in "
                 "DIR/tls when missing)");
  up->add_flag("--agent", a->up.agent,
               "Also start ros2-agent (offload mode) with its socket in DIR/agent.sock, the admin tenant mapped for "
               "root and the current user");
  up->add_option("--agent-binary", a->up.agent_binary, "Path of the ros2-agent binary");
  up->add_option("--metrics", a->up.metrics,
                 "Prometheus endpoint host:port of the engine and the agent (port 0: any free port; off: none)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            if (text == "off") return {};
            const Status st = metrics::CheckListenAddress(text, "--metrics");
            return st.ok() ? std::string() : st.message();
          },
          "HOST:PORT|off"))
      ->capture_default_str();
  up->add_option("--timeout", a->timeout_s, "Seconds to wait until the engine is ready")->capture_default_str();
  up->add_option("--hosts", a->hosts,
                 "Start N simulated hosts (network, IPC, PID and mount namespaces on a bridge), one engine each "
                 "(needs root; docs/cluster.md)")
      ->check(CLI::Range(1, 32));
  up->add_flag("--etcd", a->etcd, "With --hosts: also run an etcd member in hosts 1 to 3");
  up->add_option("--etcd-binary", a->etcd_binary, "Path of the etcd binary (default: etcd on PATH)");
  up->callback([&ctx, a, selected] {
    *selected = [&ctx, a]() -> Result<CommandOutput> {
      ROS2_RETURN_IF_ERROR(RequireDataDir(ctx, "up"));
      if (a->hosts > 0) return HostsUp(ctx, *a);
      if (a->etcd) return Status::InvalidArgument("cluster up: --etcd needs --hosts N");
      ClusterUpOptions o = a->up;
      o.data_dir = ctx.options().data_dir;
      o.ready_timeout = std::chrono::seconds(a->timeout_s);
      ROS2_ASSIGN_OR_RETURN(ClusterInfo info, ClusterUp(o));
      std::string human = fmt::format(
          "Cluster up in {} (ros2-engine pid {}, {} {} targets, transport {})\n"
          "  control endpoint:   {}\n  admin secret file:  {}\n  log:                {}\n"
          "Use it with: ros2ctl --data-dir {} pool create mypool --size 1GiB\n",
          info.data_dir, info.pid, info.targets, info.storage_class, info.transport, info.control,
          info.admin_secret_file, info.log_file, info.data_dir);
      if (!info.agent_socket.empty()) {
        human += fmt::format("  agent socket:       {} (ros2-agent pid {}, log {})\n", info.agent_socket,
                             info.agent_pid, info.agent_log);
      }
      if (!info.listen.empty()) {
        human +=
            fmt::format("  TCP (TLS) endpoint: {}; clients and joining engines trust {}\n", info.listen, info.tls_ca);
      }
      return CommandOutput{human, info.ToJson()};
    };
  });

  CLI::App* down = cluster->add_subcommand("down", "Stop the cluster's engine (SIGTERM) and wait for it to exit");
  down->add_option("--timeout", a->timeout_s, "Seconds to wait for the engine to exit")->capture_default_str();
  down->add_flag("--force", a->force, "SIGKILL the engine when it does not exit in time");
  down->callback([&ctx, a, selected] {
    *selected = [&ctx, a]() -> Result<CommandOutput> {
      ROS2_RETURN_IF_ERROR(RequireDataDir(ctx, "down"));
      if (IsHostCluster(ctx.options().data_dir)) {
        ROS2_RETURN_IF_ERROR(HostClusterDown(ctx.options().data_dir));
        return CommandOutput{
            fmt::format("Hosts of {} stopped and their namespaces, links and bridge removed\n", ctx.options().data_dir),
            {{"data_dir", ctx.options().data_dir}, {"stopped", true}}};
      }
      ROS2_ASSIGN_OR_RETURN(bool stopped,
                            ClusterDown(ctx.options().data_dir, std::chrono::seconds(a->timeout_s), a->force));
      std::string human = stopped ? fmt::format("Cluster in {} stopped\n", ctx.options().data_dir)
                                  : fmt::format("No engine was running in {}\n", ctx.options().data_dir);
      return CommandOutput{human, {{"data_dir", ctx.options().data_dir}, {"stopped", stopped}}};
    };
  });

  CLI::App* status = cluster->add_subcommand("status", "Show whether the engine runs and its targets");
  status->callback([&ctx, selected] {
    *selected = [&ctx]() -> Result<CommandOutput> {
      ROS2_RETURN_IF_ERROR(RequireDataDir(ctx, "status"));
      if (IsHostCluster(ctx.options().data_dir)) return HostsStatus(ctx);
      int pid = RunningEnginePid(ctx.options().data_dir);
      if (pid == 0) {
        return Status::NotFound(
            fmt::format("no engine is running in {} (start one with `ros2ctl cluster up "
                        "--data-dir {}`)",
                        ctx.options().data_dir, ctx.options().data_dir));
      }
      ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
      ROS2_ASSIGN_OR_RETURN(auto st, mgmt->GetEngineStatus());
      ROS2_ASSIGN_OR_RETURN(std::string control, ctx.ControlAddress());
      nlohmann::json j = EngineStatusToJson(st);
      j["pid"] = pid;
      j["data_dir"] = ctx.options().data_dir;
      j["control"] = control;
      return CommandOutput{fmt::format("Engine pid {} running in {} (control {})\n{}", pid, ctx.options().data_dir,
                                       control, EngineStatusToText(st)),
                           j};
    };
  });

  CLI::App* demo = cluster->add_subcommand(
      "demo",
      "Write a short workload through libros2 (single values, 4 KiB and 1 MiB arrays, S1 and SX), read it "
      "back and verify it");
  demo->add_option("--pool", a->demo.pool, "Pool to use (created when missing)")->capture_default_str();
  demo->add_option("--cont", a->demo.container, "Container to use (created when missing)")->capture_default_str();
  demo->add_option("--pool-size", a->demo.pool_size,
                   "Size of the pool when it is created (default: the targets' capacity, at most 1 GiB)");
  demo->add_option("--transport", a->demo.transport, "Client data-plane transport: tcp, shm or auto")
      ->check(CLI::IsMember({"tcp", "shm", "auto"}))
      ->capture_default_str();
  demo->add_option("--mib", a->demo.mib, "MiB of 1 MiB extents per object class")->capture_default_str();
  demo->add_option("--net-devices", a->demo.net_devices,
                   "Client UCX_NET_DEVICES (default: the cluster's, from DIR/cluster.json, else lo)");
  demo->callback(
      [&ctx, a, selected] { *selected = [&ctx, a]() -> Result<CommandOutput> { return RunDemo(ctx, a->demo); }; });
  AddHostCommands(*cluster, ctx, selected);
}

}  // namespace ros2::ctl
