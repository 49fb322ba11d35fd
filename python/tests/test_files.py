import io
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
import torch

import ros2


def test_connect_describes_transport(client):
    assert "transport=" in client.describe_transport()


def test_connect_prints_nothing_unless_ros2_log_asks(cluster):
    # A library user's terminal stays quiet at info level; ROS2_LOG=info shows the transport line.
    code = "import ros2; ros2.connect(data_dir=%r)" % cluster["data_dir"]
    env = {k: v for k, v in os.environ.items() if k not in ("ROS2_LOG", "ROS2_LOG_LEVEL")}
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout == "" and quiet.stderr == ""
    loud = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**env, "ROS2_LOG": "info"})
    assert loud.returncode == 0, loud.stderr
    assert "transport" in loud.stderr


def test_round_trip_binary_and_text(fs, tmpdir_fs):
    p = tmpdir_fs + "/a.bin"
    data = os.urandom(100_000)
    with fs.open(p, "wb") as f:
        assert isinstance(f, io.BufferedWriter)
        assert isinstance(f.raw, io.RawIOBase)
        f.write(data)
    with fs.open(p, "rb") as f:
        assert isinstance(f, io.BufferedReader)
        assert f.read() == data
    assert fs.stat(p).st_size == len(data)
    t = tmpdir_fs + "/t.txt"
    with fs.open(t, "w") as f:
        f.write("héllo\nworld\n")
    with fs.open(t, "r") as f:
        assert f.readlines() == ["héllo\n", "world\n"]
    with fs.open(t, "a") as f:
        f.write("more\n")
    assert fs.read_bytes(t) == "héllo\nworld\nmore\n".encode()


def test_multi_chunk_and_seek(fs, tmpdir_fs):
    chunk = fs.chunk_size
    p = tmpdir_fs + "/big"
    data = os.urandom(chunk * 2 + 12345)
    fs.write_bytes(p, data)
    assert fs.read_bytes(p) == data
    with fs.open(p, "r+b") as f:
        f.seek(chunk - 10)
        f.write(b"X" * 20)
        f.seek(chunk - 12)
        assert f.read(24) == data[chunk - 12:chunk - 10] + b"X" * 20 + data[chunk + 10:chunk + 12]
        f.seek(-5, os.SEEK_END)
        assert f.read() == data[-5:]


def test_sparse_file_reads_zeros(fs, tmpdir_fs):
    chunk = fs.chunk_size
    p = tmpdir_fs + "/sparse"
    with fs.open(p, "wb", buffering=0) as f:
        f.seek(3 * chunk + 7)
        f.write(b"end")
    st = fs.stat(p)
    assert st.st_size == 3 * chunk + 10
    data = fs.read_bytes(p)
    assert data[:3 * chunk + 7] == bytes(3 * chunk + 7)
    assert data[-3:] == b"end"


def test_readinto_numpy_torch_bytearray(fs, tmpdir_fs):
    p = tmpdir_fs + "/arr"
    src = np.arange(4096, dtype=np.float32)
    fs.write_bytes(p, src)
    with fs.open(p, "rb", buffering=0) as f:
        a = np.empty(4096, dtype=np.float32)
        assert f.readinto(a) == src.nbytes
        assert np.array_equal(a, src)
        f.seek(0)
        t = torch.empty(4096, dtype=torch.float32)
        assert f.readinto(t) == src.nbytes
        assert torch.equal(t, torch.from_numpy(src))
        f.seek(0)
        b = bytearray(100)
        assert f.readinto(b) == 100
        assert bytes(b) == src.tobytes()[:100]
        assert f.pread(8, 4) == src.tobytes()[4:12]


def test_truncate(fs, tmpdir_fs):
    p = tmpdir_fs + "/tr"
    fs.write_bytes(p, b"0123456789")
    fs.truncate(p, 4)
    assert fs.read_bytes(p) == b"0123"
    fs.truncate(p, 8)
    assert fs.read_bytes(p) == b"0123" + bytes(4)
    with fs.open(p, "r+b") as f:
        f.truncate(2)
    assert fs.stat(p).st_size == 2


def test_namespace_ops(fs, tmpdir_fs):
    d = tmpdir_fs
    fs.makedirs(d + "/x/y/z")
    fs.makedirs(d + "/x/y/z", exist_ok=True)
    fs.write_bytes(d + "/x/f1", b"1")
    fs.write_bytes(d + "/x/y/f2", b"22")
    assert sorted(fs.listdir(d + "/x")) == ["f1", "y"]
    entries = {e.name: e for e in fs.scandir(d + "/x")}
    assert entries["y"].is_dir() and entries["f1"].is_file()
    assert entries["f1"].stat().st_size == 1
    st = fs.stat(d + "/x")
    assert stat.S_ISDIR(st.st_mode)
    walked = {p: (sorted(ds), sorted(fsn)) for p, ds, fsn in fs.walk(d)}
    assert walked == {d: (["x"], []), d + "/x": (["y"], ["f1"]), d + "/x/y": (["z"], ["f2"]),
                      d + "/x/y/z": ([], [])}
    fs.write_bytes(d + "/x/y/z/cached", b"in z")
    assert fs.read_bytes(d + "/x/y/z/cached") == b"in z"  # caches directory /x/y/z
    fs.rename(d + "/x/y/z", d + "/x/y/z2")
    with pytest.raises(FileNotFoundError):
        fs.read_bytes(d + "/x/y/z/cached")  # not through the stale directory
    fs.mkdir(d + "/x/y/z")
    with pytest.raises(FileNotFoundError):
        fs.read_many([(d + "/x/y/z/cached", 0, None)])
    fs.rmtree(d + "/x/y/z2")
    fs.rename(d + "/x/f1", d + "/x/y/g1")
    assert fs.read_bytes(d + "/x/y/g1") == b"1"
    assert not fs.exists(d + "/x/f1")
    fs.remove(d + "/x/y/g1")
    fs.rmdir(d + "/x/y/z")
    assert sorted(fs.listdir(d + "/x/y")) == ["f2"]
    fs.rmtree(d + "/x")
    assert fs.listdir(d) == []


