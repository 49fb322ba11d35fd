// transport_attack_peer: the hostile client of the transport attack tests
// (transport_attack_test.cc). It is built on the real transport and object
// protocol code, connects to a ros2-engine target like any client, and then
// crafts what the normal client never sends (through the transport's test
// seam, transport/fault_injection.h): another connection's id, a cma address in another process,
// a flood of hellos or cma token requests, oversized shared segments.
//
// Usage: transport_attack_peer <attack> key=value ...
//   keys: address (hex address blob of the target), kind (shm|tcp), cap (hex
//   capability of the attacker's own container), pool, container (uuids),
//   target (engine-local index), oid (object id low bits), victim_conn (hex
//   server-side id of the victim's connection), victim_addr (hex address in the
//   victim process), victim_req (hex request id), len, count, size, hold_ms.
// Prints "RESULT <name> <code> <text>" lines on stdout (code: the Status code
// number, 0 for OK and for plain values) and exits 0 when the attack ran.
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "attack_peer_args.h"
#include "common/checksum.h"
#include "object/obj_rpc.h"
#include "testing/pattern.h"
#include "testing/proc_status.h"
#include "testing/subprocess.h"
#include "transport/cma.h"
#include "transport/fault_injection.h"
#include "transport/shared_segment.h"
#include "transport/transport.h"

using namespace ros2;
using ros2::testing::Pattern;

namespace {

using namespace ros2::testing::attack_peer;

// One transport client of the attacker: a context, a worker, endpoints.
struct Attacker {
  transport::MessageRewriter rewriter;  // attached to `worker`; outlives it
  std::unique_ptr<transport::Context> context;
  std::unique_ptr<transport::Worker> worker;
  std::vector<uint8_t> address = Unhex(Arg("address"));
  std::vector<uint8_t> cap = Unhex(Arg("cap"));

  Status Init() {
    transport::TransportOptions o;
    auto kind = transport::ParseTransportKind(Arg("kind", "shm"));
    if (!kind.ok()) return kind.status();
    o.kind = *kind;
    o.connect_timeout = std::chrono::milliseconds(NumArg("connect_timeout_ms", 10000));
    auto ctx = transport::Context::Create(o);
    if (!ctx.ok()) return ctx.status();
    context = std::move(*ctx);
    auto w = context->CreateWorker("attacker");
    if (!w.ok()) return w.status();
    worker = std::move(*w);
    transport::SetFaultInjection(*worker, &rewriter);
    return Status::Ok();
  }
  // Connects and, given the session's credential (args session=<uuid>,
  // session_key=<hex>), proves it as a client does.
  // With arg claim_pid, the hello's address blob claims another pid
  // (ClaimPid). auth=0 connects without proving the session.
  Result<std::shared_ptr<transport::Endpoint>> Connect() {
    ClaimPid();
    auto ep = worker->Connect(address);
    if (!ep.ok() || Arg("session").empty() || NumArg("auth", 1) == 0) return ep;
    transport::SessionCredential cred;
    cred.id = Uuid::Parse(Arg("session"))->bytes();
    const auto key = Unhex(Arg("session_key"));
    std::copy_n(key.begin(), std::min(key.size(), cred.key.size()), cred.key.begin());
    if (Status st = (*ep)->AuthenticateSession(cred); !st.ok()) return st;
    return ep;
  }

  std::vector<uint8_t> claimed_address;  // the hello payload while claiming a pid
  std::vector<testing::ChildProcess> claimed_children;  // the live processes whose pids were claimed
  // Arg claim_pid=N claims pid N; claim_pid=children claims, at every
  // Connect, the pid of a new child of ours (each a live process, so the
  // server can watch it), never our own.
  void ClaimPid() {
    const std::string claim = Arg("claim_pid");
    if (claim.empty()) return;
    int32_t pid = 0;
    if (claim == "children") {
      auto child = testing::ChildProcess::Fork([] {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        pause();
        return 0;
      });
      pid = child.ok() ? child->pid() : -1;
      if (child.ok()) claimed_children.push_back(std::move(*child));
    } else {
      pid = static_cast<int32_t>(std::stol(claim));
    }
    claimed_address.assign(worker->address().begin(), worker->address().end());
    std::memcpy(claimed_address.data() + 8, &pid, sizeof(pid));  // the blob's pid field
    rewriter.hello = [this](transport::wire::Message& m) { m.payload = claimed_address; };
  }

