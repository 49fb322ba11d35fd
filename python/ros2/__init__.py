"""ROS2 from Python: connect to a cluster, use a container's DFS namespace
as files, and its objects as a key-value store (docs/python.md).

    import ros2
    fs = ros2.mount("data", "files", data_dir="/tmp/ros2")
    with fs.open("/hello.txt", "w") as f:
        f.write("hi")

The client runs in this process (direct mode: the data plane goes straight
from here to the engines). Handles survive fork(): a DataLoader worker that
inherits one reconnects on its first use, never sharing the parent's
connection.
"""

import errno as _errno
import io as _io
import os as _os
import posixpath as _posixpath
import stat as _stat

# gRPC (the control plane) survives fork() with its fork handlers on and the
# poll poller (with epoll1, children forked one after another crashed in
# grpc_pollset_work): set before the extension starts gRPC (see _ros2.cc).
_os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "true")
_os.environ.setdefault("GRPC_POLL_STRATEGY", "poll")

from . import _ros2  # noqa: E402

__all__ = ["connect", "mount", "Client", "Pool", "Container", "Filesystem", "File", "DirEntry", "Object"]


try:  # ros2:// for fsspec-aware code, imported on first use
    from fsspec.registry import register_implementation as _register

    _register("ros2", "ros2.fsspec.ROS2FileSystem", clobber=True)
except ImportError:  # fsspec is optional
    pass


def _env(name, value):
    return value if value is not None else _os.environ.get(name, "")


class Client:
    """A connection to a ROS2 control endpoint (see connect()). Pickles as its
    connect() arguments (a spawned process connects again)."""

    def __init__(self, native, connect_args=None):
        self._c = native
        self._args = connect_args or {}

    def __reduce__(self):
        return (_reconnect, (self._args,))

    @property
    def control(self):
        return self._c.control

    @property
    def tenant(self):
        return self._c.tenant

    def describe_transport(self):
        return self._c.describe_transport()

    def pool(self, label):
        """Opens a session on pool `label` (label or UUID)."""
        return Pool(self._c.pool(label), self)


def _reconnect(args):
    return connect(**args)


class Pool:
    def __init__(self, native, client=None):
        self._p = native
        self._client = client

    def __reduce__(self):
        return (Client.pool, (self._client, self.label))

    @property
    def label(self):
        return self._p.label

    @property
    def uuid(self):
        return self._p.uuid

    def container(self, label):
        """Opens container `label` (label or UUID) with every right its ACL grants."""
        return Container(self._p.container(label), self)


class Container:
    def __init__(self, native, pool=None):
        self._c = native
        self._pool = pool

    def __reduce__(self):
        return (Pool.container, (self._pool, self.label))

    @property
    def label(self):
        return self._c.label

    @property
    def uuid(self):
        return self._c.uuid

    def mount(self, create=True, chunk_size=0, key_file=None):
        """The container's DFS namespace (formatted on first mount when `create`).
        `key_file`: the key of an encrypted container."""
        fs = Filesystem(self._c.mount(create=create, chunk_size=chunk_size, key_file=key_file or ""))
        fs._origin = (self, {"create": create, "chunk_size": chunk_size, "key_file": key_file})
        return fs

    def object(self, oclass, hi, lo):
        """A key-value object of the container by class ("S1", "SX") and id:
        the user bits `hi` (48 bits) and `lo`, in the order of the id's printed
        form ("<hi>.<lo>") and of the C and C++ APIs."""
        return Object(self._c.object(oclass, hi, lo))


class Object:
    """Key-value access to one object: values under (dkey, akey). Keys are str
    (UTF-8, surrogateescape) or bytes; listings return str."""

    def __init__(self, native):
        self._o = native

    @property
    def id(self):
        return self._o.id

    def put(self, dkey, akey, value):
        self._o.put(dkey, akey, value)

    def get(self, dkey, akey):
        """The value (bytes); b"" when none is stored."""
        return self._o.get(dkey, akey)

    def list_dkeys(self):
        return self._o.list_dkeys()

    def list_akeys(self, dkey):
        return self._o.list_akeys(dkey)

    def punch_dkey(self, dkey):
        self._o.punch_dkey(dkey)

    def punch_akey(self, dkey, akey):
        self._o.punch_akey(dkey, akey)

    def punch(self):
        """Removes the whole object."""
        self._o.punch()


