// What a peer with other UCX tcp settings does to a real ros2-engine
// (docs/security.md, "UCX tcp segments"). The attacker (ucx_tcp_attack_peer)
// is written from plain ucp calls, needs no hello or capability, and sets
// larger tcp segments and eager or zero-copy thresholds so that one active
// message is longer than the engine's receive segment: UCX 1.13 as packaged
// asserts on it and the engine dies. Each test checks that the engine
// refuses it by closing that connection (its log names the sizes), stays up,
// keeps serving a victim whose data reads back, and keeps its memory bounded.
// Another test has the same peer put at address 0x10 of the engine and get
// from its heap through UCX's software RMA: both are dropped. A third has it
// speak UCT's tcp protocol on a socket of its own and send transport-level put
// requests naming engine addresses: the engine's tcp interface has put
// disabled and closes that connection.
// The last test runs `ros2ctl fs put` of 64 MiB with the client's segment sizes
// set to 1m and 4m: the client keeps to what the engine receives, the put
// succeeds and the file reads back.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "attack_arena.h"
#include "engine_cluster.h"
#include "object_session.h"
#include "testing/pattern.h"
#include "testing/proc_status.h"
#include "testing/test_cluster.h"
#include "transport/wire.h"

extern char** environ;

namespace ros2::testing {
namespace {

using transport::TransportKind;

// Runs the attacker with `env` added to this process's environment (minus
// every UCX_ variable of ours) and returns its "RESULT name value" lines.
std::map<std::string, std::string> RunPeer(const std::string& address_hex, const std::vector<std::string>& env,
                                           const std::vector<std::string>& args) {
  std::vector<std::string> envs = {"UCX_TLS=tcp,self", "UCX_NET_DEVICES=lo"};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind("UCX_", 0) != 0) envs.emplace_back(*e);
  }
  envs.insert(envs.end(), env.begin(), env.end());
  std::vector<std::string> argv_s = {UCX_TCP_ATTACK_PEER_PATH, "address=" + address_hex};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  const std::string out = RunAttackerProcess(std::move(argv_s), std::move(envs));
  std::map<std::string, std::string> results;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("RESULT ", 0) != 0) continue;
    const size_t sp = line.find(' ', 7);
    results[line.substr(7, sp - 7)] = sp == std::string::npos ? "" : line.substr(sp + 1);
  }
  return results;
}

uint64_t VmRss(int pid) {
  return ProcStatusBytes(pid, "VmRSS");
}

// One engine target over tcp and a victim client (this process) with data.
struct TcpArena {
  EngineCluster cluster;
  std::unique_ptr<ObjectSession> victim;
  const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 0, 1);
  std::vector<std::byte> data = Pattern(1 << 20, 21);

  void Start() {
    ASSERT_NO_FATAL_FAILURE(cluster.Start({.transport = "tcp", .targets = 1}));
    ROS2_ASSERT_OK(cluster.mgmt->CreatePool("p", uint64_t{64} << 20));
    ROS2_ASSERT_OK(cluster.mgmt->CreateContainer("p", "victim"));
    auto v = ObjectSession::Open(cluster.engine->control(), cluster.admin, "p", "victim", TransportKind::kTcp);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    victim = std::move(*v);
    ROS2_ASSERT_OK(victim->UpdateArray(oid, "d", "a", 0, data));
  }
  // The target's UCX worker address (inside the ROS2 address blob of the pool map).
  std::string UcxAddressHex() const {
    const std::string& blob = victim->pool().map.targets(0).worker_address();
    auto a = transport::wire::DecodeAddress(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(blob.data()), blob.size()));
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    std::string hex;
    if (a.ok()) {
      for (uint8_t b : a->ucx_address) hex += fmt::format("{:02x}", b);
    }
    return hex;
  }
  // The engine runs, its old and a new connection read the victim's data back.
  void ExpectEngineServes() {
    ASSERT_FALSE(ProcessExited(cluster.engine->pid())) << "the engine died:\n" << cluster.engine->LogTail();
    auto f = victim->FetchArray(oid, "d", "a", 0, data.size());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->data, data) << "the victim's data changed";
    auto fresh = ObjectSession::Open(cluster.engine->control(), cluster.admin, "p", "victim", TransportKind::kTcp);
    ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
    auto again = (*fresh)->FetchArray(oid, "d", "a", 0, data.size());
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->data, data);
  }
  std::string EngineLog() const { return ReadWholeFile(cluster.dir.path() + "/engine0/engine.log"); }
};

