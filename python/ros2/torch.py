"""PyTorch on ROS2: datasets over a DFS directory tree and checkpoints
streamed to DFS files (docs/python.md).

Every class holds a ros2.Filesystem; DataLoader workers made by fork()
reconnect on first use (the handles re-open themselves in a new process)."""

import concurrent.futures as _futures
import io as _io
import os as _os
import posixpath as _posixpath
import threading as _threading

import torch as _torch
import torch.utils.data as _data

from . import _norm

__all__ = ["Dataset", "IterableDataset", "Checkpoint", "scan", "read_parallel"]


def scan(fs, root="/", suffixes=None, threads=8):
    """Every regular file under `root`, sorted, listing directories in parallel
    (a pool of `threads` threads, each listing one directory at a time)."""
    root = _norm(root)
    files = []
    lock = _threading.Lock()
    pending = [root]
    with _futures.ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        running = set()
        while pending or running:
            while pending:
                d = pending.pop()
                running.add(pool.submit(lambda d=d: (d, fs.scandir(d))))
            done, running = _futures.wait(running, return_when=_futures.FIRST_COMPLETED)
            for f in done:
                d, entries = f.result()
                for e in entries:
                    if e.is_dir():
                        pending.append(e.path)
                    elif e.is_file() and (suffixes is None or e.name.endswith(tuple(suffixes))):
                        with lock:
                            files.append(e.path)
    files.sort()
    return files


_readers = {}  # pid -> (threads, ThreadPoolExecutor): a forked child makes its own
_readers_lock = _threading.Lock()


def _reader_pool(threads):
    pid = _os.getpid()
    with _readers_lock:
        got = _readers.get(pid)
        if got is None or got[0] < threads:
            if got is not None:
                got[1].shutdown(wait=False)
            # An executor inherited through fork() has no threads in the child: never reuse one.
            got = (threads, _futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="ros2-read"))
            _readers.clear()
            _readers[pid] = got
        return got[1]


