// The fixture of the libfabric attack tests (ofi_attack_test.cc,
// ofi_rma_attack_test.cc): a serving ofi worker in a forked process, a raw
// libfabric peer, and the parameterised test over the providers. Included
// by those two sources only (one test binary).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "common/checksum.h"
#include "testing/subprocess.h"
#include "transport/ofi/fabric.h"
#include "transport/ofi/worker.h"
#include "transport/transport.h"
#include "transport/wire.h"

namespace ros2::transport::ofi_attack {

using namespace std::chrono_literals;
constexpr uint16_t kOpCount = 1;
// Pulls the whole bulk-out buffer and replies with the pull's status and
// the crc32c of the bytes; pushes bulk_in_capacity() bytes of payload[0]
// and replies with the push's status.
constexpr uint16_t kOpPull = 2;
constexpr uint16_t kOpPush = 3;

inline TransportOptions OfiOptions(const std::string& kind) {
  TransportOptions o;
  o.provider = Provider::kOfi;
  o.kind = ParseTransportKind(kind).value();
  o.default_timeout = 5s;
  o.connect_timeout = 5s;
  return o;
}

// A serving ofi worker in a child process (forked before it makes anything;
// a real second process, as an engine is): kOpCount counts the requests its
// handler saw and whether their connection proved `session`. Stop() has the
// child send back its counts and WorkerStats.
inline volatile sig_atomic_t g_stop = 0;

class Server {
 public:
  struct Counts {
    int handled = 0, authenticated = 0;
    WorkerStats stats;
  };
  Server(const TransportOptions& o, SessionCredential session) {
    int addr_pipe[2], stats_pipe[2];
    EXPECT_EQ(pipe(addr_pipe), 0);
    EXPECT_EQ(pipe(stats_pipe), 0);
    auto child = ros2::testing::ChildProcess::Fork([&]() -> int {
      close(addr_pipe[0]);
      close(stats_pipe[0]);
      Serve(o, session, addr_pipe[1], stats_pipe[1]);
      return 0;
    });
    EXPECT_TRUE(child.ok()) << child.status().ToString();
    if (child.ok()) child_ = std::move(*child);
    close(addr_pipe[1]);
    close(stats_pipe[1]);
    stats_fd_ = stats_pipe[0];
    uint32_t len = 0;
    if (read(addr_pipe[0], &len, sizeof(len)) == sizeof(len) && len > 0 && len < 65536) {
      address_.resize(len);
      size_t got = 0;
      while (got < len) {
        ssize_t n = read(addr_pipe[0], address_.data() + got, len - got);
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
    }
    close(addr_pipe[0]);
  }
  ~Server() {
    Stop();
    if (stats_fd_ >= 0) close(stats_fd_);
  }
  void Stop() {
    if (!child_.running()) return;
    child_.Signal(SIGUSR1);
    size_t got = 0;
    auto* p = reinterpret_cast<char*>(&counts_);
    while (got < sizeof(counts_)) {
      ssize_t n = read(stats_fd_, p + got, sizeof(counts_) - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    (void)child_.Wait(std::chrono::seconds(10));
    child_.Kill();  // reaps it, or ends one that ignored the stop
  }
  const std::vector<uint8_t>& address() const { return address_; }
  const Counts& counts() const { return counts_; }  // after Stop()

 private:
  static void Serve(TransportOptions o, SessionCredential session, int addr_fd, int stats_fd) {
    signal(SIGUSR1, [](int) { g_stop = 1; });
    o.remote_rma_target = false;  // as the engine: it only ever initiates RMA
    auto ctx = Context::Create(o);
    if (!ctx.ok()) _exit(1);
    auto worker = (*ctx)->CreateWorker("attack-target").value();
    Counts counts;
    (void)worker->RegisterHandler(kOpCount, [&](IncomingRequest r) {
      ++counts.handled;
      if (r.SessionAuthenticated(session.id)) ++counts.authenticated;
      r.Reply(Status::Ok());
    });
    (void)worker->RegisterHandler(kOpPull, [](IncomingRequest r) {
      auto buf = std::make_shared<std::vector<std::byte>>(r.bulk_out_size());
      r.Pull(*buf, [r, buf](const Status& st) mutable {
        const uint32_t crc = Crc32c(buf->data(), buf->size());
        r.Reply(st, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&crc), sizeof(crc)));
      });
    });
    (void)worker->RegisterHandler(kOpPush, [](IncomingRequest r) {
      const uint8_t fill = r.payload().empty() ? 0 : r.payload()[0];
      auto buf = std::make_shared<std::vector<std::byte>>(r.bulk_in_capacity(), std::byte{fill});
      r.Push(*buf, [r, buf](const Status& st) mutable { r.Reply(st); });
    });
    worker->SetSessionKeyLookup([session](const SessionId& id) -> Result<SessionKey> {
      if (id != session.id) return Status::NotFound("unknown session");
      return session.key;
    });
    const auto a = worker->address();
    const uint32_t len = static_cast<uint32_t>(a.size());
    (void)!write(addr_fd, &len, sizeof(len));
    (void)!write(addr_fd, a.data(), a.size());
    close(addr_fd);
    while (!g_stop) worker->Wait(1000us);
    counts.stats = worker->stats();
    (void)!write(stats_fd, &counts, sizeof(counts));
    close(stats_fd);
    _exit(0);
  }

  ros2::testing::ChildProcess child_;
  int stats_fd_ = -1;
  std::vector<uint8_t> address_;
  Counts counts_;
};

// A raw libfabric endpoint speaking the wire format by hand.
class RawPeer {
 public:
  explicit RawPeer(const TransportOptions& o) {
    fabric_ = ofi::Fabric::Open(o).value();
    EXPECT_EQ(fi_domain(fabric_->fabric(), fabric_->info(), &domain_, nullptr), 0);
    fi_av_attr av{};
    av.type = FI_AV_TABLE;
    EXPECT_EQ(fi_av_open(domain_, &av, &av_, nullptr), 0);
    fi_cq_attr cq{};
    cq.format = FI_CQ_FORMAT_TAGGED;
    EXPECT_EQ(fi_cq_open(domain_, &cq, &cq_, nullptr), 0);
    EXPECT_EQ(fi_endpoint(domain_, fabric_->info(), &ep_, nullptr), 0);
    EXPECT_EQ(fi_ep_bind(ep_, &av_->fid, 0), 0);
    EXPECT_EQ(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), 0);
    EXPECT_EQ(fi_enable(ep_), 0);
    std::vector<uint8_t> name(256);
    size_t len = name.size();
    EXPECT_EQ(fi_getname(&ep_->fid, name.data(), &len), 0);
    name.resize(len);
    std::vector<uint8_t> inner(ofi::kAddressTag, ofi::kAddressTag + 4);
    inner.insert(inner.end(), name.begin(), name.end());
    wire::WorkerAddress a;
    a.boot_id = wire::LocalHostId();
    a.pid = getpid();
    a.ucx_address = inner;
    address_.resize(wire::EncodedAddressSize(a));
    EXPECT_TRUE(wire::EncodeAddress(a, address_).ok());
    for (auto& b : recv_) b.resize(ofi::kRecvSize);
    for (size_t i = 0; i < recv_.size(); ++i) Post(i);
  }
  ~RawPeer() {
    for (fid_mr* mr : mrs_) fi_close(&mr->fid);
    fi_close(&ep_->fid);
    fi_close(&av_->fid);
    fi_close(&cq_->fid);
    fi_close(&domain_->fid);
  }
  // This peer's worker address blob (what a client Connects to).
  const std::vector<uint8_t>& address() const { return address_; }
  void Target(const std::vector<uint8_t>& blob) {
    auto peer = wire::DecodeAddress(blob).value();
    auto inner = peer.ucx_address.subspan(4);
    // Kept: shm's name map keeps the pointer (docs/transport.md, the door).
    server_name_.assign(inner.begin(), inner.end());
    server_name_.push_back(0);
    ASSERT_EQ(fi_av_insert(av_, server_name_.data(), 1, &server_, 0, nullptr), 1);
  }
  void Send(std::vector<uint8_t> bytes) {
    sent_.push_back(std::move(bytes));
    const auto& b = sent_.back();
    ssize_t rc;
    send_ctx_.emplace_back();  // FI_CONTEXT mode: every operation has its own
    while ((rc = fi_send(ep_, b.data(), b.size(), nullptr, server_, &send_ctx_.back())) == -FI_EAGAIN) Drain(nullptr);
    ASSERT_EQ(rc, 0) << fi_strerror(static_cast<int>(-rc));
  }
  void Send(const wire::Message& m) {
    std::vector<uint8_t> bytes(wire::EncodedSize(m));
    ASSERT_TRUE(wire::Encode(m, bytes).ok());
    Send(std::move(bytes));
  }
  void Hello(uint64_t my_id) {
    wire::Message h;
    h.kind = wire::Kind::kHello;
    h.request_id = my_id;
    h.payload = address_;
    if (fabric_->kind() != TransportKind::kShm) return Send(h);
    // Over shm by the server's door, as an ofi worker's hello goes.
    std::vector<uint8_t> bytes(wire::EncodedSize(h));
    ASSERT_TRUE(wire::Encode(h, bytes).ok());
    ASSERT_TRUE(ofi::OfiWorker::KnockOnDoor(server_name_, bytes).ok());
    // The server speaks first over shm: its provider's introduction waits
    // for this peer to progress (the messages that come are kept).
    const auto end = std::chrono::steady_clock::now() + 5ms;
    while (std::chrono::steady_clock::now() < end) {
      Drain(nullptr);
      std::this_thread::sleep_for(100us);
    }
  }
  // One fi_read / fi_write against the server: its completion's error
  // (0: it completed), or the posting error; -FI_ETIMEDOUT after `timeout`.
  int Rma(bool write, void* buf, size_t n, uint64_t addr, uint64_t key, std::chrono::milliseconds timeout = 3000ms) {
    rma_ctx_.emplace_back();
    fi_context* ctx = &rma_ctx_.back();
    // A write completes once delivered, so that a refusal is seen here.
    iovec iov{buf, n};
    fi_rma_iov rma{addr, n, key};
    fi_msg_rma msg{};
    msg.msg_iov = &iov;
    msg.iov_count = 1;
    msg.addr = server_;
    msg.rma_iov = &rma;
    msg.rma_iov_count = 1;
    msg.context = ctx;
    ssize_t rc;
    while ((rc = write ? fi_writemsg(ep_, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE)
                       : fi_read(ep_, buf, n, nullptr, server_, addr, key, ctx)) == -FI_EAGAIN) {
      Drain(nullptr);
    }
    if (rc != 0) return static_cast<int>(rc);
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      Drain(nullptr);
      if (auto it = rma_done_.find(ctx); it != rma_done_.end()) return it->second;
      std::this_thread::sleep_for(100us);
    }
    return -FI_ETIMEDOUT;
  }
  // Registers `buf` on this peer's domain for remote read and write; its key.
  uint64_t Register(void* buf, size_t n, uint64_t key) {
    fid_mr* mr = nullptr;
    EXPECT_EQ(fi_mr_reg(domain_, buf, n, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, key, 0, &mr, nullptr), 0);
    mrs_.push_back(mr);
    return fi_mr_key(mr);
  }
  // The next wire message received within `timeout`, or nullopt.
  std::optional<std::vector<uint8_t>> Receive(std::chrono::milliseconds timeout = 3000ms) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    std::vector<uint8_t> got;
    while (std::chrono::steady_clock::now() < end) {
      if (Drain(&got)) return got;
      std::this_thread::sleep_for(100us);
    }
    return std::nullopt;
  }

 private:
  void Post(size_t i) { (void)fi_recv(ep_, recv_[i].data(), recv_[i].size(), nullptr, FI_ADDR_UNSPEC, &ctx_[i]); }
  bool Drain(std::vector<uint8_t>* out) {
    fi_cq_tagged_entry e[8];
    ssize_t n = fi_cq_read(cq_, e, 8);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      fi_cq_readerr(cq_, &err, 0);
      if (err.op_context != nullptr) rma_done_[err.op_context] = err.err == 0 ? -FI_EOTHER : -err.err;
      for (size_t k = 0; k < recv_.size(); ++k) {
        if (err.op_context == &ctx_[k]) Post(k);  // a receive the provider gave back
      }
      return false;
    }
    bool found = false;
    for (ssize_t i = 0; i < n; ++i) {
      rma_done_[e[i].op_context] = 0;
      for (size_t k = 0; k < recv_.size(); ++k) {
        if (e[i].op_context != &ctx_[k]) continue;
        if (out != nullptr && !found) {
          out->assign(recv_[k].begin(), recv_[k].begin() + static_cast<std::ptrdiff_t>(e[i].len));
          found = true;
        } else {
          pending_.emplace_back(recv_[k].begin(), recv_[k].begin() + static_cast<std::ptrdiff_t>(e[i].len));
        }
        Post(k);
      }
    }
    if (!found && out != nullptr && !pending_.empty()) {
      *out = std::move(pending_.front());
      pending_.erase(pending_.begin());
      found = true;
    }
    return found;
  }

  std::unique_ptr<ofi::Fabric> fabric_;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
  fi_addr_t server_ = FI_ADDR_UNSPEC;
  std::vector<uint8_t> server_name_;
  std::vector<uint8_t> address_;
  std::array<std::vector<uint8_t>, 16> recv_;
  std::array<fi_context, 16> ctx_{};
  std::deque<std::vector<uint8_t>> sent_;
  std::deque<fi_context> send_ctx_;
  std::deque<fi_context> rma_ctx_;
  std::map<void*, int> rma_done_;
  std::vector<fid_mr*> mrs_;
  std::vector<std::vector<uint8_t>> pending_;
};

class OfiAttackTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    session_.id.fill(0x5a);
    session_.key.fill(0x33);
  }
  TransportOptions Options() const { return OfiOptions(GetParam()); }
  SessionCredential session_;
};

}  // namespace ros2::transport::ofi_attack
