// The host library of offload mode, its ring mechanics: connection, arena,
// submission and completion rings, blocking calls and batch I/O. The
// encoding of each file-system operation is in host_ops.cc.
#include "client/offload/host_session.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

#include "offload/wire.h"
#include "common/segment_name.h"

namespace ros2::agent {

struct HostSession::Waiter {
  bool done = false;
  bool abandoned = false;  // the caller timed out: free `owned` when the completion comes
  CompleteEntry cqe{};
  std::vector<ArenaBuffer> owned;
};

namespace {

using Clock = std::chrono::steady_clock;
// A deadline meaning "do not wait" (WaitFor then reads no clock).
constexpr Clock::time_point kNoWait = Clock::time_point::min();
// A deadline Push computes (now + options_.timeout) only if it has to wait for
// ring room, so a submission that finds room reads no clock.
constexpr Clock::time_point kTimeoutFromNow = Clock::time_point::max();
constexpr uint64_t kArenaAlign = 64;
constexpr uint32_t kMessageRoom = 512;  // bytes of error message a call leaves room for
// A batched read's or write's arguments (the file's name) and message room
// fit one block of this size: each batch slot keeps one for good, and
// Allocate/Free recycle others (at most kSmallBlocksKept of them) instead of
// splitting and merging the free map.
constexpr uint64_t kSmallBlock = 1024;
// The top bit of a batch I/O's token (HostSession::TakeBatchSlot); a blocking
// call's tokens count up from 1 and never reach it.
constexpr uint64_t kBatchToken = uint64_t{1} << 63;
constexpr size_t kSmallBlocksKept = 1024;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

Status SendAll(int fd, const void* data, size_t len, const int* fds, size_t nfds) {
  iovec iov{const_cast<void*>(data), len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 3)]{};
  if (nfds > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  if (::sendmsg(fd, &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(len)) return Status::FromErrno(errno, "send hello");
  return Status::Ok();
}

// Connects and exchanges one message; returns the socket and the reply.
Result<std::pair<int, std::string>> Exchange(const std::string& path, MessageType type, const int* fds, size_t nfds,
                                             std::chrono::milliseconds timeout, uint64_t* session_id,
                                             std::string_view payload = {}) {
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "offload: socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    ::close(fd);
    return Status::InvalidArgument("offload: agent socket path too long: " + path);
  }
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    ::close(fd);
    return Status::Disconnected("offload: cannot connect to the agent at " + path + ": " + std::strerror(e));
  }
  HelloMessage hello{};
  hello.magic = kHelloMagic;
  hello.version = kProtocolVersion;
  hello.type = static_cast<uint16_t>(type);
  std::string message(reinterpret_cast<const char*>(&hello), sizeof hello);
  message.append(payload);
  if (Status st = SendAll(fd, message.data(), message.size(), fds, nfds); !st.ok()) {
    ::close(fd);
    return Status::Disconnected("offload: agent at " + path + ": " + st.message());
  }
  pollfd p{fd, POLLIN, 0};
  int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (n <= 0) {
    ::close(fd);
    return Status::TimedOut("offload: no reply from the agent at " + path);
  }
  std::string buf(kMaxReplySize, '\0');
  ssize_t got = ::recv(fd, buf.data(), buf.size(), 0);
  if (got < static_cast<ssize_t>(sizeof(HelloReply))) {
    ::close(fd);
    return Status::Disconnected("offload: the agent at " + path + " closed the connection without a reply");
  }
  HelloReply r;
  std::memcpy(&r, buf.data(), sizeof r);
  size_t len = std::min<size_t>(r.message_len, static_cast<size_t>(got) - sizeof r);
  std::string text = buf.substr(sizeof r, len);
  if (r.magic != kHelloMagic) {
    ::close(fd);
    return Status::Protocol("offload: the peer at " + path + " is not a ros2-agent");
  }
  if (r.code != 0) {
    ::close(fd);
    return Status::FromCode(static_cast<uint8_t>(r.code), text);
  }
  *session_id = r.session_id;
  return std::make_pair(fd, std::move(text));
}

}  // namespace

