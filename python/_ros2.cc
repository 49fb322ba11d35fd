// ros2._ros2: the pybind11 extension under the Python package `ros2`
// (python/ros2/). It wraps the direct-mode C++ client (ros2/client.h,
// ros2/dfs.h); the pure-Python modules build the user-facing API on it
// (file objects, walk, torch datasets, fsspec). docs/python.md.
//
// Fork safety: every handle (client, pool, container, file system) remembers
// the pid that opened it. Used in another process (a DataLoader worker made by
// fork()), it abandons the inherited C++ objects without destroying them (their
// UCX and gRPC state belongs to the parent; tearing it down from the child
// would touch the parent's sockets and threads) and opens fresh ones from the
// same settings. Entries (object ids) stay valid across the reconnect.
// The epoll instances the client library made (UCX's async thread's among
// them) are replaced by fresh ones in the child (EpollsOfClient below), so the
// child's new client never registers its descriptors in an instance the
// parent's threads wait on.
//
// The GIL is released during every call that may talk to the cluster.
// Failures raise OSError built from (errno, message, path), which Python turns
// into FileNotFoundError, PermissionError, IsADirectoryError, ... by errno.
#include <Python.h>
#include <dirent.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pthread.h>

#include <fcntl.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "client/local_cluster.h"
#include "client/pool_map_watch.h"
#include "ros2/client.h"
#include "ros2/dfs.h"
#include "ros2/types.h"

namespace py = pybind11;

// gRPC's fork handlers (exported by libgrpc, declared in its internal
// fork_posix.h and event_engine/forkable.h). Debian's libgrpc does not
// register them itself (GRPC_POSIX_FORK_ALLOW_PTHREAD_ATFORK is off), so a
// child forked from a process with live gRPC threads inherits locks and
// thread bookkeeping of threads that do not exist in it, and its first call
// waits forever. Registered at import when GRPC_ENABLE_FORK_SUPPORT is set
// (the package sets it, with GRPC_POLL_STRATEGY=poll, before importing this
// module): they stop gRPC's threads around fork() and restart them after it.
// The client's channel also uses a subchannel pool of its own
// (src/client/client.cc), so a child never gets the parent's connection.
void grpc_prefork();
void grpc_postfork_parent();
void grpc_postfork_child();
namespace grpc_event_engine::experimental {
void PrepareFork();
void PostforkParent();
void PostforkChild();
}  // namespace grpc_event_engine::experimental

