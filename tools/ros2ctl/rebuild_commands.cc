// `ros2ctl pool exclude|drain|reintegrate` and `pool rebuild wait`, and the
// rebuild lines of `pool query` (docs/replication.md, "Rebuild").
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "commands.h"
#include "common/config.h"
#include "control/management_client.h"
#include "ctl_context.h"
#include "format.h"

namespace ros2::ctl {
namespace {

struct TargetArgs {
  std::string pool;
  std::string engine;
  int target = -1;  // -1: every target of the engine
  double timeout_s = 600;
};

std::string Duration(uint64_t ms) {
  if (ms < 10'000) return fmt::format("{:.1f} s", double(ms) / 1000.0);
  if (ms < 600'000) return fmt::format("{} s", ms / 1000);
  return fmt::format("{} min", ms / 60'000);
}

// Sets the state of the engine's targets (one, or every one it has).
Result<CommandOutput> ChangeTargets(CtlContext& ctx, const TargetArgs& a, rpc::TargetState state, const char* verb) {
  ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
  auto engine = Uuid::Parse(a.engine);
  if (!engine.ok()) return Status::InvalidArgument(fmt::format("engine '{}': not an engine UUID", a.engine));
  std::vector<uint32_t> indexes;
  if (a.target >= 0) {
    indexes.push_back(static_cast<uint32_t>(a.target));
  } else {
    ROS2_ASSIGN_OR_RETURN(auto status, mgmt->GetEngineStatus());
    for (const auto& t : status.targets()) {
      if (t.engine_uuid() == a.engine) indexes.push_back(t.index());
    }
    if (indexes.empty()) return Status::NotFound(fmt::format("engine {} has no targets in the system map", a.engine));
  }
  uint64_t version = 0;
  for (uint32_t i : indexes) {
    ROS2_ASSIGN_OR_RETURN(version, mgmt->SetTargetState(*engine, i, state, a.pool));
  }
  return CommandOutput{fmt::format("{} {} target(s) of engine {} in pool {} (map version {})\n", verb, indexes.size(),
                                   a.engine, a.pool, version),
                       {{"engine", a.engine}, {"targets", indexes}, {"map_version", version}}};
}

// Any target of the system map DOWN, DRAIN or REINT (a rebuild, drain or
// catch-up is due or runs).
bool AnyMoving(control::ManagementClient* mgmt) {
  auto status = mgmt->GetEngineStatus();
  if (!status.ok()) return false;
  for (const auto& t : status->targets()) {
    if (t.state() == rpc::TARGET_DOWN || t.state() == rpc::TARGET_DRAIN || t.state() == rpc::TARGET_REINT) return true;
  }
  return false;
}

Result<CommandOutput> WaitRebuild(CtlContext& ctx, const TargetArgs& a) {
  ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(a.timeout_s);
  const bool bar = !ctx.options().json && ::isatty(STDERR_FILENO) != 0;
  rpc::PoolInfo info;
  while (true) {
    ROS2_ASSIGN_OR_RETURN(info, mgmt->QueryPool(a.pool));
    const rpc::RebuildStatus& r = info.rebuild();
    if (bar) std::fprintf(stderr, "\r%s\033[K", RebuildProgressLine(r, 30).c_str());
    const bool settled = r.state() == "failed" || ((r.state() == "done" || r.state() == "idle") && !AnyMoving(mgmt));
    if (settled) break;
    if (std::chrono::steady_clock::now() > deadline) {
      if (bar) std::fprintf(stderr, "\n");
      return Status::TimedOut(fmt::format("pool {}: rebuild still {} after {} s", a.pool, r.state(), a.timeout_s));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (bar) std::fprintf(stderr, "\n");
  const rpc::RebuildStatus& r = info.rebuild();
  if (r.state() == "failed") return Status::IOError(fmt::format("pool {}: rebuild failed: {}", a.pool, r.error()));
  return CommandOutput{fmt::format("Pool {}: rebuild {}\n{}", a.pool, r.state(), RebuildToText(r)), RebuildToJson(r)};
}

}  // namespace

nlohmann::json RebuildToJson(const rpc::RebuildStatus& r) {
  const std::string state = r.state().empty() ? "idle" : r.state();
  return {{"state", state},
          {"map_version", r.map_version()},
          {"targets", std::vector<uint32_t>(r.targets().begin(), r.targets().end())},
          {"objects_done", r.objects_done()},
          {"objects_total", r.objects_total()},
          {"bytes_done", r.bytes_done()},
          {"bytes_total", r.bytes_total()},
          {"bytes_per_second", r.bytes_per_second()},
          {"eta_ms", r.eta_ms()},
          {"started_ms", r.started_ms()},
          {"finished_ms", r.finished_ms()},
          {"engines_done", r.engines_done()},
          {"engines_total", r.engines_total()},
          {"error", r.error()}};
}

std::string RebuildToText(const rpc::RebuildStatus& r) {
  const std::string state = r.state().empty() ? "idle" : r.state();
  if (state == "idle") return "  rebuild:     idle\n";
  std::string out = fmt::format("  rebuild:     {} (map version {}, targets {})\n", state, r.map_version(),
                                fmt::join(r.targets(), ","));
  out += fmt::format("    objects:   {}{}\n", r.objects_done(),
                     r.objects_total() ? fmt::format(" of {}", r.objects_total()) : std::string());
  out += fmt::format("    bytes:     {}{}\n", FormatSize(r.bytes_done()),
                     r.bytes_total() ? fmt::format(" of {}", FormatSize(r.bytes_total())) : std::string());
  out += fmt::format("    rate:      {}/s\n", FormatSize(uint64_t(r.bytes_per_second())));
  out += fmt::format("    engines:   {} of {} done\n", r.engines_done(), r.engines_total());
  if (state == "busy") out += fmt::format("    eta:       {}\n", r.eta_ms() ? Duration(r.eta_ms()) : "unknown");
  if (r.finished_ms() > r.started_ms())
    out += fmt::format("    took:      {}\n", Duration(r.finished_ms() - r.started_ms()));
  if (!r.error().empty()) out += fmt::format("    error:     {}\n", r.error());
  return out;
}

std::string RebuildProgressLine(const rpc::RebuildStatus& r, int width) {
  const std::string state = r.state().empty() ? "idle" : r.state();
  double fraction = r.bytes_total() ? double(r.bytes_done()) / double(r.bytes_total()) : 0.0;
  if (state == "done") fraction = 1.0;
  fraction = std::min(1.0, fraction);
  const int filled = static_cast<int>(fraction * width);
  return fmt::format("[{}{}] {:3.0f}% {} {} of {}, {}/s, ETA {}", std::string(filled, '#'),
                     std::string(width - filled, '.'), fraction * 100.0, state, FormatSize(r.bytes_done()),
                     r.bytes_total() ? FormatSize(r.bytes_total()) : std::string("?"),
                     FormatSize(uint64_t(r.bytes_per_second())), r.eta_ms() ? Duration(r.eta_ms()) : "-");
}

void AddPoolRebuildCommands(CLI::App* pool, CtlContext& ctx, CommandRunner* selected) {
  auto a = std::make_shared<TargetArgs>();
  struct Verb {
    const char* name;
    const char* help;
    rpc::TargetState state;
    const char* done;
  };
  for (const Verb& v : {Verb{"exclude", "Take an engine's targets (or one) out: DOWN, then rebuilt elsewhere",
                             rpc::TARGET_DOWN, "Excluded"},
                        Verb{"drain",
                             "Move an engine's targets' data (or one's) elsewhere while they serve, then take them out "
                             "(DRAIN, then DOWNOUT)",
                             rpc::TARGET_DRAIN, "Draining"},
                        Verb{"reintegrate", "Bring an engine's targets back: written at once, caught up, then UP",
                             rpc::TARGET_UP, "Reintegrated"}}) {
    CLI::App* cmd = pool->add_subcommand(v.name, v.help);
    cmd->add_option("pool", a->pool, "Pool label or UUID")->required();
    cmd->add_option("engine", a->engine, "Engine UUID (ros2ctl cluster status)")->required();
    cmd->add_option("--target,-t", a->target, "One target index of the engine (default: all of them)");
    cmd->callback(
        [&ctx, a, selected, v] { *selected = [&ctx, a, v]() { return ChangeTargets(ctx, *a, v.state, v.done); }; });
  }
  CLI::App* rebuild = pool->add_subcommand("rebuild", "Follow a pool's rebuild");
  rebuild->require_subcommand(1);
  CLI::App* wait = rebuild->add_subcommand("wait", "Wait until the pool's rebuild is done, with a progress bar");
  wait->add_option("pool", a->pool, "Pool label or UUID")->required();
  wait->add_option("--timeout", a->timeout_s, "Give up after this many seconds (default 600)");
  wait->callback([&ctx, a, selected] { *selected = [&ctx, a]() { return WaitRebuild(ctx, *a); }; });
}

}  // namespace ros2::ctl
