// The libfabric worker: endpoint, address vector and completion queue;
// posted receives, sends, completions, progress and sleeping.
#include "transport/ofi/worker.h"

#include <poll.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <mutex>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "common/log.h"
#include "transport/ofi/fabric_library.h"
#include "transport/ofi/frame_bytes.h"
#include "transport/spin_wait.h"

namespace ros2::transport::ofi {
namespace {

// libfabric's shm provider names each endpoint's region in /dev/shm after the
// process id ("<pid>:<n>:<m>") and refuses (EBUSY) to make one that exists. A
// process killed with -9 leaves its regions behind, so a later process given
// the same pid could not open an shm endpoint. No live process but this one
// has this pid: before its first shm endpoint, a process removes the regions
// named after its pid (only ever left by a dead one).
void RemoveRegionsOfAPreviousOwnerOfThisPid() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string prefix = std::to_string(::getpid()) + ":";
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(prefix, 0) != 0) continue;
      std::filesystem::remove(entry.path(), ec);
      ROS2_LOG_DEBUG("transport ofi: removed /dev/shm/{}, left by a dead process with this pid", name);
    }
  });
}

}  // namespace

Result<std::unique_ptr<Worker>> CreateWorker(Context& context, std::string_view name) {
  auto w = std::make_unique<OfiWorker>(context, std::string(name));
  ROS2_RETURN_IF_ERROR(w->Init());
  return std::unique_ptr<Worker>(std::move(w));
}

OfiWorker::OfiWorker(Context& context, std::string name) : context_(context), name_(std::move(name)) {}

Status OfiWorker::Init() {
  Fabric& fabric = *context_.ofi();
  const std::string where = fmt::format("worker '{}'", name_);
  const char* provider = fabric.info()->fabric_attr->prov_name;
  if (provider != nullptr && std::string_view(provider) == "shm") RemoveRegionsOfAPreviousOwnerOfThisPid();
  int rc = fi_domain(fabric.fabric(), fabric.info(), &domain_, nullptr);
  if (rc != 0) return FiStatus(where + ": fi_domain", rc);
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  rc = fi_av_open(domain_, &av_attr, &av_, nullptr);
  if (rc != 0) return FiStatus(where + ": fi_av_open", rc);
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.wait_obj = FI_WAIT_FD;
  cq_attr.size = 4096;
  rc = fi_cq_open(domain_, &cq_attr, &cq_, nullptr);
  if (rc == -FI_ENOSYS) {
    // No wait fd (libfabric 1.17's shm): poll, and nap between polls when
    // idle (NextDeadline bounds each sleep by the nap).
    cq_attr.wait_obj = FI_WAIT_NONE;
    rc = fi_cq_open(domain_, &cq_attr, &cq_, nullptr);
    cq_fd_ = -1;
    poll_only_ = true;
  }
  if (rc != 0) return FiStatus(where + ": fi_cq_open", rc);
  rc = fi_endpoint(domain_, fabric.info(), &ep_, nullptr);
  if (rc != 0) return FiStatus(where + ": fi_endpoint", rc);
  if ((rc = fi_ep_bind(ep_, &av_->fid, 0)) != 0) return FiStatus(where + ": bind av", rc);
  if ((rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV)) != 0) return FiStatus(where + ": bind cq", rc);
  if ((rc = fi_enable(ep_)) != 0) return FiStatus(where + ": fi_enable", rc);
  if (!poll_only_ && (rc = fi_control(&cq_->fid, FI_GETWAIT, &cq_fd_)) != 0) {
    return FiStatus(where + ": FI_GETWAIT", rc);
  }

  std::vector<uint8_t> name(256);
  size_t len = name.size();
  rc = fi_getname(&ep_->fid, name.data(), &len);
  if (rc == -FI_ETOOSMALL) {
    name.resize(len);
    rc = fi_getname(&ep_->fid, name.data(), &len);
  }
  if (rc != 0) return FiStatus(where + ": fi_getname", rc);
  name.resize(len);
  if (poll_only_ || fabric.kind() == TransportKind::kShm) ROS2_RETURN_IF_ERROR(OpenDoor(name));
  std::vector<uint8_t> inner(kAddressTag, kAddressTag + sizeof(kAddressTag));
  inner.insert(inner.end(), name.begin(), name.end());
  boot_id_ = wire::LocalHostId();
  wire::WorkerAddress a;
  a.boot_id = boot_id_;
  a.pid = static_cast<int32_t>(getpid());
  a.ucx_address = inner;
  address_.resize(wire::EncodedAddressSize(a));
  ROS2_RETURN_IF_ERROR(wire::EncodeAddress(a, address_).status());

  signal_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (signal_fd_ < 0 || epoll_fd_ < 0) return Status::FromErrno(errno, where + ": eventfd/epoll");
  for (int fd : {cq_fd_, signal_fd_}) {
    if (fd < 0) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return Status::FromErrno(errno, where + ": epoll_ctl");
  }
  recv_buffers_.resize(kRecvBuffers);
  recv_ops_.resize(kRecvBuffers);
  for (size_t i = 0; i < kRecvBuffers; ++i) {
    recv_buffers_[i].resize(kRecvSize);
    recv_ops_[i].kind = Op::Kind::kRecv;
    recv_ops_[i].index = i;
    PostRecv(i);
  }
  next_housekeeping_ = Clock::now();
  return Status::Ok();
}

