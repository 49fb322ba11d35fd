// Registration of the `ros2ctl fs` command group (ls, put, get, cat, mkdir,
// rm, stat, mv on a container's DFS namespace) on the CLI11 application, the
// same way as the groups in commands.h. Compiled in when the DFS library
// (target ros2_dfs) is part of the build.
#pragma once

#include <CLI/CLI.hpp>

#include "commands.h"

namespace ros2::ctl {

void AddFsCommands(CLI::App& app, CtlContext& ctx, CommandRunner* selected);

}  // namespace ros2::ctl
