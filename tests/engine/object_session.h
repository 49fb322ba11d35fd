// ObjectSession: a minimal object client for engine tests, built from the real
// pieces (the control-plane client wrappers, the transport and obj_rpc): it
// connects to a pool, opens a container, connects a transport endpoint to every
// target of the pool map and sends object RPCs to the target placement picks.
// Owns its transport Context and Worker; test thread only.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "control/credentials.h"
#include "control/session_client.h"
#include "object/obj_rpc.h"
#include "placement/pool_map.h"
#include "testing/pattern.h"
#include "transport/transport.h"

namespace ros2::testing {

struct FetchOutcome {
  obj::FetchReply reply;
  std::vector<std::byte> data;  // the bytes pushed (bulk_in_bytes)
};

class ObjectSession {
 public:
  static Result<std::unique_ptr<ObjectSession>> Open(const std::string& control, const control::Credentials& creds,
                                                     const std::string& pool, const std::string& container,
                                                     transport::TransportKind kind, control::Rights rights = 0);

  const control::PoolConnection& pool() const { return conn_; }
  const control::ContainerHandle& container() const { return cont_; }
  // The pool session's credential (Endpoint::AuthenticateSession).
  transport::SessionCredential session() const;
  const PoolMap& map() const { return map_; }
  size_t target_count() const { return endpoints_.size(); }
  transport::Endpoint& endpoint(uint32_t global_target) { return *endpoints_[global_target]; }
  transport::Worker& worker() { return *worker_; }
  // The engine uuid serving a global target.
  const std::string& engine_of(uint32_t global_target) const { return engine_of_[global_target]; }

  // The capability sent with every call; tests replace it to send bad ones.
  std::string capability;

  Result<uint32_t> TargetOf(const ObjectId& oid, const std::string& dkey) const;
  // The header of a request to `global_target`, made with the session's map
  // version (map().version; tests set map_version to send another).
  obj::RequestHeader Header(uint32_t global_target, Epoch epoch = 0) const;
  // Fetches the pool's current map version (Session.GetPoolMap) into map();
  // the targets and endpoints stay as they are. Returns the version.
  Result<uint64_t> RefreshMapVersion();
  void set_map_version(uint64_t version) { map_.version = version; }

  // A raw call whose reply keeps its payload whatever its status (a StaleMap
  // refusal carries one).
  struct RawReply {
    Status status;
    std::vector<uint8_t> payload;
  };
  RawReply CallRaw(uint32_t global_target, obj::Opcode op, std::span<const uint8_t> payload);

  // Raw call to a global target.
  Result<transport::ReplyMessage> Call(uint32_t global_target, obj::Opcode op, std::span<const uint8_t> payload,
                                       std::span<const std::byte> bulk_out = {}, std::span<std::byte> bulk_in = {});

  // Array update of `data` (record size 1) at `index`, with crc32c chunk checksums.
  Result<obj::UpdateReply> UpdateArray(const ObjectId& oid, const std::string& dkey, const std::string& akey,
                                       uint64_t index, std::span<const std::byte> data);
  Result<obj::UpdateReply> UpdateSingle(const ObjectId& oid, const std::string& dkey, const std::string& akey,
                                        std::span<const std::byte> data);
  // Fetch with verification of the returned checksums.
  Result<FetchOutcome> FetchArray(const ObjectId& oid, const std::string& dkey, const std::string& akey, uint64_t index,
                                  uint64_t count);
  Result<FetchOutcome> FetchSingle(const ObjectId& oid, const std::string& dkey, const std::string& akey,
                                   size_t capacity);

 private:
  ObjectSession() = default;
  Result<obj::UpdateReply> Update(obj::UpdateRequest req, std::span<const std::byte> data);
  Result<FetchOutcome> Fetch(const obj::FetchRequest& req, size_t capacity);

  std::string control_;
  control::Credentials creds_;
  control::PoolConnection conn_;
  control::ContainerHandle cont_;
  PoolMap map_;
  std::vector<std::string> engine_of_;
  std::vector<uint32_t> engine_index_;
  std::unique_ptr<transport::Context> context_;
  std::unique_ptr<transport::Worker> worker_;
  std::vector<std::shared_ptr<transport::Endpoint>> endpoints_;
};

}  // namespace ros2::testing