OfiWorker::~OfiWorker() {
  in_destructor_ = true;
  std::vector<std::shared_ptr<OfiConnection>> conns;
  for (auto& [id, conn] : connections_) conns.push_back(conn);
  for (auto& conn : conns)
    FailConnection(conn->local_id, Status::Cancelled("transport: worker destroyed"), false, true);
  for (auto& conn : conns) conn->detached = true;
  for (uint32_t slot = 0; slot < calls_.size(); ++slot) {
    if (calls_[slot].done) CompleteCall(slot, Status::Cancelled("transport: worker destroyed"), {}, 0);
  }
  // Let the byes and cancellations leave (bounded).
  const auto end = Clock::now() + std::chrono::milliseconds(100);
  while (ops_in_flight_ > 0 && Clock::now() < end) {
    if (queued_sends_ > 0) FlushSendQueues();
    DrainCompletions();
  }
  for (auto& [to, queue] : send_queues_) {
    for (Op* op : queue) delete op;  // never posted
  }
  for (Op* op : op_pool_) delete op;
  op_pool_.clear();
  registrations_.clear();  // before the endpoint and domain they belong to
  if (ep_ != nullptr) fi_close(&ep_->fid);
  if (av_ != nullptr) fi_close(&av_->fid);
  if (cq_ != nullptr) fi_close(&cq_->fid);
  if (domain_ != nullptr) fi_close(&domain_->fid);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (signal_fd_ >= 0) close(signal_fd_);
  if (door_fd_ >= 0) close(door_fd_);
  // Ops still in flight were owned by the provider's queues; with the
  // endpoint closed they never complete.
}

void OfiWorker::PostRecv(size_t index) {
  Op& op = recv_ops_[index];
  op.ctx = fi_context{};
  for (;;) {
    ssize_t rc = fi_recv(ep_, recv_buffers_[index].data(), kRecvSize, nullptr, FI_ADDR_UNSPEC, &op.ctx);
    if (rc == 0) return;
    if (rc != -FI_EAGAIN) {
      ROS2_LOG_ERROR("transport ofi: worker '{}': fi_recv: {}", name_, Fi().strerror(static_cast<int>(-rc)));
      return;
    }
    fi_cq_read(cq_, nullptr, 0);  // progress
  }
}

bool OfiWorker::Retry(Clock::time_point start) {
  // EAGAIN: the provider's queues are full, or it cannot reach the peer
  // (rxm reconnecting to a dead one). Progress and try again, for a while.
  DrainCompletions();
  return Clock::now() - start < send_patience_;
}