def connect(data_dir=None, control=None, tenant=None, secret=None, secret_file=None, transport="auto",
            net_devices="lo", control_timeout=10.0, io_timeout=30.0, reconnect_timeout=60.0, spin_budget=50e-6,
            agent_socket=None):
    """Connects as ros2ctl does: `data_dir` a local cluster's directory
    (its cluster.json names the control endpoint and the admin secret file),
    or `control` ("unix:/path" or "host:port") with `tenant` and `secret` /
    `secret_file`. Unset arguments come from ROS2_DATA_DIR, ROS2_CONTROL,
    ROS2_TENANT and ROS2_SECRET_FILE. Timeouts are in seconds: a call to a dead
    engine fails after `reconnect_timeout` (0: at once), never hangs.
    `spin_budget`: seconds a thread waiting for a reply polls before it sleeps
    (docs/client.md, "Waiting").

    `agent_socket` (or ROS2_AGENT_SOCKET) selects the offload mode: the file
    system runs in a ros2-agent process and this one only submits through
    shared-memory rings (docs/agent.md); the agent maps this process's uid to
    its tenant, so no secret is needed, and the object API is not offered."""
    args = {"data_dir": data_dir, "control": control, "tenant": tenant, "secret": secret,
            "secret_file": secret_file, "transport": transport, "net_devices": net_devices,
            "control_timeout": control_timeout, "io_timeout": io_timeout,
            "reconnect_timeout": reconnect_timeout, "spin_budget": spin_budget}
    if agent_socket is None:
        agent_socket = _os.environ.get("ROS2_AGENT_SOCKET") or None
    args["agent_socket"] = agent_socket
    native = _ros2.Client(
        data_dir=_env("ROS2_DATA_DIR", data_dir),
        control=_env("ROS2_CONTROL", control),
        tenant=_env("ROS2_TENANT", tenant) or "admin",
        secret=secret or "",
        secret_file=_env("ROS2_SECRET_FILE", secret_file),
        transport=transport,
        net_devices=net_devices,
        control_timeout=float(control_timeout),
        io_timeout=float(io_timeout),
        reconnect_timeout=float(reconnect_timeout),
        spin_budget=float(spin_budget),
        agent_socket=agent_socket or "",
    )
    return Client(native, args)


def mount(pool, container, create=True, key_file=None, **connect_args):
    """connect(**connect_args).pool(pool).container(container).mount()."""
    return connect(**connect_args).pool(pool).container(container).mount(create=create, key_file=key_file)


def _remount(container, opts):
    return container.mount(**opts)


def _norm(path):
    path = _os.fspath(path)
    if isinstance(path, bytes):
        path = _os.fsdecode(path)
    norm = _posixpath.normpath("/" + path)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    return norm


class DirEntry:
    """One entry of Filesystem.scandir(), like os.DirEntry."""

    __slots__ = ("name", "path", "_mode", "_ino", "_fs")

    def __init__(self, fs, dirpath, name, mode, ino):
        self._fs = fs
        self.name = name
        self.path = _posixpath.join(dirpath, name)
        self._mode = mode
        self._ino = ino

    def inode(self):
        return self._ino

    def is_dir(self, *, follow_symlinks=True):
        return _stat.S_ISDIR(self._mode)

    def is_file(self, *, follow_symlinks=True):
        return _stat.S_ISREG(self._mode)

    def is_symlink(self):
        return _stat.S_ISLNK(self._mode)

    def stat(self, *, follow_symlinks=True):
        return self._fs.stat(self.path)

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return "<ros2.DirEntry %r>" % (self.name,)