Result<std::string> QueryAgentStatus(const std::string& socket, std::chrono::milliseconds timeout) {
  uint64_t id = 0;
  ROS2_ASSIGN_OR_RETURN(auto r, Exchange(socket, MessageType::kStatus, nullptr, 0, timeout, &id));
  ::close(r.first);
  return r.second;
}

Result<std::string> AgentQos(const std::string& socket, const std::string& request, std::chrono::milliseconds timeout) {
  if (request.size() > kMaxControlPayload) return Status::InvalidArgument("offload: qos request too long");
  uint64_t id = 0;
  ROS2_ASSIGN_OR_RETURN(auto r, Exchange(socket, MessageType::kQos, nullptr, 0, timeout, &id, request));
  ::close(r.first);
  return r.second;
}

Result<std::unique_ptr<HostSession>> HostSession::Connect(const HostOptions& options) {
  if (!IsPowerOfTwo(options.ring_entries) || options.ring_entries < kMinRingEntries ||
      options.ring_entries > kMaxRingEntries) {
    return Status::InvalidArgument("offload: ring_entries must be a power of two in 2 .. 65536");
  }
  if (options.arena_size < 4096 || options.arena_size > kMaxArenaSize) {
    return Status::InvalidArgument("offload: arena_size must be 4 KiB .. 16 GiB");
  }
  auto s = std::unique_ptr<HostSession>(new HostSession());
  s->options_ = options;
  s->geometry_ = ComputeGeometry(options.ring_entries, options.ring_entries * 2, AlignUp(options.arena_size, 4096));
  const RingGeometry& g = s->geometry_;

  // Named as a shared segment (common/segment_name.h): the agent lists the
  // region as one, so the engine copies bulk straight between its storage
  // and the arena.
  const std::string memfd_name = SegmentName(NewSegmentId());
  int memfd = ::memfd_create(memfd_name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (memfd < 0) return Status::FromErrno(errno, "offload: memfd_create");
  auto close_memfd = [&] { ::close(memfd); };
  if (::ftruncate(memfd, static_cast<off_t>(g.total_size)) != 0) {
    close_memfd();
    return Status::FromErrno(errno, "offload: sizing the memfd");
  }
  // The agent refuses a region that could shrink under its mapping.
  if (::fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close_memfd();
    return Status::FromErrno(errno, "offload: sealing the memfd");
  }
  void* map = ::mmap(nullptr, g.total_size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (map == MAP_FAILED) {
    close_memfd();
    return Status::FromErrno(errno, "offload: mapping the memfd");
  }
  s->map_ = map;
  auto* h = new (map) RingHeader{};
  h->magic = kRingMagic;
  h->version = kRingVersion;
  h->header_size = kHeaderSize;
  h->sq_entries = g.sq_entries;
  h->cq_entries = g.cq_entries;
  h->sqe_size = sizeof(SubmitEntry);
  h->cqe_size = sizeof(CompleteEntry);
  h->sq_offset = g.sq_offset;
  h->cq_offset = g.cq_offset;
  h->arena_offset = g.arena_offset;
  h->arena_size = g.arena_size;
  h->total_size = g.total_size;
  s->free_[0] = g.arena_size;

  s->sq_eventfd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->sq_eventfd_ < 0) {
    close_memfd();
    return Status::FromErrno(errno, "offload: eventfd");
  }
  int fds[2] = {memfd, s->sq_eventfd_};
  auto r = Exchange(options.socket, MessageType::kHello, fds, 2,
                    std::min(options.timeout, std::chrono::milliseconds(10000)), &s->id_);
  close_memfd();  // the mapping keeps the region; the agent has its own descriptor
  if (!r.ok()) return r.status();
  s->socket_ = r->first;
  s->tenant_ = std::move(r->second);
  return s;
}

HostSession::~HostSession() {
  if (socket_ >= 0) ::close(socket_);
  if (sq_eventfd_ >= 0) ::close(sq_eventfd_);
  if (map_ != nullptr) ::munmap(map_, geometry_.total_size);
}

// --- arena ---

Result<ArenaBuffer> HostSession::Allocate(uint64_t size) {
  if (size == 0) size = 1;
  size = AlignUp(size, kArenaAlign);
  std::lock_guard<std::mutex> lock(alloc_mu_);
  if (size == kSmallBlock && !small_free_.empty()) {
    ArenaBuffer b = small_free_.back();
    small_free_.pop_back();
    return b;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < size) continue;
      uint64_t off = it->first, len = it->second;
      free_.erase(it);
      if (len > size) free_[off + size] = len - size;
      return ArenaBuffer{arena() + off, off, size};
    }
    // The recycled small blocks may be what is missing: give them back.
    if (small_free_.empty()) break;
    for (const ArenaBuffer& b : small_free_) FreeLocked(b.offset, b.size);
    small_free_.clear();
  }
  return Status::NoSpace("offload: the arena (" + std::to_string(geometry_.arena_size) + " bytes) has no free " +
                         std::to_string(size) + " bytes");
}

