"""The pool map watch stays on in Python and survives fork() (docs/cluster.md,
"How clients learn new maps"): the parent's watch is stopped around each
fork() and started again after it, so forked workers (as a PyTorch DataLoader
makes them) never inherit a thread inside a gRPC call and never hang, and the
parent's watch streams on."""

import multiprocessing as mp
import time

from ros2 import _ros2


def _worker_reads(fs, path, rounds, q):
    try:
        q.put([fs.read_bytes(path) for _ in range(rounds)])
    except BaseException as e:  # report, do not hang the parent
        q.put(repr(e))


def _wait_streams_above(n, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        live, opened = _ros2.map_watches()
        if opened > n:
            return opened
        time.sleep(0.02)
    return _ros2.map_watches()[1]


def test_watch_on_and_forked_workers_do_not_hang(fs, tmpdir_fs):
    live, opened = _ros2.map_watches()
    assert live >= 1, "the pool map watch is off"
    opened = _wait_streams_above(0)
    assert opened >= 1, "the watch never opened a stream"
    path = tmpdir_fs + "/watched"
    fs.write_bytes(path, b"x" * 4096)
    ctx = mp.get_context("fork")
    for round_ in range(6):  # DataLoader-like: workers forked again and again
        before = _ros2.map_watches()[1]
        q = ctx.Queue()
        procs = [ctx.Process(target=_worker_reads, args=(fs, path, 5, q)) for _ in range(2)]
        started = time.monotonic()
        for p in procs:
            p.start()
        results = [q.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(30)
            assert p.exitcode == 0, "round %d: a worker failed" % round_
        assert results == [[b"x" * 4096] * 5] * 2, results
        assert time.monotonic() - started < 30
        # The parent's watch was stopped for each fork and opened a stream again.
        assert _wait_streams_above(before) > before, "round %d: the parent's watch did not resume" % round_
    assert fs.read_bytes(path) == b"x" * 4096  # the parent's connection still works