class File(_io.RawIOBase):
    """An open DFS file: an unbuffered io.RawIOBase (Filesystem.open wraps it
    in io.BufferedReader/Writer/Random and TextIOWrapper as open() does).
    readinto() reads straight into any writable contiguous buffer (bytearray,
    memoryview, numpy array, CPU torch tensor) with the GIL released."""

    def __init__(self, fs, path, entry, size, readable, writable, append):
        super().__init__()
        self._fs = fs
        self._native = fs._fs
        self.name = path
        self._entry = entry
        self._pos = 0
        self._size = size
        self._readable = readable
        self._writable = writable
        self._append = append
        self.mode = ("a" if append else "r+" if readable and writable else "w" if writable else "r") + "b"

    def readable(self):
        return self._readable

    def writable(self):
        return self._writable

    def seekable(self):
        return True

    def _check(self, want):
        if self.closed:
            raise ValueError("I/O operation on closed file")
        if want == "r" and not self._readable:
            raise _io.UnsupportedOperation("File not open for reading")
        if want == "w" and not self._writable:
            raise _io.UnsupportedOperation("File not open for writing")

    def readinto(self, b):
        self._check("r")
        if hasattr(b, "numpy") and not isinstance(b, (bytes, bytearray, memoryview)):
            b = b.numpy()  # a CPU torch tensor: the same memory as a numpy array
        n = self._native.pread(self._entry, self._pos, b, self.name)
        self._pos += n
        return n

    def readall(self):
        self._check("r")
        size = self._native.file_size(self._entry, self.name)
        if size <= self._pos:
            return b""
        buf = bytearray(size - self._pos)
        n = self._native.pread(self._entry, self._pos, buf, self.name)
        self._pos += n
        del buf[n:]
        return bytes(buf)

    def pread(self, length, offset):
        """Up to `length` bytes at `offset` (does not move the position)."""
        self._check("r")
        buf = bytearray(length)
        n = self._native.pread(self._entry, offset, buf, self.name)
        del buf[n:]
        return bytes(buf)

    def write(self, b):
        self._check("w")
        if self._append:
            self._pos = self._native.file_size(self._entry, self.name)
        if hasattr(b, "numpy") and not isinstance(b, (bytes, bytearray, memoryview)):
            b = b.numpy()
        n = self._native.pwrite(self._entry, self._pos, b, self.name)
        self._pos += n
        return n

    def seek(self, offset, whence=_os.SEEK_SET):
        if self.closed:
            raise ValueError("I/O operation on closed file")
        if whence == _os.SEEK_SET:
            pos = offset
        elif whence == _os.SEEK_CUR:
            pos = self._pos + offset
        elif whence == _os.SEEK_END:
            pos = self._native.file_size(self._entry, self.name) + offset
        else:
            raise ValueError("invalid whence (%r)" % (whence,))
        if pos < 0:
            raise OSError(_errno.EINVAL, "negative seek position", self.name)
        self._pos = pos
        return pos

    def tell(self):
        return self._pos

    def truncate(self, size=None):
        self._check("w")
        if size is None:
            size = self._pos
        self._native.truncate_entry(self._entry, size, self.name)
        return size

    def fileno(self):
        raise _io.UnsupportedOperation("a ROS2 file has no file descriptor")

    def isatty(self):
        return False


def _parse_mode(mode):
    kinds = set(mode)
    if not kinds <= set("rwaxbt+") or len(mode) != len(kinds):
        raise ValueError("invalid mode: %r" % (mode,))
    create = sum(c in kinds for c in "rwax")
    if create != 1 or ("b" in kinds and "t" in kinds):
        raise ValueError("invalid mode: %r" % (mode,))
    plus = "+" in kinds
    readable = "r" in kinds or plus
    writable = "r" not in kinds or plus
    flags = _os.O_RDWR if readable and writable else _os.O_WRONLY if writable else _os.O_RDONLY
    if "w" in kinds:
        flags |= _os.O_CREAT | _os.O_TRUNC
    elif "a" in kinds:
        flags |= _os.O_CREAT
    elif "x" in kinds:
        flags |= _os.O_CREAT | _os.O_EXCL
    return flags, readable, writable, "a" in kinds, "b" in kinds


