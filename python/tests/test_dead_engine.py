import json
import os
import shutil
import signal
import tempfile
import time

import pytest

import ros2
from conftest import ROS2_ENGINE, ctl


@pytest.fixture
def own_cluster():
    data_dir = tempfile.mkdtemp(prefix="r2pk-", dir=os.environ.get("TMPDIR") or "/tmp")
    up = ctl(data_dir, "--json", "cluster", "up", "--targets", "1", "--class", "ram", "--transport", "auto",
             "--shard-size", "64MiB", "--engine", ROS2_ENGINE, "--timeout", "60")
    json.loads(up.stdout)
    try:
        ctl(data_dir, "pool", "create", "p", "--size", "64MiB")
        ctl(data_dir, "cont", "create", "p", "c")
        yield data_dir
    finally:
        ctl(data_dir, "cluster", "down", "--timeout", "30", "--force", check=False)
        shutil.rmtree(data_dir, ignore_errors=True)


def test_dead_engine_raises_not_hangs(own_cluster):
    fs = ros2.mount("p", "c", data_dir=own_cluster, reconnect_timeout=0, io_timeout=5, control_timeout=3)
    fs.write_bytes("/f", b"before")
    assert fs.read_bytes("/f") == b"before"
    with open(os.path.join(own_cluster, "engine.pid")) as f:
        pid = int(f.read().strip())
    os.kill(pid, signal.SIGKILL)
    for _ in range(500):
        if not os.path.exists("/proc/%d" % pid):
            break
        with open("/proc/%d/stat" % pid) as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.01)
    start = time.monotonic()
    with pytest.raises(OSError) as e:
        fs.read_bytes("/f")
    assert time.monotonic() - start < 20
    assert "/f" in str(e.value)
