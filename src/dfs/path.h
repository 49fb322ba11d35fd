// Path and name checks of DFS: what an entry name may be and how an absolute
// path splits into components. Free functions; safe from any thread.
#pragma once

#include <string_view>
#include <vector>

#include "common/status.h"

namespace ros2::dfs {

// A valid entry name: 1 .. kMaxNameLength bytes, no '/', no NUL, not "." or
// "..". InvalidArgument or NameTooLong otherwise.
Status ValidateName(std::string_view name);

// Splits an absolute path into its components, dropping empty ones and "."
// ("/a//b/./c" -> a, b, c); ".." is kept (the resolver walks back up). "/" has
// no components. InvalidArgument for a relative or empty path, NameTooLong for
// a path over kMaxPathLength bytes or a component over kMaxNameLength.
Result<std::vector<std::string_view>> SplitPath(std::string_view path);

}  // namespace ros2::dfs
