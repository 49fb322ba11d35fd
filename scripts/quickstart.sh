#!/usr/bin/env bash
# The main job: install dependencies, build, and run ROS2's demo workload,
# which proves the build by writing, reading back and verifying data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build
exec build/tools/ros2-demo "$@"