class Filesystem:
    """A container's DFS namespace. Paths are absolute inside the container
    ("/a/b"; a relative one is taken from the root). Thread-safe."""

    def __init__(self, native):
        self._fs = native
        self._origin = None

    def __reduce__(self):
        # Pickles as how it was made: a process started by spawn/forkserver
        # (DataLoader multiprocessing_context) connects and mounts again.
        if self._origin is None:
            raise TypeError("this ros2.Filesystem cannot be pickled")
        container, opts = self._origin
        return (_remount, (container, opts))

    @property
    def chunk_size(self):
        return self._fs.chunk_size()

    def open(self, path, mode="r", buffering=-1, encoding=None, errors=None, newline=None, perm=0o644):
        """Like open(): modes r, w, a, x with + and b/t. Binary modes give
        io.Buffered* over a File (buffering=0: the File itself); text modes an
        io.TextIOWrapper."""
        path = _norm(path)
        flags, readable, writable, append, binary = _parse_mode(mode)
        entry, size = self._fs.open(path, flags, perm)
        raw = File(self, path, entry, size, readable, writable, append)
        if buffering == 0:
            if not binary:
                raise ValueError("can't have unbuffered text I/O")
            return raw
        if buffering in (-1, 1):
            buffering = max(_io.DEFAULT_BUFFER_SIZE, min(entry.chunk_size or 0, 4 << 20))
        if readable and writable:
            buf = _io.BufferedRandom(raw, buffering)
        elif writable:
            buf = _io.BufferedWriter(raw, buffering)
        else:
            buf = _io.BufferedReader(raw, buffering)
        if binary:
            return buf
        text = _io.TextIOWrapper(buf, encoding=encoding or "utf-8", errors=errors, newline=newline)
        text.mode = mode
        return text

    def read_bytes(self, path):
        """The whole file (one call into the client, the GIL released)."""
        return self._fs.read_file(_norm(path))

    def write_bytes(self, path, data):
        with self.open(path, "wb", buffering=0) as f:
            view = memoryview(data).cast("B")
            while view:
                n = f.write(view)
                view = view[n:]

    def read_many(self, requests, window=256):
        """[(path, offset, length), ...] -> [bytes, ...], every read in flight at
        once (up to `window` chunks) through the asynchronous API. A length of
        None reads to the end of the file."""
        return self._fs.read_many([(_norm(p), o, n) for p, o, n in requests], window)

    def stat(self, path):
        """An os.stat_result of the entry (symlinks are not followed)."""
        mode, ino, nlink, uid, gid, size, atime, mtime, ctime, blocks, blksize = self._fs.stat(_norm(path))
        return _os.stat_result(
            (mode, ino, 0, nlink, uid, gid, size, atime // 10**9, mtime // 10**9, ctime // 10**9),
            {"st_atime": atime / 1e9, "st_mtime": mtime / 1e9, "st_ctime": ctime / 1e9,
             "st_atime_ns": atime, "st_mtime_ns": mtime, "st_ctime_ns": ctime,
             "st_blocks": blocks, "st_blksize": blksize})

    def exists(self, path):
        try:
            self.stat(path)
            return True
        except FileNotFoundError:
            return False

    def isdir(self, path):
        try:
            return _stat.S_ISDIR(self.stat(path).st_mode)
        except FileNotFoundError:
            return False

    def isfile(self, path):
        try:
            return _stat.S_ISREG(self.stat(path).st_mode)
        except FileNotFoundError:
            return False

    def scandir(self, path="/"):
        path = _norm(path)
        return [DirEntry(self, path, n, m, i) for n, m, i in self._fs.scandir(path)]

    def listdir(self, path="/"):
        return [n for n, _, _ in self._fs.scandir(_norm(path))]

    def mkdir(self, path, mode=0o755):
        self._fs.mkdir(_norm(path), mode)

    def makedirs(self, path, mode=0o755, exist_ok=False):
        path = _norm(path)
        if not exist_ok and self.exists(path):
            raise FileExistsError(_errno.EEXIST, "File exists", path)
        self._fs.makedirs(path, mode)

    def remove(self, path):
        self._fs.remove(_norm(path))

    unlink = remove

    def rmdir(self, path):
        self._fs.rmdir(_norm(path))

    def rename(self, src, dst):
        """Moves src to dst, replacing a compatible dst (as os.replace)."""
        self._fs.rename(_norm(src), _norm(dst), False)

    replace = rename

    def truncate(self, path, length):
        self._fs.truncate(_norm(path), length)

    def walk(self, top="/", topdown=True):
        """Like os.walk: yields (dirpath, dirnames, filenames)."""
        top = _norm(top)
        try:
            entries = self.scandir(top)
        except OSError:
            return
        dirs = [e.name for e in entries if e.is_dir()]
        files = [e.name for e in entries if not e.is_dir()]
        if topdown:
            yield top, dirs, files
        for d in dirs:
            yield from self.walk(_posixpath.join(top, d), topdown)
        if not topdown:
            yield top, dirs, files

    def rmtree(self, path):
        """Removes a directory tree (or a file)."""
        path = _norm(path)
        if not self.isdir(path):
            self.remove(path)
            return
        for dirpath, dirs, files in self.walk(path, topdown=False):
            for f in files:
                self.remove(_posixpath.join(dirpath, f))
            for d in dirs:
                self.rmdir(_posixpath.join(dirpath, d))
        if path != "/":
            self.rmdir(path)
