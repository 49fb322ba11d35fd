// Attack tests against a real ros2-engine (ctest label `security`): a hostile
// client built on the transport and the object protocol sends what libros2
// never sends — epochs far in the future, oversized updates and fetches,
// bursts of requests that stall their bulk, floods of conditional operations —
// and a hostile local user looks at the data directory. Each test checks that
// the attack is refused with a clear error, that a victim's data and calls are
// unaffected, and that the engine still serves.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine_cluster.h"
#include "object_session.h"
#include "testing/engine_process.h"
#include "testing/subprocess.h"

namespace ros2::testing {
namespace {

using transport::TransportKind;

const ObjectId kOid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 0, 22);

// A tenant with read/write on its own container of pool "p".
struct Tenant {
  control::Credentials creds;
  std::unique_ptr<ObjectSession> session;
};

void AddTenant(EngineCluster& c, const std::string& name, Tenant* out) {
  auto secret = c.mgmt->CreateTenant(name);
  ASSERT_TRUE(secret.ok()) << secret.status().ToString();
  out->creds = {name, *secret};
  ROS2_ASSERT_OK(c.mgmt->SetAcl("p", "", name, control::kRightRead));
  ROS2_ASSERT_OK(c.mgmt->CreateContainer("p", name + "-box"));
  ROS2_ASSERT_OK(c.mgmt->SetAcl("p", name + "-box", name, control::kRightRead | control::kRightWrite));
  auto s = ObjectSession::Open(c.engine->control(), out->creds, "p", name + "-box", TransportKind::kTcp);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  out->session = std::move(*s);
}

std::vector<std::byte> Value(uint64_t i) {
  return Pattern(64, 1000 + i);
}

// The engine answers a ping on every target.
void ExpectServing(ObjectSession& s) {
  for (uint32_t t = 0; t < s.target_count(); ++t) {
    auto r = s.Call(t, obj::Opcode::kPing, obj::Encode(obj::PingRequest{s.map().targets[t].engine_index}));
    EXPECT_TRUE(r.ok()) << "target " << t << ": " << r.status().ToString();
  }
}

// The single value d/a of kOid as `s` reads it now.
std::vector<std::byte> ReadSingle(ObjectSession& s) {
  auto f = s.FetchSingle(kOid, "d", "a", 4096);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? f->data : std::vector<std::byte>{};
}

// An update of `data` with the given header epoch and flags, sent raw.
Result<transport::ReplyMessage> RawUpdate(ObjectSession& s, Epoch epoch, std::span<const std::byte> data,
                                          uint8_t flags = 0, const std::string& dkey = "d") {
  obj::UpdateRequest req;
  req.header = s.Header(0, epoch);
  req.header.flags = flags;
  req.oid = kOid;
  req.dkey = dkey;
  req.akey = "a";
  req.type = obj::ValueType::kSingle;
  req.length = data.size();
  return s.Call(0, obj::Opcode::kUpdate, obj::Encode(req), data);
}

// VmHWM (peak resident set) of a process, in bytes.
uint64_t PeakRss(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("VmHWM:")) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

// Anonymous memory the client offers as bulk without touching it.
struct Mapping {
  explicit Mapping(size_t n) : size(n) {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
  }
  ~Mapping() {
    if (data != nullptr) ::munmap(data, size);
  }
  std::span<std::byte> span() const { return {data, size}; }
  size_t size;
  std::byte* data;
};

// Finding: one client update at epoch 2^64-1024 moved the engine-wide clock
// to the end of the epoch space; it wrapped, and every tenant's later writes
// were stamped below their earlier ones, invisible.
TEST(EngineAttack, ClientEpochFarAheadIsRefusedAndDoesNotMoveTheClock) {
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "tcp", .targets = 1, .limits = "{ max_epoch_drift: 10s }"}));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{16} << 20));
  Tenant victim, attacker;
  ASSERT_NO_FATAL_FAILURE(AddTenant(c, "victim", &victim));
  ASSERT_NO_FATAL_FAILURE(AddTenant(c, "attacker", &attacker));
  ROS2_ASSERT_OK(victim.session->UpdateSingle(kOid, "d", "a", Value(0)));

  // The attack: an update and a punch near the end of the epoch space.
  auto update = RawUpdate(*attacker.session, kEpochMax - 1024, Value(99));
  ASSERT_FALSE(update.ok()) << "an update 2^64-1024 was accepted";
  EXPECT_EQ(update.status().code(), Status::Code::kInvalidArgument) << update.status().ToString();
  EXPECT_NE(update.status().message().find("limits.max_epoch_drift"), std::string::npos) << update.status().ToString();
  obj::PunchRequest punch{attacker.session->Header(0, kEpochMax - 1), obj::PunchScope::kObject, kOid, "", ""};
  auto punched = attacker.session->Call(0, obj::Opcode::kPunch, obj::Encode(punch));
  ASSERT_FALSE(punched.ok());
  EXPECT_EQ(punched.status().code(), Status::Code::kInvalidArgument) << punched.status().ToString();
  // An explicit epoch within the drift is still a client's right.
  const Epoch near = MakeEpoch(HybridClock::WallMillis() + 1000, 0);
  auto ok = RawUpdate(*attacker.session, near, Value(98));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();

  // The victim keeps overwriting its value: every acknowledged write is the
  // one read back (more writes than the 1024 epochs the attack left before
  // the wrap of an unbounded clock).
  for (uint64_t i = 1; i <= 1100; ++i) {
    auto w = victim.session->UpdateSingle(kOid, "d", "a", Value(i));
    ASSERT_TRUE(w.ok()) << i << ": " << w.status().ToString();
    ASSERT_LT(w->epoch, kMaxClockEpoch) << "the engine clock ran to the end of the epoch space";
    if (i % 100 == 0 || i > 1000) {
      ASSERT_EQ(ReadSingle(*victim.session), Value(i)) << "write " << i << " is invisible";
    }
  }
  EXPECT_EQ(ReadSingle(*victim.session), Value(1100));
  ExpectServing(*victim.session);
}

