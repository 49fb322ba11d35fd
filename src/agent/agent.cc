// The agent's accept loop: hello validation, tenants, session reaping.
#include "agent/agent.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/log.h"

namespace ros2::agent {
namespace {

std::string FdTarget(int fd) {
  char buf[256];
  ssize_t n = ::readlink(fmt::format("/proc/self/fd/{}", fd).c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

void SendReply(int fd, Status::Code code, uint64_t session_id, std::string_view text) {
  std::string msg(sizeof(HelloReply), '\0');
  HelloReply r{};
  r.magic = kHelloMagic;
  r.version = kProtocolVersion;
  r.code = static_cast<uint16_t>(code);
  r.session_id = session_id;
  text = text.substr(0, kMaxReplySize - sizeof(HelloReply));
  r.message_len = static_cast<uint32_t>(text.size());
  std::memcpy(msg.data(), &r, sizeof r);
  msg.append(text);
  (void)!::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// Checks the geometry the host wrote against the region's size and the
// agent's limits; the returned copy is all the agent uses afterwards.
Result<RingGeometry> ValidateGeometry(const RingHeader& h, uint64_t file_size, const AgentConfig& config) {
  if (h.magic != kRingMagic)
    return Status::Protocol(fmt::format("region magic {:#x} is not {:#x}", h.magic, kRingMagic));
  if (h.version != kRingVersion) {
    return Status::Protocol(fmt::format("region format version {} (this agent speaks {})", h.version, kRingVersion));
  }
  if (h.header_size != kHeaderSize || h.sqe_size != sizeof(SubmitEntry) || h.cqe_size != sizeof(CompleteEntry)) {
    return Status::Protocol(fmt::format("region header/entry sizes {}/{}/{} (expected {}/{}/{})", h.header_size,
                                        h.sqe_size, h.cqe_size, kHeaderSize, sizeof(SubmitEntry),
                                        sizeof(CompleteEntry)));
  }
  if (!IsPowerOfTwo(h.sq_entries) || !IsPowerOfTwo(h.cq_entries) || h.sq_entries < kMinRingEntries ||
      h.sq_entries > config.max_ring_entries || h.cq_entries < h.sq_entries ||
      h.cq_entries > 2 * config.max_ring_entries) {
    return Status::InvalidArgument(
        fmt::format("ring sizes sq={} cq={}: powers of two, sq {} .. {}, cq >= sq and <= 2x max", h.sq_entries,
                    h.cq_entries, kMinRingEntries, config.max_ring_entries));
  }
  if (h.arena_size == 0 || h.arena_size > config.max_arena) {
    return Status::InvalidArgument(
        fmt::format("arena of {} bytes (this agent allows 1 .. {})", h.arena_size, config.max_arena));
  }
  RingGeometry g = ComputeGeometry(h.sq_entries, h.cq_entries, h.arena_size);
  if (h.sq_offset != g.sq_offset || h.cq_offset != g.cq_offset || h.arena_offset != g.arena_offset ||
      h.total_size != g.total_size) {
    return Status::Protocol("region offsets do not follow the format (docs/agent.md)");
  }
  if (g.total_size > file_size) {
    return Status::InvalidArgument(fmt::format("region needs {} bytes, the memfd has {}", g.total_size, file_size));
  }
  return g;
}

}  // namespace

Result<std::unique_ptr<Agent>> Agent::Start(const AgentConfig& config) {
  auto agent = std::unique_ptr<Agent>(new Agent(config));
  for (const auto& t : config.tenants) agent->qos_[t.name] = std::make_shared<TenantQos>(t.qos);
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "agent: socket");
  agent->listen_fd_ = fd;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, config.socket.c_str(), sizeof addr.sun_path - 1);
  // A socket file left by an agent that died is replaced; a live agent is not.
  struct stat st {};
  if (::lstat(config.socket.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Status::AlreadyExists(fmt::format("agent: {} exists and is not a socket", config.socket));
    }
    int probe = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    bool live = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (probe >= 0) ::close(probe);
    if (live) return Status::AlreadyExists(fmt::format("agent: another agent listens on {}", config.socket));
    ::unlink(config.socket.c_str());
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return Status::FromErrno(errno, fmt::format("agent: bind {}", config.socket));
  }
  if (::chmod(config.socket.c_str(), config.socket_mode) != 0) {
    return Status::FromErrno(errno, fmt::format("agent: chmod {}", config.socket));
  }
  if (::listen(fd, 128) != 0) return Status::FromErrno(errno, fmt::format("agent: listen {}", config.socket));
  ROS2_LOG_INFO("agent: listening on {} ({} tenants, control {}, transport {})", config.socket, config.tenants.size(),
                config.control, config.transport);
  if (!config.metrics_listen.empty()) {
    Agent* self = agent.get();
    auto exporter = metrics::MetricsExporter::Start(config.metrics_listen, [self] { return self->CollectMetrics(); });
    if (!exporter.ok()) return exporter.status().WithContext("agent");
    agent->metrics_ = std::move(*exporter);
    ROS2_LOG_INFO("agent: metrics on http://{}/metrics", agent->metrics_->address());
  }
  return agent;
}

Agent::~Agent() {
  metrics_.reset();  // no scrape reads the sessions from here on
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& s : sessions_) s->RequestStop();
  }
  std::vector<std::unique_ptr<Session>> sessions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sessions.swap(sessions_);
  }
  for (auto& s : sessions) {
    const auto id = s->identity();
    s.reset();  // joins its thread, unmounts, unmaps, closes
    ROS2_LOG_INFO("agent: session {} (pid {} uid {} tenant {}) reclaimed: agent stopping", id.id, id.pid, id.uid,
                  id.tenant);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    tenants_.clear();
  }
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(config_.socket.c_str());
  }
}

