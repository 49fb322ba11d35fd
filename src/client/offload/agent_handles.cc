#include "client/offload/agent_handles.h"

#include <cstring>

#include <fmt/format.h>

namespace ros2::client {

Result<std::shared_ptr<AgentClient>> AgentClient::Create(const ClientOptions& options, const std::string& socket) {
  if (options.io_timeout.count() <= 0) return Status::InvalidArgument("libros2 connect: io_timeout must be positive");
  if (options.offload_spin_budget < std::chrono::microseconds(0) ||
      options.offload_spin_budget > std::chrono::seconds(1)) {
    return Status::InvalidArgument(fmt::format("libros2 connect: offload_spin_budget {} us is not within 0..1000000",
                                               options.offload_spin_budget.count()));
  }
  agent::HostOptions host;
  host.socket = socket;
  host.timeout = options.io_timeout;
  host.spin = options.offload_spin_budget;
  auto session = agent::HostSession::Connect(host);
  if (!session.ok()) return session.status().WithContext("libros2 connect (offload mode)");
  ClientOptions kept = options;
  kept.agent_socket = socket;
  return std::make_shared<AgentClient>(std::move(kept), std::move(*session));
}

Result<std::unique_ptr<Pool>> AgentClient::ConnectPool(std::string_view pool) {
  // The agent connects when the DFS mounts.
  return std::make_unique<Pool>(std::make_shared<AgentPool>(session_, pool));
}

Result<std::unique_ptr<EventQueue>> AgentClient::CreateEventQueue() {
  return OffloadAccess::MakeQueue(session_);
}

// The agent runs the data plane and moves the bytes: nothing to register here.
Status AgentClient::RegisterBuffer(void*, uint64_t) {
  return Status::Ok();
}

Status AgentClient::UnregisterBuffer(void*) {
  return Status::Ok();
}

Result<IoBuffer> AgentClient::AllocateIoBuffer(uint64_t length) {
  if (length > 0) {
    const uint64_t rounded = (length + 4095) / 4096 * 4096;
    auto piece = session_->Allocate(rounded);
    if (piece.ok()) {
      std::memset(piece->data, 0, rounded);
      return IoBuffer(std::make_unique<IoBuffer::Impl>(piece->data, rounded,
                                                       [session = session_, p = *piece] { session->Free(p); }));
    }
  }
  auto shared = transport::SharedBuffer::Create(length);
  if (!shared.ok()) return shared.status().WithContext("allocate I/O buffer");
  return IoBuffer(std::make_unique<IoBuffer::Impl>(std::move(*shared)));
}

std::string AgentClient::DescribeTransport() const {
  return "offload agent=" + options_.agent_socket;
}

AgentContainer::AgentContainer(OffloadLink link) : link_(std::move(link)) {
  summary_.label = link_.container;
}

Result<Object> AgentContainer::OpenObject(const ObjectId& oid) const {
  return Status::NotSupported(fmt::format(
      "open object {}: offload mode carries the DFS API only; the object API needs direct mode", oid.ToString()));
}

Result<std::vector<ObjectId>> AgentContainer::ListObjects() const {
  return Status::NotSupported("list objects: offload mode carries the DFS API only");
}

Result<std::unique_ptr<EventQueue>> AgentContainer::CreateEventQueue() const {
  return OffloadAccess::MakeQueue(link_.session);
}

Result<PoolSpace> AgentContainer::QueryPoolSpace() const {
  return Status::NotSupported("query pool space: in offload mode the DFS's Statfs asks the agent");
}

AgentPool::AgentPool(std::shared_ptr<agent::HostSession> session, std::string_view pool)
    : session_(std::move(session)), pool_(pool) {}

PoolSummary AgentPool::summary() const {
  PoolSummary s;  // what the agent resolves is not the host's to see
  s.label = pool_;
  return s;
}

Result<std::unique_ptr<Container>> AgentPool::OpenContainer(std::string_view container, Rights) {
  // The agent opens it, with its tenant's rights, when the DFS mounts it.
  return MakeContainer(std::make_shared<AgentContainer>(OffloadLink{session_, pool_, std::string(container)}));
}

Result<uint64_t> AgentPool::RefreshMap() {
  return Status::NotSupported("refresh map: the pool map is the agent's in offload mode");
}

Result<std::vector<TargetConnection>> AgentPool::Connections() const {
  return Status::NotSupported("pool connections: the agent holds them in offload mode");
}

}  // namespace ros2::client
