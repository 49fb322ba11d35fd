// A host session's thread: ring polling, validation and execution.
#include "agent/session.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "agent/op_call.h"
#include "common/log.h"
#include "offload/wire.h"

namespace ros2::agent {

struct Session::Mount {
  std::unique_ptr<client::Pool> pool;
  std::unique_ptr<client::Container> container;
  std::unique_ptr<dfs::Filesystem> fs;
  ~Mount() {
    fs.reset();
    container.reset();
    pool.reset();
  }
};

namespace {

constexpr size_t kMaxMounts = 64;
constexpr size_t kMaxPathArg = dfs::kMaxPathLength;
constexpr auto kPeerCheckInterval = std::chrono::milliseconds(100);
constexpr int kSleepPollMs = 500;
constexpr std::chrono::nanoseconds kQosMaxNap = std::chrono::milliseconds(5);  // longest sleep of a throttled entry
constexpr size_t kMaxInFlight = 64;                         // reads and writes of one session in flight at once
constexpr uint64_t kMaxInFlightBytes = uint64_t{32} << 20;  // and their bytes (one larger entry still goes alone)

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int ErrnoOf(const Status& st) {
  int e = st.ToErrno();
  return e == 0 ? EIO : e;
}


}  // namespace

Session::Session(SessionIdentity identity, std::shared_ptr<TenantClient> tenant, SessionResources res,
                 std::chrono::microseconds spin)
    : identity_(std::move(identity)), tenant_(std::move(tenant)), res_(std::move(res)), spin_(spin) {}

Session::~Session() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  mounts_.clear();       // Filesystem, Container, Pool: before the tenant's client may go
  res_.segment.reset();  // unlisted before it is unmapped
  if (res_.map != nullptr) ::munmap(res_.map, res_.map_len);
  for (int fd : {res_.socket, res_.memfd, res_.sq_eventfd}) {
    if (fd >= 0) ::close(fd);
  }
}

void Session::Start() {
  thread_ = std::thread([this] { Run(); });
}

std::string Session::close_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reason_;
}

size_t Session::mounts() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& m : mounts_) n += m != nullptr;
  return n;
}

void Session::Close(std::string reason) {
  ROS2_LOG_WARN("agent: session {} (pid {} uid {} tenant {}) closed by the agent: {}", identity_.id, identity_.pid,
                identity_.uid, identity_.tenant, reason);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reason_.empty()) reason_ = std::move(reason);
  }
  header()->closed.value.store(1, std::memory_order_release);
  WakeHost();
  // The host sees the hang-up on its socket at once, whatever it waits on.
  ::shutdown(res_.socket, SHUT_RDWR);
}

bool Session::PeerGone() {
  pollfd p{res_.socket, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) return true;
  char c;
  ssize_t n = ::recv(res_.socket, &c, 1, MSG_DONTWAIT);
  if (n == 0) return true;
  if (n > 0) {
    Close("protocol: unexpected message on the socket after the hello");
    return true;
  }
  return false;
}

void Session::WakeHost() {
  WakeIndexSleepers(header()->cq_tail);
}

