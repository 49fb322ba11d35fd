// `ros2ctl fs ls` and `fs stat`: a DFS entry's attributes as ls(1)/stat(1)
// style text and as JSON (type, octal mode, size, owner, ISO-8601 UTC times,
// inode, object id, a symlink's target). Free functions used by the fs
// commands on their thread.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ctl_context.h"
#include "fs_session.h"

namespace ros2::ctl {

// "drwxr-xr-x" for a mode with its type bits.
std::string ModeString(mode_t mode);
// "file", "dir", "symlink" or "other".
std::string TypeName(mode_t mode);
// "2026-11-22T10:53:01.123456789Z".
std::string IsoTime(const timespec& t);

// A directory's entries (names only, or with `long_format` attributes via one
// lookup per entry), or a single non-directory entry.
Result<CommandOutput> ListPath(FsSession& session, const std::string& path, bool long_format);
// stat(1) of one entry (a symlink itself, not its target).
Result<CommandOutput> StatPath(FsSession& session, const std::string& path);

}  // namespace ros2::ctl