// Finding: the clock was not seeded from the stored epochs at start, so after
// a restart with the wall clock behind the stored epochs (a clock step back)
// new writes were stamped below the old ones and were invisible.
TEST(EngineAttack, ClockIsSeededFromStoredEpochsAtRestart) {
  EngineCluster c;
  EngineOptions options{
      .transport = "tcp", .storage_class = "nvme", .targets = 1, .limits = "{ max_epoch_drift: 3600s }"};
  ASSERT_NO_FATAL_FAILURE(c.Start(options));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{64} << 20));
  Tenant victim;
  ASSERT_NO_FATAL_FAILURE(AddTenant(c, "victim", &victim));
  // Stored 30 minutes ahead of the engine's wall clock: what a wall clock
  // that stepped back 30 minutes across the restart leaves behind.
  const Epoch ahead = MakeEpoch(HybridClock::WallMillis() + 30 * 60 * 1000, 0);
  auto old = RawUpdate(*victim.session, ahead, Value(1));
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  victim.session.reset();

  ASSERT_TRUE(c.engine->Terminate().ok());
  options.data_dir = c.dir.path() + "/engine0";
  auto restarted = EngineProcess::Start(options);
  ASSERT_TRUE(restarted.ok()) << restarted.status().ToString();
  c.engine = std::move(*restarted);
  ASSERT_NO_FATAL_FAILURE(c.Connect());
  auto s = ObjectSession::Open(c.engine->control(), victim.creds, "p", "victim-box", TransportKind::kTcp);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(ReadSingle(**s), Value(1));
  auto w = (*s)->UpdateSingle(kOid, "d", "a", Value(2));  // epoch 0: the engine stamps it
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_GT(w->epoch, ahead) << "the restarted engine stamped a write below a stored epoch";
  EXPECT_EQ(ReadSingle(**s), Value(2)) << "an acknowledged write after the restart is invisible";
  ExpectServing(**s);
}

