// One-sided bulk on the libfabric worker (docs/transport.md, "Remote
// memory"): the client's registrations of its bulk buffers, and the server's
// fi_read / fi_write against them.
//
// What the server trusts: nothing in the descriptor but what the provider
// checks. It reads or writes only at the fi_addr of the connection the
// request arrived on (bound to the peer by the hello, worker.cc), so a key
// names memory of that peer's domain or nothing: another client's key fails
// at the peer, which has no such registration. The range is the provider's
// to check against the registration; the server bounds the length
// (kMaxRmaBulk, and Pull/Push against the request's own sizes) and refuses a
// range that wraps. Its own memory is never registered: with mr_mode 0 the
// provider needs no local registration, so nothing of the server can be
// named by any key.
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/random.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "common/log.h"
#include "transport/ofi/fabric_library.h"
#include "transport/ofi/worker.h"

namespace ros2::transport::ofi {
namespace {

using State = IncomingRequest::State;

uint64_t GetLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

const char* Direction(const wire::BulkDescriptor& d) {
  return d.direction == wire::BulkDirection::kOut ? "out" : "in";
}

}  // namespace

OfiRegistration::~OfiRegistration() {
  if (mr != nullptr) fi_close(&mr->fid);
}

// ---- Client: registrations -------------------------------------------------------
// What may be cached. A registration names a virtual range, and a provider
// that pins pages (verbs) keeps the pages the range had when it was made: a
// buffer the application frees, and a new mapping at the same address, would
// leave a cached registration pinning the old pages (the server's fi_read /
// fi_write then moves stale bytes), and on any provider its key would keep
// granting the server access to whatever memory is mapped there later. The
// worker cannot see an munmap, so it caches only what it can prove stable:
// memory the transport allocated (Context::AllocateMemory), whose region the
// cache entry holds, so the mapping outlives every key that names it. The
// entry is dropped once the application no longer holds the region
// (SweepRegistrations). Any other buffer is registered for its call alone and
// deregistered when the call ends; a provider that pins caches those
// registrations itself, invalidated by its memory monitor (libfabric's MR
// cache, FI_MR_CACHE_MONITOR), and tcp;ofi_rxm pins nothing.
Result<std::shared_ptr<OfiRegistration>> OfiWorker::NewRegistration(const void* p, uint64_t n, uint64_t access) {
  Fabric& fabric = *context_.ofi();
  if (!fabric.rma_target()) {
    return Status::PermissionDenied(
        fmt::format("transport ofi: worker '{}' registers no memory for remote access (remote_rma_target off)", name_));
  }
  auto reg = std::make_shared<OfiRegistration>();
  // A random key (the provider takes the caller's key unless it has
  // FI_MR_PROV_KEY): a peer that never saw it cannot guess it.
  for (int attempt = 0;; ++attempt) {
    if (random_keys_left_ == 0) {  // one getrandom for many registrations
      if (getrandom(random_keys_.data(), sizeof(random_keys_), 0) != static_cast<ssize_t>(sizeof(random_keys_))) {
        return Status::FromErrno(errno, "transport ofi: getrandom");
      }
      random_keys_left_ = random_keys_.size();
    }
    const uint64_t key = random_keys_[--random_keys_left_];
    const int rc = fi_mr_reg(domain_, p, n, access, 0, key, 0, &reg->mr, nullptr);
    if (rc == 0) break;
    reg->mr = nullptr;
    if (rc == -FI_ENOKEY && attempt < 4) continue;  // the key is taken: another
    return Status::IOError(
        fmt::format("transport ofi: worker '{}': fi_mr_reg of {} bytes: {} ({})", name_, n, Fi().strerror(-rc), rc));
  }
  if ((fabric.info()->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0) {
    int rc = fi_mr_bind(reg->mr, &ep_->fid, 0);
    if (rc == 0) rc = fi_mr_enable(reg->mr);
    if (rc != 0) return Status::IOError(fmt::format("transport ofi: binding a registration: {}", Fi().strerror(-rc)));
  }
  reg->base = static_cast<const std::byte*>(p);
  reg->length = n;
  reg->access = access;
  reg->key = fi_mr_key(reg->mr);
  ++registrations_made_;
  return reg;
}

Result<std::shared_ptr<OfiRegistration>> OfiWorker::RegisterBulk(const void* p, uint64_t n,
                                                                 const std::shared_ptr<const MemoryRegion>& region,
                                                                 uint64_t access) {
  if (!region || !region->ucx_allocated() || !region->Contains(p, n)) return NewRegistration(p, n, access);
  SweepRegistrations();
  ++registration_clock_;
  for (const auto& r : registrations_) {
    if (r->region == region && (r->access & access) == access) {
      r->last_use = registration_clock_;
      return r;
    }
  }
  ROS2_ASSIGN_OR_RETURN(auto reg, NewRegistration(region->base(), region->length(), access));
  reg->region = region;
  reg->last_use = registration_clock_;
  const size_t cap = std::max<uint32_t>(1, options().registration_cache_entries);
  if (registrations_.size() >= cap) {
    // Dropped from the cache; a call that names it keeps it until it ends.
    auto oldest = std::min_element(registrations_.begin(), registrations_.end(),
                                   [](const auto& a, const auto& c) { return a->last_use < c->last_use; });
    registrations_.erase(oldest);
  }
  registrations_.push_back(reg);
  return reg;
}

void OfiWorker::SweepRegistrations() {
  // A region held only by the cache's own entries (one per access; calls in
  // flight hold their registration, which holds the region): the
  // application let it go.
  std::vector<const MemoryRegion*> released;
  for (const auto& r : registrations_) {
    const auto entries = std::count_if(registrations_.begin(), registrations_.end(),
                                       [&](const auto& e) { return e->region == r->region; });
    if (r->region.use_count() <= entries) released.push_back(r->region.get());
  }
  if (released.empty()) return;
  std::erase_if(registrations_, [&](const auto& r) {
    return std::find(released.begin(), released.end(), r->region.get()) != released.end();
  });
}

void OfiWorker::DescribeRma(const OfiRegistration& reg, const void* p, wire::BulkDescriptor& d,
                            uint8_t* key_out) const {
  d.transfer = wire::BulkTransfer::kRma;
  d.remote_addr = reinterpret_cast<uint64_t>(p);
  const uint64_t base = reinterpret_cast<uint64_t>(reg.base);
  for (size_t i = 0; i < 8; ++i) {
    key_out[i] = static_cast<uint8_t>(reg.key >> (8 * i));
    key_out[8 + i] = static_cast<uint8_t>(base >> (8 * i));
  }
  d.rkey = std::span<const uint8_t>(key_out, kRmaKeySize);
}

// ---- Server: transfers ------------------------------------------------------------
Status OfiWorker::CheckRmaDescriptor(const OfiConnection& conn, uint64_t request_id,
                                     const wire::BulkDescriptor& d) const {
  const std::string where =
      fmt::format("transport: worker '{}' refused request {:#x} from {}: bulk-{} of {} bytes by memory key", name_,
                  request_id, conn.peer_name, Direction(d), d.length);
  if (!conn.rma) {
    return Status::PermissionDenied(
        fmt::format("{}: this connection moves bulk by tagged messages (provider {} takes no client keys)", where,
                    context_.ofi()->provider()));
  }
  if (d.rkey.size() != kRmaKeySize) {
    return Status::InvalidArgument(
        fmt::format("{}: a key of {} bytes ({} expected)", where, d.rkey.size(), kRmaKeySize));
  }
  const uint64_t key = GetLe64(d.rkey.data());
  if (d.length <= options().inline_limit || d.length > kMaxRmaBulk) {
    return Status::InvalidArgument(
        fmt::format("{} {:#x}: the length must be above the inline limit ({}) and at most "
                    "{} bytes",
                    where, key, options().inline_limit, kMaxRmaBulk));
  }
  if (d.remote_addr > UINT64_MAX - d.length) {
    return Status::InvalidArgument(
        fmt::format("{} {:#x}: the range at {:#x} wraps around the address space", where, key, d.remote_addr));
  }
  const uint64_t start = GetLe64(d.rkey.data() + 8);
  if (d.remote_addr < start) {
    return Status::InvalidArgument(fmt::format("{} {:#x}: the buffer at {:#x} starts before its registration at {:#x}",
                                               where, key, d.remote_addr, start));
  }
  return Status::Ok();
}

struct OfiWorker::RmaTransfer {
  State* s = nullptr;
  bool write = false;
  std::byte* local = nullptr;
  uint64_t length = 0;
  uint64_t remote = 0;   // as the provider's keys name it
  uint64_t address = 0;  // the descriptor's
  uint64_t key = 0;
  fi_addr_t addr = FI_ADDR_UNSPEC;
  uint64_t issued = 0;
  uint32_t in_flight = 0;
  Status failure;
  Completion done;
};

Status OfiWorker::StartRma(State* s, const wire::BulkDescriptor& d, std::byte* local, uint64_t len, bool write,
                           Completion done) {
  auto* conn = static_cast<OfiConnection*>(s->conn.get());
  if (conn == nullptr || !conn->status.ok()) {
    return conn == nullptr ? Status::Disconnected("transport ofi: the connection is gone") : conn->status;
  }
  ROS2_RETURN_IF_ERROR(CheckRmaDescriptor(*conn, s->msg.request_id, d));
  auto t = std::make_shared<RmaTransfer>();
  t->s = s;
  t->write = write;
  t->local = local;
  t->length = len;
  t->key = GetLe64(d.rkey.data());
  t->address = d.remote_addr;
  // The target address as the provider's keys name it (CheckRmaDescriptor
  // saw that the buffer does not start before its registration).
  const bool virt = (context_.ofi()->info()->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
  t->remote = virt ? d.remote_addr : d.remote_addr - GetLe64(d.rkey.data() + 8);
  t->addr = conn->addr;  // the connection's own peer, never an address the request names
  t->done = std::move(done);
  ++s->refs;  // released when the transfer finishes
  if (write) writes_in_flight_[s] = HeldReply{};
  IssueRma(t);
  return Status::Ok();
}

void OfiWorker::IssueRma(const std::shared_ptr<RmaTransfer>& t) {
  const uint64_t chunk = std::max<uint64_t>(options().bulk_chunk_size, 4096);
  const uint32_t window = std::max<uint32_t>(options().bulk_chunks_in_flight, 1);
  const Clock::time_point retry_start = Clock::now();
  while (t->failure.ok() && t->issued < t->length && t->in_flight < window) {
    const uint64_t n = std::min(chunk, t->length - t->issued);
    auto* op = new Op();
    op->kind = Op::Kind::kBulkSend;
    op->done = [this, t](const Status& st, uint64_t) {
      --t->in_flight;
      if (!st.ok() && t->failure.ok()) {
        t->failure = Status::IOError(fmt::format(
            "transport ofi: request {:#x}: fi_{} of {} bytes at {:#x} with the client's key {:#x} failed: {}",
            t->s->msg.request_id, t->write ? "write" : "read", t->length, t->address, t->key, st.message()));
      }
      IssueRma(t);
    };
    std::byte* at = t->local + t->issued;
    const uint64_t remote = t->remote + t->issued;
    ssize_t rc;
    if (t->write) {
      // Delivery complete: the completion says the bytes are in the client's
      // buffer (so the reply may follow), or that its provider refused the
      // key or the range (tcp's own completion would only say they left).
      iovec iov{at, n};
      fi_rma_iov rma{remote, n, t->key};
      fi_msg_rma msg{};
      msg.msg_iov = &iov;
      msg.iov_count = 1;
      msg.addr = t->addr;
      msg.rma_iov = &rma;
      msg.rma_iov_count = 1;
      msg.context = &op->ctx;
      rc = fi_writemsg(ep_, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
    } else {
      rc = fi_read(ep_, at, n, nullptr, t->addr, remote, t->key, &op->ctx);
    }
    if (rc == 0) {
      ++ops_in_flight_;
      ++transfers_in_flight_;
      ++t->in_flight;
      t->issued += n;
      continue;
    }
    delete op;
    if (rc == -FI_EAGAIN && t->in_flight > 0) break;  // a completion issues the rest
    if (rc == -FI_EAGAIN && Retry(retry_start)) continue;
    t->failure = Status::IOError(fmt::format("transport ofi: request {:#x}: fi_{} with the client's key {:#x}: {} ({})",
                                             t->s->msg.request_id, t->write ? "write" : "read", t->key,
                                             Fi().strerror(static_cast<int>(-rc)), rc));
  }
  if (t->in_flight > 0 || (t->failure.ok() && t->issued < t->length)) return;
  // Finished: every chunk completed, or a failure and nothing left in flight.
  State* s = t->s;
  if (t->failure.ok()) {
    stats_.bulk_rma_bytes += t->length;
  } else {
    ROS2_LOG_DEBUG("transport ofi: worker '{}': {}", name_, t->failure.ToString());
    if (t->write) s->pushed_bytes = 0;
  }
  HeldReply held;
  if (t->write) {
    if (auto it = writes_in_flight_.find(s); it != writes_in_flight_.end()) {
      held = std::move(it->second);
      writes_in_flight_.erase(it);
    }
  }
  if (!t->failure.ok()) rma_failed_.insert(s);
  Completion done = std::move(t->done);
  if (done) done(t->failure);
  if (held.given) {
    // The handler replied before the bytes landed; a failed write turns the
    // reply into the failure.
    if (t->failure.ok()) {
      SendReply(s, held.status, held.payload);
    } else {
      SendReply(s, t->failure, {});
    }
  }
  rma_failed_.erase(s);
  IncomingRequest drop(s);  // balances the reference StartRma took
  --s->refs;
}

// The provider closes a connection whose peer refused a key (tcp;ofi_rxm),
// and fails what was queued on it: the reply naming the refusal goes again
// once the provider has let go of the old connection and connects anew.
void OfiWorker::SendAgain(Clock::time_point now) {
  constexpr int kAttempts = 5;
  auto due = std::move(resends_);
  resends_.clear();
  for (Resend& r : due) {
    OfiConnection* conn = FindConnection(r.connection);
    if (conn == nullptr) continue;
    if (now < r.not_before) {
      resends_.push_back(std::move(r));
      continue;
    }
    const uint64_t id = r.connection;
    const int attempt = r.attempts + 1;
    auto copy = std::make_shared<MessageBytes>(r.bytes);
    auto failed = [this, id, attempt, copy](const Status& st, uint64_t) {
      if (st.ok() || st.code() == Status::Code::kCancelled) return;
      if (attempt < kAttempts) {
        resends_.push_back(
            Resend{id, std::move(*copy), attempt, Clock::now() + std::chrono::milliseconds(2 * attempt)});
        return;
      }
      deferred_failures_.emplace_back(
          id, Status::Disconnected(fmt::format("transport ofi: send failed: {}", st.message())));
    };
    if (Status st = SendBytes(conn->addr, std::move(r.bytes), std::move(failed)); !st.ok()) {
      deferred_failures_.emplace_back(id, Status::Disconnected(fmt::format("transport ofi: {}", st.message())));
    }
  }
}

}  // namespace ros2::transport::ofi
