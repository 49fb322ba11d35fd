// The engine tests' object client.
#include "object_session.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "common/checksum.h"
#include "control/control_channel.h"
#include "placement/placement.h"

namespace ros2::testing {

Result<std::unique_ptr<ObjectSession>> ObjectSession::Open(const std::string& control,
                                                           const control::Credentials& creds, const std::string& pool,
                                                           const std::string& container, transport::TransportKind kind,
                                                           control::Rights rights) {
  std::unique_ptr<ObjectSession> s(new ObjectSession());
  auto channel = control::MakeControlChannel({.address = control});
  if (!channel.ok()) return channel.status();
  control::SessionClient session(*channel);
  auto conn = session.Connect(pool, creds);
  if (!conn.ok()) return conn.status();
  s->conn_ = std::move(*conn);
  auto cont = session.OpenContainer(creds, s->conn_.session_uuid, container, rights);
  if (!cont.ok()) return cont.status();
  s->cont_ = std::move(*cont);
  s->capability = s->cont_.capability;
  s->control_ = control;
  s->creds_ = creds;

  const rpc::PoolMap& m = s->conn_.map;
  s->map_.version = m.version();
  for (const auto& t : m.targets()) {
    uint32_t rank = 0;
    for (int e = 0; e < m.engines_size(); ++e) {
      if (m.engines(e).uuid() == t.engine_uuid()) rank = static_cast<uint32_t>(e);
    }
    s->map_.targets.push_back({rank, t.index(), TargetState::kUp});
    s->engine_of_.push_back(t.engine_uuid());
  }

  transport::TransportOptions topts;
  topts.kind = kind;
  auto ctx = transport::Context::Create(topts);
  if (!ctx.ok()) return ctx.status();
  s->context_ = std::move(*ctx);
  auto worker = s->context_->CreateWorker("engine-test-client");
  if (!worker.ok()) return worker.status();
  s->worker_ = std::move(*worker);
  for (const auto& t : m.targets()) {
    const std::string& a = t.worker_address();
    auto ep = s->worker_->Connect(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(a.data()), a.size()));
    if (!ep.ok()) return ep.status().WithContext(fmt::format("connect target {} of {}", t.index(), t.engine_uuid()));
    // The engine accepts the session's capabilities only on a connection
    // that proved the session's key.
    if (Status st = (*ep)->AuthenticateSession(s->session()); !st.ok()) return st;
    s->endpoints_.push_back(std::move(*ep));
  }
  return s;
}

transport::SessionCredential ObjectSession::session() const {
  transport::SessionCredential cred;
  if (auto id = Uuid::Parse(conn_.session_uuid); id.ok()) cred.id = id->bytes();
  std::memcpy(cred.key.data(), conn_.session_key.data(), std::min(cred.key.size(), conn_.session_key.size()));
  return cred;
}

Result<uint32_t> ObjectSession::TargetOf(const ObjectId& oid, const std::string& dkey) const {
  return TargetForDkey(map_, oid, dkey);
}

obj::RequestHeader ObjectSession::Header(uint32_t global_target, Epoch epoch) const {
  obj::RequestHeader h;
  auto pool = Uuid::Parse(cont_.container.pool_uuid());
  auto cont = Uuid::Parse(cont_.container.uuid());
  if (pool.ok()) h.pool = *pool;
  if (cont.ok()) h.container = *cont;
  h.target = map_.targets[global_target].engine_index;
  h.epoch = epoch;
  h.map_version = map_.version;
  return h;
}

Result<uint64_t> ObjectSession::RefreshMapVersion() {
  ROS2_ASSIGN_OR_RETURN(auto channel, control::MakeControlChannel({.address = control_}));
  control::SessionClient session(channel);
  ROS2_ASSIGN_OR_RETURN(rpc::PoolMap m, session.GetPoolMap(creds_, conn_.session_uuid));
  map_.version = m.version();
  return map_.version;
}

ObjectSession::RawReply ObjectSession::CallRaw(uint32_t global_target, obj::Opcode op,
                                               std::span<const uint8_t> payload) {
  transport::CallOptions options;
  options.timeout = std::chrono::seconds(20);
  options.capability = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(capability.data()), capability.size());
  RawReply out;
  bool done = false;
  Status sent = endpoints_.at(global_target)
                    ->Call(static_cast<uint16_t>(op), payload, options, [&](const transport::ReplyView& reply) {
                      out.status = reply.status;
                      out.payload.assign(reply.payload.begin(), reply.payload.end());
                      done = true;
                    });
  if (!sent.ok()) return RawReply{sent, {}};
  (void)worker_->RunUntil([&done] { return done; }, std::chrono::seconds(30));
  if (!done) return RawReply{Status::TimedOut("object session: no reply within 30 s"), {}};
  return out;
}

