#!/usr/bin/env bash
# The one configuration of build/ that scripts/quickstart.sh and scripts/test.sh
# share, so whichever runs second compiles nothing the first already built:
# fetch fio's source for the fio external ioengine (quick when already present),
# then configure RelWithDebInfo with warnings as errors. Its debug information
# is line tables only (-g1): backtraces, perf and sanitizer reports still name
# file and line, and a build from scratch is about a fifth shorter than with
# full debug information (-g), which gdb's view of local variables needs
# (pass -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g -DNDEBUG" for it).
# BUILD_DIR (default build) picks the directory; extra arguments go to cmake.
# A compiler launcher such as ccache is taken from the environment
# (CMAKE_C_COMPILER_LAUNCHER / CMAKE_CXX_COMPILER_LAUNCHER), as cmake does.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# The fio external ioengine (src/fio) builds against fio's own source, fetched
# from Debian's source package into third_party/fio-src. Fetched the same way by
# both commands: without it the configuration would differ (no libros2_fio.so).
if [ ! -f third_party/fio-src/config-host.h ] || [ ! -f third_party/fio-src/fio.h ]; then
  bash scripts/fetch-fio-source.sh >/dev/null
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROS2_WERROR=ON \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  "$@" >/dev/null
