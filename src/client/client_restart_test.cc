// libros2 across an engine restart: a real single-node cluster (nvme class,
// so the data survives) is killed with SIGKILL while a client writes and
// reads, and started again with `ros2ctl cluster up` on the same directory.
// The client must come back by itself (a fresh session and map), every
// acknowledged write must be there, a call made while the engine is down must
// fail with a clear Disconnected error once the reconnect timeout passed, and
// the failures seen meanwhile must never be NotFound (the old symptom: the
// stale session made every call NotFound forever).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ros2/client.h"
#include "testing/client_fixture.h"
#include "testing/test_cluster.h"

namespace ros2::client {
namespace {

using ros2::testing::CommandResult;
using ros2::testing::TestCluster;
using Clock = std::chrono::steady_clock;

std::string ValueOf(uint64_t i) {
  std::string v;
  while (v.size() < 3000) v += fmt::format("value {} of the restart test;", i);
  return v;
}

std::span<const std::byte> Bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::string Text(const std::vector<std::byte>& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// Stops and joins a thread on every way out of a test (an ASSERT included).
struct JoinOnExit {
  std::thread& thread;
  std::atomic<bool>* stop = nullptr;
  ~JoinOnExit() {
    if (stop != nullptr) stop->store(true);
    if (thread.joinable()) thread.join();
  }
};

class ClientRestartTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string error;
    cluster_ = TestCluster::Start(GetParam(), 2, &error, "nvme", "64MiB");
    ASSERT_NE(cluster_, nullptr) << error;
    for (const auto& args : std::vector<std::vector<std::string>>{{"pool", "create", "p", "--size", "256MiB"},
                                                                  {"cont", "create", "p", "c"}}) {
      CommandResult r = cluster_->Ctl(args);
      ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    }
  }

  ClientOptions Options(std::chrono::milliseconds reconnect_timeout) const {
    ClientOptions o;
    o.control = cluster_->control();
    o.secret_file = cluster_->admin_secret_file();
    o.transport = GetParam();
    o.reconnect_timeout = reconnect_timeout;
    return o;
  }

  std::unique_ptr<TestCluster> cluster_;
};

struct Handles {
  std::unique_ptr<Client> client;
  std::unique_ptr<Pool> pool;
  std::unique_ptr<Container> cont;
  std::optional<Object> obj;
};

Handles Open(const ClientOptions& o) {
  Handles h;
  auto connected = ros2::testing::ConnectContainer(o, "p", "c");
  EXPECT_TRUE(connected.ok()) << connected.status().ToString();
  if (!connected.ok()) return h;
  h.client = std::move(connected->client);
  h.pool = std::move(connected->pool);
  h.cont = std::move(connected->cont);
  auto obj = h.cont->OpenObject(Container::MakeObjectId(ObjectClass::kSX, 0, 7));  // dkeys over both targets
  EXPECT_TRUE(obj.ok()) << obj.status().ToString();
  if (obj.ok()) h.obj = *obj;
  return h;
}

TEST_P(ClientRestartTest, ClientRidesOutEngineKillAndRestart) {
  Handles busy = Open(Options(std::chrono::seconds(60)));
  ASSERT_TRUE(busy.obj.has_value());
  // A second client that gives up after half a second; it did I/O before the
  // kill, so it holds connections to the dead engine.
  Handles impatient = Open(Options(std::chrono::milliseconds(500)));
  ASSERT_TRUE(impatient.obj.has_value());
  ASSERT_TRUE(impatient.obj->Put("probe", "a", Bytes(ValueOf(0))).ok());
  const uint64_t map_before = busy.pool->summary().map_version;

  // One thread writes key after key and reads back an acknowledged one after
  // each write, the whole time.
  std::mutex mu;
  std::vector<uint64_t> acked;
  std::vector<Status> failures;
  std::vector<std::string> bad_reads;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> acked_count{0};
  std::thread writer([&] {
    for (uint64_t i = 0; !stop.load(); ++i) {
      Status st = busy.obj->Put(fmt::format("k{}", i), "a", Bytes(ValueOf(i)));
      std::lock_guard<std::mutex> lock(mu);
      if (st.ok()) {
        acked.push_back(i);
        acked_count.store(acked.size());
      } else {
        failures.push_back(st);
      }
      if (acked.empty()) continue;
      const uint64_t j = acked[i % acked.size()];
      auto got = busy.obj->Get(fmt::format("k{}", j), "a");
      if (got.ok() && Text(*got) != ValueOf(j)) bad_reads.push_back(fmt::format("k{}: wrong data", j));
      if (!got.ok()) failures.push_back(got.status());
    }
  });
  JoinOnExit join_writer{writer, &stop};
  auto wait_for_acks = [&](uint64_t n, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (acked_count.load() < n && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return acked_count.load() >= n;
  };
  ASSERT_TRUE(wait_for_acks(50, std::chrono::seconds(60)));

  ASSERT_TRUE(cluster_->KillEngine());

  // While the engine is down: a call fails after the reconnect timeout with
  // a clear error, instead of hanging or blaming the data.
  const auto t0 = Clock::now();
  auto down = impatient.obj->Get("probe", "a");
  const auto waited = Clock::now() - t0;
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), Status::Code::kDisconnected) << down.status().ToString();
  EXPECT_NE(down.status().message().find("reconnect_timeout"), std::string::npos) << down.status().ToString();
  EXPECT_LT(waited, std::chrono::seconds(20));
  EXPECT_GE(waited, std::chrono::milliseconds(400));

