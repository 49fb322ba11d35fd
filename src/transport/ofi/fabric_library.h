// libfabric's exported entry points, reached through dlopen rather than linked.
//
// Debian's libfabric.so.1 depends on libinfinipath.so.4 (its psm provider),
// whose load-time constructor installs SIGINT and SIGTERM handlers that exit
// the process with status 1. Linked into ros2_transport, that library would
// sit in every process of the project and of its users: a FUSE mount would no
// longer unmount on SIGTERM, a Python program would lose Ctrl-C. So libfabric
// is opened only when a process first asks for the ofi provider. Everything
// else of libfabric's API is inline calls through an object's operation table.
#pragma once

#include <rdma/fabric.h>

#include "common/status.h"

namespace ros2::transport::ofi {

struct FabricLibrary {
  decltype(&::fi_getinfo) getinfo = nullptr;
  decltype(&::fi_freeinfo) freeinfo = nullptr;
  decltype(&::fi_dupinfo) dupinfo = nullptr;  // dupinfo(nullptr) is fi_allocinfo()
  decltype(&::fi_fabric) fabric = nullptr;
  decltype(&::fi_strerror) strerror = nullptr;
};

// Opens libfabric.so.1 once per process; later calls return the same result.
// NotSupported names the library and dlerror's text when it is missing.
Result<const FabricLibrary*> LoadFabricLibrary();

// The loaded library. Only for code that runs on a Fabric, which exists only
// after a successful LoadFabricLibrary().
const FabricLibrary& Fi();

}  // namespace ros2::transport::ofi
