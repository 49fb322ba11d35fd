// ObjectId: the 128-bit identity of an object, and the object classes it encodes.
//
// The definitions (ObjectId, ObjectType, ObjectClass, ObjectClassName,
// ParseObjectClass) live in the public header ros2/types.h (include/ros2),
// which libros2 installs; this internal name stays so the tree's includes are
// unchanged. It also brings fmt, which the public header does not, for the code
// of the tree that formats through this include.
#pragma once

#include <fmt/format.h>

#include "common/status.h"
#include "ros2/types.h"