namespace ros2::python {
namespace {

// Raises OSError(errno, message, path) (Python picks the subclass by errno).
// The GIL must be held.
[[noreturn]] void Raise(const Status& status, const std::string& path = {}) {
  int err = status.ToErrno();
  if (err == 0) err = EIO;
  py::object exc;
  if (path.empty()) {
    exc = py::reinterpret_steal<py::object>(PyObject_CallFunction(PyExc_OSError, "is", err, status.ToString().c_str()));
  } else {
    exc = py::reinterpret_steal<py::object>(
        PyObject_CallFunction(PyExc_OSError, "iss", err, status.ToString().c_str(), path.c_str()));
  }
  if (!exc) throw py::error_already_set();
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

template <typename T>
T Check(Result<T> r, const std::string& path = {}) {
  if (!r.ok()) Raise(r.status(), path);
  return std::move(r).value();
}
void Check(const Status& s, const std::string& path = {}) {
  if (!s.ok()) Raise(s, path);
}

// A contiguous buffer of a Python object (bytes-like, numpy array, ...).
class Buffer {
 public:
  Buffer(py::handle obj, bool writable) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) != 0) {
      throw py::error_already_set();
    }
  }
  ~Buffer() { PyBuffer_Release(&view_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  std::byte* data() const { return static_cast<std::byte*>(view_.buf); }
  size_t size() const { return static_cast<size_t>(view_.len); }

 private:
  Py_buffer view_{};
};

// The epoll instances made while a client connected: UCX's async thread's
// (one per process, made with the first UCX context) and the data-plane
// workers'. An epoll instance is shared by a parent and the child it forks,
// and UCX does not know it was forked: the child's first UCX context reuses
// the inherited async context and adds its descriptors to the inherited
// instance, where the parent's async thread (alive only in the parent) gets
// their events, cannot handle them and spins, level-triggered, on a whole
// vCPU; the child's own events are never handled there. On a 2-vCPU machine
// that made a DataLoader worker's requests wait 10-30 ms each. The fork
// handler below gives the child a fresh, empty instance under each of these
// descriptor numbers: the inherited objects that use them are abandoned in the
// child anyway (see ClientHandle), and the parent's instances no longer see the
// child's descriptors. (No thread runs the async context's loop in the child,
// as none did before: the data plane waits on its workers' own descriptors.)
class EpollsOfClient {
 public:
  static constexpr size_t kMax = 64;
  static void Add(int fd) {
    size_t n = count_.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i) {
      if (fds_[i].load(std::memory_order_relaxed) == fd) return;
    }
    if (n == kMax) return;
    fds_[n].store(fd, std::memory_order_relaxed);
    count_.store(n + 1, std::memory_order_release);
  }
  // In the child after fork(): only system calls (async-signal-safe).
  static void ReplaceInChild() {
    const size_t n = count_.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i) {
      const int fd = fds_[i].load(std::memory_order_relaxed);
      if (!IsEpoll(fd)) continue;  // closed (and maybe reused) since
      const int fresh = ::epoll_create1(EPOLL_CLOEXEC);
      if (fresh < 0) continue;
      (void)::dup3(fresh, fd, O_CLOEXEC);
      (void)::close(fresh);
    }
  }
  // Every epoll descriptor of this process, in ascending order.
  static std::vector<int> List() {
    std::vector<int> out;
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr) return out;
    const int own = ::dirfd(dir);
    while (const dirent* d = ::readdir(dir)) {
      char* end = nullptr;
      const long fd = std::strtol(d->d_name, &end, 10);
      if (end == d->d_name || *end != '\0' || fd == own) continue;
      if (IsEpoll(static_cast<int>(fd))) out.push_back(static_cast<int>(fd));
    }
    ::closedir(dir);
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  static bool IsEpoll(int fd) {
    // "/proc/self/fd/<fd>" without snprintf (not async-signal-safe).
    char path[32] = "/proc/self/fd/";
    char digits[12];
    int nd = 0;
    unsigned v = static_cast<unsigned>(fd);
    do {
      digits[nd++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0 && nd < 11);
    size_t len = std::strlen(path);
    while (nd > 0) path[len++] = digits[--nd];
    path[len] = '\0';
    static constexpr char kEpoll[] = "anon_inode:[eventpoll]";
    char link[sizeof(kEpoll) + 8];
    const ssize_t r = ::readlink(path, link, sizeof(link));
    return r == static_cast<ssize_t>(sizeof(kEpoll) - 1) && std::memcmp(link, kEpoll, sizeof(kEpoll) - 1) == 0;
  }
  static inline std::array<std::atomic<int>, kMax> fds_{};
  static inline std::atomic<size_t> count_{0};
};

// Records the epoll descriptors made during its lifetime (a connect).
class RecordNewEpolls {
 public:
  RecordNewEpolls() : before_(EpollsOfClient::List()) {}
  ~RecordNewEpolls() {
    for (int fd : EpollsOfClient::List()) {
      if (!std::binary_search(before_.begin(), before_.end(), fd)) EpollsOfClient::Add(fd);
    }
  }
  RecordNewEpolls(const RecordNewEpolls&) = delete;
  RecordNewEpolls& operator=(const RecordNewEpolls&) = delete;

 private:
  std::vector<int> before_;
};

// The client of this process: reconnected from `options` in a forked child.
class ClientHandle {
 public:
  explicit ClientHandle(client::ClientOptions options) : options_(std::move(options)) {}
  ~ClientHandle() {
    if (pid_ != ::getpid()) (void)client_.release();  // the parent's: never torn down here
  }
  client::Client& Get() {
    std::lock_guard lock(mu_);
    if (client_ && pid_ != ::getpid()) (void)client_.release();
    if (!client_) {
      RecordNewEpolls recorder;
      auto c = client::Client::Connect(options_);
      if (!c.ok()) throw StatusError{c.status()};
      client_ = std::move(c).value();
      pid_ = ::getpid();
    }
    return *client_;
  }
  const client::ClientOptions& options() const { return options_; }
  std::string Describe() { return Get().DescribeTransport(); }

  struct StatusError {
    Status status;
  };

 private:
  std::mutex mu_;
  client::ClientOptions options_;
  pid_t pid_ = 0;
  std::unique_ptr<client::Client> client_;
};
using StatusError = ClientHandle::StatusError;

// Runs `fn` with the GIL released; a StatusError it throws becomes an OSError.
template <typename Fn>
auto Unlocked(const std::string& path, Fn&& fn) {
  try {
    py::gil_scoped_release release;
    return fn();
  } catch (const StatusError& e) {
    Raise(e.status, path);
  }
}

template <typename T>
T Must(Result<T> r) {
  if (!r.ok()) throw StatusError{r.status()};
  return std::move(r).value();
}
void Must(const Status& s) {
  if (!s.ok()) throw StatusError{s};
}

class PoolHandle {
 public:
  PoolHandle(std::shared_ptr<ClientHandle> client, std::string label)
      : client_(std::move(client)), label_(std::move(label)) {}
  ~PoolHandle() {
    if (pid_ != ::getpid()) (void)pool_.release();
  }
  client::Pool& Get() {
    std::lock_guard lock(mu_);
    if (pool_ && pid_ != ::getpid()) (void)pool_.release();
    if (!pool_) {
      pool_ = Must(client_->Get().ConnectPool(label_));
      pid_ = ::getpid();
    }
    return *pool_;
  }
  const std::shared_ptr<ClientHandle>& client() const { return client_; }
  const std::string& label() const { return label_; }

