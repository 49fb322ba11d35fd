// End-to-end object I/O against real ros2-engine processes: tcp and shm data
// planes, malformed requests, two engines in one pool, restart durability.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>

#include "control/control_channel.h"
#include "control/management_client.h"
#include "engine_cluster.h"
#include "object_session.h"
#include "testing/engine_process.h"

namespace ros2::testing {
namespace {

using transport::TransportKind;

void RunIoScenario(const char* transport, TransportKind kind, bool expect_shm) {
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = transport}));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{8} << 20));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "c"));
  auto s = ObjectSession::Open(c.engine->control(), c.admin, "p", "c", kind);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ObjectSession& session = **s;
  ASSERT_EQ(session.target_count(), 2u);
  const auto& info = session.endpoint(0).info();
  // Over shm the engine proved our pid at the hello and moves bulk by
  // cross-memory attach; over tcp it is active-message rendezvous.
  EXPECT_EQ(info.bulk_mode, expect_shm ? transport::BulkTransfer::kCma : transport::BulkTransfer::kActiveMessage);
  if (expect_shm) {
    EXPECT_TRUE(info.IsSharedMemoryOnly()) << info.ucx_report;
  } else {
    EXPECT_TRUE(info.UsesTcp()) << info.ucx_report;
    EXPECT_FALSE(info.IsSharedMemoryOnly());
  }

  const ObjectId oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kSX, 7, 1);
  std::set<std::string> dkeys;
  std::set<uint32_t> targets_used;
  for (int i = 0; i < 8; ++i) {
    const std::string dkey = fmt::format("chunk-{}", i);
    dkeys.insert(dkey);
    auto t = session.TargetOf(oid, dkey);
    ASSERT_TRUE(t.ok());
    targets_used.insert(*t);
    auto data = Pattern(4096, i);
    auto r = session.UpdateArray(oid, dkey, "data", 0, data);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_GT(r->epoch, 0u);
  }
  EXPECT_EQ(targets_used.size(), 2u) << "SX object should spread its dkeys";
  // A 1 MiB extent goes through the RMA / rendezvous path.
  auto big = Pattern(1 << 20, 99);
  auto r = session.UpdateArray(oid, "chunk-0", "data", 4096, big);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto single = Pattern(300, 5);
  ROS2_ASSERT_OK(session.UpdateSingle(oid, "chunk-1", "attr", single));

  for (int i = 0; i < 8; ++i) {
    auto f = session.FetchArray(oid, fmt::format("chunk-{}", i), "data", 0, 4096);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->data, Pattern(4096, i)) << "chunk " << i;
    EXPECT_EQ(f->reply.csum.type, ChecksumType::kCrc32c);
  }
  auto fb = session.FetchArray(oid, "chunk-0", "data", 4096, 1 << 20);
  ASSERT_TRUE(fb.ok()) << fb.status().ToString();
  EXPECT_EQ(fb->data, big);
  auto fs = session.FetchSingle(oid, "chunk-1", "attr", 4096);
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  EXPECT_EQ(fs->reply.size, 300u);
  EXPECT_EQ(fs->data, single);

  // Enumeration over both targets finds every dkey exactly once.
  std::set<std::string> listed;
  for (uint32_t t = 0; t < session.target_count(); ++t) {
    obj::ListRequest lr;
    lr.header = session.Header(t);
    lr.kind = obj::ListKind::kDkeys;
    lr.oid = oid;
    lr.max_entries = 3;  // forces several rounds with anchors
    while (!lr.anchor.eof) {
      auto reply = session.Call(t, obj::Opcode::kList, obj::Encode(lr));
      ASSERT_TRUE(reply.ok()) << reply.status().ToString();
      auto lst = obj::DecodeListReply(reply->payload);
      ASSERT_TRUE(lst.ok()) << lst.status().ToString();
      for (auto& k : lst->keys) EXPECT_TRUE(listed.insert(k).second) << "listed twice: " << k;
      lr.anchor = lst->anchor;
    }
  }
  EXPECT_EQ(listed, dkeys);

  // Array end of chunk-0 covers the 1 MiB extent; punching the dkey hides it.
  auto t0 = session.TargetOf(oid, "chunk-0");
  ASSERT_TRUE(t0.ok());
  obj::QueryRequest q{session.Header(*t0), obj::QueryKind::kArrayEnd, oid, "chunk-0", "data"};
  auto qr = session.Call(*t0, obj::Opcode::kQuery, obj::Encode(q));
  ASSERT_TRUE(qr.ok()) << qr.status().ToString();
  auto qd = obj::DecodeQueryReply(qr->payload);
  ASSERT_TRUE(qd.ok());
  EXPECT_TRUE(qd->found);
  EXPECT_EQ(qd->array_end, 4096u + (1u << 20));

  obj::PunchRequest p{session.Header(*t0), obj::PunchScope::kDkey, oid, "chunk-0", ""};
  auto pr = session.Call(*t0, obj::Opcode::kPunch, obj::Encode(p));
  ASSERT_TRUE(pr.ok()) << pr.status().ToString();
  q.header = session.Header(*t0);
  qr = session.Call(*t0, obj::Opcode::kQuery, obj::Encode(q));
  ASSERT_TRUE(qr.ok()) << qr.status().ToString();
  qd = obj::DecodeQueryReply(qr->payload);
  ASSERT_TRUE(qd.ok());
  EXPECT_FALSE(qd->found) << "punched dkey still has an array end";

  auto rc = c.engine->Terminate();
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(*rc, 0) << c.engine->LogTail();
}

