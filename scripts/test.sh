#!/usr/bin/env bash
# Builds ROS2 (warnings as errors) and runs the whole test suite with ctest.
# Extra arguments go to ctest, e.g. `scripts/test.sh -L vos` for one component.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# The fio external ioengine (src/fio) builds against fio's own source, fetched
# from Debian's source package (quick when already present).
if [ ! -f third_party/fio-src/config-host.h ]; then
  bash scripts/fetch-fio-source.sh >/dev/null
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROS2_WERROR=ON >/dev/null
ninja -C "$BUILD_DIR"
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 600 -j2 "$@"
