// ros2-bench-ofi-floor: the raw libfabric floor beside `ros2-bench transport
// --provider ofi --floor` (see transport_ofi_floor.h). No ROS2 code in the
// path: two processes (this one and a forked server) open one RDM endpoint
// each on the provider named, exchange addresses through pipes, and stream
// for --seconds:
//   op=write — the client sends a 64-byte header + `size` bytes, the server
//              answers each with a 64-byte reply (the shape of a call whose
//              bulk rides the request inline);
//   op=read  — the client sends 64 bytes, the server answers with 64 + `size`.
// `qd` requests are in flight; a reply sends the next. With --batch B a
// message carries B requests' payloads (op=write: 64 + B x size bytes, op=read:
// the reply carries them) and answers for B, as the transport's corked calls
// share a kBatch message: qd / B messages are in flight, and rxm's eager
// buffer (FI_OFI_RXM_BUFFER_SIZE, unless set) is raised to hold one. Manual progress, a
// completion queue per process (FI_CQ_FORMAT_CONTEXT) with wait object
// FI_WAIT_FD, polled and, when empty for --spin-us, slept on through
// fi_trywait + epoll_wait on its fd, as the transport's worker does; with
// --wait none the queue has no wait object and both sides busy-poll.
// Prints one line: `ofi-floor op=.. size=.. qd=.. batch=.. wait=.. calls=N seconds=S mib_s=X`.
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kHeader = 64;
constexpr uint8_t kStop = 1;

struct Options {
  std::string provider = "tcp;ofi_rxm";
  std::string domain = "lo";
  std::string op = "write";
  std::string wait = "fd";
  uint64_t size = 4096;
  int qd = 128;
  int batch = 1;
  double seconds = 1;
  double warmup = 0.2;
  int spin_us = 50;
  std::vector<int> cpus;
};

[[noreturn]] void Die(const std::string& what, int rc) {
  std::fprintf(stderr, "ofi-floor: %s: %s\n", what.c_str(), fi_strerror(-rc));
  std::exit(1);
}

void Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    std::perror("ofi-floor: sched_setaffinity");
    std::exit(1);
  }
}

// One endpoint with its queue; ops carry an fi_context (FI_CONTEXT mode).
struct Op {
  fi_context ctx;
  bool recv = false;
  std::vector<char> buf;
};

struct Side {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  int wait_fd = -1;
  int epoll_fd = -1;
  fi_addr_t peer = FI_ADDR_UNSPEC;
  std::vector<Op*> free_sends;
  std::vector<Op*> stashed;  // receives completed while Send waited for a free op
  int spin_us = 50;
};

void Open(Side& s, const Options& o) {
  fi_info* hints = fi_allocinfo();
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG;
  hints->mode = FI_CONTEXT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
  hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
  hints->domain_attr->mr_mode = 0;
  hints->fabric_attr->prov_name = strdup(o.provider.c_str());
  if (!o.domain.empty()) hints->domain_attr->name = strdup(o.domain.c_str());
  fi_info* list = nullptr;
  int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &list);
  fi_freeinfo(hints);
  if (rc != 0) Die("fi_getinfo " + o.provider, rc);
  for (fi_info* i = list; i != nullptr && s.info == nullptr; i = i->next) {
    if (o.provider == i->fabric_attr->prov_name) s.info = fi_dupinfo(i);
  }
  fi_freeinfo(list);
  if (s.info == nullptr) Die("no provider named " + o.provider, -FI_ENODATA);
  if ((rc = fi_fabric(s.info->fabric_attr, &s.fabric, nullptr)) != 0) Die("fi_fabric", rc);
  if ((rc = fi_domain(s.fabric, s.info, &s.domain, nullptr)) != 0) Die("fi_domain", rc);
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_MAP;
  if ((rc = fi_av_open(s.domain, &av_attr, &s.av, nullptr)) != 0) Die("fi_av_open", rc);
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_CONTEXT;
  cq_attr.size = 4096;
  cq_attr.wait_obj = o.wait == "fd" ? FI_WAIT_FD : FI_WAIT_NONE;
  if ((rc = fi_cq_open(s.domain, &cq_attr, &s.cq, nullptr)) != 0) Die("fi_cq_open", rc);
  if ((rc = fi_endpoint(s.domain, s.info, &s.ep, nullptr)) != 0) Die("fi_endpoint", rc);
  if ((rc = fi_ep_bind(s.ep, &s.av->fid, 0)) != 0) Die("fi_ep_bind av", rc);
  if ((rc = fi_ep_bind(s.ep, &s.cq->fid, FI_TRANSMIT | FI_RECV)) != 0) Die("fi_ep_bind cq", rc);
  if ((rc = fi_enable(s.ep)) != 0) Die("fi_enable", rc);
  s.spin_us = o.spin_us;
  if (o.wait == "fd") {
    if ((rc = fi_control(&s.cq->fid, FI_GETWAIT, &s.wait_fd)) != 0) Die("fi_control FI_GETWAIT", rc);
    s.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, s.wait_fd, &ev);
  }
}