struct Attack {
  const char* name;
  std::vector<std::string> env;
  std::vector<std::string> args;
};

void PrintTo(const Attack& a, std::ostream* os) {
  *os << a.name;
}

class UcxTcpSegmentAttack : public ::testing::TestWithParam<Attack> {};

TEST_P(UcxTcpSegmentAttack, IsRefusedByClosingTheConnectionAndTheEngineServesOn) {
  TcpArena a;
  ASSERT_NO_FATAL_FAILURE(a.Start());
  const uint64_t rss_before = VmRss(a.cluster.engine->pid());
  auto r = RunPeer(a.UcxAddressHex(), GetParam().env, GetParam().args);
  ASSERT_TRUE(r.count("sent")) << "the attacker printed nothing";
  EXPECT_NE(r["ep_error"], "none") << "the engine did not close the attacker's connection";
  ASSERT_FALSE(ProcessExited(a.cluster.engine->pid()))
      << "the engine died (is the patched libuct of scripts/install-ucx-patch.sh installed?):\n"
      << a.cluster.engine->LogTail();
  // The refusal names what was wrong: the message and the receive segment.
  const std::string log = a.EngineLog();
  EXPECT_NE(log.find("above this receiver's 262144-byte segment (UCX_TCP_RX_SEG_SIZE); closing the connection"),
            std::string::npos)
      << "the engine did not refuse the oversized message:\n"
      << a.cluster.engine->LogTail();
  ASSERT_NO_FATAL_FAILURE(a.ExpectEngineServes());
  const uint64_t rss_after = VmRss(a.cluster.engine->pid());
  std::printf("attack %s: sent=%s first_error=%s ep_error=%s; engine RSS %.1f -> %.1f MiB\n", GetParam().name,
              r["sent"].c_str(), r["first_error"].c_str(), r["ep_error"].c_str(), rss_before / 1048576.0,
              rss_after / 1048576.0);
  EXPECT_LT(rss_after, rss_before + (uint64_t{64} << 20)) << "engine RSS " << rss_before << " -> " << rss_after;
}

INSTANTIATE_TEST_SUITE_P(PeerSettings, UcxTcpSegmentAttack,
                         ::testing::Values(
                             // 1 MiB segments, no rendezvous: one 1 MiB eager message.
                             Attack{"Segments1m",
                                    {"UCX_TCP_TX_SEG_SIZE=1m", "UCX_TCP_RX_SEG_SIZE=1m", "UCX_RNDV_THRESH=inf"},
                                    {"size=1048576", "count=2"}},
                             // 4 MiB segments, copy path only: 3 MiB eager messages.
                             Attack{"Segments4mCopy",
                                    {"UCX_TCP_TX_SEG_SIZE=4m", "UCX_TCP_RX_SEG_SIZE=4m", "UCX_RNDV_THRESH=inf",
                                     "UCX_ZCOPY_THRESH=inf"},
                                    {"size=3145728", "count=2"}},
                             // Default send segments, but a 4 MiB receive segment sizes the
                             // zero-copy fragments: 2 MiB eager zero-copy messages.
                             Attack{"ZeroCopyFragments",
                                    {"UCX_TCP_RX_SEG_SIZE=4m", "UCX_RNDV_THRESH=inf", "UCX_ZCOPY_THRESH=0"},
                                    {"size=2097152", "count=2"}}),
                         [](const ::testing::TestParamInfo<Attack>& info) { return std::string(info.param.name); });