void HostSession::Free(const ArenaBuffer& b) {
  if (!b) return;
  std::lock_guard<std::mutex> lock(alloc_mu_);
  if (b.size == kSmallBlock && small_free_.size() < kSmallBlocksKept) {
    small_free_.push_back(b);
    return;
  }
  FreeLocked(b.offset, b.size);
}

void HostSession::FreeLocked(uint64_t off, uint64_t len) {
  auto next = free_.lower_bound(off);
  if (next != free_.end() && off + len == next->first) {
    len += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      prev->second += len;
      return;
    }
  }
  free_[off] = len;
}

bool HostSession::InArena(const void* p, uint64_t n) const {
  auto* b = static_cast<const std::byte*>(p);
  return b >= arena() && ArenaRangeOk(static_cast<uint64_t>(b - arena()), n, geometry_.arena_size);
}

// --- rings ---

Status HostSession::DisconnectedStatus() const {
  return Status::Disconnected("offload: the agent at " + options_.socket + " " + disconnect_reason_);
}

bool HostSession::PeerHungUp() const {
  pollfd p{socket_, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && p.revents != 0;
}

size_t HostSession::DrainLocked() {
  RingHeader* h = header();
  const uint32_t tail = h->cq_tail.value.load(std::memory_order_acquire);
  const uint32_t avail = tail - cq_head_;
  if (avail == 0 || avail > geometry_.cq_entries) return 0;
  auto* cq = reinterpret_cast<CompleteEntry*>(static_cast<std::byte*>(map_) + geometry_.cq_offset);
  for (uint32_t i = 0; i < avail; ++i) {
    CompleteEntry cqe;
    std::memcpy(&cqe, &cq[(cq_head_ + i) & (geometry_.cq_entries - 1)], sizeof cqe);
    if (auto it = waiters_.find(cqe.user_data); it != waiters_.end()) {
      auto w = it->second;
      waiters_.erase(it);
      if (w->abandoned) {
        for (const auto& b : w->owned) Free(b);
      } else {
        w->cqe = cqe;
        w->done = true;
      }
    } else if (BatchSlot* b = FindBatchSlot(cqe.user_data); b != nullptr) {
      IoCompletion c;
      c.user_data = b->user_data;
      if (cqe.code != 0 || cqe.result < 0) {
        std::string msg;
        if (cqe.msg_len > 0 && b->args) {
          msg.assign(reinterpret_cast<const char*>(b->args.data), std::min<uint64_t>(cqe.msg_len, b->args.size));
        }
        c.status = CompletionStatus(cqe, msg);
        c.error = cqe.result < 0 ? static_cast<int>(-cqe.result) : EIO;
      } else {
        c.size = static_cast<uint64_t>(cqe.result);
      }
      ReleaseBatchSlot(b);
      ready_.push_back(std::move(c));
    }
  }
  cq_head_ = tail;
  h->cq_head.value.store(cq_head_, std::memory_order_release);
  in_flight_ -= std::min<size_t>(in_flight_, avail);
  cv_.notify_all();
  return avail;
}

void HostSession::PollOnce(std::unique_lock<std::mutex>& lock, Clock::time_point deadline) {
  RingHeader* h = header();
  polling_ = true;
  lock.unlock();
  bool have = false;
  if (options_.spin.count() > 0) {  // no clock reads without a spin budget
    const auto spin_end = Clock::now() + options_.spin;
    while (Clock::now() < spin_end) {
      if (h->cq_tail.value.load(std::memory_order_acquire) != cq_head_) {
        have = true;
        break;
      }
      for (int i = 0; i < 32; ++i) CpuRelax();
    }
  }
  bool gone = false;
  if (!have) {
    h->host_sleeping.value.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (h->cq_tail.value.load(std::memory_order_relaxed) == cq_head_ &&
        h->closed.value.load(std::memory_order_relaxed) == 0) {
      // To the deadline exactly (at most 100 ms a pass): a timeout rounded
      // down to whole milliseconds would turn the last one into a loop of
      // zero-timeout polls.
      const auto left = std::clamp<Clock::duration>(deadline - Clock::now(), Clock::duration::zero(),
                                                    std::chrono::milliseconds(100));
      const auto left_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      const timespec wait{static_cast<time_t>(left_ns / 1000000000), static_cast<long>(left_ns % 1000000000)};
      // The agent wakes the tail when it posts completions and when it closes
      // the session; a killed agent wakes nobody, so a pass that times out
      // looks at the socket.
      if (!SleepOnIndex(h->cq_tail, cq_head_, wait)) gone = PeerHungUp();
    }
    h->host_sleeping.value.store(0, std::memory_order_relaxed);
    if (h->closed.value.load(std::memory_order_acquire) != 0) gone = true;
  }
  lock.lock();
  polling_ = false;
  DrainLocked();
  if (gone && !disconnected_) {
    disconnected_ = true;
    disconnect_reason_ = header()->closed.value.load(std::memory_order_acquire) != 0
                             ? "closed the session (a protocol error of this process; the reason is in its log)"
                             : "is gone (the socket hung up: the agent exited or was killed)";
  }
  cv_.notify_all();
}

template <typename Pred>
Status HostSession::WaitFor(std::unique_lock<std::mutex>& lock, Pred pred, Clock::time_point deadline) {
  for (;;) {
    if (!polling_) DrainLocked();  // what already came, without waiting (a zero timeout still reaps)
    if (pred()) return Status::Ok();
    if (disconnected_) return DisconnectedStatus();
    if (deadline == kNoWait || Clock::now() >= deadline) {
      return Status::TimedOut("offload: no completion from the agent at " + options_.socket + " in time");
    }
    if (!polling_) {
      PollOnce(lock, deadline);
    } else {
      cv_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(20)));
    }
  }
}