 private:
  std::mutex mu_;
  std::shared_ptr<ClientHandle> client_;
  std::string label_;
  pid_t pid_ = 0;
  std::unique_ptr<client::Pool> pool_;
};

class ContainerHandle {
 public:
  ContainerHandle(std::shared_ptr<PoolHandle> pool, std::string label)
      : pool_(std::move(pool)), label_(std::move(label)) {}
  ~ContainerHandle() {
    if (pid_ != ::getpid()) (void)cont_.release();
  }
  client::Container& Get() {
    std::lock_guard lock(mu_);
    if (cont_ && pid_ != ::getpid()) (void)cont_.release();
    if (!cont_) {
      cont_ = Must(pool_->Get().OpenContainer(label_));
      pid_ = ::getpid();
    }
    return *cont_;
  }
  const std::shared_ptr<PoolHandle>& pool() const { return pool_; }
  const std::string& label() const { return label_; }

 private:
  std::mutex mu_;
  std::shared_ptr<PoolHandle> pool_;
  std::string label_;
  pid_t pid_ = 0;
  std::unique_ptr<client::Container> cont_;
};

class FsHandle {
 public:
  FsHandle(std::shared_ptr<ContainerHandle> cont, dfs::MountOptions options)
      : cont_(std::move(cont)), options_(std::move(options)) {}
  ~FsHandle() {
    if (pid_ != ::getpid()) (void)fs_.release();
  }
  dfs::Filesystem& Get() {
    std::lock_guard lock(mu_);
    if (fs_ && pid_ != ::getpid()) (void)fs_.release();
    if (!fs_) {
      fs_ = Must(dfs::Filesystem::Mount(cont_->Get(), options_));
      pid_ = ::getpid();
    }
    return *fs_;
  }
  client::Container& container() { return cont_->Get(); }
  const std::shared_ptr<ContainerHandle>& cont() const { return cont_; }

 private:
  std::mutex mu_;
  std::shared_ptr<ContainerHandle> cont_;
  dfs::MountOptions options_;
  pid_t pid_ = 0;
  std::unique_ptr<dfs::Filesystem> fs_;
};

// Splits "/a/b/c" into ("/a/b", "c"); the root has no name.
std::pair<std::string, std::string> SplitPath(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return {"/", path};
  std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  return {dir, path.substr(slash + 1)};
}

std::string CheckedPath(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    Raise(Status::InvalidArgument("DFS paths are absolute (start with '/')"), path);
  }
  return path;
}