def test_read_many(fs, tmpdir_fs):
    chunk = fs.chunk_size
    files = {}
    for i in range(20):
        p = "%s/r%d" % (tmpdir_fs, i)
        files[p] = os.urandom(1000 + i * 997)
        fs.write_bytes(p, files[p])
    big = tmpdir_fs + "/big"
    files[big] = os.urandom(chunk + 5000)
    fs.write_bytes(big, files[big])
    reqs = [(p, 10, 500) for p in files] + [(big, chunk - 100, 300), (big, 0, len(files[big]) + 50)]
    out = fs.read_many(reqs)
    for (p, off, n), got in zip(reqs, out):
        assert got == files[p][off:off + n]
    assert len(out[-1]) == len(files[big])
    whole = fs.read_many([(p, 0, None) for p in files] + [(big, chunk, None)])
    assert whole[:-1] == list(files.values())
    assert whole[-1] == files[big][chunk:]


def test_errors(fs, tmpdir_fs):
    d = tmpdir_fs
    with pytest.raises(FileNotFoundError) as e:
        fs.open(d + "/missing", "rb")
    assert "missing" in str(e.value)
    with pytest.raises(FileNotFoundError):
        fs.stat(d + "/nope/deeper")
    with pytest.raises(FileNotFoundError):
        fs.read_many([(d + "/absent", 0, 10)])
    fs.mkdir(d + "/dir")
    fs.write_bytes(d + "/file", b"x")
    with pytest.raises(IsADirectoryError) as e:
        fs.open(d + "/dir", "rb")
    assert "dir" in str(e.value)
    with pytest.raises(IsADirectoryError):
        fs.remove(d + "/dir")
    with pytest.raises(NotADirectoryError):
        fs.listdir(d + "/file")
    with pytest.raises(NotADirectoryError):
        fs.rmdir(d + "/file")
    with pytest.raises(NotADirectoryError):
        fs.open(d + "/file/sub", "wb")
    with pytest.raises(FileExistsError) as e:
        fs.mkdir(d + "/dir")
    assert "dir" in str(e.value)
    with pytest.raises(FileExistsError):
        fs.open(d + "/file", "xb")
    fs.write_bytes(d + "/dir/inner", b"y")
    with pytest.raises(OSError) as e:
        fs.rmdir(d + "/dir")
    import errno
    assert e.value.errno == errno.ENOTEMPTY and d + "/dir" in str(e.value)
    with pytest.raises(ValueError):
        fs.open(d + "/file", "rw")


def test_permission_error_names_pool(cluster):
    bad = ros2.connect(control=cluster["control"], tenant="admin", secret="not-the-secret",
                       reconnect_timeout=0)
    with pytest.raises(PermissionError) as e:
        bad.pool(cluster["pool"])
    assert "pool" in str(e.value)


def test_connecting_to_a_missing_agent_names_its_socket(cluster):
    with pytest.raises(OSError) as e:
        ros2.connect(data_dir=cluster["data_dir"], agent_socket="/tmp/ros2-no-such-agent.sock")
    assert "/tmp/ros2-no-such-agent.sock" in str(e.value)


def test_objects_key_value(container):
    obj = container.object("SX", 0, 0x5151)
    obj.put("k1", "a", b"v1")
    obj.put(b"k2", "a", bytearray(b"v2"))
    obj.put("k2", "b", np.arange(3, dtype=np.uint8))
    assert obj.get("k1", "a") == b"v1"
    assert obj.get("k2", "b") == bytes([0, 1, 2])
    assert sorted(obj.list_dkeys()) == ["k1", "k2"]
    assert sorted(obj.list_akeys("k2")) == ["a", "b"]
    obj.punch_akey("k2", "b")
    assert obj.list_akeys("k2") == ["a"]
    obj.punch_dkey("k1")
    assert obj.list_dkeys() == ["k2"]
    assert obj.get("k1", "a") == b""
    obj.punch()
    assert obj.list_dkeys() == []
    with pytest.raises(OSError):
        container.object("RP_9G1", 0, 1)


def test_filesystem_pickles_as_its_origin(fs, tmpdir_fs):
    import pickle

    p = tmpdir_fs + "/pickled"
    fs.write_bytes(p, b"across processes")
    fs2 = pickle.loads(pickle.dumps(fs))
    assert fs2 is not fs
    assert fs2.read_bytes(p) == b"across processes"