Status HostSession::Push(std::unique_lock<std::mutex>& lock, const SubmitEntry* entries, size_t n,
                         Clock::time_point deadline, size_t* pushed) {
  RingHeader* h = header();
  auto* sq = reinterpret_cast<SubmitEntry*>(static_cast<std::byte*>(map_) + geometry_.sq_offset);
  for (size_t i = 0; i < n; ++i) {
    if (in_flight_ >= geometry_.sq_entries) {
      if (deadline == kTimeoutFromNow) deadline = Clock::now() + options_.timeout;
      ROS2_RETURN_IF_ERROR(WaitFor(
          lock, [&] { return in_flight_ < geometry_.sq_entries; }, deadline));
    }
    std::memcpy(&sq[sq_tail_ & (geometry_.sq_entries - 1)], &entries[i], sizeof(SubmitEntry));
    ++sq_tail_;
    ++in_flight_;
    if (pushed != nullptr) *pushed = i + 1;
    // Publish per entry when the ring may fill before the batch ends.
    if (i + 1 == n || in_flight_ == geometry_.sq_entries) {
      h->sq_tail.value.store(sq_tail_, std::memory_order_release);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (TakeSleeper(h->agent_sleeping)) {
        uint64_t one = 1;
        (void)!::write(sq_eventfd_, &one, sizeof one);
      }
    }
  }
  return Status::Ok();
}

Status HostSession::CompletionStatus(const CompleteEntry& cqe, std::string_view message) const {
  if (cqe.code != 0) {
    std::string msg(message);
    if (msg.empty()) msg = "offload: the agent reported error " + std::to_string(-cqe.result);
    return Status::FromCode(static_cast<uint8_t>(cqe.code), std::move(msg));
  }
  return Status::FromErrno(static_cast<int>(-cqe.result), "offload: agent");
}