std::string Name(Side& s) {
  char name[256];
  size_t len = sizeof(name);
  int rc = fi_getname(&s.ep->fid, name, &len);
  if (rc != 0) Die("fi_getname", rc);
  return std::string(name, len);
}

void InsertPeer(Side& s, const std::string& name) {
  if (fi_av_insert(s.av, name.data(), 1, &s.peer, 0, nullptr) != 1) Die("fi_av_insert", -FI_EINVAL);
}

void WriteBlob(int fd, const std::string& b) {
  const uint32_t n = static_cast<uint32_t>(b.size());
  if (write(fd, &n, 4) != 4 || write(fd, b.data(), n) != static_cast<ssize_t>(n)) Die("pipe write", -FI_EIO);
}

std::string ReadBlob(int fd) {
  uint32_t n = 0;
  if (read(fd, &n, 4) != 4 || n > 4096) Die("pipe read", -FI_EIO);
  std::string b(n, '\0');
  if (read(fd, b.data(), n) != static_cast<ssize_t>(n)) Die("pipe read", -FI_EIO);
  return b;
}

void PostRecv(Side& s, Op* op) {
  for (;;) {
    ssize_t rc = fi_recv(s.ep, op->buf.data(), op->buf.size(), nullptr, FI_ADDR_UNSPEC, &op->ctx);
    if (rc == 0) return;
    if (rc != -FI_EAGAIN) Die("fi_recv", static_cast<int>(rc));
    fi_cq_read(s.cq, nullptr, 0);
  }
}

// Polls the queue; when it stays empty for spin_us, sleeps on its fd.
// Calls on_complete(op) per completion; returns how many there were.
template <class F>
int Progress(Side& s, F&& on_complete) {
  fi_cq_entry entries[16];
  const Clock::time_point start = Clock::now();
  for (uint32_t pass = 0;; ++pass) {
    ssize_t n = fi_cq_read(s.cq, entries, 16);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) on_complete(static_cast<Op*>(entries[i].op_context));
      return static_cast<int>(n);
    }
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      fi_cq_readerr(s.cq, &err, 0);
      Die("completion error", -err.err);
    }
    if (s.epoll_fd < 0 || pass % 16 != 15) continue;
    if (Clock::now() - start < std::chrono::microseconds(s.spin_us)) {
      sched_yield();
      continue;
    }
    fid* fids[1] = {&s.cq->fid};
    if (fi_trywait(s.fabric, fids, 1) != FI_SUCCESS) continue;
    epoll_event ev;
    (void)epoll_wait(s.epoll_fd, &ev, 1, 100);
  }
}

