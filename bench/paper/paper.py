#!/usr/bin/python3
"""The paper's evaluation (Figs. 3-5) on this machine, in one sitting.

Started by `ros2-bench paper` (bench/paper_suite.cc), which passes the build
tree's binaries. Parts (--parts):

  fig3  the media ceiling: fio io_uring direct on the local file system,
        read/write/randread/randwrite x 1 MiB/4 KiB x 1..16 jobs;
  fig4  the raw data plane: `ros2-bench obj` (libros2 -> transport -> engine
        target), tcp and shm, client threads x engine targets, heatmaps;
  fig5  end to end: fio through libros2_fio.so on DFS, {shm, tcp} x {direct
        ("host"), offload ("DPU")} x {1 MiB, 4 KiB} x {R, W, RR, RW} x jobs,
        on a ram and an nvme pool, with host/agent/engine CPU per I/O
        (`ros2-bench offload`; where that suite is not built, direct mode only
        through `ros2-bench posix --modes engine`);
  peer  (only with --peer ceph) Ceph through fio's rados engine on the same
        shapes, by the peer script ceph-single-node.sh.

Shapes everywhere: 4 KiB at iodepth 16, 1 MiB at iodepth 4 (the peer
script's). Output in --out: records.jsonl and records.csv (the ros2-bench
--json record format), summary.json (environment, parts, targets, outputs),
fig*.png, report.md, logs/. Exit status 0 when every part ran.
"""

import argparse
import csv
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

KIB4 = 4096
MIB1 = 1 << 20
OPS = ["read", "write", "randread", "randwrite"]
OP_LABEL = {"read": "R", "write": "W", "randread": "RR", "randwrite": "RW"}
QD = {KIB4: 16, MIB1: 4}

# ---------------------------------------------------------------- configuration


def config(quick, runtime, rounds):
    """Sizes and matrices of a run; --quick is a smoke run of every part."""
    if quick:
        c = dict(
            runtime=0.3,
            fig3_jobs=[1, 2],
            fig3_size=16 << 20,
            fig4_jobs=[1, 2],
            fig4_targets=[1, 2],
            fig4_ops=["read", "randread"],
            fig4_size=4 << 20,
            fig5_classes=["ram", "nvme"],
            fig5_ops=["read", "randwrite"],
            fig5_jobs=[1],
            fig5_one_run=True,
            dfs_read_repeat=1,
            posix_read_size=8 << 20,
            posix_write_total=16 << 20,
            shard_size="128MiB",
            ceph_runtime=1,
            ceph_settle=0,
            ceph_jobs=[1],
        )
    else:
        c = dict(
            runtime=3.0,
            fig3_jobs=[1, 2, 4, 8, 16],
            fig3_size=128 << 20,
            fig4_jobs=[1, 2, 4],
            fig4_targets=[1, 2],
            fig4_ops=list(OPS),
            fig4_size=64 << 20,
            fig5_classes=["ram", "nvme"],
            fig5_ops=list(OPS),
            fig5_jobs=[1, 2, 4],
            dfs_read_repeat=3,
            posix_read_size=128 << 20,
            posix_write_total=512 << 20,
            shard_size="1GiB",
            ceph_runtime=10,
            ceph_settle=3,
            ceph_jobs=[1, 4],
        )
    if runtime:
        c["runtime"] = runtime
    c["rounds"] = rounds or 1
    c["fig4_runtime"] = c["runtime"] if quick else max(1.0, c["runtime"] * 2 / 3)
    c["fig3_runtime"] = c["runtime"]
    return c


# ---------------------------------------------------------------- records


def parse_case(case):
    kv = {}
    for tok in case.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            kv[k] = v
    return kv


def case_string(pairs):
    return " ".join(f"{k}={v}" for k, v in pairs)


class Records:
    """All records of the run, appended to records.jsonl as they come."""

    def __init__(self, path, keep=False):
        """keep: start from the records already in `path` (a redraw), less the
        target records, which are recomputed."""
        self.items = []
        self.path = path
        if keep:
            with open(path) as f:
                for line in f:
                    if line.strip():
                        r = json.loads(line)
                        if r.get("bench") != "paper":
                            self.items.append(r)
        self.f = open(path, "w")
        for r in self.items:
            self.f.write(json.dumps(r, sort_keys=True) + "\n")

    def add(self, rec):
        rec = {k: v for k, v in rec.items() if v is not None}
        self.items.append(rec)
        self.f.write(json.dumps(rec, sort_keys=True) + "\n")
        self.f.flush()

    def make(self, bench, pairs, metric, value, baseline=None, baseline_value=None):
        rec = {"bench": bench, "case": case_string(pairs), "metric": metric, "value": float(value)}
        if baseline is not None and baseline_value is not None:
            rec["baseline"] = baseline
            rec["baseline_value"] = float(baseline_value)
            rec["ratio"] = float(value) / float(baseline_value) if baseline_value else 0.0
        self.add(rec)

    def close(self):
        self.f.close()

    def find(self, bench, metric, **want):
        """Value of the first record of `bench` whose case has every key of `want`
        (values compared as strings) and no baseline, else None."""
        for r in self.items:
            if r["bench"] not in (bench if isinstance(bench, tuple) else (bench,)):
                continue
            if r["metric"] != metric or "baseline" in r and r["bench"] != "offload":
                continue
            kv = parse_case(r["case"])
            if all(kv.get(k) == str(v) for k, v in want.items()):
                return r["value"]
        return None


# ---------------------------------------------------------------- progress