Result<Op*> OfiWorker::RecvTagged(fi_addr_t from, uint64_t tag, std::span<std::byte> dst,
                                  std::function<void(const Status&, uint64_t)> done) {
  const Clock::time_point retry_start = Clock::now();
  Op* op = NewOp(Op::Kind::kBulkRecv);
  op->done = std::move(done);
  for (;;) {
    ssize_t rc = fi_trecv(ep_, dst.data(), dst.size(), nullptr, from, tag, 0, &op->ctx);
    if (rc == 0) break;
    if (rc != -FI_EAGAIN || !Retry(retry_start)) {
      FreeOp(op);
      return FiStatus("fi_trecv", rc);
    }
  }
  ++ops_in_flight_;
  ++transfers_in_flight_;
  return op;
}

int OfiWorker::DrainCompletions() {
  fi_cq_tagged_entry entries[16];
  fi_addr_t from[16];
  int handled = 0;
  for (;;) {
    ssize_t n = fi_cq_readfrom(cq_, entries, 16, from);
    if (n == -FI_EAGAIN) break;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_, &err, 0) <= 0) break;
      auto* op = static_cast<Op*>(err.op_context);
      const Status st = err.err == FI_ECANCELED ? Status::Cancelled("transport ofi: cancelled")
                                                : Status::IOError(fmt::format("transport ofi: {} (provider: {})",
                                                                              Fi().strerror(err.err), err.prov_errno));
      if (op != nullptr) OnCompletion(op, st, err.len, FI_ADDR_NOTAVAIL);
      ++handled;
      continue;
    }
    if (n < 0) {
      ROS2_LOG_WARN("transport ofi: worker '{}': fi_cq_readfrom: {}", name_, Fi().strerror(static_cast<int>(-n)));
      break;
    }
    for (ssize_t i = 0; i < n; ++i) {
      OnCompletion(static_cast<Op*>(entries[i].op_context), Status::Ok(), entries[i].len, from[i]);
    }
    handled += static_cast<int>(n);
    if (n < 16) break;
  }
  return handled;
}

void OfiWorker::OnCompletion(Op* op, const Status& st, uint64_t len, fi_addr_t from) {
  if (op->kind == Op::Kind::kRecv) {
    const size_t index = op->index;
    if (st.ok()) {
      OnMessage(std::span<const uint8_t>(recv_buffers_[index].data(), len), from);
    } else if (!in_destructor_ && st.code() != Status::Code::kCancelled) {
      ++stats_.malformed_messages;  // truncated: longer than a posted receive
    }
    if (!in_destructor_ || st.ok()) PostRecv(index);
    return;
  }
  --ops_in_flight_;
  if (op->kind != Op::Kind::kSend) --transfers_in_flight_;
  struct Release {
    OfiWorker* w;
    Op* op;
    ~Release() { w->FreeOp(op); }
  } release{this, op};
  if (op->kind == Op::Kind::kLargeRecv) {
    if (st.ok() && len == op->bytes.size()) {
      OnWireMessage(op->bytes, op->from);
    } else {
      ++stats_.malformed_messages;
    }
    return;
  }
  if (op->fail_connection != 0 && !st.ok() && st.code() != Status::Code::kCancelled) {
    const uint64_t id = op->fail_connection;
    if (op->resend_once && !op->bytes.empty()) {
      // The provider closed the connection under this message (tcp;ofi_rxm
      // does when the peer refused a memory key): it goes once more, over
      // the connection the provider makes anew (rma.cc).
      resends_.push_back(Resend{id, std::move(op->bytes), 0, Clock::now() + std::chrono::milliseconds(1)});
      return;
    }
    deferred_failures_.emplace_back(id,
                                    Status::Disconnected(fmt::format("transport ofi: send failed: {}", st.message())));
  }
  if (op->done) op->done(st, len);
}