  obj::RequestHeader Header() const {
    obj::RequestHeader h;
    h.pool = *Uuid::Parse(Arg("pool"));
    h.container = *Uuid::Parse(Arg("container"));
    h.target = static_cast<uint32_t>(NumArg("target", 0));
    h.map_version = NumArg("map_version", 0);  // the current map: the attack gets past the version check
    return h;
  }
  ObjectId Oid() const { return ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 0, NumArg("oid", 77)); }

  transport::CallOptions Options() const {
    transport::CallOptions o;
    o.timeout = std::chrono::milliseconds(NumArg("timeout_ms", 3000));
    o.capability = cap;
    return o;
  }
  Status Update(transport::Endpoint& ep, std::span<const std::byte> data) {
    obj::UpdateRequest req;
    req.header = Header();
    req.oid = Oid();
    req.dkey = "d";
    req.akey = "a";
    req.type = obj::ValueType::kArray;
    req.record_size = 1;
    req.length = data.size();
    auto o = Options();
    o.bulk_out = data;
    auto r = ep.CallSync(static_cast<uint16_t>(obj::Opcode::kUpdate), obj::Encode(req), o);
    return r.status();
  }
  Status Fetch(transport::Endpoint& ep, std::span<std::byte> into) {
    obj::FetchRequest req;
    req.header = Header();
    req.oid = Oid();
    req.dkey = "d";
    req.akey = "a";
    req.type = obj::ValueType::kArray;
    req.count = into.size();
    req.record_size = 1;
    auto o = Options();
    o.bulk_in = into;
    auto r = ep.CallSync(static_cast<uint16_t>(obj::Opcode::kFetch), obj::Encode(req), o);
    return r.status();
  }
};

// Rewrites the next requests to name `conn` and, if set, to move bulk by cma
// at `addr` in whatever process that connection proved.
void Redirect(transport::MessageRewriter& rewriter, uint64_t conn, uint64_t addr, uint64_t request_id = 0) {
  rewriter.request = [=](transport::wire::Message& m) {
    m.connection_id = conn;
    if (request_id != 0) m.request_id = request_id;
    for (uint8_t i = 0; i < m.bulk_count && addr != 0; ++i) {
      auto& d = m.bulk[i];
      if (d.direction == transport::wire::BulkDirection::kOut) m.inline_data = {};
      d.transfer = transport::wire::BulkTransfer::kCma;
      d.remote_addr = addr;
      d.rkey = {};
    }
  };
}

