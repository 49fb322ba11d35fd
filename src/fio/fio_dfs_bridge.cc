// The C bridge from the fio engine glue to DFS (see fio_dfs_bridge.h and
// docs/fio.md): mounts shared per process, per-thread event queues, files.
#include "fio/fio_dfs_bridge.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "client/event_queue_impl.h"
#include "client/local_cluster.h"
#include "common/log.h"
#include "common/object_id.h"
#include "common/status.h"
#include "ros2/client.h"
#include "ros2/dfs.h"

using ros2::Result;
using ros2::Status;

struct ros2_fio_mount {
  std::string key;
  int refs = 0;
  // Destroyed bottom-up: the file system before its container, pool, client.
  std::unique_ptr<ros2::client::Client> client;
  std::unique_ptr<ros2::client::Pool> pool;
  std::unique_ptr<ros2::client::Container> container;
  std::unique_ptr<ros2::dfs::Filesystem> fs;
};

struct ros2_fio_file {
  ros2_fio_mount* mount = nullptr;
  ros2::dfs::Entry entry;
  std::string path;
};

struct ros2_fio_queue {
  ros2_fio_mount* mount = nullptr;
  std::deque<ros2_fio_completion> done;  // completed, not yet reaped
  unsigned in_flight = 0;                // submitted, callback not yet run
  // What a completion needs of its submission, by slot: the callback then
  // captures the queue and a slot index, small enough for std::function to
  // hold without allocating.
  struct Submission {
    void* tag = nullptr;
    void* buffer = nullptr;
    uint64_t length = 0;
    bool write = false;
  };
  std::vector<Submission> submissions;
  std::vector<uint32_t> free_submissions;
  // ROS2_FIO_STAGES=<file> (Stages): when each slot was submitted, when each
  // entry of `done` completed, and the sums appended to the file at the end.
  struct Stages {
    std::string file;
    std::vector<uint64_t> submitted_ns;  // by slot
    std::deque<uint64_t> done_ns;        // parallel to `done`
    uint64_t ios = 0;
    uint64_t library_ns = 0;  // submit to the completion callback
    uint64_t waiting_ns = 0;  // the callback to fio's getevents taking it
    uint64_t reaps = 0;       // ros2_fio_reap calls
    uint64_t waits = 0;       // of them, those that found too few completions after progressing and waited
    // This thread's transport worker at the queue's creation: requests sent,
    // batches sent and the requests and replies in them (WorkerStats).
    ros2::transport::WorkerStats at_start;
  };
  std::unique_ptr<Stages> stages;
  // Last: destroyed first. ~EventQueue waits for what is in flight, whose
  // callbacks still append to `done`.
  std::unique_ptr<ros2::client::EventQueue> eq;
};

namespace {

using Clock = std::chrono::steady_clock;

thread_local std::string g_last_error;

int Fail(const Status& st) {
  g_last_error = st.ToString();
  const int err = ros2::dfs::Errno(st);
  return err == 0 ? EIO : err;
}

int Ok() {
  g_last_error.clear();
  return 0;
}

// Runs `fn`, turning an escaping exception (std::bad_alloc, a library's) into EIO.
template <typename Fn>
int Guarded(const char* what, Fn fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    g_last_error = fmt::format("ros2 fio engine: {}: {}", what, e.what());
  } catch (...) {
    g_last_error = fmt::format("ros2 fio engine: {}: unknown exception", what);
  }
  return EIO;
}

std::string Str(const char* s) {
  return s != nullptr ? std::string(s) : std::string();
}

std::string OrEnv(const char* value, const char* env) {
  if (value != nullptr && *value != '\0') return value;
  const char* e = std::getenv(env);
  return e != nullptr ? std::string(e) : std::string();
}