// Finding: data files were created 0644 in 0755 directories, so every local
// user could read the extents and small values under targets/ around every
// capability.
TEST(EngineAttack, DataDirectoryIsPrivate) {
  EngineCluster c;
  EngineOptions options{.transport = "tcp", .storage_class = "nvme", .targets = 1};
  ASSERT_NO_FATAL_FAILURE(c.Start(options));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{64} << 20));
  Tenant victim;
  ASSERT_NO_FATAL_FAILURE(AddTenant(c, "victim", &victim));
  const auto secret_value = Pattern(64 << 10, 7);  // an extent in the data file
  ROS2_ASSERT_OK(victim.session->UpdateSingle(kOid, "d", "a", secret_value));
  ROS2_ASSERT_OK(victim.session->UpdateSingle(kOid, "d", "small", Value(3)));  // a value in RocksDB
  const std::string data_dir = c.dir.path() + "/engine0";

  // Every directory under targets/ is 0700, every file has no group or other bits.
  std::string data_file;
  int checked = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(data_dir + "/targets")) {
    struct stat st {};
    ASSERT_EQ(::lstat(e.path().c_str(), &st), 0);
    if (S_ISLNK(st.st_mode)) continue;
    if (S_ISDIR(st.st_mode)) {
      EXPECT_EQ(st.st_mode & 0777, 0700u) << e.path() << fmt::format(" mode {:o}", st.st_mode & 0777);
    } else {
      EXPECT_EQ(st.st_mode & 0077, 0u) << e.path() << fmt::format(" mode {:o}", st.st_mode & 0777);
      if (e.path().filename() == "data") data_file = e.path();
    }
    ++checked;
  }
  EXPECT_GT(checked, 5);
  ASSERT_FALSE(data_file.empty()) << "no extent data file under " << data_dir;

  // A hostile local user (nobody) cannot open the data file.
  if (::geteuid() == 0) {
    const int code = ros2::testing::RunInChild([&] {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) return 3;
      int fd = ::open(data_file.c_str(), O_RDONLY);
      return fd >= 0 ? 1 : (errno == EACCES ? 0 : 2);
    });
    EXPECT_EQ(code, 0) << "another user opened " << data_file << " (1: opened, 2: other error)";
  }

  // An engine refuses a data directory others may enter, naming the fix.
  victim.session.reset();
  ASSERT_TRUE(c.engine->Terminate().ok());
  ASSERT_EQ(::chmod(data_dir.c_str(), 0755), 0);
  options.data_dir = data_dir;
  auto refused = EngineProcess::Start(options);
  ASSERT_FALSE(refused.ok()) << "the engine ran on a world-readable data directory";
  EXPECT_NE(refused.status().message().find("chmod 700"), std::string::npos) << refused.status().ToString();

  // Made private again, it serves the victim's data intact.
  ASSERT_EQ(::chmod(data_dir.c_str(), 0700), 0);
  auto restarted = EngineProcess::Start(options);
  ASSERT_TRUE(restarted.ok()) << restarted.status().ToString();
  c.engine = std::move(*restarted);
  ASSERT_NO_FATAL_FAILURE(c.Connect());
  auto s = ObjectSession::Open(c.engine->control(), victim.creds, "p", "victim-box", TransportKind::kTcp);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto f = (*s)->FetchSingle(kOid, "d", "a", secret_value.size());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->data, secret_value);
  ExpectServing(**s);
}

constexpr const char* kSmallLimits =
    "{ max_io_size: 1MiB, connection_bytes_in_flight: 4MiB, connection_requests_in_flight: 16, "
    "target_bytes_in_flight: 8MiB, target_requests_in_flight: 64 }";