// UCX's software RMA (put and get over tcp) writes and reads whatever address
// a peer names; the engine is never an RMA target and has UCX drop them: a put
// at 0x10 (which crashed it) and a get of its heap (which read it) are
// not served, and the engine serves on. Over tcp the engine's context has no
// RMA feature, so UCX has no handler for them at all (the first layer: the
// peer's operations never complete); an rdma context, which has the feature,
// drops them through RMA_SW_TARGET=n (the second, which logs the drop).
// The start and end of a process's heap, {0, 0} if it has none.
std::pair<uint64_t, uint64_t> Heap(int pid) {
  std::ifstream maps(fmt::format("/proc/{}/maps", pid));
  for (std::string line; std::getline(maps, line);) {
    if (line.find("[heap]") == std::string::npos) continue;
    char* end = nullptr;
    const uint64_t start = std::strtoull(line.c_str(), &end, 16);
    return {start, std::strtoull(end + 1, nullptr, 16)};
  }
  return {0, 0};
}

TEST(UcxRemoteMemoryAttack, PutAndGetIntoTheEngineAreDropped) {
  TcpArena a;
  ASSERT_NO_FATAL_FAILURE(a.Start());
  const uint64_t heap_start = Heap(a.cluster.engine->pid()).first;
  ASSERT_NE(heap_start, 0u) << "no heap in the engine's maps";
  const std::string heap = fmt::format("{:x}", heap_start);

  auto put = RunPeer(a.UcxAddressHex(), {}, {"rma=put", "remote=10"});
  ASSERT_TRUE(put.count("rma")) << "the attacker printed nothing";
  ASSERT_FALSE(ProcessExited(a.cluster.engine->pid()))
      << "the engine died (is the patched libucp of scripts/install-ucx-patch.sh installed?):\n"
      << a.cluster.engine->LogTail();
  EXPECT_NE(put["rma"], "Success") << "the engine acknowledged a put at 0x10";

  auto get = RunPeer(a.UcxAddressHex(), {}, {"rma=get", "remote=" + heap});
  ASSERT_TRUE(get.count("rma")) << "the attacker printed nothing";
  EXPECT_NE(get["rma"], "Success") << "the attacker read the engine's heap";

  std::printf("rma put: %s, get: %s\n", put["rma"].c_str(), get["rma"].c_str());
  ASSERT_NO_FATAL_FAILURE(a.ExpectEngineServes());
}

// Eight bytes of process `pid`'s memory at `addr`, read through /proc.
std::string PeekMemory(int pid, uint64_t addr) {
  std::string out(8, '\0');
  std::ifstream mem(fmt::format("/proc/{}/mem", pid), std::ios::binary);
  mem.seekg(static_cast<std::streamoff>(addr));
  mem.read(out.data(), static_cast<std::streamsize>(out.size()));
  return mem ? out : std::string();
}