class Progress:
    """A progress bar with an ETA on stderr. Each step has an estimate in
    seconds; the ETA scales the estimates left by how the finished steps ran
    against theirs. Without a terminal it prints a line per step and every 20 s."""

    def __init__(self, steps, enabled):
        self.steps = steps  # list of (name, est_seconds)
        self.total = sum(e for _, e in steps) or 1.0
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.t0 = time.monotonic()
        self.done_est = 0.0
        self.cur = None
        self.cur_est = 0.0
        self.cur_frac = 0.0
        self.cur_t0 = self.t0
        self.lock = threading.Lock()
        self.last_line = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._tick, daemon=True)
        if enabled:
            self.thread.start()

    def _tick(self):
        while not self.stop.wait(1.0):
            self.draw()

    def begin(self, name, est):
        with self.lock:
            self.cur, self.cur_est, self.cur_frac, self.cur_t0 = name, est, 0.0, time.monotonic()
        if self.enabled and not self.tty:
            self._line(f"start {name}")
        self.draw()

    def fraction(self, frac):
        with self.lock:
            self.cur_frac = max(self.cur_frac, min(1.0, frac))

    def end(self, status="ok"):
        with self.lock:
            name = self.cur
            self.done_est += self.cur_est
            self.cur, self.cur_est, self.cur_frac = None, 0.0, 0.0
        if self.enabled and not self.tty:
            self._line(f"done  {name}: {status}")
        self.draw()

    def _state(self):
        now = time.monotonic()
        elapsed = now - self.t0
        est_done = self.done_est + self.cur_est * self.cur_frac
        frac = min(1.0, est_done / self.total)
        # Scale the remaining estimate by the speed so far (after 10% of the work).
        speed = elapsed / est_done if est_done > 0.1 * self.total else 1.0
        left = max(0.0, (self.total - est_done) * speed)
        return elapsed, frac, left

    @staticmethod
    def _mmss(s):
        s = int(s)
        return f"{s // 60:d}:{s % 60:02d}"

    def _line(self, msg):
        elapsed, frac, left = self._state()
        sys.stderr.write(f"paper: [{frac * 100:5.1f}% {self._mmss(elapsed)} ETA {self._mmss(left)}] {msg}\n")
        sys.stderr.flush()
        self.last_line = time.monotonic()

    def draw(self):
        if not self.enabled:
            return
        with self.lock:
            elapsed, frac, left = self._state()
            name = self.cur or ""
        if self.tty:
            width = 30
            fill = int(frac * width)
            bar = "#" * fill + "." * (width - fill)
            sys.stderr.write(
                f"\r[{bar}] {frac * 100:5.1f}%  {self._mmss(elapsed)} elapsed, ETA {self._mmss(left)}  {name[:50]:<50}"
            )
            sys.stderr.flush()
        elif time.monotonic() - self.last_line > 20:
            self._line(f"running {name}")

    def close(self):
        self.stop.set()
        if self.enabled and self.tty:
            sys.stderr.write("\n")
        if self.enabled:
            self._line("finished")

    def log(self, msg):
        if self.tty and self.enabled:
            sys.stderr.write("\r" + " " * 120 + "\r")
        sys.stderr.write(f"paper: {msg}\n")
        sys.stderr.flush()


# ---------------------------------------------------------------- running children


class StepFailed(Exception):
    pass


def run_json_lines(cmd, log_path, on_record, env=None, timeout=None):
    """Runs cmd, calls on_record(dict) for every JSON line of its stdout; stderr
    (and non-JSON stdout) goes to log_path. Raises StepFailed on a non-zero exit."""
    with open(log_path, "a") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        t0 = time.monotonic()
        for line in p.stdout:
            line = line.strip()
            if line.startswith("{"):
                try:
                    rec = json.loads(line)
                except ValueError:
                    log.write(line + "\n")
                    continue
                on_record(rec)
            elif line:
                log.write(line + "\n")
            if timeout and time.monotonic() - t0 > timeout:
                p.kill()
        rc = p.wait()
        if rc != 0:
            raise StepFailed(f"{os.path.basename(cmd[0])} {' '.join(cmd[1:4])} ... exited {rc}, see {log_path}")


def tail(path, n=5):
    try:
        with open(path) as f:
            return "".join(f.readlines()[-n:]).strip()
    except OSError:
        return ""


