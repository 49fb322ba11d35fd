#!/usr/bin/env python3
"""PyTorch on ROS2 against the FUSE mount and local ext4, in the same run
(`ros2-bench python` runs this script; docs/python.md, "Benchmark").

It starts a single-node cluster (`ros2ctl cluster up --class nvme`) in a
scratch directory, so the engine's data and the ext4 baseline's files share one
file system and disk, mounts the container with ros2-fuse, and writes one
directory of sample files per sample size twice: through the Python API into
the container (the mount reads the same files) and into <scratch>/ext4.

DataLoader rounds: for every sample size and worker count, one epoch (or
--seconds of it) of a shuffled DataLoader over
  api   - ros2.torch.Dataset (batches read with read_many),
  mount - a Dataset reading each file with open().read() on the mount,
  ext4  - the same Dataset on <scratch>/ext4,
the order rotating from round to round. Before every run the page cache is
dropped (sync; echo 3 > /proc/sys/vm/drop_caches, as root): that empties the
kernel's cache of ext4 files and of the mount's files alike (ros2-fuse keeps
no data cache of its own; the engine reads with O_DIRECT). The clock starts
once every worker has delivered a one-sample warm-up batch (fork and, for the
API, the worker's reconnect are not timed). Collation is the identity (a list
of bytes), so the figure is the cost of getting the samples. Over the same
interval the CPU time of this process, the workers and the processes serving
the mode (the engine; the engine and ros2-fuse for the mount) is read from
/proc: the CPU microseconds a sample.

Checkpoint rounds: a state dict of float32 tensors (--ckpt-mib) saved and
loaded with ros2.torch.Checkpoint against torch.save to a file + flush + fsync
on ext4 and on the mount, and torch.load from both (caches dropped before
every load); GiB/s of the file's size.

Output: --json prints one record per line in ros2-bench's format (bench,
case, metric, value, baseline, baseline_value, ratio; bench/bench_report.h)
with the median over the rounds, plus `min`, `max` (of value), `ratio_min`,
`ratio_max` (of the per-round ratios) and `rounds`. Without --json, a table.
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = "python"


def log(msg):
    print("torch_bench: " + msg, file=sys.stderr, flush=True)


def parse_size(text):
    t = text.strip()
    units = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    for u in sorted(units, key=len, reverse=True):
        if t.lower().endswith(u):
            return int(float(t[: -len(u)]) * units[u])
    return int(t)


def args_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ros2ctl", default=os.environ.get("ROS2CTL", "ros2ctl"))
    p.add_argument("--engine", default=os.environ.get("ROS2_ENGINE", ""))
    p.add_argument("--fuse", default=os.environ.get("ROS2_FUSE", "ros2-fuse"), help="ros2-fuse ('' skips the mount)")
    p.add_argument("--fuse-arg", action="append", default=[], help="an extra ros2-fuse argument (repeatable)")
    p.add_argument("--dir", default="/tmp", help="scratch parent: the cluster and the ext4 files go here")
    p.add_argument("--class", dest="cls", default="nvme", choices=["nvme", "ram"])
    p.add_argument("--transport", default="shm", choices=["shm", "tcp", "auto"])
    p.add_argument("--targets", type=int, default=2)
    p.add_argument("--shard-size", default="4GiB")
    p.add_argument("--sizes", nargs="+", type=parse_size, default=[4096, 131072, 1048576])
    p.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    p.add_argument("--modes", nargs="+", default=["api", "mount", "ext4"], choices=["api", "mount", "ext4"])
    p.add_argument("--bytes-per-size", type=parse_size, default=256 << 20,
                   help="sample files per size: this many bytes' worth, within --min/--max-samples")
    p.add_argument("--min-samples", type=int, default=256)
    p.add_argument("--max-samples", type=int, default=8192)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seconds", type=float, default=3, help="stop a DataLoader run after this long (0: whole epoch)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--ckpt-size", type=parse_size, default=512 << 20, help="state dict bytes (0: no checkpoint rounds)")
    p.add_argument("--ckpt-tensor", type=parse_size, default=16 << 20, help="bytes per tensor of the state dict")
    p.add_argument("--no-drop-caches", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    p.add_argument("--json", action="store_true")
    return p


class Cluster:
    def __init__(self, a, scratch):
        self.a = a
        self.data_dir = os.path.join(scratch, "c")  # short: the control socket path is limited to 108 bytes
        self.up = False

    def ctl(self, *args, check=True):
        r = subprocess.run([self.a.ros2ctl, "--data-dir", self.data_dir, *args], capture_output=True, text=True,
                           timeout=600)
        if check and r.returncode != 0:
            raise RuntimeError("ros2ctl %s: exit %d: %s%s" % (" ".join(args), r.returncode, r.stderr, r.stdout))
        return r.stdout

    def start(self):
        cmd = ["cluster", "up", "--class", self.a.cls, "--transport", self.a.transport, "--targets",
               str(self.a.targets), "--shard-size", self.a.shard_size, "--timeout", "120"]
        if self.a.engine:
            cmd += ["--engine", self.a.engine]
        self.ctl(*cmd)
        self.up = True
        size = parse_size(self.a.shard_size) * self.a.targets
        self.ctl("pool", "create", "bench", "--size", str(size))
        self.ctl("cont", "create", "bench", "data")

    def stop(self):
        if self.up:
            self.ctl("cluster", "down", "--timeout", "30", "--force", check=False)
            self.up = False


class Mount:
    def __init__(self, a, data_dir, mountpoint, log_path):
        os.makedirs(mountpoint, exist_ok=True)
        self.mountpoint = mountpoint
        self.log = open(log_path, "w")
        cmd = [a.fuse, "-f", "-d", data_dir, "--transport", a.transport, *a.fuse_arg, "bench", "data", mountpoint]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not os.path.ismount(mountpoint):
            if self.proc.poll() is not None:
                raise RuntimeError("ros2-fuse exited %d before mounting (log: %s)" % (self.proc.returncode, log_path))
            if time.monotonic() > deadline:
                raise RuntimeError("ros2-fuse did not mount %s within 60 s" % mountpoint)
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            subprocess.run(["fusermount3", "-u", self.mountpoint], capture_output=True)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class FileDataset:
    """A plain map-style dataset: sample i is open(paths[i]).read()."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            return f.read()