Result<transport::ReplyMessage> ObjectSession::Call(uint32_t global_target, obj::Opcode op,
                                                    std::span<const uint8_t> payload,
                                                    std::span<const std::byte> bulk_out, std::span<std::byte> bulk_in) {
  transport::CallOptions options;
  options.timeout = std::chrono::seconds(20);
  options.capability = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(capability.data()), capability.size());
  options.bulk_out = bulk_out;
  options.bulk_in = bulk_in;
  return endpoints_.at(global_target)->CallSync(static_cast<uint16_t>(op), payload, options);
}

Result<obj::UpdateReply> ObjectSession::Update(obj::UpdateRequest req, std::span<const std::byte> data) {
  ROS2_ASSIGN_OR_RETURN(uint32_t target, TargetOf(req.oid, req.dkey));
  req.header = Header(target);
  req.length = data.size();
  req.csum.type = ChecksumType::kCrc32c;
  req.csum.chunk_size = 4096;
  req.csum.values = ComputeChunkChecksums(ChecksumType::kCrc32c, data, 4096);
  auto payload = obj::Encode(req);
  ROS2_ASSIGN_OR_RETURN(auto reply, Call(target, obj::Opcode::kUpdate, payload, data));
  return obj::DecodeUpdateReply(reply.payload);
}

Result<obj::UpdateReply> ObjectSession::UpdateArray(const ObjectId& oid, const std::string& dkey,
                                                    const std::string& akey, uint64_t index,
                                                    std::span<const std::byte> data) {
  obj::UpdateRequest req;
  req.oid = oid;
  req.dkey = dkey;
  req.akey = akey;
  req.type = obj::ValueType::kArray;
  req.index = index;
  req.record_size = 1;
  return Update(std::move(req), data);
}

Result<obj::UpdateReply> ObjectSession::UpdateSingle(const ObjectId& oid, const std::string& dkey,
                                                     const std::string& akey, std::span<const std::byte> data) {
  obj::UpdateRequest req;
  req.oid = oid;
  req.dkey = dkey;
  req.akey = akey;
  req.type = obj::ValueType::kSingle;
  return Update(std::move(req), data);
}

Result<FetchOutcome> ObjectSession::Fetch(const obj::FetchRequest& base, size_t capacity) {
  obj::FetchRequest req = base;
  ROS2_ASSIGN_OR_RETURN(uint32_t target, TargetOf(req.oid, req.dkey));
  req.header = Header(target);
  FetchOutcome out;
  out.data.resize(capacity);
  auto payload = obj::Encode(req);
  ROS2_ASSIGN_OR_RETURN(auto reply, Call(target, obj::Opcode::kFetch, payload, {}, out.data));
  ROS2_ASSIGN_OR_RETURN(out.reply, obj::DecodeFetchReply(reply.payload));
  out.data.resize(reply.bulk_in_bytes);
  if (out.reply.csum.type != ChecksumType::kNone) {
    ROS2_RETURN_IF_ERROR(VerifyChunkChecksums(out.reply.csum.type, out.data, out.reply.csum.chunk_size,
                                              out.reply.csum.values, "fetched data"));
  }
  return out;
}

Result<FetchOutcome> ObjectSession::FetchArray(const ObjectId& oid, const std::string& dkey, const std::string& akey,
                                               uint64_t index, uint64_t count) {
  obj::FetchRequest req;
  req.oid = oid;
  req.dkey = dkey;
  req.akey = akey;
  req.type = obj::ValueType::kArray;
  req.index = index;
  req.count = count;
  req.record_size = 1;
  return Fetch(req, count);
}

Result<FetchOutcome> ObjectSession::FetchSingle(const ObjectId& oid, const std::string& dkey, const std::string& akey,
                                                size_t capacity) {
  obj::FetchRequest req;
  req.oid = oid;
  req.dkey = dkey;
  req.akey = akey;
  req.type = obj::ValueType::kSingle;
  return Fetch(req, capacity);
}

}  // namespace ros2::testing