void Send(Side& s, const char* buf, size_t len) {
  while (s.free_sends.empty()) {
    Progress(s, [&](Op* op) { (op->recv ? s.stashed : s.free_sends).push_back(op); });
  }
  Op* op = s.free_sends.back();
  s.free_sends.pop_back();
  for (;;) {
    ssize_t rc = fi_send(s.ep, buf, len, nullptr, s.peer, &op->ctx);
    if (rc == 0) return;
    if (rc != -FI_EAGAIN) Die("fi_send", static_cast<int>(rc));
    fi_cq_read(s.cq, nullptr, 0);
  }
}

// Lets the sends still queued leave (their completions come back) before the
// endpoint closes; at most 200 ms.
void Drain(Side& s, size_t sends) {
  const Clock::time_point end = Clock::now() + std::chrono::milliseconds(200);
  fi_cq_entry entries[16];
  while (s.free_sends.size() < sends && Clock::now() < end) {
    ssize_t n = fi_cq_read(s.cq, entries, 16);
    for (ssize_t i = 0; i < n; ++i) {
      Op* op = static_cast<Op*>(entries[i].op_context);
      if (!op->recv) s.free_sends.push_back(op);
    }
  }
}

std::vector<Op> MakeOps(int n, bool recv, size_t bytes) {
  std::vector<Op> ops(static_cast<size_t>(n));
  for (Op& op : ops) {
    op.recv = recv;
    op.buf.assign(bytes, '\0');
  }
  return ops;
}

// The receives that arrived: those stashed by a send waiting for room, else
// what one progress pass completes (send completions free their ops).
void NextArrivals(Side& s, std::vector<Op*>* arrived) {
  arrived->swap(s.stashed);
  s.stashed.clear();
  if (!arrived->empty()) return;
  Progress(s, [&](Op* op) {
    if (op->recv) {
      arrived->push_back(op);
    } else {
      s.free_sends.push_back(op);
    }
  });
}

void Server(Side& s, const Options& o) {
  const bool write = o.op == "write";
  const uint64_t payload = o.size * static_cast<uint64_t>(o.batch);
  const size_t in_len = kHeader + (write ? payload : 0);
  const size_t out_len = kHeader + (write ? 0 : payload);
  std::vector<Op> recvs = MakeOps(o.qd + 16, true, in_len);
  std::vector<Op> sends = MakeOps(o.qd + 16, false, 0);
  for (Op& op : sends) s.free_sends.push_back(&op);
  for (Op& op : recvs) PostRecv(s, &op);
  std::vector<char> reply(out_len, 'r');  // one source buffer, as the bench peer's shared mode
  bool stop = false;
  std::vector<Op*> arrived;
  while (!stop) {
    NextArrivals(s, &arrived);
    for (Op* op : arrived) {
      if (static_cast<uint8_t>(op->buf[0]) == kStop) stop = true;
      PostRecv(s, op);
      if (!stop) Send(s, reply.data(), reply.size());
    }
  }
  Drain(s, sends.size());
}

