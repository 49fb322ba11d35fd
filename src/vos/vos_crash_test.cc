// Crash test: a child process runs the crash workload and reports every
// acknowledged update; the parent SIGKILLs it at random moments, reopens the
// store and checks that every acknowledged update reads back byte-exact at its
// epoch, and that every update that was in flight is either wholly there or
// wholly absent (nothing torn).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <set>
#include <sstream>

#include "vos/vos_crash_model.h"
#include "testing/subprocess.h"
#include "vos/vos_test_util.h"

namespace ros2::vos {
namespace {

struct ChildReport {
  std::set<Epoch> begun;
  std::set<Epoch> acked;
  bool finished = false;
};

// Runs the child, kills it `delay` after it acknowledged `kill_after_acks`
// updates (so the kill lands mid-flight however fast the machine is), and
// collects its report.
ChildReport RunChild(const std::string& store, Epoch first, int ops, int kill_after_acks,
                     std::chrono::microseconds delay) {
  int fds[2];
  EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  ros2::testing::SpawnOptions so;
  so.argv = {VOS_CRASH_CHILD, store, std::to_string(first), std::to_string(ops)};
  so.stdout_fd = fds[1];
  auto child = ros2::testing::ChildProcess::Spawn(so);
  EXPECT_TRUE(child.ok()) << child.status().ToString();
  if (!child.ok()) {
    ::close(fds[0]);
    ::close(fds[1]);
    return {};
  }
  ::close(fds[1]);
  std::string out;
  auto deadline = std::chrono::steady_clock::time_point::max();
  bool killed = false;
  char buf[4096];
  while (true) {
    auto now = std::chrono::steady_clock::now();
    if (!killed && now >= deadline) {
      child->Signal(SIGKILL);
      killed = true;
    }
    int timeout = -1;
    if (!killed && deadline != std::chrono::steady_clock::time_point::max()) {
      timeout = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count()) + 1;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    if (::poll(&pfd, 1, timeout) == 0) continue;
    ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (deadline == std::chrono::steady_clock::time_point::max() && out.find("R\n") != std::string::npos) {
      int acks = 0;
      for (size_t pos = out.find("A "); pos != std::string::npos; pos = out.find("A ", pos + 1)) ++acks;
      if (acks >= kill_after_acks) deadline = std::chrono::steady_clock::now() + delay;
    }
  }
  ::close(fds[0]);
  auto code = child->Wait(std::chrono::seconds(60));
  const int exit_code = code.ok() ? *code : -1;
  ChildReport r;
  std::istringstream lines(out);
  std::string tag;
  while (lines >> tag) {
    if (tag == "D") {
      r.finished = true;
      continue;
    }
    if (tag == "R") continue;
    Epoch e = 0;
    lines >> e;
    (tag == "A" ? r.acked : r.begun).insert(e);
  }
  if (!killed || exit_code != 128 + SIGKILL) {
    EXPECT_EQ(exit_code, 0) << "child failed";
  }
  return r;
}

// Reads what `op` covers, at `epoch`.
Result<std::vector<std::byte>> ReadRange(Vos* vos, const testing::CrashOp& op, Epoch epoch) {
  if (op.type == ValueType::kSingle) return testing::GetSingle(vos, op.oid, op.dkey, op.akey, epoch, 1 << 20);
  return testing::GetArray(vos, op.oid, op.dkey, op.akey, epoch, op.index, op.count(), op.record_size);
}

TEST(VosCrashTest, AcknowledgedUpdatesSurviveSigkillAndNothingIsTorn) {
  testing::TempDir dir;
  std::string store = dir.path() + "/store";
  std::mt19937 rng(static_cast<unsigned>(std::random_device{}()));
  unsigned seed = rng();
  SCOPED_TRACE("seed " + std::to_string(seed));
  rng.seed(seed);
  constexpr int kRounds = 50;
  Epoch next = 1000;
  std::vector<Epoch> all_acked;
  int torn_checks = 0, landed = 0, kills_mid_flight = 0;
  for (int round = 0; round < kRounds; ++round) {
    int kill_after_acks = static_cast<int>(rng() % 150);
    auto delay = std::chrono::microseconds(rng() % 3000);
    ChildReport r = RunChild(store, next, 200, kill_after_acks, delay);
    ASSERT_FALSE(::testing::Test::HasFailure()) << "round " << round;
    if (!r.finished) ++kills_mid_flight;
    for (Epoch e : r.acked) ASSERT_TRUE(r.begun.count(e)) << e;
    if (!r.begun.empty()) next = *r.begun.rbegin() + 1;

    VosOptions o = testing::SmallOptions(dir.path());
    o.data_size = 256ull << 20;
    auto vos = Vos::Open(o);
    ASSERT_TRUE(vos.ok()) << "round " << round << ": " << vos.status().ToString();
    for (Epoch e : r.begun) {
      testing::CrashOp op = testing::MakeCrashOp(e);
      auto got = ReadRange(vos->get(), op, e);
      ASSERT_TRUE(got.ok()) << "round " << round << " epoch " << e << ": " << got.status().ToString();
      if (r.acked.count(e)) {
        ASSERT_EQ(*got, op.data) << "round " << round << ": acknowledged update at epoch " << e << " lost or damaged";
        all_acked.push_back(e);
      } else {
        // In flight when killed: all of it or none of it.
        auto before = ReadRange(vos->get(), op, e - 1);
        ASSERT_TRUE(before.ok());
        ASSERT_TRUE(*got == op.data || *got == *before) << "round " << round << ": torn update at epoch " << e;
        ++torn_checks;
        landed += *got == op.data && *got != *before;
      }
    }
    // A sample of older rounds' updates is still intact (the allocator never reuses live space).
    for (int i = 0; i < 20 && !all_acked.empty(); ++i) {
      Epoch e = all_acked[rng() % all_acked.size()];
      testing::CrashOp op = testing::MakeCrashOp(e);
      auto got = ReadRange(vos->get(), op, e);
      ASSERT_TRUE(got.ok() && *got == op.data) << "round " << round << ": older update at epoch " << e;
    }
  }
  // Finally every acknowledged update of every round.
  VosOptions o = testing::SmallOptions(dir.path());
  o.data_size = 256ull << 20;
  auto vos = Vos::Open(o);
  ASSERT_TRUE(vos.ok());
  for (Epoch e : all_acked) {
    testing::CrashOp op = testing::MakeCrashOp(e);
    auto got = ReadRange(vos->get(), op, e);
    ASSERT_TRUE(got.ok() && *got == op.data) << "acknowledged update at epoch " << e;
  }
  EXPECT_GT(all_acked.size(), 500u);
  EXPECT_GT(kills_mid_flight, kRounds / 2);
  RecordProperty("acknowledged", static_cast<int>(all_acked.size()));
  RecordProperty("in_flight_checked", torn_checks);
  std::printf(
      "crash test: %zu acknowledged updates verified, %d in-flight updates checked (%d landed), %d of %d "
      "rounds killed mid-flight\n",
      all_acked.size(), torn_checks, landed, kills_mid_flight, kRounds);
}

}  // namespace
}  // namespace ros2::vos