// CPU seconds (user + system) the process has used so far, from /proc.
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces): state is field 3,
  // utime and stime are fields 14 and 15.
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A connected client that stops progressing its worker (a ros2-fuse thread
// blocked in read(2) on /dev/fuse does) lets the engine's keepalives fill its
// shared-memory FIFO; the engine's sends then stay pending and
// ucp_worker_arm answers BUSY for as long as the client stays idle. The target
// loops once spun a vCPU each for that whole time; they must nap instead and
// still answer the client at once when it comes back.
TEST(EngineIo, IdleClientThatNeverProgressesCostsTheEngineNoCpu) {
  EngineCluster c;
  // With 100 ms keepalives the two targets fill the client's 64-entry FIFO in
  // about 3 s (with the default 2 s, in about a minute). Measured without the
  // fix: the engine at 2 CPU-seconds per second from 3-6 s on.
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "shm", .keepalive = "100ms"}));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{8} << 20));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "c"));
  auto s = ObjectSession::Open(c.engine->control(), c.admin, "p", "c", TransportKind::kShm);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ObjectSession& session = **s;
  const ObjectId oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kSX, 9, 1);
  const auto data = Pattern(4096, 3);
  for (int i = 0; i < 4; ++i) ROS2_ASSERT_OK(session.UpdateArray(oid, fmt::format("d{}", i), "a", 0, data));

  std::this_thread::sleep_for(std::chrono::seconds(8));  // the client does not progress: its FIFO fills
  const double before = ProcessCpuSeconds(c.engine->pid());
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double used = ProcessCpuSeconds(c.engine->pid()) - before;
  // Spinning: two targets at ~100% each. Napping: a few percent.
  EXPECT_LT(used, 0.15 * wall) << "engine used " << used << " CPU s in " << wall << " s next to an idle client";

  for (int i = 0; i < 4; ++i) {
    auto f = session.FetchArray(oid, fmt::format("d{}", i), "a", 0, 4096);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->data, data);
  }
}

// Cpus_allowed_list of every thread of `pid`, keyed by thread id, with its name.
std::vector<std::pair<std::string, std::string>> ThreadCpus(pid_t pid) {
  std::vector<std::pair<std::string, std::string>> out;
  std::error_code ec;
  for (const auto& t : std::filesystem::directory_iterator(fmt::format("/proc/{}/task", pid), ec)) {
    std::ifstream comm(t.path() / "comm");
    std::string name;
    std::getline(comm, name);
    std::ifstream status(t.path() / "status");
    std::string line, cpus;
    while (std::getline(status, line)) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) cpus = line.substr(line.find_first_not_of(" \t", 18));
    }
    out.emplace_back(name, cpus);
  }
  return out;
}

