#!/usr/bin/env bash
# The main job: install dependencies, build, start a single-node ROS2 cluster
# with embedded defaults, and prove it with a short workload through libros2
# (single values, 4 KiB and 1 MiB array extents on S1 and SX objects, written,
# read back and verified byte-exact). The cluster is stopped at the end unless
# ROS2_KEEP_CLUSTER=1; its directory is ${ROS2_DATA_DIR:-/tmp/ros2-quickstart}.
# Extra arguments go to `ros2ctl cluster up` (e.g. --class ram --transport shm).
# build/ is configured by scripts/configure.sh, as scripts/test.sh configures
# it, so the test command afterwards compiles nothing this one built.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${ROS2_DATA_DIR:-/tmp/ros2-quickstart}
start=$(date +%s)
phase() { echo "quickstart: [$1/4] $2 (t+$(($(date +%s) - start))s)"; }

phase 1 "installing Debian packages (about a minute on a fresh machine)"
bash scripts/install-deps.sh
phase 2 "configuring build/ (fetches fio's source package the first time)"
bash scripts/configure.sh
phase 3 "building everything (first build about 14 min on 2 cores, then incremental)"
ninja -C build

phase 4 "starting a single-node cluster and running the demo workload"
ctl=build/tools/ros2ctl/ros2ctl
export ROS2_ENGINE=$PWD/build/src/engine/ros2-engine
if "$ctl" cluster status --data-dir "$DATA_DIR" >/dev/null 2>&1; then
  echo "quickstart: a cluster already runs in $DATA_DIR; using it"
else
  "$ctl" cluster up --data-dir "$DATA_DIR" "$@"
fi
if [ "${ROS2_KEEP_CLUSTER:-0}" != "1" ]; then
  trap '"$ctl" cluster down --data-dir "$DATA_DIR" >/dev/null || true' EXIT
fi
"$ctl" cluster demo --data-dir "$DATA_DIR"
"$ctl" cluster status --data-dir "$DATA_DIR"
if [ "${ROS2_KEEP_CLUSTER:-0}" = "1" ]; then
  echo "quickstart: the cluster keeps running; stop it with: $ctl cluster down --data-dir $DATA_DIR"
fi
echo "quickstart: done (t+$(($(date +%s) - start))s)"