int64_t ToNanos(const timespec& ts) {
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

py::tuple AttrTuple(const dfs::Attr& a) {
  return py::make_tuple(static_cast<uint32_t>(a.mode), a.ino, a.nlink, a.uid, a.gid, a.size, ToNanos(a.atime),
                        ToNanos(a.mtime), ToNanos(a.ctime), a.blocks, a.blksize);
}

// Keys: str (UTF-8 with surrogateescape, so any bytes round-trip) or bytes.
std::string KeyArg(py::handle key) {
  if (PyBytes_Check(key.ptr())) return std::string(PyBytes_AS_STRING(key.ptr()), PyBytes_GET_SIZE(key.ptr()));
  if (PyUnicode_Check(key.ptr())) {
    py::object b = py::reinterpret_steal<py::object>(PyUnicode_AsEncodedString(key.ptr(), "utf-8", "surrogateescape"));
    if (!b) throw py::error_already_set();
    return std::string(PyBytes_AS_STRING(b.ptr()), PyBytes_GET_SIZE(b.ptr()));
  }
  throw py::type_error("a key is str or bytes");
}
py::object KeyResult(const std::string& key) {
  PyObject* s = PyUnicode_DecodeUTF8(key.data(), static_cast<Py_ssize_t>(key.size()), "surrogateescape");
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(s);
}

class PyObjectHandle {
 public:
  PyObjectHandle(std::shared_ptr<ContainerHandle> cont, ObjectId oid) : cont_(std::move(cont)), oid_(oid) {}

  client::Object Open() { return Must(cont_->Get().OpenObject(oid_)); }
  std::string Name() const { return "object " + oid_.ToString(); }

  void Put(py::handle dkey, py::handle akey, py::handle value) {
    std::string d = KeyArg(dkey), a = KeyArg(akey);
    Buffer buf(value, false);
    Unlocked(Name(), [&] { Must(Open().Put(d, a, {buf.data(), buf.size()})); });
  }
  py::object Get(py::handle dkey, py::handle akey) {
    std::string d = KeyArg(dkey), a = KeyArg(akey);
    auto v = Unlocked(Name(), [&] { return Must(Open().Get(d, a)); });
    return py::bytes(reinterpret_cast<const char*>(v.data()), v.size());
  }
  py::list ListDkeys() {
    auto keys = Unlocked(Name(), [&] { return Must(Open().ListDkeys()); });
    py::list out;
    for (const auto& k : keys) out.append(KeyResult(k));
    return out;
  }
  py::list ListAkeys(py::handle dkey) {
    std::string d = KeyArg(dkey);
    auto keys = Unlocked(Name(), [&] { return Must(Open().ListAkeys(d)); });
    py::list out;
    for (const auto& k : keys) out.append(KeyResult(k));
    return out;
  }
  void PunchDkey(py::handle dkey) {
    std::string d = KeyArg(dkey);
    Unlocked(Name(), [&] { Must(Open().PunchDkey(d)); });
  }
  void PunchAkey(py::handle dkey, py::handle akey) {
    std::string d = KeyArg(dkey), a = KeyArg(akey);
    Unlocked(Name(), [&] { Must(Open().PunchAkey(d, a)); });
  }
  void Punch() {
    Unlocked(Name(), [&] { Must(Open().PunchObject()); });
  }
  py::tuple Id() const { return py::make_tuple(oid_.hi, oid_.lo); }

 private:
  std::shared_ptr<ContainerHandle> cont_;
  ObjectId oid_;
};

// The DFS namespace of a container, path-based (the Python side normalises
// paths to absolute ones).
class PyFs {
 public:
  explicit PyFs(std::shared_ptr<FsHandle> fs) : fs_(std::move(fs)) {}

  dfs::Entry Resolve(const std::string& path) { return Must(fs_->Get().LookupPath(path)); }

  // Opens (and maybe creates) a file; returns (entry, size).
  py::tuple Open(const std::string& raw_path, int flags, uint32_t mode) {
    std::string path = CheckedPath(raw_path);
    auto [entry, size] = Unlocked(path, [&] {
      auto& fs = fs_->Get();
      auto [dir, name] = SplitPath(path);
      if (name.empty()) throw StatusError{Status::IsDirectory("is a directory")};
      dfs::Entry parent = Must(fs.LookupPath(dir));
      dfs::Entry e = Must(fs.Open(parent, name, flags, static_cast<mode_t>(mode)));
      if (e.is_dir()) throw StatusError{Status::IsDirectory("is a directory")};
      uint64_t sz = (flags & O_TRUNC) != 0 ? 0 : Must(fs.Stat(e)).size;
      return std::pair{e, sz};
    });
    return py::make_tuple(py::cast(entry), size);
  }

  size_t Pread(const dfs::Entry& file, uint64_t offset, py::handle buffer, const std::string& path) {
    Buffer buf(buffer, true);
    return Unlocked(path, [&] { return Must(fs_->Get().Read(file, offset, {buf.data(), buf.size()})); });
  }
  size_t Pwrite(const dfs::Entry& file, uint64_t offset, py::handle data, const std::string& path) {
    Buffer buf(data, false);
    return Unlocked(path, [&] { return Must(fs_->Get().Write(file, offset, {buf.data(), buf.size()})); });
  }
  uint64_t FileSize(const dfs::Entry& file, const std::string& path) {
    return Unlocked(path, [&] { return Must(fs_->Get().Stat(file)).size; });
  }
  void TruncateEntry(const dfs::Entry& file, uint64_t size, const std::string& path) {
    Unlocked(path, [&] { Must(fs_->Get().Truncate(file, size)); });
  }

  py::tuple Stat(const std::string& raw_path) {
    std::string path = CheckedPath(raw_path);
    auto attr = Unlocked(path, [&] {
      auto& fs = fs_->Get();
      return Must(fs.Stat(Must(fs.LookupPath(path))));
    });
    return AttrTuple(attr);
  }

  // [(name, mode, ino)] of a directory.
  py::list Scandir(const std::string& raw_path) {
    std::string path = CheckedPath(raw_path);
    auto entries = Unlocked(path, [&] {
      auto& fs = fs_->Get();
      dfs::Entry dir = Must(fs.LookupPath(path));
      if (!dir.is_dir()) throw StatusError{Status::NotDirectory("not a directory")};
      std::vector<dfs::DirEntry> all;
      dfs::DirAnchor anchor;
      while (!anchor.eof) {
        auto page = Must(fs.Readdir(dir, anchor, 1024));
        for (auto& d : page) all.push_back(std::move(d));
      }
      return all;
    });
    py::list out;
    for (const auto& d : entries) out.append(py::make_tuple(d.name, static_cast<uint32_t>(d.mode), d.ino));
    return out;
  }

  void Mkdir(const std::string& raw_path, uint32_t mode) {
    std::string path = CheckedPath(raw_path);
    Unlocked(path, [&] {
      auto& fs = fs_->Get();
      auto [dir, name] = SplitPath(path);
      if (name.empty()) throw StatusError{Status::AlreadyExists("the root exists")};
      Must(fs.Mkdir(Must(fs.LookupPath(dir)), name, static_cast<mode_t>(mode)));
    });
  }
  uint64_t Makedirs(const std::string& raw_path, uint32_t mode) {
    std::string path = CheckedPath(raw_path);
    return Unlocked(path, [&] {
      uint64_t created = 0;
      Must(fs_->Get().MkdirAll(path, static_cast<mode_t>(mode), &created));
      return created;
    });
  }
  void Remove(const std::string& raw_path) {
    ForgetDirectories();
    std::string path = CheckedPath(raw_path);
    Unlocked(path, [&] {
      auto& fs = fs_->Get();
      auto [dir, name] = SplitPath(path);
      if (name.empty()) throw StatusError{Status::IsDirectory("is a directory")};
      Must(fs.Unlink(Must(fs.LookupPath(dir)), name));
    });
  }
  void Rmdir(const std::string& raw_path) {
    ForgetDirectories();
    std::string path = CheckedPath(raw_path);
    Unlocked(path, [&] {
      auto& fs = fs_->Get();
      auto [dir, name] = SplitPath(path);
      if (name.empty()) throw StatusError{Status::PermissionDenied("cannot remove the root")};
      Must(fs.Rmdir(Must(fs.LookupPath(dir)), name));
    });
  }
  void Rename(const std::string& raw_src, const std::string& raw_dst, bool no_replace) {
    ForgetDirectories();
    std::string src = CheckedPath(raw_src), dst = CheckedPath(raw_dst);
    Unlocked(src, [&] {
      auto& fs = fs_->Get();
      auto [sdir, sname] = SplitPath(src);
      auto [ddir, dname] = SplitPath(dst);
      if (sname.empty() || dname.empty()) throw StatusError{Status::InvalidArgument("cannot rename the root")};
      Must(fs.Rename(Must(fs.LookupPath(sdir)), sname, Must(fs.LookupPath(ddir)), dname,
                     no_replace ? dfs::kRenameNoReplace : 0u));
    });
  }
  void Truncate(const std::string& raw_path, uint64_t size) {
    std::string path = CheckedPath(raw_path);
    Unlocked(path, [&] {
      auto& fs = fs_->Get();
      dfs::Entry e = Must(fs.LookupPath(path));
      if (e.is_dir()) throw StatusError{Status::IsDirectory("is a directory")};
      Must(fs.Truncate(e, size));
    });
  }
  // The whole file as bytes: its directory from the cache, then one lookup
  // with the size and one read (no file object in between).
  py::bytes ReadFile(const std::string& raw_path) {
    std::string path = CheckedPath(raw_path);
    auto [entry, size] = Unlocked(path, [&] {
      auto [e, attr] = LookupFile(fs_->Get(), path);
      return std::pair{e, attr.size};
    });
    PyObject* b = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
    if (b == nullptr) throw py::error_already_set();
    auto out = py::reinterpret_steal<py::bytes>(b);
    auto* dest = reinterpret_cast<std::byte*>(PyBytes_AS_STRING(b));
    uint64_t got = Unlocked(path, [&] { return Must(fs_->Get().Read(entry, 0, {dest, static_cast<size_t>(size)})); });
    if (got < size) return py::bytes(PyBytes_AS_STRING(b), static_cast<size_t>(got));
    return out;
  }

  // Forgets the cached directories (after this object changed the namespace).
  void ForgetDirectories() {
    std::lock_guard lock(dirs_->mu);
    dirs_->entries.clear();
  }

  uint64_t ChunkSize() {
    return Unlocked("", [&] { return fs_->Get().chunk_size(); });
  }

  // Reads every (path, offset, length) with all of them in flight at once
  // (up to `window` chunks) through one event queue; returns a list of bytes
  // (short at the end of a file). A length of None reads to the end of the
  // file. Each path is looked up once (its directory from the cache).
  py::list ReadMany(const py::sequence& requests, size_t window) {
    struct Req {
      std::string path;
      uint64_t offset = 0;
      uint64_t length = 0;
      bool to_end = false;
      size_t file = 0;  // index into `files`
      char* dest = nullptr;
      uint64_t got = 0;
      Status status;
    };
    struct File {
      dfs::Entry entry;
      uint64_t size = 0;
      Status status;
    };
    std::vector<Req> reqs;
    reqs.reserve(py::len(requests));
    std::vector<File> files;
    std::unordered_map<std::string, size_t> file_index;
    for (py::handle item : requests) {
      auto t = py::reinterpret_borrow<py::sequence>(item);
      if (py::len(t) != 3) throw py::value_error("read_many takes (path, offset, length) tuples");
      Req r;
      r.path = CheckedPath(t[0].cast<std::string>());
      r.offset = t[1].cast<uint64_t>();
      r.to_end = t[2].is_none();
      if (!r.to_end) r.length = t[2].cast<uint64_t>();
      auto [it, fresh] = file_index.emplace(r.path, files.size());
      if (fresh) files.emplace_back();
      r.file = it->second;
      reqs.push_back(std::move(r));
    }
    if (window == 0) window = 1;
    // 1. Look every file up (blocking; sizes for reads to the end).
    {
      py::gil_scoped_release release;
      for (auto& [path, i] : file_index) {
        try {
          auto [e, attr] = LookupFile(fs_->Get(), path);
          files[i].entry = e;
          files[i].size = attr.size;
        } catch (const StatusError& e) {
          files[i].status = e.status;
        }
      }
    }
    for (const auto& r : reqs) {
      if (!files[r.file].status.ok()) Raise(files[r.file].status, r.path);
    }
    // 2. The result buffers.
    std::vector<py::object> outs;
    outs.reserve(reqs.size());
    for (auto& r : reqs) {
      if (r.to_end) r.length = files[r.file].size > r.offset ? files[r.file].size - r.offset : 0;
      PyObject* b = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(r.length));
      if (b == nullptr) throw py::error_already_set();
      outs.push_back(py::reinterpret_steal<py::object>(b));
      r.dest = PyBytes_AS_STRING(b);
    }
    // 3. Every read in flight, then wait for them together.
    std::string failed_path;
    Status failed = [&] {
      py::gil_scoped_release release;
      try {
        auto& fs = fs_->Get();
        auto eq = Must(fs_->container().CreateEventQueue());
        size_t next = 0, completed = 0;
        while (completed < reqs.size()) {
          while (next < reqs.size() && eq->in_flight() < window) {
            Req& r = reqs[next++];
            Status s = fs.SubmitRead(*eq, files[r.file].entry, r.offset,
                                     {reinterpret_cast<std::byte*>(r.dest), static_cast<size_t>(r.length)},
                                     [&r, &completed](const client::IoResult& res) {
                                       r.status = res.status;
                                       r.got = res.size;
                                       ++completed;
                                     });
            if (!s.ok()) {
              r.status = s;
              ++completed;
            }
          }
          if (completed < reqs.size() && eq->in_flight() > 0) eq->WaitAny(std::chrono::milliseconds(100));
        }
      } catch (const StatusError& e) {
        failed_path = reqs.empty() ? std::string() : reqs.front().path;
        return e.status;
      }
      for (const auto& r : reqs) {
        if (!r.status.ok()) {
          failed_path = r.path;
          return r.status;
        }
      }
      return Status::Ok();
    }();
    if (!failed.ok()) Raise(failed, failed_path);
    py::list out;
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (reqs[i].got < reqs[i].length) {
        out.append(outs[i][py::slice(0, static_cast<py::ssize_t>(reqs[i].got), 1)]);
      } else {
        out.append(outs[i]);
      }
    }
    return out;
  }

 private:
  // Directories looked up by path in the last second (as a FUSE mount's entry
  // timeout): a dataset reading thousands of files of a few directories then
  // pays one lookup a file instead of one a path component. Cleared by every
  // namespace change through this object; another client's rename of a
  // directory is seen within a second.
  struct DirCache {
    std::mutex mu;
    std::unordered_map<std::string, std::pair<dfs::Entry, std::chrono::steady_clock::time_point>> entries;
  };
  static constexpr std::chrono::seconds kDirCacheTtl{1};

  // A regular file and its attributes; a stale cached directory is looked up
  // again once.
  std::pair<dfs::Entry, dfs::Attr> LookupFile(dfs::Filesystem& fs, const std::string& path) {
    auto [dir, name] = SplitPath(path);
    if (name.empty()) throw StatusError{Status::IsDirectory("is a directory")};
    for (int attempt = 0;; ++attempt) {
      std::optional<dfs::Entry> parent;
      const auto now = std::chrono::steady_clock::now();
      {
        std::lock_guard lock(dirs_->mu);
        auto it = dirs_->entries.find(dir);
        if (it != dirs_->entries.end() && now - it->second.second < kDirCacheTtl) parent = it->second.first;
      }
      const bool cached = parent.has_value();
      if (!cached) {
        parent = Must(fs.LookupPath(dir));
        std::lock_guard lock(dirs_->mu);
        dirs_->entries.insert_or_assign(dir, std::pair{*parent, now});
      }
      auto r = fs.LookupWithAttr(*parent, name);
      if (r.ok()) {
        if (r->first.is_dir()) throw StatusError{Status::IsDirectory("is a directory")};
        return std::move(r).value();
      }
      if (cached && attempt == 0) {
        std::lock_guard lock(dirs_->mu);
        dirs_->entries.erase(dir);
        continue;
      }
      throw StatusError{r.status()};
    }
  }

  std::shared_ptr<DirCache> dirs_ = std::make_shared<DirCache>();
  std::shared_ptr<FsHandle> fs_;
};

