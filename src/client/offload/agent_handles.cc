#include "client/offload/agent_handles.h"

#include <fmt/format.h>

namespace ros2::client {

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
