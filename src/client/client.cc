// Client and the per-thread data-plane state: credentials, the gRPC channel,
// the process-wide transport Context, and one Worker per I/O thread.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "client/client_internal.h"
#include "client/event_queue_impl.h"
#include "client/handle_backends.h"
#include "client/offload/agent_handles.h"
#include "common/library_logging.h"
#include "placement/pool_map_proto.h"
#include "transport/shared_segment.h"

namespace ros2::client {

namespace {

// One transport Context per process and transport selection: every Client
// with the same selection shares it (a UCX context is heavy: its memory
// domains and UCX's own registration cache).
Result<std::shared_ptr<transport::Context>> SharedContext(const transport::TransportOptions& options) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<transport::Context>> contexts;
  std::string key = fmt::format("{}|{}|{}|{}", transport::ProviderName(options.provider),
                                transport::TransportKindName(options.kind), options.net_devices,
                                options.spin_budget.count());
  std::lock_guard<std::mutex> lock(mu);
  if (auto existing = contexts[key].lock()) return existing;
  ROS2_ASSIGN_OR_RETURN(auto created, transport::Context::Create(options));
  std::shared_ptr<transport::Context> shared(std::move(created));
  contexts[key] = shared;
  return shared;
}

// A request on an endpoint unused for this long first checks that the peer
// is alive (ThreadIo::EndpointFor).
constexpr std::chrono::milliseconds kIdleCheckAfter{2};

std::string NormalizeControl(const std::string& endpoint) {
  if (!endpoint.empty() && endpoint.front() == '/') return "unix:" + endpoint;
  return endpoint;
}

// "a,b,c": several control endpoints of one cluster, tried in turn.
std::vector<std::string> SplitControl(const std::string& control) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= control.size()) {
    const size_t comma = std::min(control.find(',', start), control.size());
    if (comma > start) out.push_back(NormalizeControl(control.substr(start, comma - start)));
    start = comma + 1;
  }
  return out;
}

}  // namespace

ThreadIo::~ThreadIo() {
  timers_.clear();
  // A thread that went idle before its engine died (and was restarted) still
  // holds endpoints to the dead process: one progress pass lets the transport
  // notice (the peer's pidfd), so closing them does not wait on a peer that
  // will never answer.
  if (NothingInFlight()) (void)worker_->Progress();
  for (auto& [address, cached] : endpoints_) cached.ep->Close();
  last_endpoint_ = nullptr;
  endpoints_.clear();
}

const transport::EndpointInfo* ThreadIo::ConnectedInfo(const std::string& address) const {
  auto it = endpoints_.find(address);
  return it == endpoints_.end() ? nullptr : &it->second.ep->info();
}

Result<std::shared_ptr<transport::Endpoint>> ThreadIo::EndpointFor(const std::string& address) {
  const auto now = std::chrono::steady_clock::now();
  auto* entry = last_endpoint_;
  if (entry == nullptr || entry->first != address) {
    auto it = endpoints_.find(address);
    entry = it != endpoints_.end() ? &*it : nullptr;
  }
  if (entry != nullptr) {
    CachedEndpoint& cached = entry->second;
    // An endpoint this thread has not used for a while may lead to an engine that died meanwhile (the transport notices
    // a dead peer only while the worker progresses): one progress pass
    // reports it, so the request is not sent into the void (where its
    // outcome would be unknown): the connection is made again, which fails,
    // unsent, when the engine is gone.
    if (!in_completion() && now - cached.last_used > kIdleCheckAfter && NothingInFlight()) {
      (void)worker_->Progress();  // no call in flight: no completion can run inside
    }
    if (cached.ep->status().ok()) {
      cached.last_used = now;
      last_endpoint_ = entry;
      return cached.ep;
    }
    EraseEndpoint(endpoints_.find(entry->first));
  }
  auto ep =
      worker_->Connect(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(address.data()), address.size()));
  if (!ep.ok()) return ep.status();
  // Corked for good: the calls a thread issues between two progress passes
  // (a burst of Submit* before Poll/Wait) leave in one message per target;
  // every wait for a reply progresses the worker, which sends them
  // (docs/transport.md, "Batches").
  (*ep)->Cork();
  auto it = endpoints_.insert_or_assign(address, CachedEndpoint{*ep, now}).first;
  last_endpoint_ = &*it;
  return *ep;
}

