import hashlib
import os
import struct
import zlib

import pytest
import torch
import torch.utils.data as data

import ros2
import ros2.torch as rt

N_SAMPLES = 2000


def _sample(i):
    # 64..1087 bytes: the index, then bytes derived from it.
    n = 64 + (i * 7919) % 1024
    return struct.pack("<I", i) + hashlib.sha256(str(i).encode()).digest() * (n // 32 + 1)


@pytest.fixture(scope="module")
def samples(fs):
    root = "/samples"
    if fs.exists(root):
        return root
    fs.makedirs(root)
    for d in range(10):
        fs.mkdir("%s/d%02d" % (root, d))
    for i in range(N_SAMPLES):
        fs.write_bytes("%s/d%02d/s%05d.bin" % (root, i % 10, i), _sample(i)[:64 + (i * 7919) % 1024])
    return root


def _decode(blob):
    (i,) = struct.unpack("<I", blob[:4])
    return i, zlib.crc32(blob)


def _expected():
    return {i: zlib.crc32(_sample(i)[:64 + (i * 7919) % 1024]) for i in range(N_SAMPLES)}


def _collate(batch):
    return batch


def test_dataset_scan_and_getitem(fs, samples):
    ds = rt.Dataset(fs, samples, transform=_decode)
    assert len(ds) == N_SAMPLES
    assert ds.paths == sorted(ds.paths)
    i, crc = ds[5]
    assert crc == _expected()[i]


def test_dataloader_two_workers_shuffled(fs, samples):
    ds = rt.Dataset(fs, samples, transform=_decode)
    loader = data.DataLoader(ds, batch_size=50, shuffle=True, num_workers=2, collate_fn=_collate,
                             generator=torch.Generator().manual_seed(1))
    seen = {}
    order = []
    for batch in loader:
        for i, crc in batch:
            assert i not in seen
            seen[i] = crc
            order.append(i)
    assert seen == _expected()
    assert order != sorted(order)  # shuffled


def test_iterable_dataset_each_sample_once(fs, samples):
    ds = rt.IterableDataset(fs, samples, transform=_decode, shuffle=True, seed=3, batch=64)
    loader = data.DataLoader(ds, batch_size=None, num_workers=2)
    got = [i for i, _ in ((int(a), int(b)) for a, b in loader)]
    assert len(got) == N_SAMPLES
    assert sorted(got) == list(range(N_SAMPLES))


def test_iterable_dataset_shards_by_rank(fs, samples, monkeypatch):
    ds = rt.IterableDataset(fs, samples, transform=_decode)
    seen = []
    for rank in range(3):
        monkeypatch.setattr(rt, "_shard", lambda rank=rank: (rank, 3))
        seen.extend(i for i, _ in ds)
    assert sorted(seen) == list(range(N_SAMPLES))


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 128)
        self.b = torch.nn.Conv2d(3, 8, 3)
        self.n = torch.nn.BatchNorm1d(128)


def _assert_same(sd1, sd2):
    assert sd1.keys() == sd2.keys()
    for k in sd1:
        assert sd1[k].dtype == sd2[k].dtype
        assert torch.equal(sd1[k], sd2[k]), k


def test_checkpoint_bit_exact(fs):
    torch.manual_seed(0)
    net = _Net()
    ckpt = rt.Checkpoint(fs, "/ckpt")
    ckpt.save(net.state_dict(), "m.pt")
    _assert_same(net.state_dict(), ckpt.load("m.pt"))
    big = {"w": torch.randn(600, 1000)}  # 2.4 MB: several chunks at the default size
    ckpt.save(big, "big.pt")
    _assert_same(big, ckpt.load("big.pt"))
    net2 = _Net()
    net2.load_state_dict(ckpt.load("m.pt"))
    _assert_same(net.state_dict(), net2.state_dict())
    assert "m.pt" in ckpt.list()


def test_checkpoint_pieces_stored_out_of_order(fs):
    # Small pieces, three writer threads and a queue of two pieces: pieces are
    # stored out of order and the writer waits for room; the file must still
    # be the exact serialisation, and a reader never sees the temporary name.
    torch.manual_seed(2)
    state = {"w%d" % i: torch.randn(64 + 37 * i, 129) for i in range(12)}
    ckpt = rt.Checkpoint(fs, "/ckpt-pieces", buffer_size=8192, write_threads=3, max_pending=16384)
    path = ckpt.save(state, "p.pt")
    _assert_same(state, ckpt.load("p.pt"))
    import io
    expected = io.BytesIO()
    torch.save(state, expected)
    assert fs.read_bytes(path) == expected.getvalue()
    assert ckpt.list() == ["p.pt"]


def test_checkpoint_async(fs):
    torch.manual_seed(1)
    net = _Net()
    ckpt = rt.Checkpoint(fs, "/ckpt-async")
    expected = {k: v.clone() for k, v in net.state_dict().items()}
    fut = ckpt.save_async(net.state_dict(), "a.pt")
    with torch.no_grad():
        net.a.weight.add_(1.0)  # training goes on: the saved snapshot must not change
    assert fut.result(timeout=60) == "/ckpt-async/a.pt"
    _assert_same(expected, ckpt.load("a.pt"))
    ckpt.close()


def _child_reads(fs, path, q):
    try:
        q.put(fs.read_bytes(path))
    except BaseException as e:  # report, do not hang the parent
        q.put(repr(e))


def test_connection_survives_fork(fs, tmpdir_fs):
    import multiprocessing as mp
    p = tmpdir_fs + "/forked"
    fs.write_bytes(p, b"from the parent")
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_child_reads, args=(fs, p, q)) for _ in range(3)]
    for pr in procs:
        pr.start()
    results = [q.get(timeout=60) for _ in procs]
    for pr in procs:
        pr.join(30)
        assert pr.exitcode == 0
    assert results == [b"from the parent"] * 3
    assert fs.read_bytes(p) == b"from the parent"  # the parent's connection still works


def test_dataloader_forkserver_worker(fs, samples):
    # A worker started without fork gets the dataset by pickle and connects anew.
    ds = rt.Dataset(fs, samples + "/d03", transform=_decode)
    loader = data.DataLoader(ds, batch_size=50, num_workers=1, collate_fn=_collate,
                             multiprocessing_context="forkserver")
    got = {i: crc for batch in loader for i, crc in batch}
    exp = _expected()
    assert got == {i: exp[i] for i in range(3, N_SAMPLES, 10)}