void OfiWorker::OnMessage(std::span<const uint8_t> bytes, fi_addr_t from) {
  if (bytes.size() == kFrameSize && GetLe32(bytes.data()) == kKeepaliveMagic) {
    for (auto& [id, conn] : connections_) conn->heard += conn->addr == from;
    return;  // it only had to arrive
  }
  if (bytes.size() == kFrameSize && GetLe32(bytes.data()) == kFrameMagic) {
    // A large message follows, tagged, from the same peer. Only a known peer
    // (a connection's address) may send one: an unknown source could make
    // this worker hold receives of up to kMaxLarge bytes.
    const uint32_t length = GetLe32(bytes.data() + 4);
    const uint64_t tag = GetLe64(bytes.data() + 8);
    bool known = false;
    for (const auto& [id, conn] : connections_) known = known || conn->addr == from;
    if (!known || from == FI_ADDR_NOTAVAIL || length <= kRecvSize || length > kMaxLarge ||
        (tag & kTagKindMask) != kTagLarge) {
      ++stats_.malformed_messages;
      return;
    }
    Op* op = NewOp(Op::Kind::kLargeRecv);
    op->bytes.resize(length);
    op->from = from;
    for (;;) {
      ssize_t rc = fi_trecv(ep_, op->bytes.data(), length, nullptr, from, tag, 0, &op->ctx);
      if (rc == 0) break;
      if (rc != -FI_EAGAIN) {
        FreeOp(op);
        ++stats_.malformed_messages;
        return;
      }
      fi_cq_read(cq_, nullptr, 0);
    }
    ++ops_in_flight_;
    ++transfers_in_flight_;
    return;
  }
  OnWireMessage(bytes, from);
}

void OfiWorker::OnWireMessage(std::span<const uint8_t> bytes, fi_addr_t from) {
  wire::Message msg;
  if (Status st = wire::Decode(bytes, msg); !st.ok()) {
    ++stats_.malformed_messages;
    const uint8_t v = wire::PeekVersion(bytes);
    if (v != 0 && v != wire::kVersion) ++stats_.wire_version_mismatches;
    RefuseMalformed(bytes, from, st);
    return;
  }
  if (msg.kind == wire::Kind::kHello) return HandleHello(msg, from);
  if (msg.kind == wire::Kind::kHelloAck) return HandleHelloAck(msg, from);
  OfiConnection* conn = FindConnection(msg.connection_id);
  if (conn == nullptr || from == FI_ADDR_NOTAVAIL || conn->addr != from) {
    // Unknown, or naming a connection of another peer: refused. A request
    // is answered on the sender's own connection when it has one.
    ++stats_.malformed_messages;
    if (conn != nullptr) ++stats_.misdirected_messages;
    if (msg.kind == wire::Kind::kRequest && from != FI_ADDR_NOTAVAIL) {
      for (auto& [id, c] : connections_) {
        if (c->addr == from && !c->client_side) {
          ReplyError(*c, msg.request_id,
                     Status::PermissionDenied(fmt::format(
                         "transport: worker '{}' refused a request naming connection {:#x}, not this peer's", name_,
                         msg.connection_id)));
          break;
        }
      }
    }
    return;
  }
  ++conn->heard;
  if (Status st = CheckIntegrity(*conn, msg, bytes); !st.ok()) {
    ++stats_.integrity_refused;
    ++stats_.malformed_messages;
    const std::string why = fmt::format("transport: worker '{}' refused a message on connection {:#x} ({}): {}", name_,
                                        conn->local_id, conn->peer_name, st.message());
    ROS2_LOG_WARN("{}", why);
    if (conn->client_side) {
      deferred_failures_.emplace_back(conn->local_id, Status::Disconnected(why));
    } else if (msg.kind == wire::Kind::kRequest) {
      ReplyError(*conn, msg.request_id, Status::PermissionDenied(why));
    }
    return;
  }
  switch (msg.kind) {
    case wire::Kind::kRequest:
      if (conn->client_side) break;
      return HandleRequest(*conn, msg, bytes);
    case wire::Kind::kReply:
      if (!conn->client_side) break;
      return HandleReply(*conn, msg);
    case wire::Kind::kBatch: return HandleBatch(*conn, msg);
    case wire::Kind::kBye: {
      const std::string why = msg.payload.empty()
                                  ? std::string("closed by the peer")
                                  : std::string(reinterpret_cast<const char*>(msg.payload.data()), msg.payload.size());
      deferred_failures_.emplace_back(conn->local_id,
                                      Status::Disconnected(fmt::format("transport: {}: {}", conn->peer_name, why)));
      return;
    }
    default: break;
  }
  ++stats_.malformed_messages;  // a kind this side of the connection never receives
}

