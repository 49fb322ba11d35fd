#!/usr/bin/env bash
# Builds ROS2 (warnings as errors) and runs the whole test suite with ctest.
# Extra arguments go to ctest, e.g. `scripts/test.sh -L vos` for one component.
# build/ is configured by scripts/configure.sh, exactly as scripts/quickstart.sh
# configures it, so after the quick start the build step has nothing to compile.
# BUILD_DIR picks another build directory.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
start=$(date +%s)
phase() { echo "test: [$1/3] $2 (t+$(($(date +%s) - start))s)"; }

phase 1 "configuring $BUILD_DIR/ (fetches fio's source package the first time)"
BUILD_DIR=$BUILD_DIR bash scripts/configure.sh
phase 2 "building (nothing to do after the quick start; about 14 min on 2 cores from scratch)"
ninja -C "$BUILD_DIR"
phase 3 "running the tests (several minutes: integration tests start real engines)"
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 600 -j2 "$@"
echo "test: done (t+$(($(date +%s) - start))s)"
