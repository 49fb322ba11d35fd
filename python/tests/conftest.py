"""A real single-node ROS2 cluster for the Python tests: `ros2ctl cluster up`
in a temporary directory (ram class, transport auto, 2 targets), pool "p" and
container "c", stopped and removed at the end of the session. ROS2CTL and
ROS2_ENGINE name the binaries (ctest sets them)."""

import json
import os
import shutil
import subprocess
import tempfile
import uuid

import pytest

import ros2

ROS2CTL = os.environ.get("ROS2CTL", "ros2ctl")
ROS2_ENGINE = os.environ.get("ROS2_ENGINE", "ros2-engine")


def ctl(data_dir, *args, check=True):
    r = subprocess.run([ROS2CTL, "--data-dir", data_dir, *args], capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise RuntimeError("ros2ctl %s failed (exit %d): %s%s" % (" ".join(args), r.returncode, r.stderr, r.stdout))
    return r


@pytest.fixture(scope="session")
def cluster():
    # Short: the control socket path must stay under 108 bytes.
    data_dir = tempfile.mkdtemp(prefix="r2py-", dir=os.environ.get("TMPDIR") or "/tmp")
    up = ctl(data_dir, "--json", "cluster", "up", "--targets", "2", "--class", "ram", "--transport", "auto",
             "--shard-size", "64MiB", "--engine", ROS2_ENGINE, "--agent", "--timeout", "60")
    info = json.loads(up.stdout)
    try:
        ctl(data_dir, "pool", "create", "p", "--size", "512MiB")
        ctl(data_dir, "cont", "create", "p", "c")
        yield {"data_dir": data_dir, "control": info["control"], "pool": "p", "container": "c",
               "agent_socket": info["agent_socket"]}
    finally:
        ctl(data_dir, "cluster", "down", "--timeout", "30", "--force", check=False)
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def client(cluster):
    return ros2.connect(data_dir=cluster["data_dir"])


@pytest.fixture(scope="session")
def container(client, cluster):
    return client.pool(cluster["pool"]).container(cluster["container"])


@pytest.fixture(scope="session")
def fs(container):
    return container.mount()


@pytest.fixture
def tmpdir_fs(fs):
    """A fresh directory in the container for one test."""
    path = "/t-" + uuid.uuid4().hex[:12]
    fs.mkdir(path)
    return path