OfiConnection* OfiWorker::FindConnection(uint64_t id) {
  auto it = connections_.find(id);
  return it == connections_.end() ? nullptr : it->second.get();
}

void OfiWorker::FailConnection(uint64_t id, const Status& why, bool count_as_lost, bool send_bye) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  std::shared_ptr<OfiConnection> conn = it->second;
  connections_.erase(it);
  if (conn->served_slot >= 0) {
    served_[conn->served_slot].fetch_sub(1, std::memory_order_relaxed);
    conn->served_slot = -1;
  }
  if (send_bye && conn->remote_id != 0 && conn->status.ok()) {
    wire::Message bye;
    bye.kind = wire::Kind::kBye;
    bye.connection_id = conn->remote_id;
    // The reason goes with it: the peer's calls fail naming it.
    const std::string reason = why.message().substr(0, wire::kMaxStatusMessage);
    bye.payload = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(reason.data()), reason.size());
    const auto patience = send_patience_;
    send_patience_ = std::chrono::milliseconds(5);  // best effort: the peer may be gone
    (void)SendMessage(*conn, bye);
    send_patience_ = patience;
  }
  // Free request states remember the connection they last served (server.cc);
  // let this one go.
  for (auto& state : state_pool_) {
    if (state->conn == conn) state->conn.reset();
  }
  if (conn->status.ok()) conn->status = why;
  conn->batch_bytes.clear();
  conn->batch_count = 0;
  for (uint32_t slot = 0; slot < calls_.size(); ++slot) {
    OfiCall& c = calls_[slot];
    if (c.done && !c.finished && c.connection_id == id) CompleteCall(slot, why, {}, 0);
  }
  if (count_as_lost) ++stats_.peers_lost;
  if (peer_lost_handler_ && !in_destructor_) peer_lost_handler_(id, why);
}

int OfiWorker::ProgressNoClock() {
  if (!pending_batches_.empty()) FlushPendingBatches();
  if (queued_sends_ > 0) FlushSendQueues();
  ++progress_depth_;
  int n = DrainCompletions();
  --progress_depth_;
  // Replies the handlers gave inside this pass leave now, not a pass later.
  if (!pending_batches_.empty()) FlushPendingBatches();
  // Naps grow only while no bulk transfer is in flight: a segmented shm
  // transfer (tagged bulk, a message above 64 KiB) moves a piece each time
  // both sides progress.
  if (poll_only_) nap_ = n > 0 || transfers_in_flight_ > 0 ? kMinNap : std::min(nap_ * 2, kMaxNap);
  if (!deferred_failures_.empty()) {
    auto failures = std::move(deferred_failures_);
    deferred_failures_.clear();
    for (auto& [id, why] : failures) FailConnection(id, why, true, false);
    n += static_cast<int>(failures.size());
  }
  return n;
}

int OfiWorker::Progress() {
  const int n = ProgressNoClock();
  MaybeHousekeeping(Clock::now());
  return n;
}

void OfiWorker::MaybeHousekeeping(Clock::time_point now) {
  if (now >= next_housekeeping_) Housekeeping(now);
}