std::string Agent::ReadyLine() const {
  return fmt::format("ros2-agent ready socket={} pid={} control={} transport={} tenants={}{}", config_.socket,
                     ::getpid(), config_.control, config_.transport, config_.tenants.size(),
                     metrics_ ? " metrics=" + metrics_->address() : "");
}

std::string Agent::StatusJson() const {
  nlohmann::json j;
  j["socket"] = config_.socket;
  j["pid"] = ::getpid();
  nlohmann::json sessions = nlohmann::json::array();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : sessions_) {
    const auto& id = s->identity();
    sessions.push_back({{"id", id.id},
                        {"pid", id.pid},
                        {"uid", id.uid},
                        {"gid", id.gid},
                        {"tenant", id.tenant},
                        {"mounts", s->mounts()},
                        {"completed", s->completed()},
                        {"max_in_flight", s->max_in_flight()},
                        {"shared_segment", s->shared_segment()},
                        {"finished", s->finished()}});
  }
  j["sessions"] = sessions;
  nlohmann::json tenants = nlohmann::json::array();
  for (const auto& [name, t] : tenants_) tenants.push_back(name);
  j["tenant_clients"] = tenants;
  nlohmann::json qos = nlohmann::json::array();
  for (const auto& [name, q] : qos_) {
    const QosLimits l = q->limits();
    qos.push_back({{"tenant", name},
                   {"bandwidth", l.bandwidth},
                   {"iops", l.iops},
                   {"bytes_served", q->bytes_served()},
                   {"ios_served", q->ios_served()}});
  }
  j["qos"] = qos;
  return j.dump();
}

Status Agent::ApplyQos(std::string_view request) {
  nlohmann::json j = nlohmann::json::parse(request, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("agent: qos: expected a JSON object");
  if (!j.contains("tenant")) return Status::Ok();  // a query
  if (!j["tenant"].is_string()) return Status::InvalidArgument("agent: qos: tenant must be a string");
  const std::string name = j["tenant"].get<std::string>();
  auto it = qos_.find(name);
  if (it == qos_.end()) return Status::NotFound(fmt::format("agent: qos: no tenant '{}' in the config", name));
  QosLimits l = it->second->limits();
  for (const char* key : {"bandwidth", "iops"}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_number_unsigned()) {
      return Status::InvalidArgument(fmt::format("agent: qos: {} must be a non-negative integer", key));
    }
    (std::string_view(key) == "bandwidth" ? l.bandwidth : l.iops) = j[key].get<uint64_t>();
  }
  it->second->SetLimits(l);
  ROS2_LOG_INFO("agent: tenant {}: qos set to bandwidth {} B/s, iops {} (0 = unlimited)", name, l.bandwidth, l.iops);
  return Status::Ok();
}