// Client options from the engine options: explicit control/secret first, then
// the data directory's cluster.json (as ros2ctl --data-dir reads it).
Result<ros2::client::ClientOptions> ClientOptionsFrom(const ros2_fio_mount_options& o) {
  ros2::client::ClientOptions co;
  co.control = OrEnv(o.control, "ROS2_CONTROL");
  co.secret_file = OrEnv(o.secret_file, "ROS2_SECRET_FILE");
  if (std::string tenant = OrEnv(o.tenant, "ROS2_TENANT"); !tenant.empty()) co.tenant = tenant;
  if (o.transport != nullptr && *o.transport != '\0') co.transport = o.transport;
  co.spin_budget = std::chrono::microseconds(o.spin_us);
  const std::string data_dir = OrEnv(o.data_dir, "ROS2_DATA_DIR");
  if (Status st = ros2::local_cluster::CompleteClientOptions(co, data_dir); !st.ok()) {
    return st.WithContext(fmt::format("ros2 fio engine: data_dir {}", data_dir));
  }
  if (co.control.empty()) {
    return Status::InvalidArgument(
        "ros2 fio engine: no cluster given: set data_dir= (a `ros2ctl cluster up` directory) or control= and "
        "secret_file= (or $ROS2_DATA_DIR)");
  }
  // "ofi-<kind>": that kind on the libfabric provider (ClientOptions::transport).
  const std::string kind = co.transport.rfind("ofi-", 0) == 0 ? co.transport.substr(4) : co.transport;
  if (kind != "auto" && kind != "tcp" && kind != "shm" && kind != "rdma") {
    return Status::InvalidArgument(fmt::format(
        "ros2 fio engine: transport={} is not one of auto, tcp, shm, rdma (or ofi-<one of those>)", co.transport));
  }
  return co;
}

Result<ros2::dfs::MountOptions> MountOptionsFrom(const ros2_fio_mount_options& o) {
  ros2::dfs::MountOptions mo;
  mo.chunk_size = o.chunk_size;
  if (o.oclass != nullptr && *o.oclass != '\0') {
    auto oc = ros2::ParseObjectClass(o.oclass);
    if (!oc.ok()) return oc.status().WithContext(fmt::format("ros2 fio engine: oclass={}", o.oclass));
    if (Status st = ros2::client::CheckObjectClassSupported(*oc); !st.ok()) {
      return st.WithContext(fmt::format("ros2 fio engine: oclass={}", o.oclass));
    }
    mo.file_class = *oc;
  }
  mo.uid = ::getuid();
  mo.gid = ::getgid();
  return mo;
}

std::string MountKey(const ros2_fio_mount_options& o, const ros2::client::ClientOptions& co) {
  // getpid(): a child forked by fio never reuses its parent's mount.
  return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", ::getpid(), co.control, co.tenant, co.secret_file, co.transport,
                     Str(o.pool), Str(o.cont), Str(o.oclass), o.chunk_size, o.spin_us);
}

std::mutex g_mounts_mu;
std::map<std::string, std::unique_ptr<ros2_fio_mount>>& Mounts() {
  static std::map<std::string, std::unique_ptr<ros2_fio_mount>> mounts;
  return mounts;
}

// While alive, writes to stdout go to stderr: UCX prints its warnings on stdout
// when a context or worker is made, which would corrupt fio's own output.
class StdoutToStderr {
 public:
  StdoutToStderr() {
    std::fflush(stdout);
    saved_ = ::dup(STDOUT_FILENO);
    if (saved_ >= 0) (void)::dup2(STDERR_FILENO, STDOUT_FILENO);
  }
  ~StdoutToStderr() {
    if (saved_ < 0) return;
    std::fflush(stdout);
    (void)::dup2(saved_, STDOUT_FILENO);
    ::close(saved_);
  }
  StdoutToStderr(const StdoutToStderr&) = delete;
  StdoutToStderr& operator=(const StdoutToStderr&) = delete;

 private:
  int saved_ = -1;
};