bool ThreadIo::NothingInFlight() const {
  for (const auto& [address, cached] : endpoints_) {
    if (cached.ep->outstanding() > 0) return false;
  }
  return true;
}

void ThreadIo::DropEndpoint(const std::string& address) {
  ForgetConnected();
  if (auto it = endpoints_.find(address); it != endpoints_.end()) EraseEndpoint(it);
}

void ThreadIo::EraseEndpoint(std::unordered_map<std::string, CachedEndpoint>::iterator it) {
  last_endpoint_ = nullptr;
  ForgetConnected();
  endpoints_.erase(it);
}

void ThreadIo::ForgetConnected() {
  connected_map_.reset();
  connected_targets_.clear();
  connected_left_ = 0;
}

void ThreadIo::NoteConnected(const std::shared_ptr<const MapSnapshot>& snapshot, uint32_t target) {
  const auto& targets = snapshot->map.targets;
  if (snapshot != connected_map_) {
    connected_map_ = snapshot;
    connected_targets_.assign(targets.size(), false);
    connected_left_ = static_cast<size_t>(
        std::count_if(targets.begin(), targets.end(), [](const auto& t) { return !IsOut(t.state); }));
  }
  if (target >= targets.size() || connected_targets_[target] || IsOut(targets[target].state)) return;
  connected_targets_[target] = true;
  --connected_left_;
}

Result<std::shared_ptr<ClientCore>> ClientCore::Create(const ClientOptions& options) {
  if (options.control.empty()) {
    return Status::InvalidArgument("libros2 connect: no control endpoint (ClientOptions::control is empty)");
  }
  if (options.tenant.empty()) return Status::InvalidArgument("libros2 connect: no tenant name");
  if (options.checksum_chunk_size == 0) {
    return Status::InvalidArgument("libros2 connect: checksum_chunk_size must be above 0");
  }
  if (options.io_timeout.count() <= 0 || options.control_timeout.count() <= 0) {
    return Status::InvalidArgument("libros2 connect: timeouts must be positive");
  }
  if (options.reconnect_timeout.count() < 0) {
    return Status::InvalidArgument("libros2 connect: reconnect_timeout must not be negative");
  }
  auto core = std::make_shared<ClientCore>();
  core->options_ = options;
  core->options_.control = options.control;
  core->credentials_.tenant = options.tenant;
  if (!options.secret.empty()) {
    core->credentials_.secret = options.secret;
  } else if (!options.secret_file.empty()) {
    auto secret = control::ReadSecretFile(options.secret_file);
    if (!secret.ok()) return secret.status().WithContext("libros2 connect: tenant " + options.tenant);
    core->credentials_.secret = *secret;
  } else {
    return Status::InvalidArgument(
        fmt::format("libros2 connect: no secret for tenant '{}' (set secret or secret_file)", options.tenant));
  }

  auto provider = transport::ParseProvider(options.provider);
  if (!provider.ok()) return provider.status().WithContext("libros2 connect: provider");
  std::string_view kind_name = options.transport;
  if (kind_name.rfind("ofi-", 0) == 0) {
    kind_name.remove_prefix(4);
    *provider = transport::Provider::kOfi;
  }
  auto kind = transport::ParseTransportKind(kind_name);
  if (!kind.ok()) return kind.status().WithContext("libros2 connect: transport");
  if (options.spin_budget < std::chrono::microseconds(0) || options.spin_budget > std::chrono::seconds(1)) {
    return Status::InvalidArgument(
        fmt::format("libros2 connect: spin_budget {} us is not within 0..1000000", options.spin_budget.count()));
  }
  transport::TransportOptions topts;
  topts.provider = *provider;
  topts.kind = *kind;
  topts.spin_budget = options.spin_budget;
  topts.net_devices = options.net_devices;
  topts.default_timeout = options.io_timeout;
  auto context = SharedContext(topts);
  if (!context.ok()) return context.status().WithContext("libros2 connect: data-plane transport");
  core->context_ = *context;

  // gRPC's default reconnect backoff grows to 2 minutes: after an engine
  // restart a channel could stay in its backoff long after the engine is
  // back. Cap it at a second, so a client notices the restart within one.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  // The minimum is also how long one connection attempt may take (gRPC's
  // connect deadline): on a loaded host 100 ms timed attempts out before the
  // server's first frame, so it stays at two seconds.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A connection of its own, not one from gRPC's process-wide subchannel
  // pool: a client made in a forked child (the Python package reconnects in
  // DataLoader workers) would otherwise be handed the parent's connection and
  // interleave its streams with the parent's on one socket.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (const std::string& endpoint : SplitControl(core->options_.control)) {
    auto channel = grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
    if (!channel) return Status::Internal("libros2 connect: cannot create a control channel to " + endpoint);
    channels.push_back(std::move(channel));
  }
  if (channels.empty()) return Status::InvalidArgument("libros2 connect: no control endpoint in '" + options.control + "'");
  core->control_channel_ = channels.front();
  core->session_ = std::make_unique<control::SessionClient>(channels, options.control_timeout);
  core->management_ =
      std::make_unique<control::ManagementClient>(channels, core->credentials_, options.control_timeout);
  return core;
}