void Agent::Run(int stop_fd) {
  for (;;) {
    // The listener, the stop descriptor, and connections whose hello has not come yet.
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    for (const auto& p : pending_) fds.push_back({p.fd, POLLIN, 0});
    int n = ::poll(fds.data(), fds.size(), static_cast<int>(kReapInterval.count()));
    if (n < 0 && errno != EINTR) {
      ROS2_LOG_ERROR("agent: poll: {}", std::strerror(errno));
      break;
    }
    if (n > 0 && fds[1].revents != 0) break;
    if (n > 0 && (fds[0].revents & POLLIN)) Accept();
    const auto now = std::chrono::steady_clock::now();
    std::vector<PendingConnection> waiting;
    for (size_t i = 0; i + 2 < fds.size(); ++i) {
      const PendingConnection& p = pending_[i];
      if (fds[i + 2].revents != 0) {
        HandleHello(p.fd);  // takes the descriptor over
      } else if (now >= p.deadline) {
        ROS2_LOG_WARN("agent: closed a connection that sent no hello within {} ms", kHelloTimeout.count());
        ::close(p.fd);
      } else {
        waiting.push_back(p);
      }
    }
    // Connections accepted during this round are at the end of pending_.
    for (size_t i = fds.size() - 2; i < pending_.size(); ++i) waiting.push_back(pending_[i]);
    pending_.swap(waiting);
    Reap();
  }
  for (const auto& p : pending_) ::close(p.fd);
  pending_.clear();
  ROS2_LOG_INFO("agent: stopping ({} sessions)", sessions_.size());
}

void Agent::Accept() {
  int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    if (errno != EAGAIN && errno != EINTR) ROS2_LOG_WARN("agent: accept: {}", std::strerror(errno));
    return;
  }
  if (pending_.size() >= kMaxPendingConnections) {
    ROS2_LOG_WARN("agent: {} connections wait for their hello; refusing another", pending_.size());
    ::close(fd);
    return;
  }
  // The hello is read once it arrives; a silent peer holds nothing but its slot.
  pending_.push_back({fd, std::chrono::steady_clock::now() + kHelloTimeout});
}

Result<std::shared_ptr<TenantClient>> Agent::AcquireTenant(const TenantMapping& t) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tenants_.find(t.name);
  if (it != tenants_.end()) return it->second;
  client::ClientOptions o;
  o.control = config_.control;
  o.tenant = t.name;
  o.secret_file = t.secret_file;
  o.transport = config_.transport;
  o.provider = config_.provider;
  o.net_devices = config_.net_devices;
  o.io_timeout = config_.io_timeout;
  o.spin_budget = config_.client_spin;
  ROS2_ASSIGN_OR_RETURN(auto c, client::Client::Connect(o));
  auto tc = std::make_shared<TenantClient>();
  tc->name = t.name;
  tc->mapping = t;
  tc->client = std::move(c);
  tc->qos = qos_.at(t.name);
  tenants_[t.name] = tc;
  ROS2_LOG_INFO("agent: tenant {}: client made ({})", t.name, tc->client->DescribeTransport());
  return tc;
}