void Session::PostCompletions() {
  if (done_.empty()) return;
  RingHeader* h = header();
  const RingGeometry& g = res_.geometry;
  auto* cq = reinterpret_cast<CompleteEntry*>(static_cast<std::byte*>(res_.map) + g.cq_offset);
  for (const CompleteEntry& c : done_) {
    std::memcpy(&cq[cq_tail_ & (g.cq_entries - 1)], &c, sizeof c);
    ++cq_tail_;
  }
  completed_.fetch_add(done_.size(), std::memory_order_relaxed);
  done_.clear();
  h->cq_tail.value.store(cq_tail_, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (TakeSleeper(h->host_sleeping)) WakeHost();
}

void Session::ProgressIo(std::chrono::microseconds wait) {
  if (outstanding_ == 0) return;
  if (wait.count() > 0) {
    eq_->WaitAny(wait);
  } else {
    std::array<client::Event, 4> ignored;
    eq_->Poll(ignored);
  }
}

bool Session::CheckPeer() {
  auto now = std::chrono::steady_clock::now();
  if (now - last_peer_check_ <= kPeerCheckInterval) return false;
  last_peer_check_ = now;
  return PeerGone();
}

void Session::Run() {
  auto eq = tenant_->client->CreateEventQueue();
  if (!eq.ok()) {
    Close("agent: cannot make the session's event queue: " + eq.status().ToString());
    finished_.store(true, std::memory_order_release);
    return;
  }
  eq_ = std::move(*eq);
  last_peer_check_ = std::chrono::steady_clock::now();
  RingHeader* h = header();
  const RingGeometry& g = res_.geometry;
  while (!stop_.load(std::memory_order_relaxed) && fault_.empty() && !peer_gone_) {
    const uint32_t tail = h->sq_tail.value.load(std::memory_order_acquire);
    const uint32_t pending = tail - sq_head_;
    metrics_.ring_depth.store(pending, std::memory_order_relaxed);
    if (pending > g.sq_entries) {
      fault_ = fmt::format("protocol: submission tail {} is behind the head {} or beyond the ring ({} entries)", tail,
                           sq_head_, g.sq_entries);
      break;
    }
    if (pending == 0) {
      WaitForWork();
      continue;
    }
    TakeSubmissions(pending);
    ProgressIo(std::chrono::microseconds(0));
    PostCompletions();
  }
  if (!fault_.empty()) Close(fault_);
  // What is in flight completes (into the still-mapped arena) before the queue goes.
  while (outstanding_ > 0) ProgressIo(std::chrono::microseconds(100'000));
  if (!peer_gone_ && fault_.empty()) PostCompletions();
  eq_.reset();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reason_.empty()) reason_ = stop_.load() ? "agent stopping" : "host closed the session (socket hang-up)";
  }
  finished_.store(true, std::memory_order_release);
}

void Session::WaitForWork() {
  RingHeader* h = header();
  if (outstanding_ > 0) {
    // I/O in flight: wait for it (a new submission is seen within a millisecond).
    ProgressIo(std::chrono::microseconds(1000));
    PostCompletions();
    peer_gone_ = CheckPeer();
    return;
  }
  PostCompletions();
  // Idle: spin for the budget, then announce sleep and wait for a signal.
  auto spin_end = std::chrono::steady_clock::now() + spin_;
  while (std::chrono::steady_clock::now() < spin_end) {
    if (h->sq_tail.value.load(std::memory_order_acquire) != sq_head_) return;
    for (int i = 0; i < 32; ++i) CpuRelax();
  }
  h->agent_sleeping.value.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (h->sq_tail.value.load(std::memory_order_acquire) != sq_head_) {
    h->agent_sleeping.value.store(0, std::memory_order_relaxed);
    return;
  }
  pollfd fds[2] = {{res_.sq_eventfd, POLLIN, 0}, {res_.socket, POLLIN | POLLRDHUP, 0}};
  int n = ::poll(fds, 2, kSleepPollMs);
  h->agent_sleeping.value.store(0, std::memory_order_relaxed);
  if (n > 0 && (fds[0].revents & POLLIN)) {
    uint64_t v;
    (void)!::read(res_.sq_eventfd, &v, sizeof v);
  }
  if (n > 0 && fds[1].revents != 0 && PeerGone()) peer_gone_ = true;
  last_peer_check_ = std::chrono::steady_clock::now();
}

bool Session::WaitForCompletionRoom() {
  RingHeader* h = header();
  const RingGeometry& g = res_.geometry;
  for (;;) {
    const uint32_t head = h->cq_head.value.load(std::memory_order_acquire);
    const uint32_t used = cq_tail_ - head;
    if (used > g.cq_entries) {
      fault_ = fmt::format("protocol: completion head {} is beyond the tail {} or behind the ring ({} entries)", head,
                           cq_tail_, g.cq_entries);
      return false;
    }
    if (used + outstanding_ + done_.size() < g.cq_entries) return true;
    PostCompletions();
    if (outstanding_ > 0) {
      ProgressIo(std::chrono::microseconds(1000));
      continue;
    }
    // Full of completions the host has not reaped: wait a little.
    if (PeerGone()) {
      peer_gone_ = true;
      return false;
    }
    if (stop_.load()) return false;
    ::usleep(50);
  }
}

bool Session::Throttled(const SubmitEntry& sqe, bool data) {
  if (tenant_->qos == nullptr) return false;
  auto wait = tenant_->qos->TryAcquire(data ? sqe.buf_len : 0, 1);
  if (wait.count() <= 0) return false;
  metrics_.Throttled(wait);
  PostCompletions();
  const auto nap = std::min<std::chrono::nanoseconds>(wait, kQosMaxNap);
  if (outstanding_ > 0) {
    ProgressIo(std::chrono::duration_cast<std::chrono::microseconds>(nap) + std::chrono::microseconds(1));
    PostCompletions();
  } else {
    std::this_thread::sleep_for(nap);
  }
  return true;
}

// Takes what is there: reads and writes go in flight together, anything else
// first waits for them (and runs on its own).
void Session::TakeSubmissions(uint32_t pending) {
  RingHeader* h = header();
  const RingGeometry& g = res_.geometry;
  auto* sq = reinterpret_cast<SubmitEntry*>(static_cast<std::byte*>(res_.map) + g.sq_offset);
  for (uint32_t i = 0; i < pending && !stop_.load(std::memory_order_relaxed); ++i) {
    // A host killed with entries queued: stop executing them within the interval.
    if (CheckPeer()) {
      peer_gone_ = true;
      return;
    }
    // Room in the completion ring for this entry and every one in flight.
    if (!WaitForCompletionRoom()) return;
    SubmitEntry sqe;
    std::memcpy(&sqe, &sq[sq_head_ & (g.sq_entries - 1)], sizeof sqe);  // private copy: the host may change it
    const bool data =
        sqe.opcode == static_cast<uint8_t>(RingOp::kRead) || sqe.opcode == static_cast<uint8_t>(RingOp::kWrite);
    // The tenant's QoS: a read or write costs its bytes and one I/O, any
    // other entry one I/O. Short of tokens, the entry stays in the ring
    // (this copy is dropped; the next look copies it again and charges
    // that copy) while the thread finishes what is in flight or sleeps;
    // then back to the outer loop: stop, peer and ring checks, this entry again.
    if (Throttled(sqe, data)) return;
    ++sq_head_;
    h->sq_head.value.store(sq_head_, std::memory_order_release);
    if (!data) {
      while (outstanding_ > 0) ProgressIo(std::chrono::microseconds(100'000));  // a barrier for the data ops before it
    } else {
      // Bounded bytes in flight: a host that dies leaves at most this much to finish.
      while (outstanding_ > 0 && outstanding_bytes_ + sqe.buf_len > kMaxInFlightBytes) {
        ProgressIo(std::chrono::microseconds(1000));
      }
    }
    CompleteEntry cqe{};
    cqe.user_data = sqe.user_data;
    if (Execute(sqe, cqe)) done_.push_back(cqe);
    if (outstanding_ >= kMaxInFlight) ProgressIo(std::chrono::microseconds(1000));
    // Long batches: progress and let the host see completions every 16
    // entries (callbacks run only inside progress, so a batch's reads and
    // writes are all in flight before the first of them is completed).
    if ((i & 15) == 15) {
      ProgressIo(std::chrono::microseconds(0));
      PostCompletions();
    }
  }
}

void Session::Fail(const SubmitEntry& sqe, CompleteEntry& cqe, int err, const Status& status) {
  metrics_.failed.Add();
  cqe.result = -static_cast<int64_t>(err);
  cqe.code = static_cast<uint32_t>(status.code());
  cqe.aux = 0;
  cqe.msg_len = 0;
  const std::string& msg = status.message();
  if (sqe.args_cap > 0 && ArenaRangeOk(sqe.args_off, sqe.args_cap, res_.geometry.arena_size)) {
    size_t n = std::min<size_t>(msg.size(), sqe.args_cap);
    std::memcpy(arena() + sqe.args_off, msg.data(), n);
    cqe.msg_len = static_cast<uint32_t>(n);
  }
  ROS2_LOG_DEBUG("agent session {}: {} failed: {}", identity_.id, OpName(sqe.opcode), status.ToString());
}

bool Session::PutResult(const SubmitEntry& sqe, CompleteEntry& cqe, const std::vector<std::byte>& bytes) {
  if (bytes.size() > sqe.buf_len) {
    Fail(sqe, cqe, ERANGE,
         Status::InvalidArgument(fmt::format("agent: {} result needs {} bytes, the result area has {}",
                                             OpName(sqe.opcode), bytes.size(), sqe.buf_len)));
    return false;
  }
  if (!bytes.empty()) std::memcpy(arena() + sqe.buf_off, bytes.data(), bytes.size());
  cqe.aux = bytes.size();
  return true;
}

void Session::ExecuteMount(const SubmitEntry& sqe, ArgReader& r, CompleteEntry& cqe) {
  std::string pool, cont;
  uint64_t chunk = 0;
  uint32_t create = 1, file_class = 0, dir_class = 0;
  if (!r.Str(&pool, 4096) || !r.Str(&cont, 4096) || !r.U64(&chunk) || !r.U32(&create) || !r.U32(&file_class) ||
      !r.U32(&dir_class) || file_class > 0xff || dir_class > 0xff) {
    Fail(sqe, cqe, EINVAL, Status::InvalidArgument("agent mount: malformed arguments"));
    return;
  }
  size_t slot = 0;
  while (slot < mounts_.size() && mounts_[slot] != nullptr) ++slot;
  if (slot >= kMaxMounts) {
    Fail(sqe, cqe, EMFILE, Status::Busy(fmt::format("agent mount: the session holds {} mounts already", kMaxMounts)));
    return;
  }
  auto m = std::make_unique<Mount>();
  auto p = tenant_->client->ConnectPool(pool);
  if (!p.ok()) return Fail(sqe, cqe, ErrnoOf(p.status()), p.status().WithContext("agent mount: pool " + pool));
  m->pool = std::move(*p);
  auto c = m->pool->OpenContainer(cont);
  if (!c.ok()) {
    return Fail(
        sqe, cqe, ErrnoOf(c.status()),
        c.status().WithContext(fmt::format("agent mount: container {}/{} as tenant {}", pool, cont, identity_.tenant)));
  }
  m->container = std::move(*c);
  dfs::MountOptions o;
  o.chunk_size = chunk;
  o.create = create != 0;
  o.file_class = static_cast<ObjectClass>(file_class);
  o.dir_class = static_cast<ObjectClass>(dir_class);
  // Entries are owned by the caller the kernel named, whatever the host says.
  o.uid = identity_.uid;
  o.gid = identity_.gid;
  // Encrypted containers: the agent's key for it (the host never sees one);
  // without one the DFS refuses the mount, naming the container and its key id.
  if (m->container->summary().encryption) o.encryption_key_file = tenant_->mapping.KeyFileFor(cont);
  auto fs = dfs::Filesystem::Mount(*m->container, o);
  if (!fs.ok()) return Fail(sqe, cqe, ErrnoOf(fs.status()), fs.status().WithContext("agent mount"));
  m->fs = std::move(*fs);
  ArgWriter w;
  w.Entry(m->fs->Root());
  w.U64(m->fs->chunk_size());
  if (!PutResult(sqe, cqe, w.bytes())) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (slot == mounts_.size()) mounts_.emplace_back();
    mounts_[slot] = std::move(m);
  }
  cqe.result = static_cast<int64_t>(slot);
  ROS2_LOG_INFO("agent session {} (pid {} tenant {}): mounted {}/{} as mount {}", identity_.id, identity_.pid,
                identity_.tenant, pool, cont, slot);
}

bool Session::Execute(const SubmitEntry& sqe, CompleteEntry& cqe) {
  (sqe.opcode == static_cast<uint8_t>(RingOp::kRead)    ? metrics_.reads
   : sqe.opcode == static_cast<uint8_t>(RingOp::kWrite) ? metrics_.writes
                                                        : metrics_.other_ops)
      .Add();
  went_async_ = false;
  ExecuteNow(sqe, cqe);
  return !went_async_;
}

// What every entry shares: nothing outside the arena, nothing unknown, the
// mount its layout names, the entry's name; then the opcode's handler.
void Session::ExecuteNow(const SubmitEntry& sqe, CompleteEntry& cqe) {
  const uint64_t arena_size = res_.geometry.arena_size;
  if (sqe.args_len > sqe.args_cap || sqe.args_cap > kMaxArgsSize ||
      !ArenaRangeOk(sqe.args_off, sqe.args_cap, arena_size)) {
    SubmitEntry no_msg = sqe;
    no_msg.args_cap = 0;  // the range itself is bad: no message can be written there
    return Fail(no_msg, cqe, EFAULT,
                Status::InvalidArgument(fmt::format("agent: argument area [{}, +{} cap {}) is outside the arena "
                                                    "({} bytes) or too large",
                                                    sqe.args_off, sqe.args_len, sqe.args_cap, arena_size)));
  }
  if (!ArenaRangeOk(sqe.buf_off, sqe.buf_len, arena_size)) {
    return Fail(sqe, cqe, EFAULT,
                Status::InvalidArgument(fmt::format("agent: buffer [{}, +{}) is outside the arena ({} bytes)",
                                                    sqe.buf_off, sqe.buf_len, arena_size)));
  }
  const OpSpec* spec = FindOp(sqe.opcode);
  if (spec == nullptr || sqe.flags != 0) {
    return Fail(sqe, cqe, EOPNOTSUPP,
                Status::NotSupported(fmt::format("agent: unknown opcode {} (flags {:#x})", sqe.opcode, sqe.flags)));
  }
  const std::vector<std::byte> args(arena() + sqe.args_off, arena() + sqe.args_off + sqe.args_len);
  OpCall call{*this, sqe, cqe, nullptr, {}, ArgReader(args), {arena() + sqe.buf_off, sqe.buf_len}};
  if (spec->layout != ArgLayout::kSession) {
    if (sqe.mount >= mounts_.size() || mounts_[sqe.mount] == nullptr) {
      return Fail(sqe, cqe, EBADF,
                  Status::InvalidArgument(fmt::format("agent: {} names mount {}, which this session does not hold",
                                                      spec->name, sqe.mount)));
    }
    call.fs = mounts_[sqe.mount]->fs.get();
  }
  if (spec->layout == ArgLayout::kEntry || spec->layout == ArgLayout::kEntryData) {
    std::string entry_name;
    if (call.args.remaining() > 0 && !call.args.Str(&entry_name, dfs::kMaxNameLength)) {
      return Fail(sqe, cqe, EINVAL, Status::InvalidArgument("agent: malformed entry name"));
    }
    call.entry = FromWire(sqe.entry, std::move(entry_name));
  }
  if (spec->layout == ArgLayout::kEntryData && call.entry.chunk_size != 0) {
    // The DFS splits an I/O per chunk: a forged tiny chunk size must not make
    // the agent hold millions of pieces.
    const uint64_t cs = call.entry.chunk_size;
    const uint64_t pieces = (sqe.offset % cs + sqe.buf_len + cs - 1) / cs;
    if (pieces > kMaxChunksPerIo) {
      return Fail(sqe, cqe, EINVAL,
                  Status::InvalidArgument(fmt::format(
                      "agent: a {} of {} bytes spans {} chunks of {} bytes (at most {} per entry; split it)",
                      spec->name, sqe.buf_len, pieces, cs, kMaxChunksPerIo)));
    }
  }
  spec->handler(call);
}

void Session::Unmount(const SubmitEntry& sqe) {
  std::unique_ptr<Mount> gone;
  std::lock_guard<std::mutex> lock(mu_);
  gone = std::move(mounts_[sqe.mount]);
}

void Session::SubmitIo(OpCall& call, bool read) {
  const SubmitEntry sqe = call.sqe;
  // In flight on the session's event queue; the callback completes it.
  outstanding_bytes_ += sqe.buf_len;
  auto done = [this, sqe, read](const client::IoResult& r) {
    outstanding_bytes_ -= sqe.buf_len;
    CompleteEntry c{};
    c.user_data = sqe.user_data;
    if (r.status.ok()) {
      c.result = static_cast<int64_t>(r.size);
      (read ? metrics_.read_bytes : metrics_.written_bytes).Add(r.size);
    } else {
      Fail(sqe, c, ErrnoOf(r.status), r.status);
    }
    done_.push_back(c);
    --outstanding_;
  };
  ++outstanding_;  // before: a zero-length request calls back at once
  went_async_ = true;
  if (outstanding_ > max_in_flight_.load(std::memory_order_relaxed)) {
    max_in_flight_.store(outstanding_, std::memory_order_relaxed);
  }
  Status st = read ? call.fs->SubmitRead(*eq_, call.entry, sqe.offset, call.buf, done)
                   : call.fs->SubmitWrite(*eq_, call.entry, sqe.offset, call.buf, done);
  if (!st.ok()) {  // nothing was queued, no callback comes
    --outstanding_;
    outstanding_bytes_ -= sqe.buf_len;
    went_async_ = false;
    call.Fail(st);
  }
}

// --- OpCall ---

void OpCall::Fail(const Status& status) {
  Fail(ErrnoOf(status), status);
}
void OpCall::Fail(int err, const Status& status) {
  session.Fail(sqe, cqe, err, status);
}
void OpCall::BadArgs() {
  Fail(EINVAL, Status::InvalidArgument(fmt::format("agent: malformed arguments of {}", OpName(sqe.opcode))));
}
bool OpCall::Str(std::string* s) {
  return args.Str(s, kMaxPathArg);
}
bool OpCall::Put(const std::vector<std::byte>& bytes) {
  return session.PutResult(sqe, cqe, bytes);
}
void OpCall::PutEntry(const Result<dfs::Entry>& e) {
  if (!e.ok()) return Fail(e.status());
  ArgWriter w;
  w.Entry(*e);
  Put(w.bytes());
}
void OpCall::MountContainer() {
  session.ExecuteMount(sqe, args, cqe);
}
void OpCall::UnmountMount() {
  session.Unmount(sqe);
}
void OpCall::SubmitIo(bool read) {
  session.SubmitIo(*this, read);
}

}  // namespace ros2::agent
