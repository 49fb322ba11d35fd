#include "transport/ofi/fabric_library.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace ros2::transport::ofi {
namespace {

constexpr const char* kLibrary = "libfabric.so.1";

template <typename F>
bool Bind(void* handle, const char* name, F& out, std::string* missing) {
  out = reinterpret_cast<F>(::dlsym(handle, name));
  if (out == nullptr) *missing += fmt::format("{}{}", missing->empty() ? "" : ", ", name);
  return out != nullptr;
}

Result<const FabricLibrary*> Open() {
  void* handle = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return Status::NotSupported(fmt::format("transport ofi: cannot load {} (install libfabric1): {}", kLibrary,
                                            why != nullptr ? why : "unknown error"));
  }
  static FabricLibrary library;
  std::string missing;
  Bind(handle, "fi_getinfo", library.getinfo, &missing);
  Bind(handle, "fi_freeinfo", library.freeinfo, &missing);
  Bind(handle, "fi_dupinfo", library.dupinfo, &missing);
  Bind(handle, "fi_fabric", library.fabric, &missing);
  Bind(handle, "fi_strerror", library.strerror, &missing);
  if (!missing.empty()) {
    return Status::NotSupported(fmt::format("transport ofi: {} lacks {}", kLibrary, missing));
  }
  return &library;
}

const Result<const FabricLibrary*>& Loaded() {
  static const Result<const FabricLibrary*> loaded = Open();
  return loaded;
}

}  // namespace

Result<const FabricLibrary*> LoadFabricLibrary() {
  return Loaded();
}

const FabricLibrary& Fi() {
  const auto& loaded = Loaded();
  if (!loaded.ok()) {
    std::fprintf(stderr, "transport ofi: libfabric used before it was loaded: %s\n",
                 loaded.status().ToString().c_str());
    std::abort();
  }
  return **loaded;
}

}  // namespace ros2::transport::ofi
