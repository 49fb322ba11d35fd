// Offload mode's Pool and Container handles (client/handle_backends.h): the
// labels the application opened; ros2-agent opens the pool and container,
// with its tenant's rights, when the DFS mounts the container
// (dfs/offload/agent_filesystem.h). The object API answers NotSupported: the
// agent offers the DFS, not raw objects.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "client/handle_backends.h"
#include "client/offload/agent_queue.h"

namespace ros2::client {

class AgentContainer final : public ContainerBackend {
 public:
  explicit AgentContainer(OffloadLink link);
  const ContainerSummary& summary() const override { return summary_; }
  Result<Object> OpenObject(const ObjectId& oid) const override;
  Result<std::vector<ObjectId>> ListObjects() const override;
  Result<std::unique_ptr<EventQueue>> CreateEventQueue() const override;
  Result<PoolSpace> QueryPoolSpace() const override;
  const OffloadLink* offload_link() const override { return &link_; }

 private:
  OffloadLink link_;
  ContainerSummary summary_;  // the label only: the rest is the agent's to know
};

class AgentPool final : public PoolBackend {
 public:
  AgentPool(std::shared_ptr<agent::HostSession> session, std::string_view pool);
  PoolSummary summary() const override;
  Result<std::unique_ptr<Container>> OpenContainer(std::string_view container, Rights rights) override;
  Result<uint64_t> RefreshMap() override;
  Result<std::vector<TargetConnection>> Connections() const override;

 private:
  std::shared_ptr<agent::HostSession> session_;
  std::string pool_;
};

}  // namespace ros2::client