namespace {

// The region a hello brings, checked and mapped: a memfd whose size cannot
// shrink under the mapping, holding a valid header, and an eventfd.
struct MappedRegion {
  void* map = nullptr;
  RingGeometry geometry;
};

Result<MappedRegion> MapRegion(int memfd, int eventfd, const AgentConfig& config) {
  if (!FdTarget(memfd).starts_with("/memfd:")) {
    return Status::InvalidArgument("agent: the region descriptor is not a memfd");
  }
  int seals = ::fcntl(memfd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    return Status::InvalidArgument(
        "agent: the memfd is not sealed against shrinking (F_SEAL_SHRINK); the agent's mapping could be "
        "truncated under it");
  }
  if (FdTarget(eventfd) != "anon_inode:[eventfd]") {
    return Status::InvalidArgument("agent: descriptor 1 is not an eventfd");
  }
  struct stat st {};
  if (::fstat(memfd, &st) != 0 || st.st_size < static_cast<off_t>(kHeaderSize)) {
    return Status::InvalidArgument("agent: the memfd is smaller than a region header");
  }
  RingHeader head{};
  if (::pread(memfd, &head, sizeof head, 0) != static_cast<ssize_t>(sizeof head)) {
    return Status::InvalidArgument("agent: cannot read the region header");
  }
  auto geometry = ValidateGeometry(head, static_cast<uint64_t>(st.st_size), config);
  if (!geometry.ok()) {
    return Status::FromCode(static_cast<uint8_t>(geometry.status().code()), "agent: " + geometry.status().message());
  }
  void* map = ::mmap(nullptr, geometry->total_size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (map == MAP_FAILED) {
    return Status::InvalidArgument(fmt::format("agent: mapping the memfd: {}", std::strerror(errno)));
  }
  return MappedRegion{map, *geometry};
}

}  // namespace

void Agent::HandleHello(int fd) {
  // Everything received is closed unless a session takes it over.
  int fds[3] = {-1, -1, -1};
  auto close_all = [&] {
    for (int& f : fds) {
      if (f >= 0) ::close(f);
      f = -1;
    }
    ::close(fd);
  };
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    ROS2_LOG_WARN("agent: SO_PEERCRED: {}", std::strerror(errno));
    return close_all();
  }
  HelloMessage hello{};
  char payload[kMaxControlPayload];
  iovec iov[2] = {{&hello, sizeof hello}, {payload, sizeof payload}};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 3)];
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  size_t nfds = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); n >= 0 && c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int f;
        std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
        if (nfds < 3) {
          fds[nfds++] = f;
        } else {
          ::close(f);
        }
      }
    }
  }
  const std::string who = fmt::format("pid {} uid {} gid {}", cred.pid, cred.uid, cred.gid);
  auto refuse = [&](Status::Code code, const std::string& why) {
    ROS2_LOG_WARN("agent: refused {}: {}", who, why);
    SendReply(fd, code, 0, why);
    close_all();
  };
  const size_t payload_len = n > static_cast<ssize_t>(sizeof hello) ? static_cast<size_t>(n) - sizeof hello : 0;
  const bool control_msg =
      n >= static_cast<ssize_t>(sizeof hello) && hello.type == static_cast<uint16_t>(MessageType::kQos);
  if ((n != static_cast<ssize_t>(sizeof hello) && !control_msg) || (msg.msg_flags & MSG_TRUNC) ||
      hello.magic != kHelloMagic) {
    return refuse(Status::Code::kProtocol, "agent: expected a hello message");
  }
  if (hello.version != kProtocolVersion) {
    return refuse(Status::Code::kProtocol,
                  fmt::format("agent: protocol version {} (this agent speaks {})", hello.version, kProtocolVersion));
  }
  if (hello.type == static_cast<uint16_t>(MessageType::kStatus)) {
    if (cred.uid != 0 && cred.uid != ::geteuid()) {
      return refuse(Status::Code::kPermissionDenied, "agent: status is for root or the agent's user");
    }
    SendReply(fd, Status::Code::kOk, 0, StatusJson());
    return close_all();
  }
  if (control_msg) {
    if (cred.uid != 0 && cred.uid != ::geteuid()) {
      return refuse(Status::Code::kPermissionDenied, "agent: qos is for root or the agent's user");
    }
    if (Status st = ApplyQos(std::string_view(payload, payload_len)); !st.ok()) {
      return refuse(st.code(), st.message());
    }
    SendReply(fd, Status::Code::kOk, 0, StatusJson());
    return close_all();
  }
  if (hello.type != static_cast<uint16_t>(MessageType::kHello)) {
    return refuse(Status::Code::kProtocol, fmt::format("agent: unknown message type {}", hello.type));
  }
  if ((msg.msg_flags & MSG_CTRUNC) != 0 || nfds != 2) {
    return refuse(Status::Code::kProtocol,
                  fmt::format("agent: a hello carries 2 descriptors (memfd, submission eventfd), got {}", nfds));
  }
  const TenantMapping* tenant = FindTenant(config_, cred.uid, cred.gid);
  if (tenant == nullptr) {
    return refuse(Status::Code::kPermissionDenied,
                  fmt::format("agent: uid {} gid {} is not mapped to a tenant", cred.uid, cred.gid));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (sessions_.size() >= config_.max_sessions) {
      return refuse(Status::Code::kBusy, fmt::format("agent: {} sessions open (max_sessions)", sessions_.size()));
    }
    size_t mine = 0;
    for (const auto& s : sessions_) mine += s->identity().tenant == tenant->name;
    if (mine >= config_.max_sessions_per_tenant) {
      return refuse(Status::Code::kBusy,
                    fmt::format("agent: tenant {} has {} sessions open (max_sessions_per_tenant)", tenant->name, mine));
    }
  }
  auto region = MapRegion(fds[0], fds[1], config_);
  if (!region.ok()) return refuse(region.status().code(), region.status().message());
  void* map = region->map;
  const RingGeometry* geometry = &region->geometry;
  auto tc = AcquireTenant(*tenant);
  if (!tc.ok()) {
    ::munmap(map, geometry->total_size);
    return refuse(tc.status().code(), "agent: tenant " + tenant->name + ": " + tc.status().message());
  }
  SessionIdentity id;
  id.id = next_session_id_++;
  id.pid = cred.pid;
  id.uid = cred.uid;
  id.gid = cred.gid;
  id.tenant = tenant->name;
  SessionResources res;
  res.socket = fd;
  res.memfd = fds[0];
  res.sq_eventfd = fds[1];
  res.map = map;
  res.map_len = geometry->total_size;
  res.geometry = *geometry;
  // Listed as a shared segment, the region's arena is where the engine reads
  // updates from and writes fetched bytes to, with no copy in the agent.
  auto segment = transport::ForeignSegment::Register(fds[0], static_cast<std::byte*>(map), geometry->total_size);
  if (segment.ok()) {
    res.segment = std::move(*segment);
  } else {
    ROS2_LOG_INFO("agent: session {}: bulk is copied through the agent: {}", id.id, segment.status().ToString());
  }
  const bool listed = res.segment != nullptr;
  auto session = std::make_unique<Session>(id, *tc, std::move(res), config_.spin);
  ROS2_LOG_INFO("agent: session {} opened for {} as tenant {} (sq {} cq {} arena {} bytes{})", id.id, who, tenant->name,
                geometry->sq_entries, geometry->cq_entries, geometry->arena_size, listed ? ", a shared segment" : "");
  SendReply(fd, Status::Code::kOk, id.id, tenant->name);
  session->Start();
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.push_back(std::move(session));
}

void Agent::Reap() {
  std::vector<std::unique_ptr<Session>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if ((*it)->finished()) {
        retired_[(*it)->identity().tenant].AddCounters((*it)->metrics());
        done.push_back(std::move(*it));
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& s : done) {
    const auto id = s->identity();
    const std::string reason = s->close_reason();
    std::string tenant = id.tenant;
    s.reset();  // joins, unmounts, unmaps, closes
    ROS2_LOG_INFO("agent: session {} (pid {} uid {} tenant {}) reclaimed: {}", id.id, id.pid, id.uid, tenant, reason);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tenants_.find(tenant);
    if (it != tenants_.end() && it->second.use_count() == 1) {
      tenants_.erase(it);  // its last session: the client and its transport context go
      ROS2_LOG_INFO("agent: tenant {}: last session closed, client dropped", tenant);
    }
  }
}

}  // namespace ros2::agent