void OfiWorker::Housekeeping(Clock::time_point now) {
  next_housekeeping_ = now + std::chrono::milliseconds(1);
  ExpireDeadlines(now);
  ExpireUnauthenticated(now);
  if (!resends_.empty()) SendAgain(now);
  if (!registrations_.empty()) SweepRegistrations();
  if (door_fd_ >= 0) ReadDoor();
  if (now >= next_keepalive_) Keepalive(now);
}

bool OfiWorker::InsertAddress(std::span<const uint8_t> name, fi_addr_t* out) {
  std::vector<uint8_t> copy(name.begin(), name.end());
  copy.push_back(0);
  auto same = std::find(av_names_.begin(), av_names_.end(), copy);
  const uint8_t* key = same != av_names_.end() ? same->data() : av_names_.emplace_back(std::move(copy)).data();
  return fi_av_insert(av_, key, 1, out, 0, nullptr) == 1;
}

OfiConnection::~OfiConnection() {
  if (pidfd >= 0) close(pidfd);
}

void OfiWorker::WatchPeer(OfiConnection& conn) {
  if (!conn.info.same_host || conn.info.peer_pid <= 0) {
    conn.info.failure_detection = FailureDetection::kUcxPeer;  // keepalives (no UCX here: the ofi equivalent)
    return;
  }
  // The pid is the peer's claim; a false one only ends this peer's own
  // connection when that other process exits.
  conn.pidfd = static_cast<int>(syscall(SYS_pidfd_open, conn.info.peer_pid, 0));
  conn.info.failure_detection = conn.pidfd >= 0 ? FailureDetection::kPidWatch : FailureDetection::kUcxPeer;
}

// Once per keepalive_interval: a same-host peer whose pidfd fired has exited;
// a connection that heard nothing from its peer since the last tick sends a
// keepalive frame (the peer drops it), so a peer that is gone fails the send
// (tcp;ofi_rxm reports the broken connection on the completion) and the
// connection with it, even when nothing else is sent to it.
void OfiWorker::Keepalive(Clock::time_point now) {
  const auto interval = options().keepalive_interval;
  next_keepalive_ = now + (interval.count() > 0 ? interval : std::chrono::milliseconds(2000));
  if (interval.count() <= 0) return;
  std::vector<uint64_t> idle;
  for (auto& [id, conn] : connections_) {
    if (conn->remote_id == 0 || !conn->status.ok()) continue;
    if (conn->pidfd >= 0) {
      pollfd p{conn->pidfd, POLLIN, 0};
      if (poll(&p, 1, 0) == 1) {
        deferred_failures_.emplace_back(id,
                                        Status::Disconnected(fmt::format("transport ofi: {} exited", conn->peer_name)));
      }
      continue;
    }
    if (conn->heard == conn->heard_at_tick) idle.push_back(id);
    conn->heard_at_tick = conn->heard;
  }
  for (uint64_t id : idle) {
    OfiConnection* conn = FindConnection(id);
    if (conn == nullptr) continue;
    MessageBytes frame(kFrameSize, 0);
    PutLe32(frame.data(), kKeepaliveMagic);
    auto failed = [this, id](const Status& st, uint64_t) {
      if (!st.ok() && st.code() != Status::Code::kCancelled) {
        deferred_failures_.emplace_back(
            id, Status::Disconnected(fmt::format("transport ofi: keepalive failed: {}", st.message())));
      }
    };
    const auto patience = send_patience_;
    send_patience_ = std::chrono::milliseconds(5);
    if (Status st = SendBytes(conn->addr, std::move(frame), std::move(failed)); !st.ok()) {
      deferred_failures_.emplace_back(id,
                                      Status::Disconnected(fmt::format("transport ofi: keepalive: {}", st.message())));
    }
    send_patience_ = patience;
  }
}

bool OfiWorker::PrepareSleep() {
  if (!pending_batches_.empty()) FlushPendingBatches();
  if (!deferred_failures_.empty()) return false;
  uint64_t v = 0;
  while (read(signal_fd_, &v, sizeof(v)) > 0) {
  }
  if (poll_only_) return true;
  fid* fids[1] = {&cq_->fid};
  return fi_trywait(context_.ofi()->fabric(), fids, 1) == FI_SUCCESS;
}