  std::string error;
  ASSERT_TRUE(cluster_->Restart(&error)) << error;
  const uint64_t acked_at_restart = acked_count.load();
  // The busy client goes on by itself: 50 more acknowledged writes.
  EXPECT_TRUE(wait_for_acks(acked_at_restart + 50, std::chrono::seconds(90)))
      << acked_count.load() << " acknowledged, " << acked_at_restart << " at the restart";
  stop.store(true);
  writer.join();

  // The impatient client recovers on its next call.
  auto again = impatient.obj->Get("probe", "a");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(Text(*again), ValueOf(0));
  EXPECT_GT(busy.pool->summary().map_version, map_before);

  EXPECT_TRUE(bad_reads.empty()) << bad_reads.front();
  // Failures: at most the calls in flight at the kill, each a Disconnected
  // that says what happened; never NotFound.
  EXPECT_LE(failures.size(), 4u);
  for (const Status& f : failures) {
    EXPECT_TRUE(f.code() == Status::Code::kDisconnected || f.code() == Status::Code::kCancelled) << f.ToString();
  }

  // Every acknowledged write is there, for this client and for a new one.
  Handles fresh = Open(Options(std::chrono::seconds(10)));
  ASSERT_TRUE(fresh.obj.has_value());
  // 50 before the kill and 50 after the restart were waited for (the writer
  // may stop at exactly that count).
  ASSERT_GE(acked.size(), acked_at_restart + 50);
  ASSERT_GE(acked.size(), 100u);
  for (uint64_t i : acked) {
    for (Handles* h : {&busy, &fresh}) {
      auto got = h->obj->Get(fmt::format("k{}", i), "a");
      ASSERT_TRUE(got.ok()) << "k" << i << ": " << got.status().ToString();
      ASSERT_EQ(Text(*got), ValueOf(i)) << "k" << i;
    }
  }
}

