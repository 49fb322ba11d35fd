// cluster partition|heal|exec: the hosts of `cluster up --hosts N`
// (host_cluster.h, docs/cluster.md).
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "host_cluster.h"
#include "host_namespaces.h"

namespace ros2::ctl {

namespace {

struct HostArgs {
  std::string host;
  std::vector<std::string> command;
};

Status RequireHostCluster(const CtlContext& ctx, std::string_view cmd) {
  if (ctx.options().data_dir.empty()) {
    return Status::InvalidArgument(
        fmt::format("cluster {}: --data-dir DIR of a `cluster up --hosts` is required", cmd));
  }
  if (!IsHostCluster(ctx.options().data_dir)) {
    return Status::NotFound(
        fmt::format("cluster {}: {} holds no host cluster (start one with `ros2ctl --data-dir {} "
                    "cluster up --hosts 3`)",
                    cmd, ctx.options().data_dir, ctx.options().data_dir));
  }
  return Status::Ok();
}

void AddLinkCommand(CLI::App& cluster, CtlContext& ctx, CommandRunner* selected, bool partition) {
  const char* name = partition ? "partition" : "heal";
  CLI::App* cmd = cluster.add_subcommand(
      name, partition ? "Cut a host off the others: its link to the bridge goes down (ip link set ... down)"
                      : "Reconnect a partitioned host: its link to the bridge comes up again");
  auto a = std::make_shared<HostArgs>();
  cmd->add_option("host", a->host, "Host number (1..N) or name (host1..)")->required();
  cmd->callback([&ctx, a, selected, partition, name] {
    *selected = [&ctx, a, partition, name]() -> Result<CommandOutput> {
      ROS2_RETURN_IF_ERROR(RequireHostCluster(ctx, name));
      ROS2_RETURN_IF_ERROR(SetHostPartitioned(ctx.options().data_dir, a->host, partition));
      ROS2_ASSIGN_OR_RETURN(HostInfo h, FindHost(ctx.options().data_dir, a->host));
      return CommandOutput{fmt::format("{} ({}) {}\n", h.hostname, h.address,
                                       partition ? "partitioned: its link is down" : "healed: its link is up"),
                           {{"host", h.hostname}, {"link_up", !partition}}};
    };
  });
}

}  // namespace

void AddHostCommands(CLI::App& cluster, CtlContext& ctx, CommandRunner* selected) {
  AddLinkCommand(cluster, ctx, selected, true);
  AddLinkCommand(cluster, ctx, selected, false);

  CLI::App* exec = cluster.add_subcommand(
      "exec", "Run a command inside a host (its network, IPC, PID and mount namespaces): exec HOST -- COMMAND...");
  auto a = std::make_shared<HostArgs>();
  exec->add_option("host", a->host, "Host number (1..N) or name (host1..)")->required();
  exec->add_option("command", a->command, "The command and its arguments (after --)")->required();
  exec->callback([&ctx, a, selected] {
    *selected = [&ctx, a]() -> Result<CommandOutput> {
      ROS2_RETURN_IF_ERROR(RequireHostCluster(ctx, "exec"));
      ROS2_ASSIGN_OR_RETURN(HostInfo h, FindHost(ctx.options().data_dir, a->host));
      ROS2_ASSIGN_OR_RETURN(int code, RunInHost(h.init_pid, a->command, ctx.options().stdout_fd));
      if (code != 0) {
        return Status::IOError(
            fmt::format("cluster exec: `{}` in {} exited with status {}", a->command[0], h.hostname, code));
      }
      CommandOutput out{"", {{"host", h.hostname}, {"exit_code", code}}};
      out.streamed = true;
      return out;
    };
  });
}

}  // namespace ros2::ctl