def has_subcommand(bench, name):
    """Whether `ros2-bench --help` lists the sub-command (suites are compiled in
    only when their component exists)."""
    try:
        r = subprocess.run([bench, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    listing = r.stdout.split("Subcommands:", 1)[-1]
    return any(line.split()[:1] == [name] for line in listing.splitlines())


# ---------------------------------------------------------------- Fig. 3: the media


def fio_side(j, op):
    return j["read"] if "read" in op else j["write"]


def run_fig3(a, c, recs, prog, logs):
    d = tempfile.mkdtemp(prefix="ros2-paper-fig3-", dir=a.dir)
    cells = [(bs, op, n) for bs in (MIB1, KIB4) for op in OPS for n in c["fig3_jobs"]]
    try:
        for i, (bs, op, n) in enumerate(cells):
            out = os.path.join(d, "out.json")
            cmd = [
                "fio", "--name=media", f"--directory={d}", "--ioengine=io_uring", "--direct=1",
                f"--rw={op}", f"--bs={bs}", f"--iodepth={QD[bs]}", f"--numjobs={n}",
                f"--size={c['fig3_size']}", "--time_based", f"--runtime={int(c['fig3_runtime'] * 1000)}ms",
                "--group_reporting", "--lat_percentiles=1", "--output-format=json", f"--output={out}",
            ]
            if op.startswith("rand"):
                cmd.append("--norandommap")
            with open(os.path.join(logs, "fig3.log"), "a") as log:
                log.write("$ " + " ".join(cmd) + "\n")
                log.flush()
                r = subprocess.run(cmd, stdout=log, stderr=log)
            if r.returncode != 0:
                raise StepFailed(f"fio {op} bs={bs} jobs={n} exited {r.returncode}, see logs/fig3.log")
            with open(out) as f:
                j = json.load(f)["jobs"][0]
            s = fio_side(j, op)
            pairs = [("op", op), ("bs", bs), ("qd", QD[bs]), ("jobs", n), ("engine", "io_uring"), ("mode", "local")]
            recs.make("media", pairs, "iops", s["iops"])
            recs.make("media", pairs, "mib_s", s["bw_bytes"] / MIB1)
            lat = s.get("lat_ns", {}).get("percentile", {}).get("50.000000")
            if lat:
                recs.make("media", pairs, "lat_us_p50", lat / 1000)
            ios = s["total_ios"] or 1
            cpu_s = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * j["job_runtime"] / 1000.0
            recs.make("media", pairs, "host_cpu_us_per_io", cpu_s / ios * 1e6)
            prog.fraction((i + 1) / len(cells))
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------- Fig. 4: the data plane


def run_fig4(a, c, recs, prog, logs):
    ops, bss, jobs = c["fig4_ops"], [MIB1, KIB4], c["fig4_jobs"]
    per_run = len(ops) * len(bss) * len(jobs) * 2  # cases (x 2 transports)
    runs = [(t, bs) for t in c["fig4_targets"] for bs in bss]
    seen = [0]

    for t, bs in runs:

        def add(rec, t=t):
            kv = parse_case(rec["case"])
            if rec.get("baseline"):  # the shm-vs-tcp ratio: recomputed in the report
                return
            pairs = list(kv.items()) + [("targets", t)]
            recs.make("obj", pairs, rec["metric"], rec["value"])
            if rec["metric"] == "iops":
                seen[0] += 1
                prog.fraction(seen[0] / (per_run * len(runs) / 2))

        cmd = [
            a.bench, "--json", "obj", "--dir", a.dir, "--classes", "ram", "--transports", "tcp,shm",
            "--ops", ",".join(ops), "--bs", str(bs), "--jobs", ",".join(map(str, jobs)),
            "--qd", str(QD[bs]), "--targets", str(t), "--runtime", str(c["fig4_runtime"]),
            "--size", str(c["fig4_size"]), "--shard-size", c["shard_size"], "--no-baseline",
        ]
        if a.ros2ctl:
            cmd += ["--ros2ctl", a.ros2ctl]
        if a.engine:
            cmd += ["--engine", a.engine]
        run_json_lines(cmd, os.path.join(logs, "fig4.log"), add)


# ---------------------------------------------------------------- Fig. 5: end to end


def fig5_from_record(rec):
    """A Fig. 5 cell (class, transport, mode, op, bs, jobs) of an offload or posix
    record, else None."""
    kv = parse_case(rec["case"])
    if rec["bench"] == "offload":
        mode = kv.get("mode")
    elif rec["bench"] == "posix" and kv.get("mode") == "engine":
        mode = "direct"
    else:
        return None
    try:
        return (kv["class"], kv["transport"], mode, kv["op"], int(kv["bs"]), int(kv["jobs"]))
    except KeyError:
        return None


def run_fig5(a, c, recs, prog, logs):
    expected = (len(c["fig5_classes"]) * 2 * 2 * 2 * len(c["fig5_ops"]) * len(c["fig5_jobs"])) or 1
    seen = set()

    def add(rec):
        # keep offload/posix records as they are (their own format), normalised
        # to mode=direct|offload for posix's engine mode
        if rec["bench"] == "posix":
            kv = parse_case(rec["case"])
            if kv.get("mode") != "engine":
                return
            kv["mode"] = "direct"
            rec = dict(rec, bench="offload", case=case_string(kv.items()))
            rec.pop("baseline", None), rec.pop("baseline_value", None), rec.pop("ratio", None)
        recs.add(rec)
        cell = fig5_from_record(rec)
        if cell and cell[2] in ("direct", "offload"):  # not fio-null, the floor
            seen.add(cell)
            prog.fraction(len(seen) / expected)

    if a.offload_records:
        with open(a.offload_records) as f:
            for line in f:
                if line.strip().startswith("{"):
                    add(json.loads(line))
        return "records from " + a.offload_records
    have_offload = has_subcommand(a.bench, "offload")
    jobs = ",".join(map(str, c["fig5_jobs"]))
    for cls in c["fig5_classes"]:
        # full: one run per block size at its own depth; quick: both sizes in one run
        # (one cluster per transport instead of two) at the 4 KiB depth
        groups = [(MIB1, KIB4)] if c.get("fig5_one_run") else [(MIB1,), (KIB4,)]
        for group in groups:
            bs_list, qd = ",".join(map(str, group)), QD[group[-1]]
            if have_offload:
                cmd = [
                    a.bench, "--json", "offload", "--transports", "shm,tcp", "--class", cls,
                    "--ops", ",".join(c["fig5_ops"]), "--bs", bs_list, "--jobs", jobs,
                    "--qd", str(qd), "--rounds", str(c["rounds"]), "--runtime", str(c["runtime"]),
                    "--dir", a.dir, "--read-size", str(c["posix_read_size"]),
                    "--write-total", str(c["posix_write_total"]), "--shard-size", c["shard_size"],
                ]
                if a.ros2ctl:
                    cmd += ["--ros2ctl", a.ros2ctl]
                if a.engine:
                    cmd += ["--engine", a.engine]
                run_json_lines(cmd, os.path.join(logs, "fig5.log"), add)
            else:
                for t in ("shm", "tcp"):
                    cmd = [
                        a.bench, "--json", "posix", "--dir", a.dir, "--modes", "engine", "--fuse", "none",
                        "--class", cls, "--transport", t, "--ops", ",".join(c["fig5_ops"]), "--bs", bs_list,
                        "--jobs", jobs, "--qd", str(qd), "--runtime", str(c["runtime"]),
                        "--read-size", str(c["posix_read_size"]), "--write-total", str(c["posix_write_total"]),
                        "--shard-size", c["shard_size"],
                    ]
                    if a.ros2ctl:
                        cmd += ["--ros2ctl", a.ros2ctl]
                    if a.engine:
                        cmd += ["--engine", a.engine]
                    run_json_lines(cmd, os.path.join(logs, "fig5.log"), add)
    if "nvme" in c["fig5_classes"] and dfs_read_jobs(c):
        # The DFS-read target's own baseline: local fio and DFS 1 MiB reads back
        # to back, --repeat times, on the nvme pool's file system. Fig. 3's
        # local reads ran minutes before Fig. 5's, and this disk's rate drifts
        # by more than the target's margin between them.
        cmd = [
            a.bench, "--json", "posix", "--dir", a.dir, "--modes", "local,engine", "--fuse", "none",
            "--class", "nvme", "--transport", "shm", "--ops", "read", "--bs", str(MIB1),
            "--jobs", ",".join(map(str, dfs_read_jobs(c))), "--qd", str(QD[MIB1]), "--runtime", str(c["runtime"]),
            "--repeat", str(c.get("dfs_read_repeat", 1)), "--read-size", str(c["posix_read_size"]),
            "--shard-size", c["shard_size"],
        ]
        if a.ros2ctl:
            cmd += ["--ros2ctl", a.ros2ctl]
        if a.engine:
            cmd += ["--engine", a.engine]
        run_json_lines(cmd, os.path.join(logs, "fig5.log"), recs.add)
    if not have_offload:
        return "direct mode only: this ros2-bench has no offload suite (ran `posix --modes engine`)"
    return None


def dfs_read_jobs(c):
    """Job counts of the DFS 1 MiB read target: Fig. 5's that Fig. 3 also ran."""
    return [j for j in c["fig5_jobs"] if j in c["fig3_jobs"]]


def dfs_read_back_to_back(recs, jobs):
    """(DFS, local fio) MiB/s of the back-to-back posix run's 1 MiB reads at
    `jobs`, or None when that run is not in the records."""
    for r in recs.items:
        if r["bench"] != "posix" or r["metric"] != "mib_s" or "baseline_value" not in r:
            continue
        kv = parse_case(r["case"])
        if (kv.get("mode"), kv.get("op"), kv.get("bs"), kv.get("jobs"), kv.get("class"), kv.get("transport")) == (
                "engine", "read", str(MIB1), str(jobs), "nvme", "shm"):
            return r["value"], r["baseline_value"]
    return None


# ---------------------------------------------------------------- the Ceph peer


def find_ceph_script(a):
    cands = [a.ceph_script, os.environ.get("ROS2_CEPH_PEER_SCRIPT")]
    for p in cands:
        if p and os.path.isfile(p):
            return os.path.abspath(p)
    return None


def ceph_running(script, env):
    r = subprocess.run(["bash", script, "status"], capture_output=True, text=True, env=env)
    return "not running" not in r.stdout and "osd.0" in r.stdout


def run_peer(a, c, recs, prog, logs, env_info):
    script = find_ceph_script(a)
    if not script:
        raise StepFailed("the Ceph peer script ceph-single-node.sh was not found (--ceph-script)")
    if os.geteuid() != 0:
        raise StepFailed("the Ceph peer needs root (it installs packages and runs daemons)")
    env = dict(os.environ, RUNTIME=str(c["ceph_runtime"]), SETTLE=str(c["ceph_settle"]),
               FIO_JOBS=" ".join(map(str, c["ceph_jobs"])), FIO_BS="4k 1m",
               FIO_RW="write randwrite read randread", SKIP_RADOS="1")
    log_path = os.path.join(logs, "peer-ceph.log")
    was_running = ceph_running(script, env)
    with open(log_path, "a") as log:
        log.write(f"$ bash {script} setup\n")
        log.flush()
        r = subprocess.run(["bash", script, "setup"], stdout=log, stderr=log, env=env)
    if r.returncode != 0:
        raise StepFailed("ceph setup failed: " + tail(log_path, 3).replace("\n", " | "))
    prog.fraction(0.15)
    try:
        with open(log_path, "a") as log:
            log.write(f"$ bash {script} bench\n")
            log.flush()
            p = subprocess.Popen(["bash", script, "bench"], stdout=subprocess.PIPE, stderr=log, text=True, env=env)
            res = None
            n_total = 2 * 4 * len(c["ceph_jobs"])
            n = 0
            for line in p.stdout:
                log.write(line)
                m = re.match(r"raw fio/rados output: (\S+)", line)
                if m:
                    res = m.group(1)
                if line.startswith("fio-"):
                    n += 1
            rc = p.wait()
        # progress from the log lines (the bench logs "  -> " per run on stderr)
        if rc != 0 or not res:
            raise StepFailed(f"ceph bench exited {rc}: " + tail(log_path, 3).replace("\n", " | "))
        prog.fraction(0.95)
        tsv = os.path.join(res, "results.tsv")
        with open(tsv) as f:
            rows = [l.rstrip("\n").rstrip("\t").split("\t") for l in f if l.strip()]
        head = rows[0]
        for row in rows[1:]:
            d = dict(zip(head, row))
            if not d["workload"].startswith("fio-"):
                continue
            op = d["workload"][4:]
            bs = {"4k": KIB4, "1m": MIB1}.get(d["bs"])
            if bs is None:
                continue
            iops = float(d["IOPS"])
            pairs = [("op", op), ("bs", bs), ("qd", d["qd"]), ("jobs", d["jobs"]), ("peer", "ceph")]
            recs.make("ceph", pairs, "iops", iops)
            recs.make("ceph", pairs, "mib_s", float(d["MiB/s"]))
            recs.make("ceph", pairs, "lat_us_avg", float(d["lat_avg_ms"]) * 1000)
            if iops > 0:
                # %cpu: 100 = one core over the run; per I/O = share / IOPS
                recs.make("ceph", pairs, "osd_cpu_us_per_io", float(d["osd%cpu"]) / 100 / iops * 1e6)
                recs.make("ceph", pairs, "host_cpu_us_per_io", float(d["client%cpu"]) / 100 / iops * 1e6)
        try:
            with open(os.path.join(res, "env.txt")) as f:
                env_info["ceph"] = f.readline().strip()
        except OSError:
            pass
        env_info["ceph_results"] = res
        shutil.copy(tsv, os.path.join(logs, "ceph-results.tsv"))
    finally:
        if not was_running:
            with open(log_path, "a") as log:
                subprocess.run(["bash", script, "stop"], stdout=log, stderr=log, env=env)


# ---------------------------------------------------------------- targets


def targets(recs, c):
    """[(name, value, threshold, relation, detail)]; value None = not measured."""
    out = []

    def f5(metric, cls, t, mode, op, bs, jobs):
        return recs.find("offload", metric, op=op, bs=bs, jobs=jobs, transport=t, **{"class": cls}, mode=mode)

    def ratio(x, y):
        return x / y if x is not None and y else None

    jobs5 = c["fig5_jobs"]
    for j in dfs_read_jobs(c):
        pair = dfs_read_back_to_back(recs, j)
        if pair:
            (dfs, loc), how = pair, "back to back"
        else:  # records of a run before the back-to-back step: Fig. 5 against Fig. 3
            dfs, loc = f5("mib_s", "nvme", "shm", "direct", "read", MIB1, j), recs.find(
                "media", "mib_s", op="read", bs=MIB1, jobs=j)
            how = "Fig. 5 / Fig. 3"
        out.append((f"DFS 1 MiB read over shm via fio / local fio io_uring, {j} job{'s' if j > 1 else ''}",
                    ratio(dfs, loc), 0.8, ">=", f"{fmt(dfs)} / {fmt(loc)} MiB/s ({how})"))
    for j in (1, 4):
        if j not in jobs5:
            continue
        s = f5("iops", "ram", "shm", "direct", "randread", KIB4, j)
        t = f5("iops", "ram", "tcp", "direct", "randread", KIB4, j)
        out.append((f"4 KiB randread IOPS, ram pool, shm / tcp, {j} job{'s' if j > 1 else ''}",
                    ratio(s, t), 2.0, ">=", f"{fmt(s)} / {fmt(t)} IOPS"))
    for cls in c["fig5_classes"]:
        for op in ("read", "write"):
            j = jobs5[0]
            o = f5("mib_s", cls, "shm", "offload", op, MIB1, j)
            d = f5("mib_s", cls, "shm", "direct", op, MIB1, j)
            out.append((f"offload / direct over shm, 1 MiB {op}, {cls} pool, {j} job", ratio(o, d), 0.8, ">=",
                        f"{fmt(o)} / {fmt(d)} MiB/s"))
            ot = f5("mib_s", cls, "tcp", "offload", op, MIB1, j)
            dt = f5("mib_s", cls, "tcp", "direct", op, MIB1, j)
            rs, rt = ratio(o, d), ratio(ot, dt)
            val = (1 - rt) - (1 - rs) if rs is not None and rt is not None else None
            out.append((f"offload's loss over tcp minus over shm, 1 MiB {op}, {cls} pool (tcp ratio {fmt(rt, 2)}, "
                        f"shm ratio {fmt(rs, 2)})", val, 0.0, ">", "loss = 1 - offload/direct"))
    have_ceph = any(r["bench"] == "ceph" for r in recs.items)
    if have_ceph:
        for t in ("shm", "tcp"):
            for op, bs, metric, thr in (("randread", KIB4, "iops", 3.0), ("randwrite", KIB4, "iops", 3.0),
                                        ("write", MIB1, "mib_s", 1.5), ("read", MIB1, "mib_s", 1.0)):
                r2 = f5(metric, "nvme", t, "direct", op, bs, 1)
                ce = recs.find("ceph", metric, op=op, bs=bs, jobs=1)
                unit = "IOPS" if metric == "iops" else "MiB/s"
                out.append((f"ROS2 ({t}, nvme) / Ceph, {'4 KiB' if bs == KIB4 else '1 MiB'} {op} qd {QD[bs]}, 1 job",
                            ratio(r2, ce), thr, ">=", f"{fmt(r2)} / {fmt(ce)} {unit}"))
    return out


def met(value, thr, rel):
    if value is None:
        return None
    return value >= thr if rel == ">=" else value > thr


def fmt(x, nd=None):
    if x is None:
        return "-"
    if nd is not None:
        return f"{x:.{nd}f}"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


# ---------------------------------------------------------------- figures


def figures(recs, c, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    made = []

    def save(fig, name):
        p = os.path.join(out, name)
        fig.savefig(p, dpi=80)
        plt.close(fig)
        made.append(name)

    def grouped(ax, groups, series, values, ylabel, title):
        """Bars: x = groups, one bar per series; values[(g, s)] (missing = no bar)."""
        n = max(1, len(series))
        w = 0.8 / n
        x = np.arange(len(groups))
        for i, s in enumerate(series):
            ys = [values.get((g, s)) for g in groups]
            ax.bar(x + (i - (n - 1) / 2) * w, [y if y is not None else 0 for y in ys], w, label=str(s))
        ax.set_xticks(x)
        ax.set_xticklabels(groups)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)

    # Fig. 3: the media ceiling
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, bs, metric, scale, ylabel in ((axes[0], MIB1, "mib_s", 1 / 1024, "GiB/s"),
                                          (axes[1], KIB4, "iops", 1e-3, "KIOPS")):
        vals = {}
        for op in OPS:
            for j in c["fig3_jobs"]:
                v = recs.find("media", metric, op=op, bs=bs, jobs=j)
                if v is not None:
                    vals[(OP_LABEL[op], f"{j} job{'s' if j > 1 else ''}")] = v * scale
        grouped(ax, [OP_LABEL[o] for o in OPS], [f"{j} job{'s' if j > 1 else ''}" for j in c["fig3_jobs"]], vals,
                ylabel, f"({'a' if bs == MIB1 else 'b'}) local fio io_uring, {'1 MiB' if bs == MIB1 else '4 KiB'}"
                f" qd {QD[bs]}")
    axes[1].legend(fontsize=7)
    fig.suptitle("Fig. 3 analogue: local FIO benchmark with IO_URING (one virtio disk)", fontsize=10)
    fig.tight_layout()
    save(fig, "fig3_media.png")

    # Fig. 4: heatmaps, client threads x engine targets
    ops4 = c["fig4_ops"]
    fig, axes = plt.subplots(len(ops4), 4, figsize=(12, 2.4 * len(ops4) + 0.6), squeeze=False)
    cols = [("tcp", MIB1), ("shm", MIB1), ("tcp", KIB4), ("shm", KIB4)]
    for r, op in enumerate(ops4):
        for col, (t, bs) in enumerate(cols):
            ax = axes[r][col]
            metric, scale, unit = ("mib_s", 1 / 1024, "GiB/s") if bs == MIB1 else ("iops", 1e-3, "KIOPS")
            m = np.full((len(c["fig4_jobs"]), len(c["fig4_targets"])), np.nan)
            for i, j in enumerate(c["fig4_jobs"]):
                for k, tg in enumerate(c["fig4_targets"]):
                    v = recs.find("obj", metric, op=op, bs=bs, jobs=j, transport=t, targets=tg)
                    if v is not None:
                        m[i, k] = v * scale
            vmax = 0.0
            for tt in ("tcp", "shm"):
                for j in c["fig4_jobs"]:
                    for tg in c["fig4_targets"]:
                        v = recs.find("obj", metric, op=op, bs=bs, jobs=j, transport=tt, targets=tg)
                        vmax = max(vmax, (v or 0) * scale)
            ax.imshow(m, cmap="viridis", aspect="auto", origin="lower", vmin=0, vmax=vmax or 1)
            for i in range(m.shape[0]):
                for k in range(m.shape[1]):
                    if not np.isnan(m[i, k]):
                        ax.text(k, i, f"{m[i, k]:.1f}" if bs == MIB1 else f"{m[i, k]:.0f}", ha="center",
                                va="center", color="white", fontsize=8)
            ax.set_xticks(range(len(c["fig4_targets"])))
            ax.set_xticklabels(c["fig4_targets"])
            ax.set_yticks(range(len(c["fig4_jobs"])))
            ax.set_yticklabels(c["fig4_jobs"])
            ax.set_xlabel("engine targets", fontsize=8)
            ax.set_ylabel("client threads", fontsize=8)
            ax.set_title(f"{t.upper()} {'1 MiB' if bs == MIB1 else '4 KiB'} {OP_LABEL[op]} ({unit})", fontsize=9)
    fig.suptitle("Fig. 4 analogue: libros2 object I/O to engine targets (ram), TCP vs shared memory", fontsize=10)
    fig.tight_layout()
    save(fig, "fig4_data_plane.png")

    # Fig. 5: per class, rows host (direct) / DPU (offload), columns 1 MiB tcp/shm, 4 KiB tcp/shm
    for cls in c["fig5_classes"]:
        fig, axes = plt.subplots(2, 4, figsize=(14, 6), squeeze=False)
        for r, mode in enumerate(("direct", "offload")):
            for col, (t, bs) in enumerate(cols):
                ax = axes[r][col]
                metric, scale, unit = ("mib_s", 1 / 1024, "GiB/s") if bs == MIB1 else ("iops", 1e-3, "KIOPS")
                vals = {}
                for op in c["fig5_ops"]:
                    for j in c["fig5_jobs"]:
                        v = recs.find("offload", metric, op=op, bs=bs, jobs=j, transport=t, mode=mode,
                                      **{"class": cls})
                        if v is not None:
                            vals[(OP_LABEL[op], f"{j} job{'s' if j > 1 else ''}")] = v * scale
                who = "host (direct)" if mode == "direct" else "DPU analogue (offload, agent)"
                grouped(ax, [OP_LABEL[o] for o in c["fig5_ops"]],
                        [f"{j} job{'s' if j > 1 else ''}" for j in c["fig5_jobs"]], vals, unit,
                        f"{who}\n{t.upper()} {'1 MiB' if bs == MIB1 else '4 KiB'}")
        for col in range(4):  # one y scale per block size: tcp vs shm and host vs DPU compare by eye
            same = [axes[r][k] for r in range(2) for k in range(4) if cols[k][1] == cols[col][1]]
            top = max(ax.get_ylim()[1] for ax in same)
            axes[0][col].set_ylim(0, top)
            axes[1][col].set_ylim(0, top)
        axes[0][3].legend(fontsize=7)
        fig.suptitle(f"Fig. 5 analogue: fio through libros2_fio.so on DFS, {cls} pool "
                     "(left: 1 MiB GiB/s, right: 4 KiB KIOPS)", fontsize=10)
        fig.tight_layout()
        save(fig, f"fig5_end_to_end_{cls}.png")

    # CPU per I/O: host, agent, engine stacked, for every Fig. 5 cell
    fig, axes = plt.subplots(len(c["fig5_classes"]), 4, figsize=(15, 3.4 * len(c["fig5_classes"]) + 0.6),
                             squeeze=False)
    for r, cls in enumerate(c["fig5_classes"]):
        for col, (t, bs) in enumerate(cols):
            ax = axes[r][col]
            labels, host, agent, engine = [], [], [], []
            for op in c["fig5_ops"]:
                # reference: local fio io_uring's own CPU per I/O (Fig. 3), the kernel's path
                for j in c["fig5_jobs"]:
                    v = recs.find("media", "host_cpu_us_per_io", op=op, bs=bs, jobs=j)
                    if v is not None:
                        labels.append(f"{OP_LABEL[op]} L{j}")
                        host.append(v)
                        agent.append(0)
                        engine.append(0)
                # fio's own CPU per I/O at this shape (ioengine=null, from the offload suite): the floor
                for j in c["fig5_jobs"]:
                    v = recs.find("offload", "host_cpu_us_per_io", op=op, bs=bs, jobs=j, transport=t,
                                  mode="fio-null", **{"class": cls})
                    if v is not None:
                        labels.append(f"{OP_LABEL[op]} N{j}")
                        host.append(v)
                        agent.append(0)
                        engine.append(0)
                for mode in ("direct", "offload"):
                    for j in c["fig5_jobs"]:
                        kw = dict(op=op, bs=bs, jobs=j, transport=t, mode=mode, **{"class": cls})
                        labels.append(f"{OP_LABEL[op]} {'H' if mode == 'direct' else 'D'}{j}")
                        host.append(recs.find("offload", "host_cpu_us_per_io", **kw) or 0)
                        agent.append(recs.find("offload", "agent_cpu_us_per_io", **kw) or 0)
                        engine.append(recs.find("offload", "engine_cpu_us_per_io", **kw) or 0)
            x = np.arange(len(labels))
            ax.bar(x, host, 0.7, label="host (fio + client or ring)")
            ax.bar(x, agent, 0.7, bottom=host, label="agent")
            ax.bar(x, engine, 0.7, bottom=[h + g for h, g in zip(host, agent)], label="engine")
            ax.set_xticks(x)
            ax.set_xticklabels(labels, rotation=90, fontsize=6)
            ax.set_ylabel("CPU us per I/O")
            ax.set_title(f"{cls} {t.upper()} {'1 MiB' if bs == MIB1 else '4 KiB'}", fontsize=9)
            ax.grid(axis="y", alpha=0.3)
    handles, labels_ = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels_, loc="lower center", ncol=3, fontsize=7)
    fig.suptitle("CPU per I/O of each Fig. 5 cell (L = local fio io_uring, N = fio alone (null engine), H = host/direct,"
                 " D = DPU analogue/offload; digit = jobs)",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    save(fig, "fig6_cpu_per_io.png")

    # The peer: Ceph vs ROS2 on the same shapes
    if any(r["bench"] == "ceph" for r in recs.items):
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
        shapes = [("randread", KIB4), ("randwrite", KIB4), ("read", KIB4), ("write", KIB4)]
        big = [("read", MIB1), ("write", MIB1), ("randread", MIB1), ("randwrite", MIB1)]
        systems = ["Ceph (rados)", "ROS2 tcp", "ROS2 shm"]
        for ax, shp, metric, scale, unit in ((axes[0], shapes, "iops", 1e-3, "KIOPS, 4 KiB qd 16"),
                                             (axes[1], big, "mib_s", 1 / 1024, "GiB/s, 1 MiB qd 4")):
            vals = {}
            for op, bs in shp:
                g = OP_LABEL[op]
                v = recs.find("ceph", metric, op=op, bs=bs, jobs=1)
                if v is not None:
                    vals[(g, systems[0])] = v * scale
                for t, name in (("tcp", systems[1]), ("shm", systems[2])):
                    v = recs.find("offload", metric, op=op, bs=bs, jobs=1, transport=t, mode="direct",
                                  **{"class": "nvme"})
                    if v is not None:
                        vals[(g, name)] = v * scale
            grouped(ax, [OP_LABEL[o] for o, _ in shp], systems, vals, unit, f"1 job, {unit}")
        axes[0].legend(fontsize=7)
        # CPU per I/O at 4 KiB randread / randwrite: client + server
        vals = {}
        for op in ("randread", "randwrite"):
            g = OP_LABEL[op] + " 4K"
            cl = recs.find("ceph", "host_cpu_us_per_io", op=op, bs=KIB4, jobs=1)
            osd = recs.find("ceph", "osd_cpu_us_per_io", op=op, bs=KIB4, jobs=1)
            if cl is not None and osd is not None:
                vals[(g, systems[0])] = cl + osd
            for t, name in (("tcp", systems[1]), ("shm", systems[2])):
                kw = dict(op=op, bs=KIB4, jobs=1, transport=t, mode="direct", **{"class": "nvme"})
                h = recs.find("offload", "host_cpu_us_per_io", **kw)
                e = recs.find("offload", "engine_cpu_us_per_io", **kw)
                if h is not None and e is not None:
                    vals[(g, name)] = h + e
        grouped(axes[2], ["RR 4K", "RW 4K"], systems, vals, "CPU us per I/O", "client + server CPU per I/O")
        fig.suptitle("Peer: Ceph (one BlueStore OSD on a file) vs ROS2 (nvme pool, direct), same disk, same shapes",
                     fontsize=10)
        fig.tight_layout()
        save(fig, "fig7_ceph_peer.png")
    return made


# ---------------------------------------------------------------- report


def write_csv(recs, path):
    keys = ["op", "bs", "qd", "jobs", "transport", "class", "mode", "targets", "engine", "peer"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["bench", "case", "metric", "value", "baseline", "baseline_value", "ratio"] + keys)
        for r in recs.items:
            kv = parse_case(r["case"])
            w.writerow([r["bench"], r["case"], r["metric"], r["value"], r.get("baseline", ""),
                        r.get("baseline_value", ""), r.get("ratio", "")] + [kv.get(k, "") for k in keys])


def md_table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def write_report(recs, c, summary, figs, path):
    L = []
    L.append("# ROS2: the paper's evaluation on this machine\n")
    e = summary["environment"]
    L.append(f"Run {summary['started']} ({'quick' if summary['quick'] else 'full'}, {summary['elapsed_s']:.0f} s) "
             f"on {e['cpus']} CPUs, {e['mem_gib']} GiB, kernel {e['kernel']}; {e.get('fio', '')}; "
             f"{e.get('ceph', 'no Ceph')}. Shapes: 4 KiB at qd 16, 1 MiB at qd 4.\n")
    L.append("## Parts\n")
    L.append(md_table(["part", "status", "seconds", "note"],
                      [(p, v["status"], f"{v['seconds']:.0f}", v.get("note", "")) for p, v in summary["parts"].items()]))
    L.append("\n## Targets (same run)\n")
    rows = []
    for t in summary["targets"]:
        st = "-" if t["met"] is None else ("met" if t["met"] else "missed")
        rows.append((t["name"], fmt(t["value"], 2), f"{t['relation']} {t['threshold']}", st, t["detail"]))
    L.append(md_table(["target", "value", "goal", "", "numbers"], rows))

    def fig_section(title, name, text):
        if name in figs:
            L.append(f"\n## {title}\n\n![{title}]({name})\n\n{text}\n")

    def tab(bench, metric, keys, rows_of, **fixed):
        rows = []
        for rk in rows_of:
            vals = []
            for ck in keys:
                kw = dict(fixed)
                kw.update(rk[1])
                kw.update(ck[1])
                vals.append(fmt(recs.find(bench, metric, **kw)))
            rows.append([rk[0]] + vals)
        return md_table([""] + [k[0] for k in keys], rows)

    jobs3 = [(f"{j}j", {"jobs": j}) for j in c["fig3_jobs"]]
    opsr = [(OP_LABEL[o], {"op": o}) for o in OPS]
    fig_section("Fig. 3: the media ceiling", "fig3_media.png",
                "1 MiB MiB/s:\n\n" + tab("media", "mib_s", jobs3, opsr, bs=MIB1) +
                "\n\n4 KiB IOPS:\n\n" + tab("media", "iops", jobs3, opsr, bs=KIB4))
    t4 = []
    for t in ("tcp", "shm"):
        for bs, metric in ((MIB1, "mib_s"), (KIB4, "iops")):
            t4.append(f"{t} {'1 MiB MiB/s' if bs == MIB1 else '4 KiB IOPS'} (rows op x client threads, "
                      "columns engine targets):\n")
            rows_of = [(f"{OP_LABEL[o]} {j}j", {"op": o, "jobs": j}) for o in c["fig4_ops"] for j in c["fig4_jobs"]]
            t4.append(tab("obj", metric, [(f"{tg} tgt", {"targets": tg}) for tg in c["fig4_targets"]], rows_of,
                          bs=bs, transport=t) + "\n")
    fig_section("Fig. 4: the raw data plane", "fig4_data_plane.png", "\n".join(t4))
    for cls in c["fig5_classes"]:
        t5 = []
        for bs, metric in ((MIB1, "mib_s"), (KIB4, "iops")):
            keys = [(f"{t} {m[0].upper()}{j}", {"transport": t, "mode": m, "jobs": j})
                    for t in ("shm", "tcp") for m in ("direct", "offload") for j in c["fig5_jobs"]]
            t5.append(f"{'1 MiB MiB/s' if bs == MIB1 else '4 KiB IOPS'} (D = direct/host, O = offload/DPU; "
                      "digit = jobs):\n")
            t5.append(tab("offload", metric, keys, [(OP_LABEL[o], {"op": o}) for o in c["fig5_ops"]], bs=bs,
                          **{"class": cls}) + "\n")
        fig_section(f"Fig. 5: end to end, {cls} pool", f"fig5_end_to_end_{cls}.png", "\n".join(t5))
    t6 = []
    for m in ("host_cpu_us_per_io", "agent_cpu_us_per_io", "engine_cpu_us_per_io"):
        for cls in c["fig5_classes"]:
            keys = [(f"{t} {md[0].upper()} {'1M' if bs == MIB1 else '4K'}",
                     {"transport": t, "mode": md, "bs": bs}) for bs in (MIB1, KIB4) for t in ("shm", "tcp")
                    for md in ("direct", "offload")]
            t6.append(f"{m}, {cls} pool, {c['fig5_jobs'][0]} job:\n")
            t6.append(tab("offload", m, keys, [(OP_LABEL[o], {"op": o}) for o in c["fig5_ops"]],
                          jobs=c["fig5_jobs"][0], **{"class": cls}) + "\n")
    fig_section("CPU per I/O (what the paper could not measure)", "fig6_cpu_per_io.png", "\n".join(t6))
    if "fig7_ceph_peer.png" in figs:
        keys = [("Ceph", {}), ("ROS2 tcp", {"transport": "tcp"}), ("ROS2 shm", {"transport": "shm"})]
        rows = []
        for op in OPS:
            for bs, metric in ((KIB4, "iops"), (MIB1, "mib_s")):
                ce = recs.find("ceph", metric, op=op, bs=bs, jobs=1)
                r = [f"{OP_LABEL[op]} {'4 KiB IOPS' if bs == KIB4 else '1 MiB MiB/s'}", fmt(ce)]
                for t in ("tcp", "shm"):
                    v = recs.find("offload", metric, op=op, bs=bs, jobs=1, transport=t, mode="direct",
                                  **{"class": "nvme"})
                    r.append(fmt(v) + (f" ({v / ce:.1f}x)" if v and ce else ""))
                rows.append(r)
        fig_section("The peer: Ceph on the same disk", "fig7_ceph_peer.png",
                    md_table(["1 job", "Ceph", "ROS2 tcp", "ROS2 shm"], rows))
    L.append("\nRecords: records.jsonl / records.csv (ros2-bench --json format); logs of every step: logs/.\n")
    with open(path, "w") as f:
        f.write("\n".join(L))


# ---------------------------------------------------------------- main


def environment():
    def cmd_out(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return ""

    mem = 0
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) // (1 << 20)
    except (OSError, ValueError):
        pass
    return {"cpus": os.cpu_count(), "mem_gib": mem, "kernel": platform.release(), "fio": cmd_out(["fio", "--version"]),
            "loadavg_start": os.getloadavg()[0]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bench", required=True, help="ros2-bench binary")
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--parts", default="fig3,fig4,fig5,peer")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--peer", default="")
    ap.add_argument("--ros2ctl", default="")
    ap.add_argument("--engine", default="")
    ap.add_argument("--ceph-script", default="")
    ap.add_argument("--offload-records", default="")
    ap.add_argument("--runtime", type=float, default=0)
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--redraw", action="store_true",
                    help="run nothing: recompute targets, CSV, figures and report from --out's records.jsonl")
    a = ap.parse_args()
    c = config(a.quick, a.runtime, a.rounds)
    parts = [p for p in a.parts.split(",") if p]
    if "peer" in parts and not a.peer:
        parts.remove("peer")
    old_summary = {}
    if a.redraw:
        parts = []
        try:
            with open(os.path.join(a.out, "summary.json")) as f:
                old_summary = json.load(f)
        except (OSError, ValueError):
            pass
        if old_summary.get("config"):
            c = old_summary["config"]
    os.makedirs(a.out, exist_ok=True)
    logs = os.path.join(a.out, "logs")
    os.makedirs(logs, exist_ok=True)
    if not a.redraw:
        for old in os.listdir(logs):
            os.remove(os.path.join(logs, old))
    recs = Records(os.path.join(a.out, "records.jsonl"), keep=a.redraw)

    # estimates (seconds) for the bar and the ETA
    rt = c["runtime"]
    n3 = 8 * len(c["fig3_jobs"])
    n4 = len(c["fig4_ops"]) * 2 * len(c["fig4_jobs"]) * 2 * len(c["fig4_targets"])
    n5 = len(c["fig5_classes"]) * 2 * 2 * 2 * len(c["fig5_ops"]) * len(c["fig5_jobs"])
    est = {
        "fig3": n3 * (c["fig3_runtime"] + 0.6) + (2 if a.quick else 20),
        "fig4": n4 * (c["fig4_runtime"] + 0.4) + 4 * len(c["fig4_targets"]) * 3,
        "fig5": n5 * (rt * c["rounds"] + 3.5) + len(c["fig5_classes"]) * 4 * 6
        + 2 * len(dfs_read_jobs(c)) * c.get("dfs_read_repeat", 1) * (rt + 1.5) + 15,
        "peer": 60 + 16 * len(c["ceph_jobs"]) * (c["ceph_runtime"] + c["ceph_settle"] + 1),
    }
    if "fig5" in parts and not a.offload_records and not has_subcommand(a.bench, "offload"):
        est["fig5"] = n5 / 2 * (rt + 1.5) + len(c["fig5_classes"]) * 8 * 6  # direct mode only, a cluster per run
    steps = [(p, est[p]) for p in ("fig3", "fig4", "fig5", "peer") if p in parts]
    steps.append(("figures", 8))
    prog = Progress(steps, not a.no_progress)
    summary = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "quick": a.quick,
               "config": c, "environment": environment(), "parts": {}}
    t_start = time.monotonic()
    ok = True
    runners = {
        "fig3": lambda: run_fig3(a, c, recs, prog, logs),
        "fig4": lambda: run_fig4(a, c, recs, prog, logs),
        "fig5": lambda: run_fig5(a, c, recs, prog, logs),
        "peer": lambda: run_peer(a, c, recs, prog, logs, summary["environment"]),
    }
    for p, e in steps[:-1]:
        prog.begin(p, e)
        t0 = time.monotonic()
        entry = {"status": "ok"}
        try:
            note = runners[p]()
            if note:
                entry["note"] = note
        except (StepFailed, OSError, ValueError, KeyError) as ex:
            entry = {"status": "failed", "note": str(ex)}
            prog.log(f"{p} failed: {ex}")
            ok = False
        entry["seconds"] = time.monotonic() - t0
        summary["parts"][p] = entry
        prog.end(entry["status"])
    if a.redraw:
        for k in ("started", "quick", "environment", "parts"):
            if k in old_summary:
                summary[k] = old_summary[k]
    for p in ("fig3", "fig4", "fig5", "peer"):
        if p not in summary["parts"]:
            summary["parts"][p] = {"status": "skipped", "seconds": 0,
                                   "note": "no --peer" if p == "peer" else "not in --parts"}
    recs.close()

    prog.begin("figures", 8)
    summary["targets"] = [
        {"name": n, "value": v, "threshold": thr, "relation": rel, "met": met(v, thr, rel), "detail": d}
        for n, v, thr, rel, d in targets(recs, c)
    ]
    # the targets as records too (bench "paper", metric "target")
    with open(recs.path, "a") as f:
        for t in summary["targets"]:
            if t["value"] is not None:
                rec = {"bench": "paper", "case": "target=" + re.sub(r"[^A-Za-z0-9.]+", "_", t["name"]).strip("_"),
                       "metric": "target_value", "value": t["value"]}
                recs.items.append(rec)
                f.write(json.dumps(rec, sort_keys=True) + "\n")
    write_csv(recs, os.path.join(a.out, "records.csv"))
    try:
        figs = figures(recs, c, a.out)
    except ImportError as ex:
        prog.log(f"no figures: {ex} (install Debian's python3-matplotlib)")
        figs, ok = [], False
    summary["elapsed_s"] = old_summary.get("elapsed_s", 0) if a.redraw else time.monotonic() - t_start
    summary["environment"]["loadavg_end"] = os.getloadavg()[0]
    summary["outputs"] = ["records.jsonl", "records.csv", "summary.json", "report.md"] + figs
    write_report(recs, c, summary, figs, os.path.join(a.out, "report.md"))
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    prog.end("ok")
    prog.close()
    for t in summary["targets"]:
        st = "-" if t["met"] is None else ("met" if t["met"] else "MISSED")
        print(f"{st:6} {fmt(t['value'], 2):>6}  {t['relation']} {t['threshold']}  {t['name']}  ({t['detail']})")
    print(f"paper: wrote {a.out}/report.md and {len(figs)} figures in {summary['elapsed_s']:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
