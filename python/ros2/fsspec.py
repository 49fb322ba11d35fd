"""fsspec on ROS2: `ros2://pool/container/path` (docs/python.md).

    import fsspec, ros2.fsspec  # registers the "ros2" protocol
    with fsspec.open("ros2://data/files/a.csv", "rb", data_dir="/tmp/ros2") as f: ...

Importing ros2 registers the protocol as well (fsspec imports this module
on first use). Storage options are ros2.connect()'s arguments (data_dir,
control, tenant, secret_file, ...). One connection and one mount per
(pool, container) is kept per file system instance."""

import threading

from fsspec.registry import register_implementation
from fsspec.spec import AbstractFileSystem

import ros2

__all__ = ["ROS2FileSystem"]


class ROS2FileSystem(AbstractFileSystem):
    protocol = "ros2"
    root_marker = ""

    def __init__(self, **connect_args):
        super().__init__(**connect_args)
        self._connect_args = {k: v for k, v in connect_args.items() if not k.startswith("skip_instance_cache")}
        self._client = None
        self._mounts = {}
        self._lock = threading.Lock()

    # --- paths: "pool/container/path" ---
    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        if path.startswith("ros2://"):
            path = path[len("ros2://"):]
        return path.strip("/")

    def _split(self, path):
        path = self._strip_protocol(path)
        parts = path.split("/", 2)
        if len(parts) < 2 or not parts[0] or not parts[1]:
            raise ValueError("ros2 paths are ros2://POOL/CONTAINER/PATH, not %r" % (path,))
        return parts[0], parts[1], "/" + (parts[2] if len(parts) > 2 else "")

    def _fs(self, pool, container):
        with self._lock:
            key = (pool, container)
            if key not in self._mounts:
                if self._client is None:
                    args = dict(self._connect_args)
                    args.pop("create", None)
                    self._client = ros2.connect(**args)
                self._mounts[key] = self._client.pool(pool).container(container).mount()
            return self._mounts[key]

    def _resolve(self, path):
        pool, cont, inner = self._split(path)
        return self._fs(pool, cont), "%s/%s" % (pool, cont), inner

    def _info_of(self, prefix, inner, st):
        import stat as _stat

        kind = "directory" if _stat.S_ISDIR(st.st_mode) else "file"
        name = prefix + (inner if inner != "/" else "")
        return {"name": name, "size": st.st_size if kind == "file" else 0, "type": kind,
                "mode": st.st_mode, "mtime": st.st_mtime, "ino": st.st_ino}

    # --- AbstractFileSystem ---
    def info(self, path, **kwargs):
        fs, prefix, inner = self._resolve(path)
        return self._info_of(prefix, inner, fs.stat(inner))

    def ls(self, path, detail=True, **kwargs):
        fs, prefix, inner = self._resolve(path)
        st = fs.stat(inner)
        import stat as _stat

        if not _stat.S_ISDIR(st.st_mode):
            out = [self._info_of(prefix, inner, st)]
        else:
            base = inner.rstrip("/")
            out = [self._info_of(prefix, base + "/" + e.name, e.stat()) for e in fs.scandir(inner)]
            out.sort(key=lambda d: d["name"])
        return out if detail else [d["name"] for d in out]

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        fs, _, inner = self._resolve(path)
        if "b" not in mode:
            mode += "b"
        return fs.open(inner, mode)

    def cat_file(self, path, start=None, end=None, **kwargs):
        fs, _, inner = self._resolve(path)
        if start is None and end is None:
            return fs.read_bytes(inner)
        size = fs.stat(inner).st_size
        start = 0 if start is None else (start if start >= 0 else max(0, size + start))
        end = size if end is None else (end if end >= 0 else max(0, size + end))
        if end <= start:
            return b""
        return fs.read_many([(inner, start, end - start)])[0]

    def pipe_file(self, path, value, **kwargs):
        fs, _, inner = self._resolve(path)
        fs.write_bytes(inner, value)

    def mkdir(self, path, create_parents=True, **kwargs):
        fs, _, inner = self._resolve(path)
        if create_parents:
            fs.makedirs(inner, exist_ok=True)
        else:
            fs.mkdir(inner)

    def makedirs(self, path, exist_ok=False):
        fs, _, inner = self._resolve(path)
        fs.makedirs(inner, exist_ok=exist_ok)

    def rmdir(self, path):
        fs, _, inner = self._resolve(path)
        fs.rmdir(inner)

    def _rm(self, path):
        fs, _, inner = self._resolve(path)
        if fs.isdir(inner):
            fs.rmdir(inner)
        else:
            fs.remove(inner)

    def rm_file(self, path):
        # AbstractFileSystem.rm(recursive=True) passes the directories too,
        # deepest first.
        self._rm(path)

    def mv(self, path1, path2, recursive=False, maxdepth=None, **kwargs):
        fs1, prefix1, inner1 = self._resolve(path1)
        _, prefix2, inner2 = self._resolve(path2)
        if prefix1 != prefix2:
            return super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)
        fs1.rename(inner1, inner2)

    def created(self, path):
        import datetime

        return datetime.datetime.fromtimestamp(self.info(path)["mtime"], tz=datetime.timezone.utc)

    def modified(self, path):
        return self.created(path)


register_implementation("ros2", ROS2FileSystem, clobber=True)
