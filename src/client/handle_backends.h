// The two ways a Client, a Pool and a Container handle do their work, chosen
// once when they are made: each public handle (include/ros2/client.h) holds
// one backend, its Impl, and forwards to it.
//   DirectClient / DirectPool / DirectContainer — libros2's own: the control
//     channel and the transport, a pool session, the map, the container's
//     capability, objects on the targets (client.cc, pool.cc, object_io.cc,
//     object_scan.cc);
//   AgentClient / AgentPool / AgentContainer (offload/agent_handles.h) —
//     offload mode: the agent session and labels; the agent opens the pool
//     and container when the DFS mounts it, and the object API answers
//     NotSupported.
// Each method has the contract of the public method of the same name.
// Thread-safe as the handles are.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "client/client_internal.h"
#include "ros2/client.h"
#include "transport/shared_segment.h"

namespace ros2::client {

class PoolCore;
struct OffloadLink;

class Container::Impl {
 public:
  virtual ~Impl() = default;
  virtual const ContainerSummary& summary() const = 0;
  virtual Result<Object> OpenObject(const ObjectId& oid) const = 0;
  virtual Result<std::vector<ObjectId>> ListObjects() const = 0;
  virtual Result<std::unique_ptr<EventQueue>> CreateEventQueue() const = 0;
  virtual Result<PoolSpace> QueryPoolSpace() const = 0;
  // The agent session of an offload-mode container (null for a direct one).
  virtual const OffloadLink* offload_link() const { return nullptr; }
};

using ContainerBackend = Container::Impl;

class Pool::Impl {
 public:
  virtual ~Impl() = default;
  virtual PoolSummary summary() const = 0;
  virtual Result<std::unique_ptr<Container>> OpenContainer(std::string_view container, Rights rights) = 0;
  virtual Result<uint64_t> RefreshMap() = 0;
  virtual Result<std::vector<TargetConnection>> Connections() const = 0;

 protected:
  static std::unique_ptr<Container> MakeContainer(std::shared_ptr<ContainerBackend> backend) {
    return std::make_unique<Container>(std::move(backend));
  }
};
using PoolBackend = Pool::Impl;

class Client::Impl {
 public:
  virtual ~Impl() = default;
  virtual Result<std::unique_ptr<Pool>> ConnectPool(std::string_view pool) = 0;
  virtual Result<std::unique_ptr<EventQueue>> CreateEventQueue() = 0;
  virtual Status RegisterBuffer(void* addr, uint64_t length) = 0;
  virtual Status UnregisterBuffer(void* addr) = 0;
  virtual Result<IoBuffer> AllocateIoBuffer(uint64_t length) = 0;
  virtual std::string DescribeTransport() const = 0;
  virtual const ClientOptions& options() const = 0;
  virtual bool offload() const = 0;
};
using ClientBackend = Client::Impl;

// An IoBuffer's memory: a shared segment (direct mode), or a piece of the
// agent session's arena (offload mode: I/O on it is not copied by the host),
// given back by `release` when the buffer goes.
class IoBuffer::Impl {
 public:
  explicit Impl(std::unique_ptr<transport::SharedBuffer> shared) : shared_(std::move(shared)) {}
  Impl(std::byte* arena_data, uint64_t arena_size, std::function<void()> release)
      : arena_data_(arena_data), arena_size_(arena_size), release_(std::move(release)) {}
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  std::byte* data() const;
  uint64_t size() const;

 private:
  std::unique_ptr<transport::SharedBuffer> shared_;
  std::byte* arena_data_ = nullptr;
  uint64_t arena_size_ = 0;
  std::function<void()> release_;
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

class DirectClient final : public ClientBackend {
 public:
  explicit DirectClient(std::shared_ptr<ClientCore> core) : core_(std::move(core)) {}
  Result<std::unique_ptr<Pool>> ConnectPool(std::string_view pool) override;
  Result<std::unique_ptr<EventQueue>> CreateEventQueue() override;
  Status RegisterBuffer(void* addr, uint64_t length) override;
  Status UnregisterBuffer(void* addr) override;
  Result<IoBuffer> AllocateIoBuffer(uint64_t length) override;
  std::string DescribeTransport() const override;
  const ClientOptions& options() const override;
  bool offload() const override { return false; }

 private:
  std::shared_ptr<ClientCore> core_;
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
