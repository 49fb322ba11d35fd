// Offload mode's Client, Pool and Container handles
// (client/handle_backends.h): the client's one agent session and the labels
// the application opened; ros2-agent opens the pool and container,
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

class AgentClient final : public ClientBackend {
 public:
  // Connects to the agent at `socket` (what ClientOptions::agent_socket or
  // ROS2_AGENT_SOCKET names); the rest of `options` that offload mode uses
  // is checked here.
  static Result<std::shared_ptr<AgentClient>> Create(const ClientOptions& options, const std::string& socket);
  AgentClient(ClientOptions options, std::shared_ptr<agent::HostSession> session)
      : options_(std::move(options)), session_(std::move(session)) {}
  Result<std::unique_ptr<Pool>> ConnectPool(std::string_view pool) override;
  Result<std::unique_ptr<EventQueue>> CreateEventQueue() override;
  // The agent's arena is the registered memory: nothing to do.
  Status RegisterBuffer(void* addr, uint64_t length) override;
  Status UnregisterBuffer(void* addr) override;
  // Arena memory, which the agent reads and writes in place; a full arena
  // falls back to ordinary memory (copied through the arena).
  Result<IoBuffer> AllocateIoBuffer(uint64_t length) override;
  std::string DescribeTransport() const override;
  const ClientOptions& options() const override { return options_; }
  bool offload() const override { return true; }

 private:
  ClientOptions options_;
  std::shared_ptr<agent::HostSession> session_;
};

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