def identity(batch):
    return batch


def drop_caches(a):
    os.sync()
    if a.no_drop_caches:
        return
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def samples_for(a, size):
    return max(a.min_samples, min(a.max_samples, a.bytes_per_size // size))


def write_samples(a, fs, ext4_root, size, count):
    """`count` files of `size` bytes, the same content in the container and on ext4."""
    import random
    rnd = random.Random(size)
    base = bytearray(rnd.randbytes(size))
    d = "/s%d" % size
    fs.makedirs(d, exist_ok=True)
    local = os.path.join(ext4_root, "s%d" % size)
    os.makedirs(local, exist_ok=True)
    def one(i):
        blob = bytearray(base)
        blob[:8] = i.to_bytes(8, "little")
        name = "%06d.bin" % i
        if "api" in a.modes or "mount" in a.modes:
            fs.write_bytes(d + "/" + name, blob)
        if "ext4" in a.modes:
            with open(os.path.join(local, name), "wb") as f:
                f.write(blob)

    # Untimed; a durable create and write each, so several at a time.
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, range(count)))
    return d, [os.path.join(local, "%06d.bin" % i) for i in range(count)]


def cpu_seconds(pids):
    """User + system CPU seconds of the processes `pids` (those gone count 0)."""
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def engine_pids(data_dir):
    """The ros2-engine processes of the cluster in `data_dir` (by /proc, not ps)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/comm" % name) as f:
                if f.read().strip() != "ros2-engine":
                    continue
            with open("/proc/%s/cmdline" % name, "rb") as f:
                if os.fsencode(data_dir) in f.read():
                    pids.append(int(name))
        except OSError:
            pass
    return pids


def run_loader(ds, workers, batch_size, seconds, seed, serving_pids=()):
    """(samples/s, CPU microseconds a sample) of one shuffled pass, timed from
    the moment every worker has delivered its one-sample warm-up batch. The
    CPU is that of this process, the DataLoader workers and `serving_pids`
    (the engine, ros2-fuse) over the same interval."""
    import torch
    from torch.utils.data import DataLoader
    g = torch.Generator()
    g.manual_seed(seed)
    order = torch.randperm(len(ds), generator=g).tolist()
    warm = max(1, workers)
    batches = [[i] for i in order[:warm]]
    rest = order[warm:]
    batches += [rest[k:k + batch_size] for k in range(0, len(rest), batch_size)]
    dl = DataLoader(ds, batch_sampler=batches, num_workers=workers, collate_fn=identity)
    it = iter(dl)
    pids = [os.getpid(), *serving_pids]

    def cpu():  # read after every batch: a worker exits at the end of the epoch
        return cpu_seconds(pids + [w.pid for w in getattr(it, "_workers", [])])

    n = 0
    t0 = None
    cpu0 = cpu1 = 0.0
    elapsed = 0.0
    for k, b in enumerate(it):
        if k == warm - 1:
            cpu0 = cpu1 = cpu()
            t0 = time.perf_counter()
        elif k >= warm:
            n += len(b)
            cpu1 = cpu()
            elapsed = time.perf_counter() - t0
            if seconds and elapsed >= seconds:
                break
    del it
    if n == 0 or elapsed <= 0:
        return 0.0, 0.0
    return n / elapsed, (cpu1 - cpu0) / n * 1e6


def make_state(total, per_tensor):
    import torch
    g = torch.Generator()
    g.manual_seed(1)
    state = {}
    n = max(1, total // per_tensor)
    for i in range(n):
        state["layer%03d.weight" % i] = torch.rand(per_tensor // 4, generator=g)
    return state


def ckpt_round(a, fs, ckpt, state, ext4_dir, mount_dir, order, results):
    import torch
    paths = {"ext4": os.path.join(ext4_dir, "ckpt.pt")}
    if mount_dir:
        paths["mount"] = os.path.join(mount_dir, "ckpt-mount.pt")
    for mode in order:
        # Save: remove the previous round's file first (untimed).
        if mode == "api":
            for n in ("ckpt.pt", "ckpt.pt.tmp"):
                if fs.exists(ckpt.path(n)):
                    fs.remove(ckpt.path(n))
        elif os.path.exists(paths[mode]):
            os.remove(paths[mode])
        drop_caches(a)
        t0 = time.perf_counter()
        if mode == "api":
            ckpt.save(state, "ckpt.pt")
        else:
            with open(paths[mode], "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
        t = time.perf_counter() - t0
        size = fs.stat(ckpt.path("ckpt.pt")).st_size if mode == "api" else os.stat(paths[mode]).st_size
        results.setdefault(("ckpt_save", mode), []).append(size / t / (1 << 30))
    for mode in order:
        drop_caches(a)
        t0 = time.perf_counter()
        if mode == "api":
            loaded = ckpt.load("ckpt.pt")
        else:
            loaded = torch.load(paths[mode])
        t = time.perf_counter() - t0
        size = fs.stat(ckpt.path("ckpt.pt")).st_size if mode == "api" else os.stat(paths[mode]).st_size
        first = next(iter(state))
        if len(loaded) != len(state) or not torch.equal(loaded[first], state[first]):
            raise RuntimeError("checkpoint loaded from %s differs from the one saved" % mode)
        del loaded
        results.setdefault(("ckpt_load", mode), []).append(size / t / (1 << 30))


def summarize(rounds_values, base_values):
    med = statistics.median(rounds_values)
    rec = {"value": med, "min": min(rounds_values), "max": max(rounds_values), "rounds": len(rounds_values)}
    if base_values:
        bmed = statistics.median(base_values)
        ratios = [v / b for v, b in zip(rounds_values, base_values) if b > 0]
        rec["baseline_value"] = bmed
        rec["ratio"] = med / bmed if bmed > 0 else 0.0
        if ratios:
            rec["ratio_min"] = min(ratios)
            rec["ratio_max"] = max(ratios)
    return rec


def make_records(a, loader, ckpt_results, ckpt_bytes, cpu=None):
    recs = []
    cpu = cpu or {}

    def add(case, metric, values, baseline, base_values, cpu_values=None, base_cpu_values=None):
        if not values:
            return
        r = {"bench": BENCH, "case": case, "metric": metric}
        if cpu_values:
            r["cpu_us_per_sample"] = statistics.median(cpu_values)
        if baseline and base_cpu_values:
            r["baseline_cpu_us_per_sample"] = statistics.median(base_cpu_values)
        s = summarize(values, base_values if baseline else None)
        r["value"] = s.pop("value")
        if baseline and base_values:
            r["baseline"] = baseline
            r["baseline_value"] = s.pop("baseline_value")
            r["ratio"] = s.pop("ratio")
        r.update(s)
        recs.append(r)

    for size in a.sizes:
        for w in a.workers:
            get = lambda m: loader.get((size, w, m), [])  # noqa: E731
            c = lambda m: cpu.get((size, w, m), [])  # noqa: E731
            case = "op=dataloader bs=%d workers=%d batch=%d class=%s" % (size, w, a.batch_size, a.cls)
            api, mnt, ext = get("api"), get("mount"), get("ext4")
            if api:
                if mnt:
                    add(case + " mode=api", "samples_s", api, "mount", mnt, c("api"), c("mount"))
                if ext or not mnt:
                    add(case + " mode=api", "samples_s", api, "ext4" if ext else None, ext, c("api"), c("ext4"))
            if mnt:
                add(case + " mode=mount", "samples_s", mnt, "ext4" if ext else None, ext, c("mount"), c("ext4"))
            if ext and not api and not mnt:
                add(case + " mode=ext4", "samples_s", ext, None, None, c("ext4"))
    for op in ("ckpt_save", "ckpt_load"):
        base_name = "ext4-fsync" if op == "ckpt_save" else "ext4"
        ext = ckpt_results.get((op, "ext4"), [])
        for mode in ("api", "mount"):
            v = ckpt_results.get((op, mode), [])
            case = "op=%s bytes=%d class=%s mode=%s" % (op, ckpt_bytes, a.cls, mode)
            add(case, "gib_s", v, base_name if ext else None, ext)
        if ext and not ckpt_results.get((op, "api")) and not ckpt_results.get((op, "mount")):
            add("op=%s bytes=%d mode=ext4" % (op, ckpt_bytes), "gib_s", ext, None, None)
    return recs


def print_table(recs, out):
    if not recs:
        return
    wc = max(len(r["case"]) for r in recs)
    wm = max(6, max(len(r["metric"]) for r in recs))
    print("%-8s %-*s %-*s %12s %12s %14s %7s %13s %15s" % ("bench", wc, "case", wm, "metric", "value", "baseline",
                                                         "baseline_value", "ratio", "ratio_range", "cpu_us (base)"),
          file=out)
    for r in recs:
        has = "baseline" in r
        cpu = "-"
        if "cpu_us_per_sample" in r:
            cpu = "%.0f" % r["cpu_us_per_sample"]
            if "baseline_cpu_us_per_sample" in r:
                cpu += " (%.0f)" % r["baseline_cpu_us_per_sample"]
        print("%-8s %-*s %-*s %12.2f %12s %14s %7s %13s %15s" % (
            r["bench"], wc, r["case"], wm, r["metric"], r["value"], r.get("baseline", "-"),
            "%.2f" % r["baseline_value"] if has else "-", "%.2f" % r["ratio"] if has else "-",
            "%.2f-%.2f" % (r["ratio_min"], r["ratio_max"]) if "ratio_min" in r else "-", cpu), file=out)


def main():
    a = args_parser().parse_args()
    # The records go to the original stdout; everything else that writes on
    # fd 1 (the client library's log lines, in this process and in DataLoader
    # workers) goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    sys.stdout.flush()
    os.dup2(2, 1)
    if os.geteuid() != 0 and not a.no_drop_caches:
        log("not root: the page cache is not dropped between runs (--no-drop-caches implied)")
        a.no_drop_caches = True
    if not a.fuse or shutil.which(a.fuse) is None and not os.access(a.fuse, os.X_OK):
        if "mount" in a.modes:
            log("no ros2-fuse binary (%r): the mount is skipped" % a.fuse)
        a.modes = [m for m in a.modes if m != "mount"]

    # UCX prints "unused env variables" on stdout (which would break --json)
    # when it finds settings of a transport it did not load; read at import.
    os.environ.setdefault("UCX_WARN_UNUSED_ENV_VARS", "n")
    import torch  # noqa: F401  (before the cluster: a missing torch fails fast)
    import ros2
    import ros2.torch

    scratch = tempfile.mkdtemp(prefix="r2tb-", dir=a.dir)
    os.chmod(scratch, 0o711)  # the engine started as root runs as the ros2 user (docs/security.md)
    cluster = Cluster(a, scratch)
    mount = None
    try:
        t_setup = time.perf_counter()
        cluster.start()
        fs = ros2.mount("bench", "data", data_dir=cluster.data_dir, transport=a.transport)
        ext4_root = os.path.join(scratch, "ext4")
        os.makedirs(ext4_root)
        if "mount" in a.modes:
            mount = Mount(a, cluster.data_dir, os.path.join(scratch, "mnt"), os.path.join(scratch, "fuse.log"))
        sets = {}
        for size in a.sizes:
            count = samples_for(a, size)
            sets[size] = write_samples(a, fs, ext4_root, size, count)
        log("cluster up and %s sample files written in %.1f s" % (
            " + ".join("%d x %d B" % (samples_for(a, s), s) for s in a.sizes), time.perf_counter() - t_setup))

        loader = {}
        cpu = {}  # (size, workers, mode) -> CPU us a sample per round
        engines = engine_pids(cluster.data_dir)
        ckpt_results = {}
        ckpt_bytes = 0
        state = None
        ckpt = None
        if a.ckpt_size > 0:
            state = make_state(a.ckpt_size, a.ckpt_tensor)
            ckpt_bytes = sum(t.numel() * t.element_size() for t in state.values())
            ckpt = ros2.torch.Checkpoint(fs, "/ckpt")
        modes = list(a.modes)
        for rnd in range(a.rounds):
            order = modes[rnd % len(modes):] + modes[:rnd % len(modes)]
            for size in a.sizes:
                root, local_paths = sets[size]
                for w in a.workers:
                    for mode in order:
                        if mode == "api":
                            ds = ros2.torch.Dataset(fs, root)
                        elif mode == "mount":
                            ds = FileDataset([os.path.join(mount.mountpoint, root.lstrip("/"), os.path.basename(p))
                                              for p in local_paths])
                        else:
                            ds = FileDataset(local_paths)
                        serving = {"api": engines, "mount": engines + ([mount.proc.pid] if mount else []),
                                   "ext4": []}[mode]
                        drop_caches(a)
                        v, c = run_loader(ds, w, a.batch_size, a.seconds, rnd * 1000 + size + w, serving)
                        loader.setdefault((size, w, mode), []).append(v)
                        cpu.setdefault((size, w, mode), []).append(c)
                        log("round %d bs=%d workers=%d %-5s %10.0f samples/s %7.0f us CPU a sample" % (
                            rnd + 1, size, w, mode, v, c))
            if state is not None:
                corder = [m for m in order if m in ("api", "mount", "ext4")]
                ckpt_round(a, fs, ckpt, state, ext4_root, mount.mountpoint if mount else None, corder, ckpt_results)
                log("round %d checkpoint %s" % (rnd + 1, ", ".join(
                    "%s %s %.2f GiB/s" % (op, m, ckpt_results[(op, m)][-1]) for op in ("ckpt_save", "ckpt_load")
                    for m in corder)))
        recs = make_records(a, loader, ckpt_results, ckpt_bytes, cpu)
        if a.json:
            for r in recs:
                print(json.dumps(r), file=out, flush=True)
        else:
            print_table(recs, out)
            out.flush()
        return 0
    finally:
        if mount is not None:
            mount.stop()
        cluster.stop()
        if not a.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
