# Finds every third-party library ROS2 uses. All come from Debian bookworm packages
# installed by scripts/install-deps.sh; nothing is vendored.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

find_package(ucx CONFIG REQUIRED)            # data plane
find_package(RocksDB CONFIG REQUIRED)        # VOS metadata
find_package(yaml-cpp CONFIG REQUIRED)       # configuration
find_package(spdlog CONFIG REQUIRED)         # logging
find_package(fmt CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)          # command lines
find_package(nlohmann_json CONFIG REQUIRED)  # --json output
find_package(OpenSSL REQUIRED)               # HMAC, AES-GCM, TLS
find_package(Protobuf REQUIRED)              # control plane
find_package(gRPC CONFIG REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)  # metrics endpoints (pull exposer)

pkg_check_modules(URING REQUIRED IMPORTED_TARGET liburing)
pkg_check_modules(ISAL REQUIRED IMPORTED_TARGET libisal)
pkg_check_modules(FUSE3 REQUIRED IMPORTED_TARGET fuse3)
pkg_check_modules(LIBFABRIC REQUIRED IMPORTED_TARGET libfabric)

if(ROS2_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
  include(GoogleTest)
endif()
if(ROS2_BUILD_BENCH)
  find_package(benchmark CONFIG REQUIRED)
endif()