Result<std::shared_ptr<ThreadIo>> ClientCore::ThisThreadIo() {
  std::thread::id self = std::this_thread::get_id();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = threads_.find(self);
  if (it != threads_.end()) return it->second;
  auto worker = context_->CreateWorker(fmt::format("libros2-{}", threads_.size()));
  if (!worker.ok()) return worker.status().WithContext("libros2: creating this thread's transport worker");
  auto io = std::make_shared<ThreadIo>(context_, std::move(*worker), self);
  threads_[self] = io;
  return io;
}

Status ClientCore::RegisterBuffer(void* addr, uint64_t length) {
  auto region = context_->RegisterMemory(addr, length);
  if (!region.ok()) return region.status().WithContext("register buffer");
  std::lock_guard<std::mutex> lock(registered_mu_);
  registered_[reinterpret_cast<uintptr_t>(addr)] = std::move(*region);
  has_registered_.store(true, std::memory_order_relaxed);
  return Status::Ok();
}

Status ClientCore::UnregisterBuffer(void* addr) {
  std::shared_ptr<const transport::MemoryRegion> gone;  // released after the lock
  std::lock_guard<std::mutex> lock(registered_mu_);
  auto it = registered_.find(reinterpret_cast<uintptr_t>(addr));
  if (it == registered_.end()) {
    return Status::NotFound(fmt::format("unregister buffer: no registration starts at {}", addr));
  }
  gone = std::move(it->second);
  registered_.erase(it);
  has_registered_.store(!registered_.empty(), std::memory_order_relaxed);
  return Status::Ok();
}

std::shared_ptr<const transport::MemoryRegion> ClientCore::RegisteredRegion(const void* addr, uint64_t length) {
  if (!has_registered_.load(std::memory_order_relaxed)) return nullptr;
  std::lock_guard<std::mutex> lock(registered_mu_);
  auto it = registered_.upper_bound(reinterpret_cast<uintptr_t>(addr));
  if (it == registered_.begin()) return nullptr;
  --it;
  return it->second->Contains(addr, length) ? it->second : nullptr;
}

void ClientCore::AbandonPeers(const std::vector<std::string>& addresses) {
  if (addresses.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, io] : threads_) io->AbandonPeers(addresses);
}

Result<std::shared_ptr<const MapSnapshot>> MakeMapSnapshot(const rpc::PoolMap& map) {
  ROS2_ASSIGN_OR_RETURN(ConvertedPoolMap converted, PoolMapFromProto(map));
  auto snap = std::make_shared<MapSnapshot>();
  snap->map = std::move(converted.map);
  snap->engine_uuids = std::move(converted.engine_uuids);
  snap->engine_addresses = std::move(converted.engine_addresses);
  for (const auto& t : map.targets()) {
    snap->addresses.push_back(t.worker_address());
    snap->engine_index.push_back(t.index());
  }
  return std::shared_ptr<const MapSnapshot>(std::move(snap));
}

// --- Client ---

Client::Client(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  InitLibraryLogging();  // warn unless the process or ROS2_LOG chose otherwise
  std::string agent_socket = options.agent_socket;
  if (agent_socket.empty()) {
    if (const char* env = std::getenv("ROS2_AGENT_SOCKET"); env != nullptr) agent_socket = env;
  }
  if (!agent_socket.empty()) {
    // Offload mode: the agent holds the credentials and runs the data plane.
    ROS2_ASSIGN_OR_RETURN(auto agent, AgentClient::Create(options, agent_socket));
    return std::make_unique<Client>(std::move(agent));
  }
  ROS2_ASSIGN_OR_RETURN(auto core, ClientCore::Create(options));
  return std::make_unique<Client>(std::make_shared<DirectClient>(std::move(core)));
}