// target_cpus pins target i to the i-th CPU listed, and nothing else: the
// threads the targets start (a shard's opener, its store's commit thread,
// RocksDB's pool) keep the engine's whole CPU set. I/O still flows.
TEST(EngineIo, TargetsRunOnTheirConfiguredCpusAndNothingElseIsPinned) {
  const std::vector<int> cpus = transport::CurrentThreadCpus();
  ASSERT_FALSE(cpus.empty());
  // Reversed order where there are two CPUs, so a pin by index would show.
  const int cpu0 = cpus.back(), cpu1 = cpus.front();
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start(
      {.transport = "tcp", .storage_class = "nvme", .targets = 2, .target_cpus = fmt::format("[{}, {}]", cpu0, cpu1)}));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{64} << 20));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "c"));
  auto s = ObjectSession::Open(c.engine->control(), c.admin, "p", "c", TransportKind::kTcp);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const ObjectId oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kSX, 11, 1);  // striped: both targets
  for (int i = 0; i < 8; ++i) {
    ROS2_ASSERT_OK((*s)->UpdateArray(oid, fmt::format("d{}", i), "a", 0, Pattern(8192, static_cast<uint8_t>(i))));
  }
  for (int i = 0; i < 8; ++i) {
    auto f = (*s)->FetchArray(oid, fmt::format("d{}", i), "a", 0, 8192);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->data, Pattern(8192, static_cast<uint8_t>(i)));
  }

  const auto threads = ThreadCpus(c.engine->pid());
  std::string all;  // the main thread's set: the engine's
  for (const auto& [name, list] : threads) {
    if (name == "ros2-engine") all = list;
  }
  ASSERT_FALSE(all.empty());
  int targets_seen = 0, others = 0;
  for (const auto& [name, list] : threads) {
    if (name == "ros2-target-0") {
      EXPECT_EQ(list, std::to_string(cpu0));
      ++targets_seen;
    } else if (name == "ros2-target-1") {
      EXPECT_EQ(list, std::to_string(cpu1));
      ++targets_seen;
    } else {
      EXPECT_EQ(list, all) << "thread '" << name << "' was pinned";
      ++others;
    }
  }
  EXPECT_EQ(targets_seen, 2) << "each target thread carries its name";
  EXPECT_GT(others, 3);
}

TEST(EngineIo, EndToEndOverTcp) {
  RunIoScenario("tcp", TransportKind::kTcp, false);
}

TEST(EngineIo, EndToEndOverShm) {
  RunIoScenario("shm", TransportKind::kShm, true);
}

TEST(EngineIo, MalformedRequestsGetClearErrorsAndTheEngineKeepsServing) {
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "tcp", .targets = 1}));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{8} << 20));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "c"));
  auto s = ObjectSession::Open(c.engine->control(), c.admin, "p", "c", TransportKind::kTcp);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ObjectSession& session = **s;
  const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 0, 2);
  auto data = Pattern(5000, 1);
  ROS2_ASSERT_OK(session.UpdateArray(oid, "d", "a", 0, data));

  const std::vector<uint8_t> garbage = {1, 0, 0xde, 0xad, 0xbe, 0xef};
  for (obj::Opcode op : {obj::Opcode::kUpdate, obj::Opcode::kFetch, obj::Opcode::kList, obj::Opcode::kQuery,
                         obj::Opcode::kPunch, obj::Opcode::kPing}) {
    auto reply = session.Call(0, op, garbage);
    ASSERT_FALSE(reply.ok()) << obj::OpcodeName(static_cast<uint16_t>(op));
    EXPECT_EQ(reply.status().code(), Status::Code::kProtocol) << reply.status().ToString();
    EXPECT_NE(reply.status().message().find("object rpc"), std::string::npos) << reply.status().ToString();
  }
  // Misaddressed request.
  obj::FetchRequest f{session.Header(0), oid, "d", "a", obj::ValueType::kArray, 0, 5000, 1};
  f.header.target = 5;
  std::vector<std::byte> buf(5000);
  auto wrong = session.Call(0, obj::Opcode::kFetch, obj::Encode(f), {}, buf);
  EXPECT_EQ(wrong.status().code(), Status::Code::kInvalidArgument) << wrong.status().ToString();
  // Update whose declared length differs from its data, and bad checksums.
  obj::UpdateRequest u;
  u.header = session.Header(0);
  u.oid = oid;
  u.dkey = "d";
  u.akey = "a";
  u.type = obj::ValueType::kArray;
  u.length = 10;
  auto mismatch = session.Call(0, obj::Opcode::kUpdate, obj::Encode(u), std::span(data).first(20));
  EXPECT_EQ(mismatch.status().code(), Status::Code::kInvalidArgument) << mismatch.status().ToString();
  u.length = 5000;
  u.csum = {ChecksumType::kCrc32c, 4096, {1, 2}};  // wrong values
  auto corrupt = session.Call(0, obj::Opcode::kUpdate, obj::Encode(u), Pattern(5000, 2));
  EXPECT_EQ(corrupt.status().code(), Status::Code::kCorruption) << corrupt.status().ToString();

  // Still serving, and nothing changed.
  auto ping = session.Call(0, obj::Opcode::kPing, obj::Encode(obj::PingRequest{0}));
  ASSERT_TRUE(ping.ok()) << ping.status().ToString();
  auto pr = obj::DecodePingReply(ping->payload);
  ASSERT_TRUE(pr.ok());
  EXPECT_EQ(pr->target_count, 1u);
  EXPECT_EQ(pr->engine.ToString(), c.engine->engine_id());
  auto back = session.FetchArray(oid, "d", "a", 0, 5000);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->data, data);
}