void Client(Side& s, const Options& o) {
  const bool write = o.op == "write";
  const uint64_t payload = o.size * static_cast<uint64_t>(o.batch);
  const size_t out_len = kHeader + (write ? payload : 0);
  const size_t in_len = kHeader + (write ? 0 : payload);
  const int messages = (o.qd + o.batch - 1) / o.batch;
  std::vector<Op> recvs = MakeOps(o.qd + 16, true, in_len);
  std::vector<Op> sends = MakeOps(o.qd + 16, false, 0);
  for (Op& op : sends) s.free_sends.push_back(&op);
  for (Op& op : recvs) PostRecv(s, &op);
  std::vector<char> request(out_len, 'q');  // one source buffer for every call in flight
  request[0] = 0;
  const Clock::time_point start = Clock::now();
  const Clock::time_point measure_from =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.warmup));
  const Clock::time_point end =
      measure_from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  int in_flight = 0;
  for (int i = 0; i < messages; ++i, ++in_flight) Send(s, request.data(), request.size());
  uint64_t counted = 0;
  bool measuring = false;
  Clock::time_point t0 = measure_from, t1 = end;
  std::vector<Op*> arrived;
  while (in_flight > 0) {
    NextArrivals(s, &arrived);
    const Clock::time_point now = Clock::now();
    if (!measuring && now >= measure_from) {
      measuring = true;
      t0 = now;
      counted = 0;
    }
    for (Op* op : arrived) {
      --in_flight;
      counted += static_cast<uint64_t>(o.batch);
      PostRecv(s, op);
      if (now < end) {
        Send(s, request.data(), request.size());
        ++in_flight;
      }
    }
    if (now < end) t1 = now;
  }
  request[0] = static_cast<char>(kStop);
  Send(s, request.data(), kHeader);
  Drain(s, sends.size());
  const double secs = std::chrono::duration<double>(t1 - t0).count();
  std::printf("ofi-floor op=%s size=%llu qd=%d batch=%d wait=%s calls=%llu seconds=%.3f mib_s=%.1f\n", o.op.c_str(),
              static_cast<unsigned long long>(o.size), o.qd, o.batch, o.wait.c_str(),
              static_cast<unsigned long long>(counted), secs,
              secs > 0 ? static_cast<double>(counted * o.size) / secs / (1 << 20) : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"raw libfabric streaming floor: qd messages in flight, a reply each"};
  app.add_option("--provider", o.provider, "libfabric provider by name");
  app.add_option("--domain", o.domain, "domain name (\"\" leaves it to fi_getinfo)");
  app.add_option("--op", o.op, "write (size bytes out, small reply) or read (small request, size bytes back)")
      ->check(CLI::IsMember({"write", "read"}));
  app.add_option("--size", o.size, "payload bytes a message")->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  app.add_option("--qd", o.qd, "requests in flight")->check(CLI::Range(1, 1024));
  app.add_option("--batch", o.batch, "requests a message carries (and a reply answers)")->check(CLI::Range(1, 64));
  app.add_option("--seconds", o.seconds, "measured seconds (after --warmup)")->check(CLI::Range(0.01, 600.0));
  app.add_option("--warmup", o.warmup, "seconds streamed before measuring");
  app.add_option("--wait", o.wait, "fd (FI_WAIT_FD queue, sleep when idle) or none (busy-poll)")
      ->check(CLI::IsMember({"fd", "none"}));
  app.add_option("--spin-us", o.spin_us, "with --wait fd: poll this long before sleeping");
  app.add_option("--cpus", o.cpus, "CLIENT,SERVER CPUs to pin the two processes to")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  if (!o.cpus.empty() && o.cpus.size() != 2) {
    std::fprintf(stderr, "ofi-floor: --cpus takes two CPUs: CLIENT,SERVER\n");
    return 2;
  }
  const uint64_t eager = std::max<uint64_t>(16384, kHeader + o.size * static_cast<uint64_t>(o.batch) + 1024);
  setenv("FI_OFI_RXM_BUFFER_SIZE", std::to_string(eager).c_str(), /*overwrite=*/0);
  int to_client[2], to_server[2];
  if (pipe(to_client) != 0 || pipe(to_server) != 0) {
    std::perror("ofi-floor: pipe");
    return 1;
  }
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) {
    std::perror("ofi-floor: fork");
    return 1;
  }
  const bool server = child == 0;
  if (o.cpus.size() == 2) Pin(o.cpus[server ? 1 : 0]);
  Side s;
  Open(s, o);
  WriteBlob(server ? to_client[1] : to_server[1], Name(s));
  InsertPeer(s, ReadBlob(server ? to_server[0] : to_client[0]));
  if (server) {
    Server(s, o);
    std::_Exit(0);
  }
  Client(s, o);
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "ofi-floor: server exited with status %d\n", status);
    return 1;
  }
  return 0;
}
