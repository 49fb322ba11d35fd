// Attacks on a real ros2-engine from a client written from plain UCX calls
// (raw_ucx_attack_peer), over shared memory and tcp: UCX's own software RMA
// aimed at the engine's memory, memory keys that name the engine's files,
// rendezvous over shared memory, malformed headers and framing, segment
// references to descriptors that are not sealed memfds, and a token flood from another
// user. Each checks that the attack is refused with an error naming the
// cause (or gets nothing), that the victim's data and calls are unaffected,
// and that the engine keeps serving. docs/security.md has the attack table.
#include <gtest/gtest.h>

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "attack_arena.h"
#include "control/session_client.h"
#include "transport/connection_auth.h"
#include "transport/cma.h"

namespace ros2::testing {
namespace {

Outcomes RunRaw(const std::string& attack, const std::vector<std::string>& args) {
  return RunAttacker(RAW_UCX_ATTACK_PEER_PATH, attack, args);
}

// A writable private mapping of the engine (its heap if it has one).
uint64_t EngineWritableAddress(pid_t pid) {
  std::ifstream maps(fmt::format("/proc/{}/maps", pid));
  std::string line;
  uint64_t any = 0;
  while (std::getline(maps, line)) {
    uint64_t lo = 0, hi = 0;
    char perms[8] = {};
    if (sscanf(line.c_str(), "%lx-%lx %7s", &lo, &hi, perms) != 3 || std::string(perms) != "rw-p") continue;
    if (line.find("[heap]") != std::string::npos) return lo;
    if (any == 0 && hi - lo >= (1u << 16)) any = lo;
  }
  return any;
}

// `len` bytes of the engine's memory at `addr` (the test runs as root).
std::vector<uint8_t> EngineMemory(pid_t pid, uint64_t addr, size_t len) {
  std::vector<uint8_t> out(len);
  std::ifstream mem(fmt::format("/proc/{}/mem", pid), std::ios::binary);
  mem.seekg(static_cast<std::streamoff>(addr));
  mem.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(len));
  return out;
}

// A descriptor of the engine that is a regular file it has open (an extent
// file, a RocksDB file, the log).
int EngineRegularFileFd(pid_t pid) {
  const std::string dir = fmt::format("/proc/{}/fd", pid);
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  int found = -1;
  while (dirent* e = readdir(d)) {
    char target[512];
    const std::string link = dir + "/" + e->d_name;
    const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = 0;
    if (target[0] == '/' && std::string(target).find("/engine0/") != std::string::npos) {
      found = atoi(e->d_name);
      break;
    }
  }
  closedir(d);
  return found;
}

// The engine maps a file with inode `inode`.
bool EngineMapsInode(pid_t pid, const std::string& inode) {
  std::ifstream maps(fmt::format("/proc/{}/maps", pid));
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream words(line);
    std::string range, perms, off, dev, ino;
    words >> range >> perms >> off >> dev >> ino;
    if (ino == inode) return true;
  }
  return false;
}

class RawUcxAttack : public ::testing::TestWithParam<TransportKind> {
 protected:
  void SetUp() override {
    a.kind = GetParam();
    ASSERT_NO_FATAL_FAILURE(a.Start());
  }
  bool Shm() const { return GetParam() == TransportKind::kShm; }
  Arena a;
};

// The attacks that need a capability to pass (their refusal comes after
// it): over shared memory, where a session is proven without integrity tags.
class RawUcxAttackShm : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(a.Start()); }
  Arena a;
};

