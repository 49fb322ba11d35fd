// `ros2ctl fs mkdir`, `rm`, `mv` and `cat`: namespace changes and reading one
// file, on a mounted FsSession, with mkdir(1)/rm(1)/mv(1) rules (-p, -r, -f,
// moving into an existing directory). Errors name the path and the errno text.
// Free functions used by the fs commands on their thread.
#pragma once

#include <string>

#include "ctl_context.h"
#include "fs_session.h"

namespace ros2::ctl {

// mkdir PATH (the parent must exist; EEXIST when PATH does) or, with
// `parents`, every missing component (an existing directory is fine).
Result<CommandOutput> MakeDirectory(FsSession& session, const std::string& path, bool parents, mode_t mode);
// rm PATH: a file, a symlink or an empty directory; with `recursive` a whole
// tree; with `force` a missing PATH is not an error. The root is refused.
Result<CommandOutput> RemovePath(FsSession& session, const std::string& path, bool recursive, bool force);
// mv SRC DST: rename(2), replacing a compatible DST; into DST when it is an
// existing directory.
Result<CommandOutput> MovePath(FsSession& session, const std::string& src, const std::string& dst);
// cat PATH: the file's bytes to `out_fd`, in order, in pipelined blocks.
Result<CommandOutput> CatPath(FsSession& session, const std::string& path, int out_fd);

}  // namespace ros2::ctl