void RegisterEpollForkHandler() {
  ::pthread_atfork(nullptr, nullptr, [] { EpollsOfClient::ReplaceInChild(); });
}

// The pool map watches' threads are always inside a gRPC call, and gRPC's
// fork handlers do nothing while any thread is: these stop them before fork()
// and start them again in the parent after it. Registered after gRPC's, so the
// prepare handler runs before gRPC's and the parent handler after it.
void RegisterMapWatchForkHandlers() {
  ::pthread_atfork(client::PoolMapWatchesBeforeFork, client::PoolMapWatchesAfterForkParent,
                   client::PoolMapWatchesAfterForkChild);
}

// Debian's gRPC (1.51) can hang in fork(): grpc_prefork() first forbids new
// execution contexts, then joins its executor threads, and a call's teardown
// queued on one of them opens a context (the client security context's
// destructor; every channel has one, insecure ones too), so the joined thread
// waits for the fork and the fork for it (fixed upstream after 1.51, gRPC pull
// request 31969). The map watches cancel their streams just before fork()
// (RegisterMapWatchForkHandlers), which queues exactly such teardowns. gRPC
// has no call to drain its executors, so before grpc_prefork() this waits,
// for at most 200 ms, until each executor thread ("default-executor",
// "resolver-executor") has been seen sleeping twice in a row 1 ms apart: a
// thread with queued work is running or runnable, and an idle one sleeps.
void AwaitGrpcExecutorsIdle() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  int quiet = 0;
  while (quiet < 2 && std::chrono::steady_clock::now() < deadline) {
    bool busy = false;
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      std::getline(comm, name);
      if (name.find("-execut") == std::string::npos) continue;
      std::ifstream stat(task.path() / "stat");
      std::string line;
      std::getline(stat, line);
      const size_t paren = line.rfind(')');  // "pid (comm) S ..."
      if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'S') busy = true;
    }
    quiet = busy ? 0 : quiet + 1;
    if (quiet < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void RegisterGrpcForkHandlers() {
  const char* v = std::getenv("GRPC_ENABLE_FORK_SUPPORT");
  if (v == nullptr || (std::string_view(v) != "true" && std::string_view(v) != "1")) return;
  ::pthread_atfork(
      [] {
        grpc_event_engine::experimental::PrepareFork();
        AwaitGrpcExecutorsIdle();
        grpc_prefork();
      },
      [] {
        grpc_postfork_parent();
        grpc_event_engine::experimental::PostforkParent();
      },
      [] {
        grpc_postfork_child();
        grpc_event_engine::experimental::PostforkChild();
      });
}

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

}  // namespace
}  // namespace ros2::python