// The asynchronous API the fio engine and the DFS data path use: fetches in
// flight when the engine dies are resent once it is back.
TEST_P(ClientRestartTest, AsyncFetchesInFlightAreResentAfterRestart) {
  Handles h = Open(Options(std::chrono::seconds(60)));
  ASSERT_TRUE(h.obj.has_value());
  constexpr uint64_t kKeys = 64;
  for (uint64_t i = 0; i < kKeys; ++i) ASSERT_TRUE(h.obj->Put(fmt::format("k{}", i), "a", Bytes(ValueOf(i))).ok());
  auto eq = h.cont->CreateEventQueue();
  ASSERT_TRUE(eq.ok()) << eq.status().ToString();

  // Submit (corked: the requests leave at the next progress), kill the
  // engine, then wait: the fetches fail as Disconnected, are resent once a
  // second thread has started the engine again, and complete with the data.
  std::vector<std::vector<std::byte>> buffers(kKeys, std::vector<std::byte>(4096));
  std::vector<FetchArgs> args(kKeys);
  for (uint64_t i = 0; i < kKeys; ++i) {
    args[i].dkey = fmt::format("k{}", i);
    args[i].akey = "a";
    args[i].buffer = buffers[i];
    Status st = h.obj->SubmitFetch(**eq, args[i], i);
    ASSERT_TRUE(st.ok()) << i << ": " << st.ToString();
  }
  ASSERT_TRUE(cluster_->KillEngine());
  std::string error;
  bool restarted = false;
  std::thread restarter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    restarted = cluster_->Restart(&error);
  });
  JoinOnExit join_restarter{restarter};
  std::vector<Event> events(kKeys);
  size_t got = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (got < kKeys && Clock::now() < deadline) {
    auto n = (*eq)->Wait(std::span<Event>(events).subspan(got), 1, std::chrono::seconds(5));
    if (n.ok()) got += *n;
  }
  restarter.join();
  ASSERT_TRUE(restarted) << error;
  ASSERT_EQ(got, kKeys);
  for (size_t e = 0; e < got; ++e) {
    const uint64_t i = events[e].user_data;
    ASSERT_TRUE(events[e].result.status.ok()) << i << ": " << events[e].result.status.ToString();
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(buffers[i].data()), events[e].result.size), ValueOf(i));
  }
}

// A Submit never waits for a dead engine: it returns at once (the resend is a
// timer of the queue), and the completion arrives later, once the reconnect
// window has passed, as Disconnected naming reconnect_timeout.
TEST_P(ClientRestartTest, SubmitOnADeadEngineReturnsAtOnceAndCompletesLater) {
  constexpr auto kWindow = std::chrono::seconds(4);
  Handles h = Open(Options(kWindow));
  ASSERT_TRUE(h.obj.has_value());
  constexpr uint64_t kKeys = 16;
  for (uint64_t i = 0; i < kKeys; ++i) ASSERT_TRUE(h.obj->Put(fmt::format("k{}", i), "a", Bytes(ValueOf(i))).ok());
  auto eq = h.cont->CreateEventQueue();
  ASSERT_TRUE(eq.ok()) << eq.status().ToString();
  ASSERT_TRUE(cluster_->KillEngine());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the endpoints go idle

  std::vector<std::vector<std::byte>> buffers(kKeys, std::vector<std::byte>(4096));
  std::vector<FetchArgs> args(kKeys);
  const auto t0 = Clock::now();
  for (uint64_t i = 0; i < kKeys; ++i) {
    args[i].dkey = fmt::format("k{}", i);
    args[i].akey = "a";
    args[i].buffer = buffers[i];
    const auto before = Clock::now();
    Status st = h.obj->SubmitFetch(**eq, args[i], i);
    const auto took = Clock::now() - before;
    ASSERT_TRUE(st.ok()) << i << ": " << st.ToString();
    EXPECT_LT(took, std::chrono::milliseconds(500)) << "submit " << i << " waited";
  }
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ((*eq)->in_flight(), kKeys);  // nothing completed inside a submit

  std::vector<Event> events(kKeys);
  size_t got = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (got < kKeys && Clock::now() < deadline) {
    auto n = (*eq)->Wait(std::span<Event>(events).subspan(got), 1, std::chrono::seconds(5));
    if (n.ok()) got += *n;
  }
  const auto waited = Clock::now() - t0;
  ASSERT_EQ(got, kKeys);
  EXPECT_GE(waited, kWindow - std::chrono::milliseconds(100));
  for (size_t e = 0; e < got; ++e) {
    const Status& st = events[e].result.status;
    EXPECT_EQ(st.code(), Status::Code::kDisconnected) << events[e].user_data << ": " << st.ToString();
    EXPECT_NE(st.message().find("reconnect_timeout"), std::string::npos) << st.ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, ClientRestartTest, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ros2::client