Status Connect(const ros2_fio_mount_options& o, const ros2::client::ClientOptions& co, ros2_fio_mount& m) {
  if (o.pool == nullptr || *o.pool == '\0') return Status::InvalidArgument("ros2 fio engine: pool= is required");
  if (o.cont == nullptr || *o.cont == '\0') return Status::InvalidArgument("ros2 fio engine: cont= is required");
  ROS2_ASSIGN_OR_RETURN(auto mount_options, MountOptionsFrom(o));
  // Library chatter stays below fio's own output unless $ROS2_LOG_LEVEL asks.
  static std::once_flag logging_once;
  std::call_once(logging_once, [] { (void)ros2::InitLogging("fio", "warn"); });
  StdoutToStderr quiet;
  ROS2_ASSIGN_OR_RETURN(m.client, ros2::client::Client::Connect(co));
  auto pool = m.client->ConnectPool(o.pool);
  if (!pool.ok()) return pool.status().WithContext(fmt::format("ros2 fio engine: pool {} at {}", o.pool, co.control));
  m.pool = std::move(*pool);
  auto cont = m.pool->OpenContainer(o.cont);
  if (!cont.ok())
    return cont.status().WithContext(fmt::format("ros2 fio engine: container {} of pool {}", o.cont, o.pool));
  m.container = std::move(*cont);
  auto fs = ros2::dfs::Filesystem::Mount(*m.container, mount_options);
  if (!fs.ok()) return fs.status().WithContext(fmt::format("ros2 fio engine: mount DFS of {}/{}", o.pool, o.cont));
  m.fs = std::move(*fs);
  return Status::Ok();
}

// A job's file path as an absolute DFS path ("a/b/f" and "/a/b/f" both name
// /a/b/f: fio paths start at the container's root).
std::string Absolute(std::string_view path) {
  std::string abs = path.starts_with('/') ? std::string(path) : "/" + std::string(path);
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  return abs;
}

// The absolute path of a file's directory, and the file's name.
Result<std::pair<std::string, std::string>> ParentAndName(std::string_view path) {
  const std::string abs = Absolute(path);
  const size_t slash = abs.rfind('/');
  std::string name = abs.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") {
    return Status::InvalidArgument(fmt::format("ros2 fio engine: '{}' names no file", path));
  }
  return std::make_pair(slash == 0 ? std::string("/") : abs.substr(0, slash), std::move(name));
}

// How long ros2_fio_reap blocks in one EventQueue::WaitAny before it looks at
// its deadline again (fio's getevents without a timeout waits indefinitely).
constexpr auto kReapSlice = std::chrono::milliseconds(100);

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

// ROS2_FIO_STAGES=<file>: each event queue times its I/Os in the client
// library and appends "ios <n> library_ns <sum> waiting_ns <sum>" to the file
// when destroyed (`ros2-bench posix --stages` reads it beside the engine's
// stages: a debug counter set, not a log line per I/O).
std::unique_ptr<ros2_fio_queue::Stages> StagesFromEnv() {
  const char* file = std::getenv("ROS2_FIO_STAGES");
  if (file == nullptr || file[0] == '\0') return nullptr;
  auto s = std::make_unique<ros2_fio_queue::Stages>();
  s->file = file;
  return s;
}

// The transport counters of the thread that owns `eq` (zeros for an
// offload-mode queue, which has no transport worker of its own).
ros2::transport::WorkerStats WorkerStatsOf(ros2::client::EventQueue& eq) {
  auto io = ros2::client::DirectIoOf(eq, "fio stages");
  return io.ok() ? (*io)->worker().stats() : ros2::transport::WorkerStats{};
}

// "requests" counts the requests the queue's thread sent, "messages" the
// messages they took: a batch of several requests is one. "reaps" counts
// fio's getevents, "waits" those that found too few completions after
// progressing and waited on the worker, "sleeps" the times the thread's
// worker slept on its event fd (each one a wake-up by a reply).
void WriteStages(const ros2_fio_queue::Stages& s, const ros2::transport::WorkerStats& now) {
  FILE* f = std::fopen(s.file.c_str(), "a");
  if (f == nullptr) return;
  const uint64_t requests = now.requests_sent - s.at_start.requests_sent;
  const uint64_t batches = now.batches_sent - s.at_start.batches_sent;
  const uint64_t batched = now.batched_messages - s.at_start.batched_messages;
  std::fprintf(
      f, "ios %llu library_ns %llu waiting_ns %llu requests %llu messages %llu reaps %llu waits %llu sleeps %llu\n",
      static_cast<unsigned long long>(s.ios), static_cast<unsigned long long>(s.library_ns),
      static_cast<unsigned long long>(s.waiting_ns), static_cast<unsigned long long>(requests),
      static_cast<unsigned long long>(requests - std::min(batched, requests) + batches),
      static_cast<unsigned long long>(s.reaps), static_cast<unsigned long long>(s.waits),
      static_cast<unsigned long long>(now.sleeps - s.at_start.sleeps));
  std::fclose(f);
}