int Run(const std::string& attack) {
  Attacker a;
  if (Status st = a.Init(); !st.ok()) {
    Report("init", st);
    return 1;
  }
  if (attack == "token-flood") {
    auto peer = transport::wire::DecodeAddress(a.address);
    if (!peer.ok()) return Report("address", peer.status()), 1;
    uint64_t ok = 0, refused = 0;
    Status first_refusal;
    for (uint64_t i = 0; i < NumArg("count", 5000); ++i) {
      auto t = transport::cma::RequestToken(peer->pid, std::chrono::milliseconds(2000));
      if (t.ok()) {
        ++ok;
      } else {
        if (refused++ == 0) first_refusal = t.status();
      }
    }
    Value("tokens_issued", std::to_string(ok));
    Value("tokens_refused", std::to_string(refused));
    if (refused > 0) Report("first_refusal", first_refusal);
    return 0;
  }
  if (attack == "conn-flood") {
    std::vector<std::shared_ptr<transport::Endpoint>> eps;
    uint64_t refused = 0;
    Status first_refusal;
    for (uint64_t i = 0; i < NumArg("count", 100); ++i) {
      auto ep = a.Connect();
      if (ep.ok()) {
        eps.push_back(*ep);
      } else if (refused++ == 0) {
        first_refusal = ep.status();
      }
    }
    Value("connected", std::to_string(eps.size()));
    Value("refused", std::to_string(refused));
    if (refused > 0) Report("first_refusal", first_refusal);
    // Hold them (progressing, so a bye from the server is seen) and count
    // the ones the server closed.
    const auto hold = std::chrono::milliseconds(NumArg("hold_ms", 0));
    (void)a.worker->RunUntil([] { return false; }, hold);
    uint64_t closed = 0;
    Status first_close;
    for (auto& ep : eps) {
      if (!ep->status().ok() && closed++ == 0) first_close = ep->status();
    }
    Value("closed", std::to_string(closed));
    if (closed > 0) Report("first_close", first_close);
    return 0;
  }

  auto ep = a.Connect();
  if (!ep.ok()) return Report("connect", ep.status()), 1;
  Value("bulk_mode", std::string(transport::BulkTransferName((*ep)->info().bulk_mode)));
  const uint64_t len = NumArg("len", 64 * 1024);

  if (attack == "replay") {
    // Args cap/container: a capability captured from another tenant's
    // traffic, sent from this process's own connection.
    const auto data = Pattern(4096, 99);
    Report("update", a.Update(**ep, data));
    std::vector<std::byte> into(4096);
    Report("fetch", a.Fetch(**ep, into));
    return 0;
  }
  if (attack == "ids") {
    // The server's ids of two connections of ours, as our requests carry them.
    auto ep2 = a.Connect();
    if (!ep2.ok()) return Report("connect2", ep2.status()), 1;
    std::vector<uint64_t> ids;
    a.rewriter.request = [&](transport::wire::Message& m) { ids.push_back(m.connection_id); };
    (void)(*ep)->CallSync(0x7abc, {}, a.Options());
    (void)(*ep2)->CallSync(0x7abc, {}, a.Options());
    Value("id1", fmt::format("{:x}", ids.at(0)));
    Value("id2", fmt::format("{:x}", ids.at(1)));
    return 0;
  }
  if (attack == "bye") {
    a.rewriter.request = [&](transport::wire::Message& m) {
      m = transport::wire::Message{};
      m.kind = transport::wire::Kind::kBye;
      m.connection_id = HexArg("victim_conn");
    };
    auto o = a.Options();
    o.timeout = std::chrono::milliseconds(500);
    Report("bye", (*ep)->CallSync(0x7abc, {}, o).status());  // no answer is expected either way
    a.rewriter.request = nullptr;
    Report("own_connection", (*ep)->CallSync(0x7abc, {}, a.Options()).status());  // NotSupported: still served
    return 0;
  }
  if (attack == "fetch-into") {
    // Our own container holds the bytes we choose; the fetch names the
    // victim's connection and an address in the victim.
    const auto chosen = Pattern(len, 66);
    Report("plant", a.Update(**ep, chosen));
    std::vector<std::byte> buf(len);
    Redirect(a.rewriter, HexArg("victim_conn"), HexArg("victim_addr"));
    Report("attack", a.Fetch(**ep, buf));
    return 0;
  }
  if (attack == "update-from") {
    std::vector<std::byte> buf(len);
    Redirect(a.rewriter, HexArg("victim_conn"), HexArg("victim_addr"));
    Report("attack", a.Update(**ep, buf));
    a.rewriter.request = nullptr;
    std::vector<std::byte> stored(len);
    Status st = a.Fetch(**ep, stored);
    Report("read_own", st);
    if (st.ok()) Value("stored_crc", fmt::format("{:08x}", Crc32c(stored.data(), stored.size())));
    return 0;
  }
  if (attack == "hijack-reply") {
    // A fetch of our own object whose reply goes to the victim's connection
    // under the id of the victim's next call.
    const auto chosen = Pattern(len, 67);
    Report("plant", a.Update(**ep, chosen));
    std::vector<std::byte> buf(len);
    Redirect(a.rewriter, HexArg("victim_conn"), 0, HexArg("victim_req"));
    Report("attack", a.Fetch(**ep, buf));
    // A refusal answers our own connection, but under the forged request id:
    // our call cannot match it (it times out); it shows up as a stale reply.
    Value("stale_replies", std::to_string(a.worker->stats().stale_replies));
    return 0;
  }
  if (attack == "inline-limit") {
    // Inline bulk the normal client never sends: out above the server's
    // limit, and an inline bulk-in of `len` bytes (above 1 MiB the reply
    // cannot be encoded at all).
    std::vector<std::byte> buf(len), in(NumArg("in_len", len));
    a.rewriter.request = [&](transport::wire::Message& m) {
      for (uint8_t i = 0; i < m.bulk_count; ++i) {
        m.bulk[i].transfer = transport::wire::BulkTransfer::kInline;
        m.bulk[i].remote_addr = 0;
        m.bulk[i].rkey = {};
        if (m.bulk[i].direction == transport::wire::BulkDirection::kOut)
          m.inline_data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(buf.data()), buf.size());
      }
    };
    const auto t0 = std::chrono::steady_clock::now();
    Report("inline_out", a.Update(**ep, buf));
    Report("inline_in", a.Fetch(**ep, in));
    Value("elapsed_ms",
          std::to_string(
              std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()));
    return 0;
  }
  if (attack == "cma-stall") {
    // Memory whose pages never arrive (userfaultfd, no handler): a
    // process_vm_readv of it blocks until we close the descriptor, as a page
    // of a stalled FUSE or network file would. Our own update names it as
    // cma bulk-out, on our own (proven) connection.
    const int uffd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC));
    uffdio_api api{};
    api.api = UFFD_API;
    void* stall = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uffdio_register reg{};
    reg.range.start = reinterpret_cast<uint64_t>(stall);
    reg.range.len = len;
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) != 0 || stall == MAP_FAILED ||
        ioctl(uffd, UFFDIO_REGISTER, &reg) != 0)
      return Report("userfaultfd", Status::FromErrno(errno, "userfaultfd")), 1;
    std::vector<std::byte> buf(len);
    a.rewriter.request = [&](transport::wire::Message& m) {
      for (uint8_t i = 0; i < m.bulk_count; ++i) {
        m.bulk[i].transfer = transport::wire::BulkTransfer::kCma;
        m.bulk[i].remote_addr = reinterpret_cast<uint64_t>(stall);
        m.bulk[i].rkey = {};
      }
      m.inline_data = {};
    };
    Report("attack", a.Update(**ep, buf));
    // Keep the stall in place a while (the victim calls meanwhile).
    std::this_thread::sleep_for(std::chrono::milliseconds(NumArg("hold_ms", 0)));
    close(uffd);
    return 0;
  }
  if (attack == "big-segments") {
    // Segments of `size` bytes (sparse memfds: nothing is committed), each
    // named by an update of 4 KiB from its start.
    std::vector<std::unique_ptr<transport::SharedBuffer>> segs;
    uint64_t ok = 0, refused = 0;
    Status first_refusal;
    for (uint64_t i = 0; i < NumArg("count", 8); ++i) {
      auto seg = transport::SharedBuffer::Create(NumArg("size", uint64_t{2} << 40));
      if (!seg.ok()) return Report("create", seg.status()), 1;
      Status st = a.Update(**ep, std::span<const std::byte>((*seg)->data(), 4096));
      if (st.ok()) {
        ++ok;
      } else if (refused++ == 0) {
        first_refusal = st;
      }
      segs.push_back(std::move(*seg));
    }
    // The engine's address space while we still hold the segments (a closed
    // connection unmaps them).
    if (auto peer = transport::wire::DecodeAddress(a.address); peer.ok()) {
      Value("engine_vm_bytes", std::to_string(ros2::testing::ProcStatusBytes(peer->pid, "VmSize")));
    }
    Value("segments_served", std::to_string(ok));
    Value("segments_refused", std::to_string(refused));
    if (refused > 0) Report("first_refusal", first_refusal);
    return 0;
  }
  Report("usage", Status::InvalidArgument("unknown attack " + attack));
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (argc < 2) {
    fprintf(stderr, "usage: %s <attack> key=value ...\n", argv[0]);
    return 2;
  }
  ros2::testing::attack_peer::ParseArgs(argc, argv, 2);
  return Run(argv[1]);
}
