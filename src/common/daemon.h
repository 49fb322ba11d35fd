// What the two daemons (ros2-engine, ros2-agent) do alike at start-up: the
// switch from root to their dedicated user (docs/security.md, "Privileges"),
// the stop signals, and the failure line before exit. Each daemon's main
// supplies what is its own (the paths it hands over and checks).
#pragma once

#include <signal.h>

#include <functional>
#include <string>
#include <string_view>

#include "common/privileges.h"
#include "common/status.h"

namespace ros2 {

// Prints "<program>: <status>" to stderr; returns the exit code (1).
int StartupFailure(std::string_view program, const Status& st);

// Started as root with `process` naming another user: looks the user up,
// runs `as_root(user)` (what must be made or handed over while still root),
// switches to the user keeping process.capabilities, then runs
// `as_user(user)` (access checks as that user). Runs before any thread
// starts. Returns what happened, for the log: "switched to user ...",
// "runs as root (process.user: root)", or empty when not started as root.
// The first error of a step is returned as it is.
Result<std::string> LeaveRoot(const ProcessConfig& process, std::string_view program,
                              const std::function<Status(const ServiceUser&)>& as_root,
                              const std::function<Status(const ServiceUser&)>& as_user);

// Blocks SIGTERM and SIGINT in the calling thread, and so in every thread it
// starts afterwards (call it before the first), and ignores SIGPIPE. Returns
// the blocked set, for sigwait or a signalfd.
sigset_t BlockStopSignals();

}  // namespace ros2