void CompleteInto(ros2_fio_queue* q, uint32_t slot, const ros2::client::IoResult& r) {
  const auto [tag, buffer, length, write] = q->submissions[slot];
  if (q->stages) {
    const uint64_t now = NowNs();
    q->stages->library_ns += now - q->stages->submitted_ns[slot];
    q->stages->done_ns.push_back(now);
  }
  q->free_submissions.push_back(slot);
  --q->in_flight;
  ros2_fio_completion c{tag, 0, length};
  if (!r.status.ok()) {
    c.error =
        Fail(r.status.WithContext(fmt::format("ros2 fio engine: {} of {} bytes", write ? "write" : "read", length)));
    c.bytes = 0;
  } else if (!write && r.size < length) {
    // End of the DFS file inside the request: the rest reads as a hole.
    std::memset(static_cast<std::byte*>(buffer) + r.size, 0, length - r.size);
  }
  q->done.push_back(c);
}

}  // namespace

extern "C" {

const char* ros2_fio_last_error(void) {
  return g_last_error.c_str();
}

int ros2_fio_mount_acquire(const ros2_fio_mount_options* options, ros2_fio_mount** out) {
  return Guarded("mount", [&]() -> int {
    *out = nullptr;
    auto co = ClientOptionsFrom(*options);
    if (!co.ok()) return Fail(co.status());
    const std::string key = MountKey(*options, *co);
    std::lock_guard lock(g_mounts_mu);
    auto& mounts = Mounts();
    if (auto it = mounts.find(key); it != mounts.end()) {
      ++it->second->refs;
      *out = it->second.get();
      return Ok();
    }
    auto m = std::make_unique<ros2_fio_mount>();
    m->key = key;
    if (Status st = Connect(*options, *co, *m); !st.ok()) return Fail(st);
    m->refs = 1;
    *out = m.get();
    mounts.emplace(key, std::move(m));
    return Ok();
  });
}

void ros2_fio_mount_release(ros2_fio_mount* mount) {
  if (mount == nullptr) return;
  (void)Guarded("unmount", [&]() -> int {
    std::unique_ptr<ros2_fio_mount> last;
    {
      std::lock_guard lock(g_mounts_mu);
      if (--mount->refs > 0) return 0;
      auto it = Mounts().find(mount->key);
      if (it != Mounts().end()) {
        last = std::move(it->second);
        Mounts().erase(it);
      }
    }
    StdoutToStderr quiet;
    last.reset();  // unmount and disconnect outside the lock
    return 0;
  });
}

uint64_t ros2_fio_mount_chunk_size(const ros2_fio_mount* mount) {
  return mount->fs->chunk_size();
}

int ros2_fio_file_open(ros2_fio_mount* mount, const char* path, int flags, ros2_fio_file** out) {
  return Guarded("open", [&]() -> int {
    *out = nullptr;
    auto& fs = *mount->fs;
    auto where = ParentAndName(Str(path));
    if (!where.ok()) return Fail(where.status());
    // Another job of this run may create the same parents at once: MkdirAll tolerates it.
    auto dir = (flags & O_CREAT) != 0 ? fs.MkdirAll(where->first) : fs.LookupPath(where->first);
    if (!dir.ok()) return Fail(dir.status().WithContext(fmt::format("ros2 fio engine: parent of {}", path)));
    auto entry = fs.Open(*dir, where->second, flags, 0644);
    if (!entry.ok()) return Fail(entry.status().WithContext(fmt::format("ros2 fio engine: open {}", path)));
    if (!entry->is_file()) {
      return Fail(Status::IsDirectory(fmt::format("ros2 fio engine: {} is not a regular file", path)));
    }
    auto file = std::make_unique<ros2_fio_file>();
    file->mount = mount;
    file->entry = std::move(*entry);
    file->path = path;
    *out = file.release();
    return Ok();
  });
}

void ros2_fio_file_close(ros2_fio_file* file) {
  std::unique_ptr<ros2_fio_file> owned(file);
}

int ros2_fio_file_size(ros2_fio_mount* mount, const char* path, uint64_t* size) {
  return Guarded("stat", [&]() -> int {
    auto entry = mount->fs->LookupPath(Absolute(Str(path)));
    if (!entry.ok()) return Fail(entry.status().WithContext(fmt::format("ros2 fio engine: stat {}", Str(path))));
    auto attr = mount->fs->Stat(*entry);
    if (!attr.ok()) return Fail(attr.status().WithContext(fmt::format("ros2 fio engine: stat {}", Str(path))));
    *size = attr->size;
    return Ok();
  });
}

int ros2_fio_file_unlink(ros2_fio_mount* mount, const char* path) {
  return Guarded("unlink", [&]() -> int {
    auto& fs = *mount->fs;
    auto where = ParentAndName(Str(path));
    if (!where.ok()) return Fail(where.status());
    auto dir = fs.LookupPath(where->first);
    if (!dir.ok()) return Fail(dir.status().WithContext(fmt::format("ros2 fio engine: unlink {}", path)));
    if (Status st = fs.Unlink(*dir, where->second); !st.ok()) {
      return Fail(st.WithContext(fmt::format("ros2 fio engine: unlink {}", path)));
    }
    return Ok();
  });
}

int ros2_fio_queue_create(ros2_fio_mount* mount, unsigned /*depth*/, ros2_fio_queue** out) {
  return Guarded("event queue", [&]() -> int {
    *out = nullptr;
    StdoutToStderr quiet;
    auto eq = mount->client->CreateEventQueue();
    if (!eq.ok()) return Fail(eq.status().WithContext("ros2 fio engine: event queue"));
    auto q = std::make_unique<ros2_fio_queue>();
    q->mount = mount;
    q->eq = std::move(*eq);
    q->stages = StagesFromEnv();
    if (q->stages) q->stages->at_start = WorkerStatsOf(*q->eq);
    *out = q.release();
    return Ok();
  });
}

void ros2_fio_queue_destroy(ros2_fio_queue* queue) {
  (void)Guarded("event queue destroy", [&]() -> int {
    std::unique_ptr<ros2_fio_queue> owned(queue);
    if (queue->stages) WriteStages(*queue->stages, WorkerStatsOf(*queue->eq));
    return 0;  // ~EventQueue waits for what is still in flight
  });
}

int ros2_fio_submit(ros2_fio_queue* q, ros2_fio_file* file, int write, void* buffer, uint64_t length, uint64_t offset,
                    void* tag) {
  return Guarded("submit", [&]() -> int {
    auto& fs = *q->mount->fs;
    const bool is_write = write != 0;
    uint32_t slot;
    if (!q->free_submissions.empty()) {
      slot = q->free_submissions.back();
      q->free_submissions.pop_back();
    } else {
      slot = static_cast<uint32_t>(q->submissions.size());
      q->submissions.emplace_back();
    }
    q->submissions[slot] = {tag, buffer, length, is_write};
    if (q->stages) {
      if (q->stages->submitted_ns.size() <= slot) q->stages->submitted_ns.resize(slot + 1);
      q->stages->submitted_ns[slot] = NowNs();
    }
    auto done = [q, slot](const ros2::client::IoResult& r) { CompleteInto(q, slot, r); };
    Status st =
        is_write
            ? fs.SubmitWrite(*q->eq, file->entry, offset,
                             std::span<const std::byte>(static_cast<const std::byte*>(buffer), length), std::move(done))
            : fs.SubmitRead(*q->eq, file->entry, offset, std::span<std::byte>(static_cast<std::byte*>(buffer), length),
                            std::move(done));
    if (!st.ok()) {
      q->free_submissions.push_back(slot);
      const int err = Fail(st.WithContext(fmt::format("ros2 fio engine: submit {} of {} bytes at {} of {}",
                                                      is_write ? "write" : "read", length, offset, file->path)));
      q->done.push_back(ros2_fio_completion{tag, err, 0});
      if (q->stages) q->stages->done_ns.push_back(NowNs());
      return err;
    }
    ++q->in_flight;
    return Ok();
  });
}

int ros2_fio_reap(ros2_fio_queue* q, unsigned min, unsigned max, const timespec* timeout, ros2_fio_completion* out) {
  const int rc = Guarded("reap", [&]() -> int {
    const bool bounded = timeout != nullptr;
    const auto deadline = bounded ? Clock::now() + std::chrono::seconds(timeout->tv_sec) +
                                        std::chrono::nanoseconds(timeout->tv_nsec)
                                  : Clock::time_point{};
    if (min > max) min = max;
    bool waited = false;
    // Always progress first, even with completions listed: a request fio
    // committed since the last reap leaves now (docs/fio.md, "getevents").
    while (true) {
      (void)q->eq->Poll({});  // runs the callbacks of what completed
      if (q->done.size() >= min || (q->in_flight == 0 && !q->done.empty())) break;
      if (q->in_flight == 0) break;  // nothing can complete any more
      // Progress and sleep on the worker (spin briefly, then its event fd)
      // until a completion callback runs: no sleep longer than needed, no
      // yield loop holding a vCPU the engine needs.
      auto slice = std::chrono::duration_cast<std::chrono::microseconds>(kReapSlice);
      if (bounded) {
        const auto now = Clock::now();
        if (now >= deadline) break;
        slice = std::min(slice, std::chrono::duration_cast<std::chrono::microseconds>(deadline - now));
      }
      (void)q->eq->WaitAny(slice);
      waited = true;
    }
    if (q->stages) {
      ++q->stages->reaps;
      if (waited) ++q->stages->waits;
    }
    return 0;
  });
  if (rc != 0) return -rc;
  unsigned n = 0;
  const uint64_t now = q->stages && !q->done.empty() ? NowNs() : 0;
  while (n < max && !q->done.empty()) {
    out[n++] = q->done.front();
    q->done.pop_front();
    if (q->stages && !q->stages->done_ns.empty()) {
      q->stages->waiting_ns += now - q->stages->done_ns.front();
      q->stages->done_ns.pop_front();
      ++q->stages->ios;
    }
  }
  return static_cast<int>(n);
}

unsigned ros2_fio_queue_in_flight(const ros2_fio_queue* q) {
  return q->in_flight + static_cast<unsigned>(q->done.size());
}

}  // extern "C"

