#!/usr/bin/env bash
# Offload mode against direct mode, same run: fio through libros2_fio.so on a
# single-node cluster with an agent (ram class, shm), the same job once
# directly and once with ROS2_AGENT_SOCKET set, alternating, for ROUNDS
# rounds. Prints per case IOPS, MiB/s and the host process's CPU (fio's own
# usr+sys) per I/O. Until `ros2-bench offload` exists this is how the
# figures of docs/PERFORMANCE.md's offload rows are made.
#   BUILD=build ROUNDS=3 RUNTIME=5 bash scripts/offload-fio-ab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-3}
RUNTIME=${RUNTIME:-5}
B=$(cd "$BUILD" && pwd)
D=$(mktemp -d /tmp/ros2-offload-ab-XXXX)
C="$B/tools/ros2ctl/ros2ctl --data-dir $D"
trap '$C cluster down >/dev/null 2>&1 || true; rm -rf "$D"' EXIT
$C cluster up --targets 2 --class ram --transport shm --shard-size 1GiB --engine "$B/src/engine/ros2-engine" \
  --agent >/dev/null
$C pool create p --size 1800MiB >/dev/null
$C cont create p c >/dev/null
ENG=(--ioengine="external:$B/src/fio/libros2_fio.so" --data_dir="$D" --pool=p --cont=c)
fio "${ENG[@]}" --name=prep --filename_format=/b/f.0 --rw=write --bs=1m --size=256m --output-format=json >/dev/null
run() {  # mode bs rw
  local env=()
  [ "$1" = offload ] && env=(ROS2_AGENT_SOCKET="$D/agent.sock")
  env "${env[@]}" fio "${ENG[@]}" --name=t --filename_format=/b/f.0 --rw="$3" --bs="$2" --size=256m --iodepth=16 \
    --time_based --runtime="$RUNTIME" --output-format=json 2>/dev/null |
    /usr/bin/python3 -c "
import json, sys
j = json.load(sys.stdin)['jobs'][0]; r = j['read']; t = j['job_runtime'] / 1000; n = r['total_ios']
cpu = (j['usr_cpu'] + j['sys_cpu']) / 100 * t
print('%-8s %-3s iops=%-7.0f MiB/s=%-7.1f host_cpu_us_per_io=%.1f' % ('$1', '$2', n / t, r['io_bytes'] / t / 2**20, cpu / n * 1e6))"
}
for _ in $(seq "$ROUNDS"); do
  run direct 4k randread; run offload 4k randread
  run direct 1m read; run offload 1m read
done
