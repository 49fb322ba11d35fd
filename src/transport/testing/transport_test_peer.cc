// transport_test_peer: the server process of the transport tests. Usage:
//   transport_test_peer <tcp|shm|auto>
//   transport_test_peer <tcp|shm|auto> client <server address hex>
// The client form connects to a server, sends kOpHold requests with 64 MiB of
// bulk-out each (the server starts pulling) and waits to be killed: the tests
// use it to kill a client in the middle of a transfer.
// Prints its worker address as one line "ADDRESS <hex>" on stdout, then serves the opcodes
// of test_protocol.h until killed or until its parent dies.
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "transport/testing/test_protocol.h"
#include "transport/transport.h"

using namespace ros2;
using namespace ros2::transport;

int main(int argc, char** argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  signal(SIGPIPE, SIG_IGN);  // as a daemon: a closed stdout must not kill the server
  if (argc < 2) {
    fprintf(stderr, "usage: %s <tcp|shm|auto|ofi-tcp|ofi-shm>\n", argv[0]);
    return 2;
  }
  // "ofi-<kind>": the libfabric provider with that kind.
  const bool ofi = std::string_view(argv[1]).rfind("ofi-", 0) == 0;
  auto kind = ParseTransportKind(ofi ? argv[1] + 4 : argv[1]);
  if (!kind.ok()) {
    fprintf(stderr, "%s\n", kind.status().ToString().c_str());
    return 2;
  }
  TransportOptions opts;
  opts.kind = *kind;
  if (ofi) opts.provider = Provider::kOfi;
  if (const char* spin = getenv("ROS2_TRANSPORT_SPIN_US")) opts.spin_budget = std::chrono::microseconds(atoi(spin));
  // The RMA path's test: this server needs the RMA feature to GET and PUT.
  if (getenv("ROS2_TRANSPORT_FORCE_RMA") != nullptr) opts.force_rma_bulk = true;
  auto ctx = Context::Create(opts);
  if (!ctx.ok()) {
    fprintf(stderr, "%s\n", ctx.status().ToString().c_str());
    return 1;
  }
  auto worker_or = (*ctx)->CreateWorker("test-peer");
  if (!worker_or.ok()) {
    fprintf(stderr, "%s\n", worker_or.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<Worker> worker = std::move(*worker_or);
  if (argc >= 4 && std::string(argv[2]) == "client") {
    std::vector<uint8_t> address;
    for (size_t i = 0; i + 1 < strlen(argv[3]); i += 2) {
      address.push_back(static_cast<uint8_t>(std::stoi(std::string(argv[3] + i, 2), nullptr, 16)));
    }
    auto ep = worker->Connect(address);
    if (!ep.ok()) {
      fprintf(stderr, "%s\n", ep.status().ToString().c_str());
      return 1;
    }
    std::vector<std::byte> big(64u << 20, std::byte{7});
    for (int i = 0; i < 4; ++i) {
      CallOptions co;
      co.bulk_out = big;
      (void)(*ep)->Call(testing::kOpHold, {}, co, [](const ReplyView&) {});
    }
    printf("ADDRESS 00\n");  // tells the test the requests are on their way
    fflush(stdout);
    for (;;) worker->Wait(std::chrono::milliseconds(100));
  }
  std::vector<IncomingRequest> held;

  auto echo = [](IncomingRequest req) {
    auto buffer = std::make_shared<std::vector<std::byte>>(req.bulk_out_size());
    auto finish = [req, buffer](const Status& pulled) mutable {
      if (!pulled.ok()) return req.Reply(pulled);
      uint32_t crc = Crc32c(buffer->data(), buffer->size());
      std::vector<uint8_t> reply(4 + req.payload().size());
      std::memcpy(reply.data(), &crc, 4);
      if (!req.payload().empty()) std::memcpy(reply.data() + 4, req.payload().data(), req.payload().size());
      const size_t n = std::min<uint64_t>(buffer->size(), req.bulk_in_capacity());
      if (n == 0) return req.Reply(Status::Ok(), reply);
      req.Push(std::span<const std::byte>(buffer->data(), n),
               [req, buffer, reply = std::move(reply)](const Status& pushed) mutable { req.Reply(pushed, reply); });
    };
    if (buffer->empty()) return finish(Status::Ok());
    req.Pull(*buffer, std::move(finish));
  };
  (void)worker->RegisterHandler(testing::kOpEcho, echo);
  (void)worker->RegisterHandler(testing::kOpHold, [&held](IncomingRequest req) {
    auto buffer = std::make_shared<std::vector<std::byte>>(req.bulk_out_size());
    held.push_back(req);
    if (!buffer->empty()) req.Pull(*buffer, [buffer](const Status&) {});
  });
  (void)worker->RegisterHandler(testing::kOpHeldCount, [&held](IncomingRequest req) {
    uint64_t n = held.size();
    req.Reply(Status::Ok(), std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&n), 8));
  });
  (void)worker->RegisterHandler(testing::kOpDrop, [](IncomingRequest) {});
  (void)worker->RegisterHandler(testing::kOpStats, [&worker](IncomingRequest req) {
    const WorkerStats& st = worker->stats();
    uint64_t v[10] = {st.malformed_messages,      st.peers_lost,      st.bulk_rma_bytes, st.bulk_am_bytes,
                      st.wire_version_mismatches, st.bulk_cma_bytes,  st.cma_refused,    st.bulk_segment_bytes,
                      st.segments_mapped,         st.segments_refused};
    req.Reply(Status::Ok(), std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v), sizeof(v)));
  });
  // Writes FillByte(i) straight into the client's buffer when it is a shared
  // segment mapped here (the engine's zero-copy fetch), else NotSupported.
  (void)worker->RegisterHandler(testing::kOpFillDirect, [](IncomingRequest req) {
    std::span<std::byte> direct = req.DirectBulkIn();
    if (direct.empty()) return req.Reply(Status::NotSupported("no direct bulk-in buffer"));
    for (size_t i = 0; i < direct.size(); ++i) direct[i] = testing::FillByte(i);
    req.PushedDirect(direct.size());
    req.Reply(Status::Ok());
  });
  (void)worker->RegisterHandler(testing::kOpFail,
                                [](IncomingRequest req) { req.Reply(Status::NotFound("no such thing")); });
  // Bandwidth probes: one scratch buffer, reused (no per-request allocation).
  std::vector<std::byte> scratch(64u << 20, std::byte{0x5a});
  (void)worker->RegisterHandler(testing::kOpFill, [&scratch](IncomingRequest req) {
    const uint64_t n = std::min<uint64_t>(req.bulk_in_capacity(), scratch.size());
    req.Push(std::span<const std::byte>(scratch.data(), n), [req](const Status& st) mutable { req.Reply(st); });
  });
  (void)worker->RegisterHandler(testing::kOpSink, [&scratch](IncomingRequest req) {
    if (req.bulk_out_size() > scratch.size()) return req.Reply(Status::InvalidArgument("too large"));
    req.Pull(std::span<std::byte>(scratch.data(), req.bulk_out_size()),
             [req](const Status& st) mutable { req.Reply(st); });
  });
  std::vector<IncomingRequest> later;
  (void)worker->RegisterHandler(testing::kOpEchoLater, [&later](IncomingRequest req) { later.push_back(req); });
  std::vector<IncomingRequest> pull_later;
  (void)worker->RegisterHandler(testing::kOpPullLater,
                                [&pull_later](IncomingRequest req) { pull_later.push_back(req); });
  worker->SetReplyBatching(true);
  worker->SetPeerLostHandler([&held](uint64_t connection_id, const Status&) {
    std::erase_if(held, [&](const IncomingRequest& r) { return r.connection_id() == connection_id; });
  });

  std::string hex;
  for (uint8_t b : worker->address()) {
    char two[3];
    snprintf(two, sizeof two, "%02x", b);
    hex += two;
  }
  printf("ADDRESS %s\n", hex.c_str());
  fflush(stdout);
  for (;;) {
    worker->Wait(std::chrono::milliseconds(100));
    for (IncomingRequest& req : later) req.Reply(Status::Ok(), req.payload());
    later.clear();
    for (IncomingRequest& req : pull_later) {
      auto buffer = std::make_shared<std::vector<std::byte>>(req.bulk_out_size());
      req.Pull(*buffer, [req, buffer](const Status& pulled) mutable {
        if (!pulled.ok()) return req.Reply(pulled);
        const uint32_t crc = Crc32c(buffer->data(), buffer->size());
        req.Reply(Status::Ok(), std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&crc), 4));
      });
    }
    pull_later.clear();
    worker->FlushBatches();
  }
}