// Finding: updates up to 4 GiB were decoded, their buffers allocated and their
// data pulled before VOS refused anything over 1 GiB; fetches allocated up to
// 4 GiB.
TEST(EngineAttack, OversizedRequestsAreRefusedBeforeAllocating) {
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "tcp", .targets = 1, .limits = kSmallLimits}));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{16} << 20));
  Tenant victim, attacker;
  ASSERT_NO_FATAL_FAILURE(AddTenant(c, "victim", &victim));
  ASSERT_NO_FATAL_FAILURE(AddTenant(c, "attacker", &attacker));
  ROS2_ASSERT_OK(victim.session->UpdateSingle(kOid, "d", "a", Value(1)));
  const uint64_t before = PeakRss(c.engine->pid());
  ASSERT_GT(before, 0u);

  constexpr size_t kHuge = size_t{256} << 20;
  Mapping huge(kHuge);
  ASSERT_NE(huge.data, nullptr);
  auto update = RawUpdate(*attacker.session, 0, huge.span());
  ASSERT_FALSE(update.ok()) << "a 256 MiB update was accepted";
  EXPECT_EQ(update.status().code(), Status::Code::kInvalidArgument) << update.status().ToString();
  EXPECT_NE(update.status().message().find("limits.max_io_size"), std::string::npos) << update.status().ToString();

  obj::FetchRequest fetch{attacker.session->Header(0), kOid, "d", "a", obj::ValueType::kArray, 0, kHuge, 1};
  auto fetched = attacker.session->Call(0, obj::Opcode::kFetch, obj::Encode(fetch), {}, huge.span());
  ASSERT_FALSE(fetched.ok()) << "a 256 MiB fetch was accepted";
  EXPECT_EQ(fetched.status().code(), Status::Code::kInvalidArgument) << fetched.status().ToString();
  EXPECT_NE(fetched.status().message().find("limits.max_io_size"), std::string::npos) << fetched.status().ToString();

  const uint64_t after = PeakRss(c.engine->pid());
  EXPECT_LT(after, before + (uint64_t{64} << 20))
      << "the engine's peak memory grew from " << before << " to " << after << " bytes for refused requests";
  EXPECT_EQ(ReadSingle(*victim.session), Value(1));
  ROS2_ASSERT_OK(victim.session->UpdateSingle(kOid, "d", "a", Value(2)));
  EXPECT_EQ(ReadSingle(*victim.session), Value(2));
  ExpectServing(*victim.session);
}

// Outcome counts of a burst of asynchronous calls.
struct Burst {
  std::atomic<int> done{0}, ok{0}, busy{0}, other{0};
  std::string busy_message, other_message;
};

// Finding: nothing bounded the bytes or requests a connection or a target has
// in flight: a client that sends many large updates and stalls their bulk
// makes the engine allocate for all of them.
TEST(EngineAttack, StalledUpdatesAreBoundedPerConnection) {
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "tcp", .data_size = "64MiB", .targets = 1, .limits = kSmallLimits}));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{64} << 20));
  Tenant victim, attacker;
  ASSERT_NO_FATAL_FAILURE(AddTenant(c, "victim", &victim));
  ASSERT_NO_FATAL_FAILURE(AddTenant(c, "attacker", &attacker));
  ROS2_ASSERT_OK(victim.session->UpdateSingle(kOid, "d", "a", Value(1)));

  // 32 updates of 1 MiB each (within max_io_size), sent at once; the attacker
  // then does not progress its worker, so their bulk stalls at the engine.
  constexpr int kCalls = 32;
  const auto data = Pattern(1 << 20, 5);
  ObjectSession& a = *attacker.session;
  ROS2_ASSERT_OK(a.UpdateSingle(kOid, "warm", "a", Value(0)));  // the attacker's shard is open
  std::vector<std::vector<uint8_t>> payloads;
  for (int i = 0; i < kCalls; ++i) {
    obj::UpdateRequest req;
    req.header = a.Header(0);
    req.oid = kOid;
    req.dkey = "d" + std::to_string(i);
    req.akey = "a";
    req.type = obj::ValueType::kSingle;
    req.length = data.size();
    payloads.push_back(obj::Encode(req));
  }
  Burst burst;
  for (int i = 0; i < kCalls; ++i) {
    transport::CallOptions o;
    o.timeout = std::chrono::seconds(30);
    o.capability = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(a.capability.data()), a.capability.size());
    o.bulk_out = data;
    ROS2_ASSERT_OK(a.endpoint(0).Call(static_cast<uint16_t>(obj::Opcode::kUpdate), payloads[i], o,
                                      [&burst](const transport::ReplyView& r) {
                                        if (r.status.ok()) {
                                          ++burst.ok;
                                        } else if (r.status.code() == Status::Code::kBusy) {
                                          if (burst.busy++ == 0) burst.busy_message = r.status.ToString();
                                        } else if (burst.other++ == 0) {
                                          burst.other_message = r.status.ToString();
                                        }
                                        ++burst.done;
                                      }));
  }
  // Meanwhile the victim, on its own connection, writes and reads as usual.
  for (uint64_t i = 2; i < 12; ++i) {
    auto w = victim.session->UpdateSingle(kOid, "d", "a", Value(i));
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_EQ(ReadSingle(*victim.session), Value(i));
  }
  ROS2_ASSERT_OK(a.worker().RunUntil([&] { return burst.done.load() == kCalls; }, std::chrono::seconds(60)));
  EXPECT_GT(burst.busy.load(), 0) << "no update of the burst was refused: " << burst.ok.load() << " stored";
  EXPECT_NE(burst.busy_message.find("limits.connection_bytes_in_flight"), std::string::npos) << burst.busy_message;
  EXPECT_GE(burst.ok.load(), 1) << "the first updates within the budget are served";
  EXPECT_EQ(burst.other.load(), 0) << burst.other_message;
  EXPECT_EQ(ReadSingle(*victim.session), Value(11));
  ExpectServing(*victim.session);
}

