// agent qos: show and set a running ros2-agent's per-tenant QoS limits
// (docs/agent.md, "QoS"), over the agent's socket.
#include <cstdlib>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "client/offload/host_session.h"
#include "commands.h"
#include "common/config.h"

namespace ros2::ctl {

namespace {

struct AgentQosArgs {
  std::string socket;
  std::string tenant;
  std::string bandwidth;  // a size per second ("50MiB"), 0 = unlimited
  std::string iops;
  int timeout_s = 5;
};

std::string Limit(uint64_t v, bool bytes) {
  if (v == 0) return "unlimited";
  return bytes ? fmt::format("{} B/s ({:.1f} MiB/s)", v, static_cast<double>(v) / (1 << 20)) : fmt::format("{}/s", v);
}

}  // namespace

void AddAgentCommands(CLI::App& app, CtlContext& ctx, CommandRunner* selected) {
  CLI::App* agent = app.add_subcommand("agent", "Talk to a running ros2-agent (offload mode)");
  agent->require_subcommand(1);
  auto a = std::make_shared<AgentQosArgs>();
  CLI::App* qos = agent->add_subcommand(
      "qos", "Show the tenants' QoS limits and what they were served; with --tenant, change that tenant's limits live");
  qos->add_option("--socket", a->socket, "The agent's socket (default: DIR/agent.sock of --data-dir)");
  qos->add_option("--tenant", a->tenant, "The tenant whose limits change");
  qos->add_option("--bandwidth", a->bandwidth, "Bytes per second, e.g. 50MiB (0: unlimited)");
  qos->add_option("--iops", a->iops, "I/Os per second (0: unlimited)");
  qos->add_option("--timeout", a->timeout_s, "Seconds to wait for the agent")->capture_default_str();
  qos->callback([&ctx, a, selected] {
    *selected = [&ctx, a]() -> Result<CommandOutput> {
      std::string socket = a->socket;
      if (socket.empty() && !ctx.options().data_dir.empty()) {
        socket = (std::filesystem::path(ctx.options().data_dir) / "agent.sock").string();
      }
      if (socket.empty()) return Status::InvalidArgument("agent qos: --socket PATH or --data-dir DIR is required");
      nlohmann::json request = nlohmann::json::object();
      if (!a->tenant.empty()) {
        request["tenant"] = a->tenant;
        if (!a->bandwidth.empty()) {
          auto v = ParseSize(a->bandwidth);
          if (!v.ok()) {
            return Status::InvalidArgument(fmt::format("bad --bandwidth '{}': {}", a->bandwidth, v.status().message()));
          }
          request["bandwidth"] = *v;
        }
        if (!a->iops.empty()) {
          char* end = nullptr;
          const unsigned long long v = std::strtoull(a->iops.c_str(), &end, 10);
          if (a->iops.empty() || *end != '\0' || a->iops[0] == '-') {
            return Status::InvalidArgument(fmt::format("bad --iops '{}': expected a count", a->iops));
          }
          request["iops"] = static_cast<uint64_t>(v);
        }
      } else if (!a->bandwidth.empty() || !a->iops.empty()) {
        return Status::InvalidArgument("agent qos: --bandwidth and --iops need --tenant NAME");
      }
      ROS2_ASSIGN_OR_RETURN(std::string reply,
                            agent::AgentQos(socket, request.dump(), std::chrono::seconds(a->timeout_s)));
      nlohmann::json status = nlohmann::json::parse(reply, nullptr, false);
      if (status.is_discarded() || !status.contains("qos")) {
        return Status::Protocol("agent qos: the agent's reply is not a status document with qos");
      }
      CommandOutput out;
      out.json = status["qos"];
      for (const auto& t : status["qos"]) {
        out.human +=
            fmt::format("{}: bandwidth {}, iops {}; served {} bytes, {} I/Os\n", t["tenant"].get<std::string>(),
                        Limit(t["bandwidth"].get<uint64_t>(), true), Limit(t["iops"].get<uint64_t>(), false),
                        t["bytes_served"].get<uint64_t>(), t["ios_served"].get<uint64_t>());
      }
      return out;
    };
  });
}

}  // namespace ros2::ctl
