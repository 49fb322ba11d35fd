"""Offload mode: the same Python calls with the file system running in the
cluster's ros2-agent (`cluster up --agent`); this process holds no secret."""
import os
import zlib

import pytest
import torch
from torch.utils.data import DataLoader

import ros2
import ros2.torch


@pytest.fixture(scope="module")
def offload_fs(cluster):
    client = ros2.connect(agent_socket=cluster["agent_socket"])
    assert client.describe_transport().startswith("offload agent=")
    return client.pool(cluster["pool"]).container(cluster["container"]).mount()


def test_files_round_trip_through_the_agent(offload_fs, fs):
    d = "/offload-" + os.urandom(4).hex()
    offload_fs.makedirs(d + "/sub")
    data = os.urandom(3 * offload_fs.chunk_size + 777)
    with offload_fs.open(d + "/sub/f.bin", "wb") as f:
        f.write(data)
    with offload_fs.open(d + "/sub/f.bin", "rb") as f:
        f.seek(offload_fs.chunk_size - 5)
        assert f.read(10) == data[offload_fs.chunk_size - 5:offload_fs.chunk_size + 5]
    # The direct-mode mount sees what the agent wrote, and the other way round.
    assert fs.read_bytes(d + "/sub/f.bin") == data
    fs.write_bytes(d + "/direct.txt", b"from the host")
    assert sorted(offload_fs.listdir(d)) == ["direct.txt", "sub"]
    got = offload_fs.read_many([(d + "/sub/f.bin", 0, 100), (d + "/direct.txt", 5, 3)])
    assert got == [data[:100], b"the"]
    with pytest.raises(FileNotFoundError):
        offload_fs.stat(d + "/missing")
    offload_fs.rename(d + "/direct.txt", d + "/moved.txt")
    offload_fs.remove(d + "/moved.txt")
    assert offload_fs.listdir(d) == ["sub"]


def test_object_api_is_not_offered(cluster):
    client = ros2.connect(agent_socket=cluster["agent_socket"])
    cont = client.pool(cluster["pool"]).container(cluster["container"])
    with pytest.raises(OSError):
        cont.object("SX", 0, 1).put("d", "a", b"x")


def test_dataloader_workers_reconnect_to_the_agent(offload_fs):
    d = "/offload-dl-" + os.urandom(4).hex()
    offload_fs.makedirs(d)
    crcs = {}
    for i in range(64):
        blob = os.urandom(1000 + i)
        offload_fs.write_bytes("%s/%03d" % (d, i), blob)
        crcs["%03d" % i] = zlib.crc32(blob)
    ds = ros2.torch.Dataset(offload_fs, d, transform=lambda b: torch.tensor(zlib.crc32(b)))
    seen = []
    for batch in DataLoader(ds, batch_size=8, num_workers=2, shuffle=True):
        seen.extend(int(x) for x in batch)
    assert sorted(seen) == sorted(crcs.values())