def _auto_read_threads():
    """Threads per reading process: 2 x CPUs / DataLoader workers, 1 to 8,
    so that the reads in flight over all workers stay the same whatever their
    number (each thread has one blocking lookup at a time)."""
    info = _data.get_worker_info()
    workers = max(1, info.num_workers) if info is not None else 1
    return max(1, min(8, 2 * (_os.cpu_count() or 1) // workers))


def read_parallel(fs, requests, threads=None, min_per_thread=4):
    """fs.read_many(requests) split over up to `threads` threads (at least
    `min_per_thread` requests each). read_many looks each file up with a
    blocking call before it submits the reads together; splitting a batch
    overlaps those lookups too (each thread has its own data-plane worker).
    `threads` None: _auto_read_threads()."""
    if threads is None:
        threads = _auto_read_threads()
    n = len(requests)
    parts = min(threads, n // max(1, min_per_thread))
    if parts <= 1:
        return fs.read_many(requests)
    step = -(-n // parts)
    groups = [requests[i:i + step] for i in range(0, n, step)]
    out = []
    for blobs in _reader_pool(threads).map(fs.read_many, groups):
        out.extend(blobs)
    return out


class Dataset(_data.Dataset):
    """Map-style dataset: one sample per regular file under `root` (sorted
    paths; `suffixes` filters them). Item i is transform(bytes of file i), or
    the bytes when no transform is given. The namespace is scanned once, at
    construction, in parallel."""

    def __init__(self, fs, root="/", transform=None, suffixes=None, scan_threads=8, read_threads=None):
        self.fs = fs
        self.root = root
        self.transform = transform
        self.read_threads = read_threads
        self.paths = scan(fs, root, suffixes, scan_threads)

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        data = self.fs.read_bytes(self.paths[index])
        return self.transform(data) if self.transform is not None else data

    def __getitems__(self, indices):
        """A batch read with every file in flight at once (read_many), split
        over `read_threads` threads (read_parallel)."""
        blobs = read_parallel(self.fs, [(self.paths[i], 0, None) for i in indices], self.read_threads)
        if self.transform is None:
            return blobs
        return [self.transform(b) for b in blobs]


def _shard():
    """(index, count) of this reader among distributed ranks x DataLoader workers."""
    rank, world = 0, 1
    if _torch.distributed.is_available() and _torch.distributed.is_initialized():
        rank, world = _torch.distributed.get_rank(), _torch.distributed.get_world_size()
    info = _data.get_worker_info()
    worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
    return rank * workers + worker, world * workers


class IterableDataset(_data.IterableDataset):
    """Streams the files under `root`, sharded across distributed ranks and
    DataLoader workers so that each file is yielded exactly once per epoch
    over all of them. `shuffle` with `seed` permutes the files the same way
    on every reader (call set_epoch(e) to reshuffle per epoch); reads go
    `batch` files at a time through read_many (read_parallel)."""

    def __init__(self, fs, root="/", transform=None, suffixes=None, shuffle=False, seed=0, batch=32,
                 scan_threads=8, read_threads=None):
        self.fs = fs
        self.read_threads = read_threads
        self.transform = transform
        self.paths = scan(fs, root, suffixes, scan_threads)
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.batch = max(1, batch)

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return len(self.paths)

    def _my_paths(self):
        order = list(range(len(self.paths)))
        if self.shuffle:
            g = _torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            order = _torch.randperm(len(self.paths), generator=g).tolist()
        index, count = _shard()
        return [self.paths[i] for i in order[index::count]]

    def __iter__(self):
        mine = self._my_paths()
        for start in range(0, len(mine), self.batch):
            group = mine[start:start + self.batch]
            for blob in read_parallel(self.fs, [(p, 0, None) for p in group], self.read_threads):
                yield self.transform(blob) if self.transform is not None else blob


class _StreamWriter(_io.RawIOBase):
    """The write-only file torch.save writes a checkpoint into: writes are
    copied (torch may reuse or free the memory it passes once write returns),
    small ones gathered into `buffer_size` pieces, and stored by `threads`
    background threads, each piece one native write with all its chunks in
    flight, so several pieces are being stored while torch serialises the
    next tensor. At most `max_pending` bytes wait; close() returns once every
    piece is stored (durably: each DFS write is) and raises the first error."""

    def __init__(self, fs, path, buffer_size, threads, max_pending):
        super().__init__()
        entry, _ = fs._fs.open(path, _os.O_WRONLY | _os.O_CREAT | _os.O_TRUNC, 0o644)
        self._native = fs._fs
        self._entry = entry
        self.name = path
        self._pos = 0
        self._buffer_size = max(1, buffer_size)
        self._buf = bytearray()
        self._buf_pos = 0
        self._pool = _futures.ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="ros2-ckpt-w")
        self._pending_bytes = 0
        self._max_pending = max(self._buffer_size, max_pending)
        self._cond = _threading.Condition()
        self._error = None

    def writable(self):
        return True

    def write(self, b):
        view = memoryview(b).cast("B")
        n = view.nbytes
        if n >= self._buffer_size:
            self._flush_buf()
            self._submit(self._pos, bytes(view))
        else:
            if not self._buf:
                self._buf_pos = self._pos
            self._buf += view
            if len(self._buf) >= self._buffer_size:
                self._flush_buf()
        self._pos += n
        return n

    def tell(self):
        return self._pos

    def _flush_buf(self):
        if self._buf:
            data, self._buf = bytes(self._buf), bytearray()
            self._submit(self._buf_pos, data)

    def _submit(self, offset, data):
        with self._cond:
            while self._pending_bytes > 0 and self._pending_bytes + len(data) > self._max_pending and self._error is None:
                self._cond.wait()
            if self._error is not None:
                raise self._error
            self._pending_bytes += len(data)
        self._pool.submit(self._store, offset, data)

    def _store(self, offset, data):
        try:
            view = memoryview(data)
            while view:
                n = self._native.pwrite(self._entry, offset, view, self.name)
                offset += n
                view = view[n:]
        except BaseException as e:  # noqa: BLE001 (handed to the writer's thread)
            with self._cond:
                if self._error is None:
                    self._error = e
        finally:
            with self._cond:
                self._pending_bytes -= len(data)
                self._cond.notify_all()

    def flush(self):
        """Stores what was gathered and waits until every piece is stored."""
        if self.closed:
            return
        self._flush_buf()
        with self._cond:
            while self._pending_bytes > 0:
                self._cond.wait()
            if self._error is not None:
                raise self._error

    def close(self):
        if self.closed:
            return
        try:
            self.flush()
        finally:
            self._pool.shutdown(wait=True)
            super().close()


class Checkpoint:
    """Saves and loads state dicts as DFS files, streaming torch.save /
    torch.load straight to and from the file (no local copy).

        ckpt = Checkpoint(fs, "/ckpt")
        ckpt.save(model.state_dict(), "step-100.pt")
        model.load_state_dict(ckpt.load("step-100.pt"))

    save() writes to a temporary name and renames it over the target, so a
    reader sees the old or the new checkpoint, never half of one. It stores
    the serialised pieces from `write_threads` background threads (up to
    `max_pending` bytes of copies queued), so serialising overlaps with
    storing. load() streams: torch.load reads each tensor with one readinto,
    every chunk of it in flight."""

    def __init__(self, fs, directory="/", buffer_size=4 << 20, write_threads=2, max_pending=128 << 20):
        self.fs = fs
        self.directory = _norm(directory)
        self.buffer_size = buffer_size
        self.write_threads = write_threads
        self.max_pending = max_pending
        self._executor = None
        self._lock = _threading.Lock()
        if self.directory != "/":
            fs.makedirs(self.directory, exist_ok=True)

    def path(self, name):
        return _posixpath.join(self.directory, name)

    def save(self, state, name):
        final = self.path(name)
        tmp = final + ".tmp"
        with _StreamWriter(self.fs, tmp, self.buffer_size, self.write_threads, self.max_pending) as f:
            _torch.save(state, f)
        self.fs.rename(tmp, final)
        return final

    def save_async(self, state, name):
        """Saves in a background thread; returns a concurrent.futures.Future
        (its result is the path). The tensors are copied to CPU memory first, so
        training may change them once this returns."""
        snapshot = _snapshot(state)
        with self._lock:
            if self._executor is None:
                self._executor = _futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ros2-ckpt")
        return self._executor.submit(self.save, snapshot, name)

    def load(self, name, map_location=None):
        """The state dict saved as `name`, streamed: torch.load reads each
        record with one readinto on the unbuffered file (every chunk of it in
        flight), straight into the tensor's storage."""
        with self.fs.open(self.path(name), "rb", buffering=0) as f:
            return _torch.load(f, map_location=map_location)

    def list(self):
        return sorted(n for n in self.fs.listdir(self.directory) if not n.endswith(".tmp"))

    def close(self):
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


def _snapshot(obj):
    if isinstance(obj, _torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return type(obj)((k, _snapshot(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_snapshot(v) for v in obj)
    return obj