TEST(EngineIo, TwoEnginesServeOnePool) {
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "tcp"}));
  EngineOptions second;
  second.data_dir = c.dir.path() + "/engine1";
  second.transport = "tcp";
  second.join = c.engine->control();
  second.join_secret_file = c.engine->admin_secret_file();
  auto e1 = EngineProcess::Start(second);
  ASSERT_TRUE(e1.ok()) << e1.status().ToString();
  EXPECT_NE((*e1)->engine_id(), c.engine->engine_id());

  auto status = c.mgmt->GetEngineStatus();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->engines_size(), 2);
  EXPECT_EQ(status->targets_size(), 4);

  ROS2_ASSERT_OK(c.mgmt->CreatePool("wide", uint64_t{8} << 20));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("wide", "c"));
  auto s = ObjectSession::Open(c.engine->control(), c.admin, "wide", "c", TransportKind::kTcp);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ObjectSession& session = **s;
  ASSERT_EQ(session.target_count(), 4u);

  std::set<std::string> engines_used;
  for (uint64_t i = 0; i < 16; ++i) {
    const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 1, i);
    auto t = session.TargetOf(oid, "d");
    ASSERT_TRUE(t.ok());
    engines_used.insert(session.engine_of(*t));
    ASSERT_TRUE(session.UpdateSingle(oid, "d", "a", Pattern(100 + i, i)).ok()) << "object " << i;
  }
  EXPECT_EQ(engines_used.size(), 2u) << "16 S1 objects should land on both engines";
  for (uint64_t i = 0; i < 16; ++i) {
    const ObjectId oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 1, i);
    auto f = session.FetchSingle(oid, "d", "a", 1024);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->data, Pattern(100 + i, i));
  }
  auto rc = (*e1)->Terminate();
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(*rc, 0) << (*e1)->LogTail();
}

// The pool holds 16 MiB. Writing 10 MiB and then overwriting it needs 20 MiB
// unless the overwritten versions are reclaimed: the target aggregates the
// pool's shards when an update runs out of space and retries it, so every
// overwrite succeeds and reads back the new bytes.
TEST(EngineIo, OverwritesReclaimSpaceInsteadOfFailingWithNoSpace) {
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "tcp", .storage_class = "nvme"}));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{16} << 20));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "c"));
  auto s = ObjectSession::Open(c.engine->control(), c.admin, "p", "c", TransportKind::kTcp);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const ObjectId oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kS1, 11, 1);
  constexpr uint64_t kMiB = 1 << 20;
  for (int round = 0; round < 3; ++round) {
    for (uint64_t i = 0; i < 10; ++i) {
      auto r = (*s)->UpdateArray(oid, "d", "a", i * kMiB, Pattern(kMiB, static_cast<uint32_t>(round * 100 + i)));
      ASSERT_TRUE(r.ok()) << "round " << round << " MiB " << i << ": " << r.status().ToString();
    }
  }
  for (uint64_t i = 0; i < 10; ++i) {
    auto f = (*s)->FetchArray(oid, "d", "a", i * kMiB, kMiB);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->data, Pattern(kMiB, static_cast<uint32_t>(200 + i))) << "MiB " << i;
  }
  auto rc = c.engine->Terminate();
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(*rc, 0) << c.engine->LogTail();
}