// Finding: conditional operations queued without bound in the dkey gate.
TEST(EngineAttack, ConditionalFloodIsBoundedPerConnection) {
  EngineCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start({.transport = "tcp", .targets = 1, .limits = kSmallLimits}));
  ROS2_ASSERT_OK(c.mgmt->CreatePool("p", uint64_t{16} << 20));
  Tenant victim, attacker;
  ASSERT_NO_FATAL_FAILURE(AddTenant(c, "victim", &victim));
  ASSERT_NO_FATAL_FAILURE(AddTenant(c, "attacker", &attacker));

  // 200 conditional inserts of one key, in one batch: all but the first wait
  // in the gate for the one before them.
  constexpr int kCalls = 200;
  ObjectSession& a = *attacker.session;
  ROS2_ASSERT_OK(a.UpdateSingle(kOid, "warm", "a", Value(0)));  // the attacker's shard is open
  const auto value = Value(7);
  obj::UpdateRequest req;
  req.header = a.Header(0);
  req.header.flags = obj::kFlagIfAbsent;
  req.oid = kOid;
  req.dkey = "d";
  req.akey = "a";
  req.type = obj::ValueType::kSingle;
  req.length = value.size();
  const auto payload = obj::Encode(req);
  Burst burst;
  std::atomic<int> exists{0};
  a.endpoint(0).Cork();
  for (int i = 0; i < kCalls; ++i) {
    transport::CallOptions o;
    o.timeout = std::chrono::seconds(30);
    o.capability = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(a.capability.data()), a.capability.size());
    o.bulk_out = value;
    ROS2_ASSERT_OK(
        a.endpoint(0).Call(static_cast<uint16_t>(obj::Opcode::kUpdate), payload, o, [&](const transport::ReplyView& r) {
          if (r.status.ok()) {
            ++burst.ok;
          } else if (r.status.code() == Status::Code::kBusy) {
            if (burst.busy++ == 0) burst.busy_message = r.status.ToString();
          } else if (r.status.code() == Status::Code::kAlreadyExists) {
            ++exists;
          } else if (burst.other++ == 0) {
            burst.other_message = r.status.ToString();
          }
          ++burst.done;
        }));
  }
  a.endpoint(0).Uncork();
  ROS2_ASSERT_OK(a.worker().RunUntil([&] { return burst.done.load() == kCalls; }, std::chrono::seconds(60)));
  EXPECT_GT(burst.busy.load(), 0) << "the gate queued all " << kCalls << " conditional inserts";
  EXPECT_NE(burst.busy_message.find("limits.connection_requests_in_flight"), std::string::npos) << burst.busy_message;
  EXPECT_EQ(burst.ok.load(), 1) << "exactly one conditional insert wins";
  EXPECT_EQ(burst.other.load(), 0) << burst.other_message;

  // The victim's own conditional operations are served.
  auto mine = RawUpdate(*victim.session, 0, Value(8), obj::kFlagIfAbsent);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  auto again = RawUpdate(*victim.session, 0, Value(9), obj::kFlagIfAbsent);
  EXPECT_EQ(again.status().code(), Status::Code::kAlreadyExists) << again.status().ToString();
  EXPECT_EQ(ReadSingle(*victim.session), Value(8));
  ExpectServing(*victim.session);
}

}  // namespace
}  // namespace ros2::testing