PYBIND11_MODULE(_ros2, m) {
  using namespace ros2;
  using namespace ros2::python;
  m.doc() = "ROS2 native client (direct mode); use the `ros2` package";
  RegisterGrpcForkHandlers();
  RegisterMapWatchForkHandlers();
  RegisterEpollForkHandler();

  m.def("map_watches", [] {
    client::PoolMapWatchCounts c = client::PoolMapWatchesOfProcess();
    return py::make_tuple(c.live, c.streams_opened);
  }, "(watches live, streams they opened): the pool map watches of this process (docs/cluster.md)");

  py::class_<dfs::Entry>(m, "Entry")
      .def_property_readonly("is_dir", &dfs::Entry::is_dir)
      .def_property_readonly("is_file", &dfs::Entry::is_file)
      .def_property_readonly("name", [](const dfs::Entry& e) { return e.name; })
      .def_property_readonly("chunk_size", [](const dfs::Entry& e) { return e.chunk_size; });

  py::class_<ClientHandle, std::shared_ptr<ClientHandle>>(m, "Client")
      .def(py::init([](const std::string& data_dir, const std::string& control, const std::string& tenant,
                       const std::string& secret, const std::string& secret_file, const std::string& transport,
                       const std::string& net_devices, double control_timeout, double io_timeout,
                       double reconnect_timeout, double spin_budget, const std::string& agent_socket) {
             client::ClientOptions o;
             o.agent_socket = agent_socket;
             o.control = control;
             o.tenant = tenant;
             o.secret = secret;
             o.secret_file = secret_file;
             o.transport = transport;
             o.net_devices = net_devices;
             o.control_timeout = Millis(control_timeout);
             o.io_timeout = Millis(io_timeout);
             o.reconnect_timeout = Millis(reconnect_timeout);
             o.spin_budget = std::chrono::microseconds(static_cast<int64_t>(spin_budget * 1e6));
             Check(local_cluster::CompleteClientOptions(o, data_dir), data_dir);
             auto h = std::make_shared<ClientHandle>(std::move(o));
             Unlocked(data_dir, [&] { h->Get(); });
             return h;
           }),
           py::arg("data_dir"), py::arg("control"), py::arg("tenant"), py::arg("secret"), py::arg("secret_file"),
           py::arg("transport"), py::arg("net_devices"), py::arg("control_timeout"), py::arg("io_timeout"),
           py::arg("reconnect_timeout"), py::arg("spin_budget"), py::arg("agent_socket") = "")
      .def("describe_transport", [](ClientHandle& h) { return Unlocked("", [&] { return h.Describe(); }); })
      .def_property_readonly("control", [](const ClientHandle& h) { return h.options().control; })
      .def_property_readonly("tenant", [](const ClientHandle& h) { return h.options().tenant; })
      .def("pool", [](const std::shared_ptr<ClientHandle>& h, const std::string& label) {
        auto p = std::make_shared<PoolHandle>(h, label);
        Unlocked("pool " + label, [&] { p->Get(); });
        return p;
      });

  py::class_<PoolHandle, std::shared_ptr<PoolHandle>>(m, "Pool")
      .def_property_readonly("label", &PoolHandle::label)
      .def_property_readonly("uuid", [](PoolHandle& p) { return Unlocked("", [&] { return p.Get().summary().uuid; }); })
      .def("container", [](const std::shared_ptr<PoolHandle>& p, const std::string& label) {
        auto c = std::make_shared<ContainerHandle>(p, label);
        Unlocked("container " + label, [&] { c->Get(); });
        return c;
      });

  py::class_<ContainerHandle, std::shared_ptr<ContainerHandle>>(m, "Container")
      .def_property_readonly("label", &ContainerHandle::label)
      .def_property_readonly("uuid",
                             [](ContainerHandle& c) { return Unlocked("", [&] { return c.Get().summary().uuid; }); })
      .def(
          "mount",
          [](const std::shared_ptr<ContainerHandle>& c, bool create, uint64_t chunk_size, const std::string& key_file) {
            dfs::MountOptions o;
            o.create = create;
            o.chunk_size = chunk_size;
            o.encryption_key_file = key_file;
            o.uid = ::getuid();
            o.gid = ::getgid();
            auto fs = std::make_shared<FsHandle>(c, std::move(o));
            Unlocked("container " + c->label(), [&] { fs->Get(); });
            return PyFs(fs);
          },
          py::arg("create") = true, py::arg("chunk_size") = 0, py::arg("key_file") = "")
      .def(
          "object",
          [](const std::shared_ptr<ContainerHandle>& c, const std::string& oclass, uint64_t hi, uint64_t lo) {
            auto oc = ParseObjectClass(oclass);
            if (!oc.ok()) Raise(oc.status());
            Check(client::CheckObjectClassSupported(*oc));
            return PyObjectHandle(c, client::Container::MakeObjectId(*oc, hi, lo));
          },
          py::arg("oclass"), py::arg("hi"), py::arg("lo"));

  py::class_<PyObjectHandle>(m, "Object")
      .def_property_readonly("id", &PyObjectHandle::Id)
      .def("put", &PyObjectHandle::Put, py::arg("dkey"), py::arg("akey"), py::arg("value"))
      .def("get", &PyObjectHandle::Get, py::arg("dkey"), py::arg("akey"))
      .def("list_dkeys", &PyObjectHandle::ListDkeys)
      .def("list_akeys", &PyObjectHandle::ListAkeys, py::arg("dkey"))
      .def("punch_dkey", &PyObjectHandle::PunchDkey, py::arg("dkey"))
      .def("punch_akey", &PyObjectHandle::PunchAkey, py::arg("dkey"), py::arg("akey"))
      .def("punch", &PyObjectHandle::Punch);

  py::class_<PyFs>(m, "Filesystem")
      .def("open", &PyFs::Open, py::arg("path"), py::arg("flags"), py::arg("mode"))
      .def("pread", &PyFs::Pread)
      .def("pwrite", &PyFs::Pwrite)
      .def("file_size", &PyFs::FileSize)
      .def("truncate_entry", &PyFs::TruncateEntry)
      .def("stat", &PyFs::Stat)
      .def("scandir", &PyFs::Scandir)
      .def("mkdir", &PyFs::Mkdir)
      .def("makedirs", &PyFs::Makedirs)
      .def("remove", &PyFs::Remove)
      .def("rmdir", &PyFs::Rmdir)
      .def("rename", &PyFs::Rename)
      .def("truncate", &PyFs::Truncate)
      .def("chunk_size", &PyFs::ChunkSize)
      .def("read_file", &PyFs::ReadFile)
      .def("read_many", &PyFs::ReadMany, py::arg("requests"), py::arg("window") = 256);
}
