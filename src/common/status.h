// Status and Result<T>: how every ROS2 function reports success or failure.
//
// The definitions live in the public header ros2/types.h (include/ros2), which
// libros2 installs; this internal name stays so the tree's includes are
// unchanged. ROS2_RETURN_IF_ERROR and ROS2_ASSIGN_OR_RETURN come from there too.
#pragma once

#include "ros2/types.h"