TEST(EngineIo, RestartKeepsEveryAcknowledgedWrite) {
  EngineCluster c;
  EngineOptions options{.transport = "tcp", .storage_class = "nvme"};
  ASSERT_NO_FATAL_FAILURE(c.Start(options));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{8} << 20));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "c"));
  const ObjectId oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kSX, 3, 3);
  {
    auto s = ObjectSession::Open(c.engine->control(), c.admin, "p", "c", TransportKind::kTcp);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    for (int i = 0; i < 12; ++i) {
      // Small (RocksDB) and large (extent store) values.
      const size_t n = i % 2 == 0 ? 512 : 64 * 1024;
      auto r = (*s)->UpdateArray(oid, fmt::format("k{}", i), "data", 0, Pattern(n, i));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
  }
  c.engine->Kill();  // no clean shutdown: only acknowledged (durable) writes may be relied on

  options.data_dir = c.dir.path() + "/engine0";
  auto restarted = EngineProcess::Start(options);
  ASSERT_TRUE(restarted.ok()) << restarted.status().ToString();
  c.engine = std::move(*restarted);
  ASSERT_NO_FATAL_FAILURE(c.Connect());
  auto s = ObjectSession::Open(c.engine->control(), c.admin, "p", "c", TransportKind::kTcp);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  for (int i = 0; i < 12; ++i) {
    const size_t n = i % 2 == 0 ? 512 : 64 * 1024;
    auto f = (*s)->FetchArray(oid, fmt::format("k{}", i), "data", 0, n);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->data, Pattern(n, i)) << "value " << i << " lost or changed across the restart";
  }
  auto rc = c.engine->Terminate();
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(*rc, 0) << c.engine->LogTail();
}

TEST(EngineIo, SigtermFinishesOrFailsInFlightRequestsAndExitsCleanly) {
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "tcp", .targets = 1}));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{8} << 20));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", "c"));
  auto s = ObjectSession::Open(c.engine->control(), c.admin, "p", "c", TransportKind::kTcp);
  ROS2_ASSERT_OK(s);
  ObjectSession& session = **s;
  constexpr int kRequests = 64;
  const auto data = Pattern(32 * 1024, 7);
  std::vector<std::vector<uint8_t>> payloads;
  for (int i = 0; i < kRequests; ++i) {
    obj::UpdateRequest u;
    u.header = session.Header(0);
    u.oid = ObjectId::Make(ObjectType::kArray, ObjectClass::kS1, 0, 77);
    u.dkey = fmt::format("k{}", i);
    u.akey = "a";
    u.type = obj::ValueType::kArray;
    u.length = data.size();
    payloads.push_back(obj::Encode(u));
  }
  int done = 0, ok = 0;
  std::vector<Status> failures;
  transport::CallOptions options;
  options.capability =
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(session.capability.data()), session.capability.size());
  options.bulk_out = data;
  for (int i = 0; i < kRequests; ++i) {
    ROS2_ASSERT_OK(session.endpoint(0).Call(static_cast<uint16_t>(obj::Opcode::kUpdate), payloads[i], options,
                                            [&](const transport::ReplyView& r) {
                                              ++done;
                                              if (r.status.ok()) {
                                                ++ok;
                                              } else {
                                                failures.push_back(r.status);
                                              }
                                            }));
    if (i == kRequests / 2) ::kill(c.engine->pid(), SIGTERM);  // stop in the middle of the stream
  }
  ROS2_ASSERT_OK(session.worker().RunUntil([&] { return done == kRequests; }, std::chrono::seconds(40)));
  for (const Status& st : failures) {
    // Refused at the door or cut by the exit: a clear error, never a hang or a wrong success.
    EXPECT_TRUE(st.code() == Status::Code::kCancelled || st.code() == Status::Code::kDisconnected) << st.ToString();
    if (st.code() == Status::Code::kCancelled) {
      EXPECT_NE(st.message().find("shutting down"), std::string::npos) << st.ToString();
    }
  }
  EXPECT_EQ(ok + static_cast<int>(failures.size()), kRequests);
  auto rc = c.engine->Terminate();  // already signalled: this reaps it
  ROS2_ASSERT_OK(rc);
  EXPECT_EQ(*rc, 0) << c.engine->LogTail();
}

}  // namespace
}  // namespace ros2::testing
