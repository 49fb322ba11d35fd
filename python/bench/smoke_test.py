#!/usr/bin/env python3
"""Smoke test of the PyTorch benchmark (ctest python_bench_smoke): runs
`ros2-bench --json python` (or torch_bench.py itself without ROS2_BENCH) at
tiny sizes, one round, and checks that every line of its output is a record
of the expected shape, one for each case it was asked for."""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

ARGS = ["--sizes", "4096", "--workers", "1", "--rounds", "1", "--min-samples", "64", "--max-samples", "64",
        "--ckpt-size", "4MiB", "--ckpt-tensor", "1MiB", "--shard-size", "256MiB", "--batch-size", "8"]


def main():
    bench = os.environ.get("ROS2_BENCH")
    if bench:
        cmd = [bench, "--json", "python", *ARGS]
    else:
        cmd = [sys.executable, os.path.join(HERE, "torch_bench.py"), "--json", *ARGS]
    fuse = os.environ.get("ROS2_FUSE", "")
    has_mount = bool(fuse) and os.access(fuse, os.X_OK)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240)
    sys.stderr.write(r.stderr[-4000:])
    if r.returncode != 0:
        print("FAIL: %s exited %d" % (" ".join(cmd), r.returncode))
        return 1
    records = []
    for line in r.stdout.splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            print("FAIL: not a JSON record: %r" % line)
            return 1
    expected = {("op=dataloader bs=4096 workers=1 batch=8 class=nvme mode=api", "ext4"),
                ("op=ckpt_save bytes=4194304 class=nvme mode=api", "ext4-fsync"),
                ("op=ckpt_load bytes=4194304 class=nvme mode=api", "ext4")}
    if has_mount:
        expected |= {("op=dataloader bs=4096 workers=1 batch=8 class=nvme mode=api", "mount"),
                     ("op=dataloader bs=4096 workers=1 batch=8 class=nvme mode=mount", "ext4"),
                     ("op=ckpt_save bytes=4194304 class=nvme mode=mount", "ext4-fsync"),
                     ("op=ckpt_load bytes=4194304 class=nvme mode=mount", "ext4")}
    seen = set()
    for rec in records:
        for key in ("bench", "case", "metric", "value", "baseline", "baseline_value", "ratio", "min", "max",
                    "ratio_min", "ratio_max", "rounds"):
            if key not in rec:
                print("FAIL: record without %s: %s" % (key, rec))
                return 1
        if rec["bench"] != "python" or rec["metric"] not in ("samples_s", "gib_s"):
            print("FAIL: unexpected record %s" % rec)
            return 1
        if not (rec["value"] > 0 and rec["baseline_value"] > 0 and rec["rounds"] == 1):
            print("FAIL: empty measurement %s" % rec)
            return 1
        if abs(rec["ratio"] - rec["value"] / rec["baseline_value"]) > 1e-9 * max(1.0, rec["ratio"]):
            print("FAIL: ratio is not value / baseline_value: %s" % rec)
            return 1
        seen.add((rec["case"], rec["baseline"]))
    if seen != expected:
        print("FAIL: records %s, expected %s" % (sorted(seen), sorted(expected)))
        return 1
    print("ok: %d records" % len(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
