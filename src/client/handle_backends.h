// The two ways a Pool and a Container handle do their work, chosen once when
// they are made (include/ros2/client.h holds one backend per handle):
//   DirectPool / DirectContainer — libros2's own: a pool session, the map,
//     the container's capability, objects on the targets (pool.cc,
//     object_io.cc, object_scan.cc);
//   AgentPool / AgentContainer (offload/agent_handles.h) — offload mode: only
//     labels; the agent opens them when the DFS mounts the container, and
//     the object API answers NotSupported.
// Each method has the contract of the public method of the same name.
// Thread-safe as the handles are.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "ros2/client.h"

namespace ros2::client {

class PoolCore;
struct OffloadLink;

class ContainerBackend {
 public:
  virtual ~ContainerBackend() = default;
  virtual const ContainerSummary& summary() const = 0;
  virtual Result<Object> OpenObject(const ObjectId& oid) const = 0;
  virtual Result<std::vector<ObjectId>> ListObjects() const = 0;
  virtual Result<std::unique_ptr<EventQueue>> CreateEventQueue() const = 0;
  virtual Result<PoolSpace> QueryPoolSpace() const = 0;
  // The agent session of an offload-mode container (null for a direct one).
  virtual const OffloadLink* offload_link() const { return nullptr; }
};

class PoolBackend {
 public:
  virtual ~PoolBackend() = default;
  virtual PoolSummary summary() const = 0;
  virtual Result<std::unique_ptr<Container>> OpenContainer(std::string_view container, Rights rights) = 0;
  virtual Result<uint64_t> RefreshMap() = 0;
  virtual Result<std::vector<TargetConnection>> Connections() const = 0;

 protected:
  static std::unique_ptr<Container> MakeContainer(std::shared_ptr<ContainerBackend> backend) {
    return std::unique_ptr<Container>(new Container(std::move(backend)));
  }
};

class DirectContainer final : public ContainerBackend {
 public:
  explicit DirectContainer(std::shared_ptr<ContainerCore> core) : core_(std::move(core)) {}
  const ContainerSummary& summary() const override;
  Result<Object> OpenObject(const ObjectId& oid) const override;
  Result<std::vector<ObjectId>> ListObjects() const override;
  Result<std::unique_ptr<EventQueue>> CreateEventQueue() const override;
  Result<PoolSpace> QueryPoolSpace() const override;

 private:
  std::shared_ptr<ContainerCore> core_;
};

class DirectPool final : public PoolBackend {
 public:
  explicit DirectPool(std::shared_ptr<PoolCore> core) : core_(std::move(core)) {}
  PoolSummary summary() const override;
  Result<std::unique_ptr<Container>> OpenContainer(std::string_view container, Rights rights) override;
  Result<uint64_t> RefreshMap() override;
  Result<std::vector<TargetConnection>> Connections() const override;

 private:
  std::shared_ptr<PoolCore> core_;
};

}  // namespace ros2::client