TEST_P(RawUcxAttack, SoftwareRmaCannotReadOrWriteTheEnginesMemory) {
  const pid_t engine = a.cluster.engine->pid();
  const uint64_t addr = EngineWritableAddress(engine);
  ASSERT_NE(addr, 0u);
  auto r = RunRaw("sw-rma", a.Args({fmt::format("engine_addr={:x}", addr), "len=4096"}));
  ASSERT_TRUE(r["connected"].ok()) << r["connect"].text;
  EXPECT_FALSE(r["get"].ok()) << "the attacker read " << r["leaked_nonzero"].text << " nonzero bytes of the engine";
  EXPECT_FALSE(r["put"].ok()) << "the engine acknowledged a put into its memory";
  std::printf("get: %s; put: %s\n", r["get"].text.c_str(), r["put"].text.c_str());
  const auto after = EngineMemory(engine, addr, 4096);
  EXPECT_LT(std::count(after.begin(), after.end(), uint8_t{0xAB}), 4096) << "the attacker's bytes are in the engine";
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST_F(RawUcxAttackShm, AMemoryKeyNamingTheEnginesFileIsNeverUnpacked) {
  const pid_t engine = a.cluster.engine->pid();
  const int fd = EngineRegularFileFd(engine);
  ASSERT_GE(fd, 0);
  for (const char* alloc : {"posix", "sysv"}) {
    SCOPED_TRACE(alloc);
    auto r = RunRaw("rma-key", a.Args({fmt::format("engine_pid={}", engine), fmt::format("engine_fd={}", fd),
                                       std::string("alloc=") + alloc}));
    ASSERT_TRUE(r["connected"].ok()) << r["connect"].text;
    ASSERT_FALSE(r.count("authenticate")) << r["authenticate"].text;
    EXPECT_EQ(r["attack"].code, static_cast<int>(Status::Code::kPermissionDenied)) << r["attack"].text << "\n"
                                                                                   << a.cluster.engine->LogTail();
    EXPECT_NE(r["attack"].text.find("memory key"), std::string::npos) << r["attack"].text;
  }
  // Nothing was stored from whatever the key named.
  auto stolen =
      a.attacker->FetchArray(ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 0, 77), "d", "stolen", 0, 65536);
  EXPECT_TRUE(!stolen.ok() || stolen->data.empty() ||
              std::all_of(stolen->data.begin(), stolen->data.end(), [](std::byte b) { return b == std::byte{0}; }))
      << "the engine stored bytes the forged key named";
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST_F(RawUcxAttackShm, RendezvousOverSharedMemoryIsRefusedWithoutMappingTheKey) {
  const pid_t engine = a.cluster.engine->pid();
  auto r = RunRaw("rndv", a.Args({"len=1048576"}));
  ASSERT_TRUE(r["connected"].ok()) << r["connect"].text;
  EXPECT_EQ(r["attack"].code, static_cast<int>(Status::Code::kPermissionDenied)) << r["attack"].text;
  EXPECT_NE(r["attack"].text.find("rendezvous"), std::string::npos) << r["attack"].text;
  ASSERT_TRUE(r.count("segment_inode")) << "the attacker's memory is not a shared segment";
  EXPECT_FALSE(EngineMapsInode(engine, r["segment_inode"].text)) << "the engine mapped the attacker's segment";
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST_P(RawUcxAttack, AMalformedRequestIsAnsweredAtOnceWithTheReason) {
  auto r = RunRaw("malformed", a.Args({"timeout_ms=10000"}));
  ASSERT_TRUE(r["connected"].ok()) << r["connect"].text;
  EXPECT_EQ(r["oversize_capability"].code, static_cast<int>(Status::Code::kProtocol)) << r["oversize_capability"].text;
  EXPECT_NE(r["oversize_capability"].text.find("capability length"), std::string::npos)
      << r["oversize_capability"].text;
  EXPECT_LT(std::stoull(r["elapsed_ms"].text), 8000u) << "the refusal waited for the caller's deadline";
  EXPECT_EQ(r["short_am_bulk"].code, static_cast<int>(Status::Code::kProtocol)) << r["short_am_bulk"].text;
  EXPECT_NE(r["short_am_bulk"].text.find("does not match"), std::string::npos) << r["short_am_bulk"].text;
  // A malformed batch on its own connection: closed with a bye naming it.
  EXPECT_EQ(r["malformed_batch"].code, static_cast<int>(Status::Code::kDisconnected)) << r["malformed_batch"].text;
  EXPECT_NE(r["malformed_batch"].text.find("malformed batch"), std::string::npos) << r["malformed_batch"].text;
  EXPECT_EQ(r["batch_entries_answered"].text, "0") << "an entry of the malformed batch ran";
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST_P(RawUcxAttack, AForgedOrIncompleteSessionProofIsRefused) {
  auto r = RunRaw("forged-auth", a.Args());
  ASSERT_TRUE(r["connected"].ok()) << r["connect"].text;
  EXPECT_EQ(r["wrong_key"].code, static_cast<int>(Status::Code::kPermissionDenied)) << r["wrong_key"].text;
  EXPECT_NE(r["wrong_key"].text.find("proof does not match"), std::string::npos) << r["wrong_key"].text;
  EXPECT_EQ(r["unknown_flags"].code, static_cast<int>(Status::Code::kInvalidArgument)) << r["unknown_flags"].text;
  if (GetParam() == TransportKind::kTcp) {
    EXPECT_EQ(r["no_integrity"].code, static_cast<int>(Status::Code::kPermissionDenied)) << r["no_integrity"].text;
    EXPECT_NE(r["no_integrity"].text.find("integrity tags"), std::string::npos) << r["no_integrity"].text;
  }
  EXPECT_EQ(r["unproven_update"].code, static_cast<int>(Status::Code::kPermissionDenied)) << r["unproven_update"].text;
  EXPECT_NE(r["unproven_update"].text.find("authenticated for"), std::string::npos) << r["unproven_update"].text;
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST_F(RawUcxAttackShm, OversizedProofsAndASessionBeyondTheCapAreRefusedByName) {
  // Sessions of the pool besides the attacker's own: with it, one more than
  // a connection may be authenticated for.
  auto channel = control::MakeControlChannel({.address = a.cluster.engine->control()});
  ASSERT_TRUE(channel.ok()) << channel.status().ToString();
  control::SessionClient sessions(*channel);
  std::string uuids, keys;
  for (size_t i = 0; i < transport::kMaxSessionsPerConnection; ++i) {
    auto conn = sessions.Connect("p", a.cluster.admin);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    uuids += (i == 0 ? "" : ",") + conn->session_uuid;
    keys += (i == 0 ? "" : ",") + Hex(conn->session_key);
  }
  auto r = RunRaw("session-limits", a.Args({"sessions=" + uuids, "session_keys=" + keys}));
  ASSERT_TRUE(r["connected"].ok()) << r["connect"].text << r["authenticate"].text;
  const std::string expected = fmt::format("(expected {})", transport::kAuthPayloadSize);
  EXPECT_EQ(r["oversize_payload"].code, static_cast<int>(Status::Code::kInvalidArgument)) << r["oversize_payload"].text;
  EXPECT_NE(r["oversize_payload"].text.find(fmt::format("payload of {} bytes {}", transport::kAuthPayloadSize + 1000,
                                                        expected)),
            std::string::npos)
      << r["oversize_payload"].text;
  EXPECT_EQ(r["short_payload"].code, static_cast<int>(Status::Code::kInvalidArgument)) << r["short_payload"].text;
  EXPECT_NE(r["short_payload"].text.find("payload of 16 bytes " + expected), std::string::npos)
      << r["short_payload"].text;
  EXPECT_EQ(r["huge_payload"].code, static_cast<int>(Status::Code::kProtocol)) << r["huge_payload"].text;
  EXPECT_NE(r["huge_payload"].text.find("payload length"), std::string::npos) << r["huge_payload"].text;
  // The attacker's own session is the first; sessions 2..16 are accepted.
  for (size_t n = 2; n <= transport::kMaxSessionsPerConnection; ++n) {
    const auto& o = r[fmt::format("session_{}", n)];
    EXPECT_TRUE(o.ok()) << "session " << n << ": " << o.text;
  }
  const auto& over = r[fmt::format("session_{}", transport::kMaxSessionsPerConnection + 1)];
  EXPECT_EQ(over.code, static_cast<int>(Status::Code::kBusy)) << over.text;
  EXPECT_NE(over.text.find(fmt::format("holds {} sessions already", transport::kMaxSessionsPerConnection)),
            std::string::npos)
      << over.text;
  // The connection keeps what it proved: the attacker's capability still works on it.
  EXPECT_TRUE(r["update_after"].ok()) << r["update_after"].text;
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

INSTANTIATE_TEST_SUITE_P(Transports, RawUcxAttack, ::testing::Values(TransportKind::kShm, TransportKind::kTcp),
                         [](const auto& info) { return std::string(transport::TransportKindName(info.param)); });

TEST_F(RawUcxAttackShm, SegmentReferencesToOtherKindsOfFileAreRefused) {
  auto r = RunRaw("segment-fd", a.Args({"prove=1"}));
  ASSERT_TRUE(r["connected"].ok()) << r["connect"].text;
  ASSERT_FALSE(r.count("authenticate")) << r["authenticate"].text;
  for (const char* kind : {"pipe", "socket", "file"}) {
    EXPECT_EQ(r[kind].code, static_cast<int>(Status::Code::kInvalidArgument)) << kind << ": " << r[kind].text;
    EXPECT_NE(r[kind].text.find("not a memfd"), std::string::npos) << kind << ": " << r[kind].text;
  }
  EXPECT_EQ(r["unsealed"].code, static_cast<int>(Status::Code::kInvalidArgument)) << r["unsealed"].text;
  EXPECT_NE(r["unsealed"].text.find("not sealed against shrinking"), std::string::npos) << r["unsealed"].text;
  EXPECT_FALSE(r["missing"].ok()) << r["missing"].text;
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST_F(RawUcxAttackShm, ASegmentOnAStalledFuseFileIsRefusedWithoutStallingTheTarget) {
  // While the attacker's FUSE daemon holds every request, the victim's calls
  // (on the same target thread) complete within their deadline.
  Status victim_call = Status::Internal("the victim's call did not run");
  auto r = RunAttacker(RAW_UCX_ATTACK_PEER_PATH, "segment-fuse", a.Args({"prove=1", "hold_ms=4000"}), "holding", [&] {
    auto f = a.victim->FetchArray(a.victim_oid, "d", "a", 0, 4096);
    victim_call = f.ok() ? Status::Ok() : f.status();
  });
  ASSERT_TRUE(r["connected"].ok()) << r["connect"].text << r["mount"].text << r["open"].text;
  EXPECT_EQ(r["attack"].code, static_cast<int>(Status::Code::kInvalidArgument)) << r["attack"].text;
  EXPECT_NE(r["attack"].text.find("not a memfd"), std::string::npos) << r["attack"].text;
  EXPECT_LT(std::stoull(r["elapsed_ms"].text), 3000u) << "the refusal waited on the FUSE daemon";
  EXPECT_TRUE(victim_call.ok()) << "the victim's call stalled behind the attacker's file: " << victim_call.ToString();
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

TEST_F(RawUcxAttackShm, ATokenFloodFromAnotherUserLeavesOthersTheirTokens) {
  // 72 processes of 64 tokens: more than the listener issues in all.
  auto r = RunRaw("token-flood-user", a.Args({"uid=65534", "procs=72", "per_proc=64"}));
  ASSERT_TRUE(r.count("tokens_issued")) << r["setuid"].text;
  EXPECT_LE(std::stoull(r["tokens_issued"].text), 64u * transport::cma::Authority::kUserShare)
      << "one user took more than its share";
  auto token = transport::cma::RequestToken(a.cluster.engine->pid(), std::chrono::milliseconds(2000));
  EXPECT_TRUE(token.ok()) << "another user's flood left no token: " << token.status().ToString();
  ASSERT_NO_FATAL_FAILURE(a.ExpectVictimUnaffected());
}

}  // namespace
}  // namespace ros2::testing