std::chrono::microseconds OfiWorker::NextDeadline(std::chrono::microseconds max_wait) const {
  std::chrono::microseconds wait = max_wait;
  if (!deadlines_.empty()) {
    auto until = std::chrono::duration_cast<std::chrono::microseconds>(deadlines_.top().first - Clock::now());
    wait = std::min(wait, std::max(until, std::chrono::microseconds(0)));
  }
  // Expiry checks (calls and unauthenticated connections) run every ms.
  if (live_calls_ > 0 || !connections_.empty()) wait = std::min(wait, std::chrono::microseconds(100000));
  if (poll_only_) wait = std::min(wait, nap_);
  // Queued sends go when the provider takes them: look again soon.
  if (queued_sends_ > 0) wait = std::min(wait, kMinNap);
  return wait;
}

// The UCX worker's policy (worker.cc, WorkerImpl::Wait): look before reading
// the clock, then the same spin (SpinBeforeSleep), then sleep on the queue's
// wait fd. Each poll is one
// fi_cq_readfrom, which makes tcp;ofi_rxm's progress run (one epoll_wait of
// its sockets); a sched_yield a poll would double the system calls of the
// busy window and let a peer on our CPU run only when it needs to.
int OfiWorker::Wait(std::chrono::microseconds max_wait) {
  const SpinResult spun =
      PollThenSpin([this] { return ProgressNoClock(); }, [this](Clock::time_point now) { MaybeHousekeeping(now); },
                   waits_, thread_pinned_, max_wait, options());
  if (spun.events >= 0) return spun.events;
  const Clock::time_point start = spun.start;
  if (!PrepareSleep()) return Progress();
  auto left = max_wait - std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
  left = NextDeadline(std::max(left, std::chrono::microseconds(0)));
  ++stats_.sleeps;
  if (poll_only_) {
    // No fd to sleep on: a nap (Signal() is not seen until it ends).
    std::this_thread::sleep_for(left);
    return Progress();
  }
  epoll_event ev[2];
  const timespec sleep_ts{static_cast<time_t>(left.count() / 1000000),
                          static_cast<long>(left.count() % 1000000) * 1000};
  (void)epoll_pwait2(epoll_fd_, ev, 2, &sleep_ts, nullptr);  // microsecond timeouts (deadlines, naps)
  next_housekeeping_ = Clock::time_point{};                  // a pid event or a deadline may be due
  return Progress();
}

Status OfiWorker::RunUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  if (progress_depth_ > 0 && !done()) return InsideProgress(name_, "wait");
  const Clock::time_point end = Clock::now() + timeout;
  while (!done()) {
    const Clock::time_point now = Clock::now();
    if (now >= end) {
      if (done()) break;
      return Status::TimedOut(fmt::format("transport: worker '{}': wait of {} ms expired", name_, timeout.count()));
    }
    Wait(std::chrono::duration_cast<std::chrono::microseconds>(end - now));
  }
  return Status::Ok();
}

void OfiWorker::Signal() {
  uint64_t one = 1;
  (void)write(signal_fd_, &one, sizeof(one));
}

Status OfiWorker::RegisterHandler(uint16_t opcode, RequestHandler handler) {
  if (opcode > wire::kMaxUserOpcode) {
    return Status::InvalidArgument(fmt::format("transport: opcode {:#x} is reserved", opcode));
  }
  if (handlers_.size() <= opcode) handlers_.resize(opcode + 1);
  handlers_[opcode] = std::move(handler);
  return Status::Ok();
}

ServedConnections OfiWorker::served_connections() const {
  ServedConnections s;
  s.shm = served_[0].load(std::memory_order_relaxed);
  s.tcp = served_[1].load(std::memory_order_relaxed);
  s.rdma = served_[2].load(std::memory_order_relaxed);
  return s;
}

}  // namespace ros2::transport::ofi