// UCX's transport-level tcp put (uct_tcp_ep_handle_put_req, what ucp's
// rendezvous uses to write into a buffer the receiver announced) writes to the
// address the peer's put request names, registered or not. The engine's UCX
// context disables tcp put (PUT_ENABLE=n: its address offers no put, so no
// peer's ucp chooses put rendezvous into it), and its patched libuct closes
// a connection that sends such an interface a put request with data (the
// zero-length one of UCT's flush writes nothing and stays allowed) or an
// endpoint an acknowledgement of a put it did not send. The attacker writes the messages on a raw socket after
// UCT's own connection handshake: a put into the engine's heap (which it would
// write and acknowledge), a put at 0x10 (which kills an engine that serves it)
// and an acknowledgement of a put the engine never made (an
// assertion in UCX). Each is refused with the error in the engine's log, the
// heap reads the same, and the engine serves the victim on.
TEST(UcxTransportPutAttack, PutRequestsIntoTheEngineCloseTheirConnection) {
  TcpArena a;
  ASSERT_NO_FATAL_FAILURE(a.Start());
  const int pid = a.cluster.engine->pid();
  // Near the heap's end: free memory (malloc's top chunk), where an engine
  // that served the put would take the write without crashing.
  const auto [heap_start, heap_end] = Heap(pid);
  ASSERT_NE(heap_start, 0u) << "no heap in the engine's maps";
  const uint64_t heap = heap_end - 0x100;
  const std::string before = PeekMemory(pid, heap);
  ASSERT_EQ(before.size(), 8u) << "cannot read the engine's memory through /proc";

  const std::vector<std::pair<std::string, std::vector<std::string>>> attacks = {
      {"put into the heap", {"tcp_put=req", fmt::format("remote={:x}", heap)}},
      {"put at 0x10", {"tcp_put=req", "remote=10"}},
      {"ack of no put", {"tcp_put=ack"}}};
  for (const auto& [name, args] : attacks) {
    SCOPED_TRACE(name);
    auto r = RunPeer(a.UcxAddressHex(), {}, args);
    ASSERT_TRUE(r.count("closed")) << "the attacker printed nothing";
    ASSERT_FALSE(ProcessExited(pid))
        << "the engine died (is the patched libuct of scripts/install-ucx-patch.sh installed?):\n"
        << a.cluster.engine->LogTail();
    EXPECT_EQ(r["connected"], "yes") << "the engine did not take the raw connection request";
    EXPECT_EQ(r["closed"], "yes") << "the engine did not close the connection";
    EXPECT_EQ(r["put_acked"], "no") << "the engine acknowledged the put";
    std::printf("attack %s: connected=%s closed=%s put_acked=%s\n", name.c_str(), r["connected"].c_str(),
                r["closed"].c_str(), r["put_acked"].c_str());
  }
  EXPECT_EQ(PeekMemory(pid, heap), before) << "the engine's heap was written";
  const std::string log = a.EngineLog();
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("peer sent a 8-byte put request, but put is disabled on this interface (UCX_TCP_PUT_ENABLE=n); "
                  "closing the connection"),
            2u)
      << a.cluster.engine->LogTail();
  EXPECT_EQ(count("peer acknowledged a put this endpoint did not send; closing the connection"), 1u)
      << a.cluster.engine->LogTail();
  ASSERT_NO_FATAL_FAILURE(a.ExpectEngineServes());
}

// `ros2ctl fs put` of 64 MiB over tcp with the user's UCX segment sizes set
// to 1m and to 4m: the client sends what the engine receives (warning that it
// replaced the settings), the put succeeds, the file reads back byte-exact and
// the engine stays up.
TEST(UcxTcpSegments, FsPutWithLargeClientSegmentsSucceedsAndReadsBack) {
  std::string error;
  auto cluster = TestCluster::Start("tcp", 1, &error, "ram", "256MiB");
  ASSERT_NE(cluster, nullptr) << error;
  ASSERT_EQ(cluster->Ctl({"pool", "create", "p", "--size", "200MiB"}).exit_code, 0);
  ASSERT_EQ(cluster->Ctl({"cont", "create", "p", "c"}).exit_code, 0);
  const std::string local = cluster->scratch() + "/big.bin";
  std::string bytes(64u << 20, '\0');
  std::mt19937_64 rng(36);
  for (size_t i = 0; i < bytes.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(&bytes[i], &v, 8);
  }
  std::ofstream(local, std::ios::binary | std::ios::trunc) << bytes;

  for (const char* seg : {"1m", "4m"}) {
    SCOPED_TRACE(seg);
    setenv("UCX_TCP_TX_SEG_SIZE", seg, 1);
    setenv("UCX_TCP_RX_SEG_SIZE", seg, 1);
    CommandResult put = cluster->Ctl({"fs", "--transport", "tcp", "put", "p", "c", local, "/big.bin"});
    unsetenv("UCX_TCP_TX_SEG_SIZE");
    unsetenv("UCX_TCP_RX_SEG_SIZE");
    ASSERT_FALSE(ProcessExited(cluster->EnginePid())) << "the engine died";
    ASSERT_EQ(put.exit_code, 0) << put.err;
    EXPECT_NE(put.err.find(fmt::format("UCX_TCP_TX_SEG_SIZE={} is above the 262144 bytes", seg)), std::string::npos)
        << "no warning naming the replaced setting:\n"
        << put.err;
    const std::string back = cluster->scratch() + "/back.bin";
    std::remove(back.c_str());
    CommandResult get = cluster->Ctl({"fs", "--transport", "tcp", "get", "p", "c", "/big.bin", back});
    ASSERT_EQ(get.exit_code, 0) << get.err;
    EXPECT_TRUE(ReadWholeFile(back) == bytes) << "the file read back differs";
  }
}

}  // namespace
}  // namespace ros2::testing