namespace {
// fio's shared buffer allocations by address (fio frees by the pointer it got).
std::mutex g_iomem_mu;
std::map<void*, ros2::client::IoBuffer>& SharedIomem() {
  static auto* m = new std::map<void*, ros2::client::IoBuffer>();
  return *m;
}
}  // namespace

extern "C" int ros2_fio_iomem_alloc(struct ros2_fio_mount* mount, uint64_t length, int shared, void** out) {
  *out = nullptr;
  if (!shared) {
    void* p = nullptr;
    const int err = ::posix_memalign(&p, 4096, length == 0 ? 4096 : length);
    if (err != 0) return Fail(ros2::Status::FromErrno(err, "fio buffers: allocating"));
    *out = p;
    return 0;
  }
  auto b = mount->client->AllocateIoBuffer(length);
  if (!b.ok()) return Fail(b.status().WithContext("fio buffers"));
  void* p = b->data();
  std::lock_guard lock(g_iomem_mu);
  SharedIomem().emplace(p, std::move(*b));
  *out = p;
  return 0;
}

extern "C" void ros2_fio_iomem_free(void* buffer) {
  if (buffer == nullptr) return;
  ros2::client::IoBuffer owned;  // unmapped when it goes out of scope, outside the lock
  {
    std::lock_guard lock(g_iomem_mu);
    auto it = SharedIomem().find(buffer);
    if (it != SharedIomem().end()) {
      owned = std::move(it->second);
      SharedIomem().erase(it);
    }
  }
  if (owned.data() == nullptr) ::free(buffer);  // heap memory from posix_memalign
}
