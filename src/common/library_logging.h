// The logging default of the libraries (libros2, and through it the Python
// package and the fio engine): in a process that did not call InitLogging
// (log.h), log warnings and errors only, to stderr, unless ROS2_LOG (or
// ROS2_LOG_LEVEL) = trace|debug|info|... asks for another level; a process that
// did (a daemon, a tool) keeps its own level. docs/observability.md, "Logs of
// the libraries". Thread-safe.
#pragma once

namespace ros2 {

// Applies the default above once; cheap after the first call. Entry points of
// the libraries call it (client::Client::Connect).
void InitLibraryLogging();

}  // namespace ros2