Result<std::unique_ptr<Pool>> Client::ConnectPool(std::string_view pool) {
  if (pool.empty()) return Status::InvalidArgument("connect pool: empty pool label");
  return impl_->ConnectPool(pool);
}
Result<std::unique_ptr<EventQueue>> Client::CreateEventQueue() {
  return impl_->CreateEventQueue();
}
Status Client::RegisterBuffer(void* addr, uint64_t length) {
  if (addr == nullptr || length == 0) return Status::InvalidArgument("register buffer: null address or zero length");
  return impl_->RegisterBuffer(addr, length);
}
Status Client::UnregisterBuffer(void* addr) {
  if (addr == nullptr) return Status::InvalidArgument("unregister buffer: null address");
  return impl_->UnregisterBuffer(addr);
}
Result<IoBuffer> Client::AllocateIoBuffer(uint64_t length) {
  return impl_->AllocateIoBuffer(length);
}
std::string Client::DescribeTransport() const {
  return impl_->DescribeTransport();
}
const ClientOptions& Client::options() const {
  return impl_->options();
}
bool Client::offload() const {
  return impl_->offload();
}

// --- DirectClient ---

Result<std::unique_ptr<Pool>> DirectClient::ConnectPool(std::string_view pool) {
  auto conn = core_->session().Connect(pool, core_->credentials());
  if (!conn.ok()) return conn.status().WithContext(fmt::format("connect pool '{}'", pool));
  auto snapshot = MakeMapSnapshot(conn->map);
  if (!snapshot.ok()) return snapshot.status().WithContext(fmt::format("connect pool '{}'", pool));
  auto pc = std::make_shared<PoolCore>(core_, std::move(*conn), std::move(*snapshot));
  pc->StartMapWatch();
  return std::make_unique<Pool>(std::make_shared<DirectPool>(std::move(pc)));
}

Result<std::unique_ptr<EventQueue>> DirectClient::CreateEventQueue() {
  ROS2_ASSIGN_OR_RETURN(auto io, core_->ThisThreadIo());
  return MakeEventQueue(std::make_unique<DirectQueue>(std::move(io)));
}

Status DirectClient::RegisterBuffer(void* addr, uint64_t length) {
  return core_->RegisterBuffer(addr, length);
}

Status DirectClient::UnregisterBuffer(void* addr) {
  return core_->UnregisterBuffer(addr);
}

Result<IoBuffer> DirectClient::AllocateIoBuffer(uint64_t length) {
  auto shared = transport::SharedBuffer::Create(length);
  if (!shared.ok()) return shared.status().WithContext("allocate I/O buffer");
  return IoBuffer(std::make_unique<IoBuffer::Impl>(std::move(*shared)));
}

std::string DirectClient::DescribeTransport() const {
  return core_->context().Describe();
}
const ClientOptions& DirectClient::options() const {
  return core_->options();
}

// --- IoBuffer ---

IoBuffer::IoBuffer() = default;
IoBuffer::IoBuffer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IoBuffer::IoBuffer(IoBuffer&& other) noexcept = default;
IoBuffer& IoBuffer::operator=(IoBuffer&& other) noexcept = default;
IoBuffer::~IoBuffer() = default;
std::byte* IoBuffer::data() const {
  return impl_ ? impl_->data() : nullptr;
}
uint64_t IoBuffer::size() const {
  return impl_ ? impl_->size() : 0;
}

IoBuffer::Impl::~Impl() {
  if (release_) release_();
}
std::byte* IoBuffer::Impl::data() const {
  return shared_ ? shared_->data() : arena_data_;
}
uint64_t IoBuffer::Impl::size() const {
  return shared_ ? shared_->size() : arena_size_;
}

Status CheckObjectClassSupported(ObjectClass oc) {
  if (ReplicaCount(oc) != 0) return Status::Ok();
  return Status::InvalidArgument(fmt::format("unknown object class {}", static_cast<int>(oc)));
}

}  // namespace ros2::client
