// Registration of ros2ctl's sub-commands on the CLI11 application. Each
// function adds one command group; when the user picks a command, its runner is
// stored in *selected and main() runs it after parsing. Runners return the
// command's output or a Status whose message is printed as the error.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "ctl_context.h"

namespace ros2::ctl {

using CommandRunner = std::function<Result<CommandOutput>()>;

void AddPoolCommands(CLI::App& app, CtlContext& ctx, CommandRunner* selected);
// `pool exclude|drain|reintegrate` and `pool rebuild wait` (rebuild_commands.cc).
void AddPoolRebuildCommands(CLI::App* pool, CtlContext& ctx, CommandRunner* selected);
void AddContainerCommands(CLI::App& app, CtlContext& ctx, CommandRunner* selected);
void AddTenantCommands(CLI::App& app, CtlContext& ctx, CommandRunner* selected);
void AddAclCommands(CLI::App& app, CtlContext& ctx, CommandRunner* selected);
void AddClusterCommands(CLI::App& app, CtlContext& ctx, CommandRunner* selected);
// cluster partition|heal|exec of `cluster up --hosts` (host_commands.cc).
void AddHostCommands(CLI::App& cluster, CtlContext& ctx, CommandRunner* selected);
void AddCertCommands(CLI::App& app, CtlContext& ctx, CommandRunner* selected);
// top: a live view of the engines' metrics endpoints (top_command.cc).
void AddTopCommand(CLI::App& app, CtlContext& ctx, CommandRunner* selected);
// key create (built with DFS: ROS2CTL_WITH_FS).
void AddKeyCommands(CLI::App& app, CtlContext& ctx, CommandRunner* selected);
// agent qos (built with the agent's host library: ROS2CTL_WITH_AGENT).
void AddAgentCommands(CLI::App& app, CtlContext& ctx, CommandRunner* selected);

}  // namespace ros2::ctl