Result<CompleteEntry> HostSession::Call(SubmitEntry sqe, const std::vector<std::byte>& args, uint64_t result_size,
                                        std::vector<std::byte>* result) {
  const auto deadline = Clock::now() + options_.timeout;
  if (args.size() > kMaxArgsSize - kMessageRoom) return Status::InvalidArgument("offload: arguments too large");
  auto w = std::make_shared<Waiter>();
  ROS2_ASSIGN_OR_RETURN(ArenaBuffer a, Allocate(args.size() + kMessageRoom));
  w->owned.push_back(a);
  if (!args.empty()) std::memcpy(a.data, args.data(), args.size());
  sqe.args_off = a.offset;
  sqe.args_len = static_cast<uint32_t>(args.size());
  sqe.args_cap = static_cast<uint32_t>(a.size);
  ArenaBuffer res;
  if (result_size > 0) {
    auto r = Allocate(result_size);
    if (!r.ok()) {
      Free(a);
      return r.status();
    }
    res = *r;
    w->owned.push_back(res);
    sqe.buf_off = res.offset;
    sqe.buf_len = res.size;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (disconnected_) {
    for (const auto& b : w->owned) Free(b);
    return DisconnectedStatus();
  }
  const uint64_t token = next_token_++;
  sqe.user_data = token;
  waiters_[token] = w;
  Status st = Push(lock, &sqe, 1, deadline);
  if (!st.ok()) {
    waiters_.erase(token);
    for (const auto& b : w->owned) Free(b);
    return st;
  }
  st = WaitFor(
      lock, [&] { return w->done; }, deadline);
  if (!st.ok()) {
    // Still in flight: the agent may yet write into these areas. They are
    // freed when (if) the completion comes.
    w->abandoned = true;
    if (disconnected_) waiters_.erase(token);  // nothing will come; the areas die with the session
    return st;
  }
  lock.unlock();
  CompleteEntry cqe = w->cqe;
  Status failed;
  if (cqe.code != 0 || cqe.result < 0) {
    std::string msg(reinterpret_cast<const char*>(a.data), std::min<uint64_t>(cqe.msg_len, a.size));
    failed = CompletionStatus(cqe, msg);
  } else if (result != nullptr && res) {
    uint64_t n = std::min<uint64_t>(cqe.aux, res.size);
    result->assign(res.data, res.data + n);
  }
  for (const auto& b : w->owned) Free(b);
  if (!failed.ok()) return failed;
  return cqe;
}

// --- batch ---

Status HostSession::Submit(std::span<const IoRequest> requests) {
  // Reused per thread (Submit never runs a callback, so it is not re-entered).
  thread_local std::vector<SubmitEntry> entries;
  entries.clear();
  Status st;
  std::unique_lock<std::mutex> lock(mu_);
  if (disconnected_) return DisconnectedStatus();
  for (const auto& r : requests) {
    if (r.mount > 0xffff) {
      st = Status::InvalidArgument("offload: mount index out of range");
      break;
    }
    if (r.file == nullptr) {
      st = Status::InvalidArgument("offload: a batched I/O names no file");
      break;
    }
    if (r.kind != RingOp::kRead && r.kind != RingOp::kWrite) {
      st = Status::InvalidArgument(fmt::format("offload: a batched I/O is a read or a write, not ring op {}",
                                               static_cast<unsigned>(r.kind)));
      break;
    }
    if (r.buffer.empty() || !InArena(r.buffer.data(), r.buffer.size())) {
      st = Status::InvalidArgument("offload: a batched I/O buffer must lie inside the arena (Allocate)");
      break;
    }
    // The arguments are the entry's name, written straight into the slot's block.
    const uint64_t args_len = StrSize(r.file->name);
    auto token = TakeBatchSlot(r.user_data, args_len + kMessageRoom);
    if (!token.ok()) {
      st = token.status();
      break;
    }
    const ArenaBuffer& args = batch_slots_[static_cast<uint32_t>(*token)].args;
    PutStr(args.data, r.file->name);
    SubmitEntry e = MakeEntry(r.kind, r.mount, *r.file);
    e.user_data = *token;
    e.offset = r.offset;
    e.buf_off = static_cast<uint64_t>(r.buffer.data() - arena());
    e.buf_len = r.buffer.size();
    e.args_off = args.offset;
    e.args_len = static_cast<uint32_t>(args_len);
    e.args_cap = static_cast<uint32_t>(args.size);
    entries.push_back(e);
  }
  batch_in_flight_ += entries.size();
  size_t pushed = 0;
  Status push = Push(lock, entries.data(), entries.size(), kTimeoutFromNow, &pushed);
  for (size_t i = pushed; i < entries.size(); ++i) {  // never queued: no completion will come
    ReleaseBatchSlot(FindBatchSlot(entries[i].user_data));
    --batch_in_flight_;
  }
  if (!push.ok()) return push;
  return st;
}

Status HostSession::SubmitRaw(const SubmitEntry& sqe) {
  const auto deadline = Clock::now() + options_.timeout;
  std::unique_lock<std::mutex> lock(mu_);
  if (disconnected_) return DisconnectedStatus();
  SubmitEntry s = sqe;
  ROS2_ASSIGN_OR_RETURN(s.user_data, TakeBatchSlot(sqe.user_data, 0));
  ++batch_in_flight_;
  Status st = Push(lock, &s, 1, deadline);
  if (!st.ok()) {
    ReleaseBatchSlot(FindBatchSlot(s.user_data));
    --batch_in_flight_;
  }
  return st;
}

Result<uint64_t> HostSession::TakeBatchSlot(uint64_t user_data, uint64_t args_size) {
  if (free_batch_slots_.empty()) {
    free_batch_slots_.push_back(static_cast<uint32_t>(batch_slots_.size()));
    batch_slots_.emplace_back();
  }
  const uint32_t index = free_batch_slots_.back();  // taken once its block is there
  BatchSlot& b = batch_slots_[index];
  if (args_size > 0) {
    if (args_size <= kSmallBlock) {
      if (!b.block) {
        ROS2_ASSIGN_OR_RETURN(b.block, Allocate(kSmallBlock));
      }
      b.args = b.block;
    } else {
      ROS2_ASSIGN_OR_RETURN(b.args, Allocate(args_size));
    }
  }
  free_batch_slots_.pop_back();
  b.user_data = user_data;
  b.live = true;
  return kBatchToken | (uint64_t{b.generation & 0x7fffffffu} << 32) | index;
}

HostSession::BatchSlot* HostSession::FindBatchSlot(uint64_t token) {
  if ((token & kBatchToken) == 0) return nullptr;
  const auto index = static_cast<uint32_t>(token);
  if (index >= batch_slots_.size()) return nullptr;
  BatchSlot& b = batch_slots_[index];
  if (!b.live || (b.generation & 0x7fffffffu) != ((token >> 32) & 0x7fffffffu)) return nullptr;
  return &b;
}

void HostSession::ReleaseBatchSlot(BatchSlot* b) {
  if (b == nullptr) return;
  b->live = false;
  if (b->args.data != b->block.data) Free(b->args);  // a larger name's own block
  b->args = ArenaBuffer{};
  ++b->generation;
  free_batch_slots_.push_back(static_cast<uint32_t>(b - batch_slots_.data()));
}

void HostSession::ForceSubmissionTail(uint32_t tail) {
  std::lock_guard<std::mutex> lock(mu_);
  header()->sq_tail.value.store(tail, std::memory_order_release);
  uint64_t one = 1;
  (void)!::write(sq_eventfd_, &one, sizeof one);
}

Result<size_t> HostSession::Reap(std::span<IoCompletion> out, size_t min_completions,
                                 std::chrono::microseconds timeout) {
  const auto deadline = timeout.count() > 0 ? Clock::now() + timeout : kNoWait;
  std::unique_lock<std::mutex> lock(mu_);
  min_completions = std::min(min_completions, out.size());
  Status st = WaitFor(
      lock, [&] { return ready_.size() >= std::min(min_completions, batch_in_flight_); }, deadline);
  size_t n = 0;
  while (n < out.size() && !ready_.empty()) {
    out[n++] = std::move(ready_.front());
    ready_.pop_front();
    --batch_in_flight_;
  }
  if (n == 0 && !st.ok()) return st;
  return n;
}

size_t HostSession::batch_in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return batch_in_flight_;
}

}  // namespace ros2::agent
