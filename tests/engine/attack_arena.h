// The scene of the data-plane attack tests: a real ros2-engine with one
// target, a victim client (the test process) holding data of its own, the
// attacker's own container and capability (a tenant with valid rights, but
// not to the victim's data), and a runner for the hostile client processes
// (transport_attack_peer, raw_ucx_attack_peer) that prints their results.
// Test thread only.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine_cluster.h"
#include "object_session.h"
#include "testing/pattern.h"
#include "testing/proc_status.h"
#include "testing/status_assert.h"
#include "testing/subprocess.h"
#include "transport/fault_injection.h"

extern char** environ;

namespace ros2::testing {

using transport::TransportKind;

inline std::string Hex(std::span<const uint8_t> bytes) {
  std::string out;
  for (uint8_t b : bytes) out += fmt::format("{:02x}", b);
  return out;
}
inline std::string Hex(const std::string& s) {
  return Hex(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

// One line "RESULT <name> <code> <text>" of the attacker.
struct Outcome {
  int code = -1;
  std::string text;
  bool ok() const { return code == 0; }
};
using Outcomes = std::map<std::string, Outcome>;

// Runs `argv` (argv[0] the binary) with environment `env` to its end (at
// most 60 s) and returns what it printed on stdout; a non-zero exit fails the
// test. `during`, if given, runs once the process has printed result `when`
// (while it still runs).
inline std::string RunAttackerProcess(std::vector<std::string> args, std::vector<std::string> env,
                                      const std::string& when = "", const std::function<void()>& during = nullptr) {
  int fds[2];
  EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
  SpawnOptions so;
  so.argv = args;
  for (const auto& e : env) {
    const size_t eq = e.find('=');
    so.env.emplace_back(e.substr(0, eq), eq == std::string::npos ? std::string() : e.substr(eq + 1));
  }
  so.env_only = true;  // the attacker's environment is what the test gives it
  so.stdout_fd = fds[1];
  auto child = ChildProcess::Spawn(so);
  EXPECT_TRUE(child.ok()) << child.status().ToString();
  close(fds[1]);
  std::string out;
  bool during_ran = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (during && out.find("RESULT " + when + " ") != std::string::npos &&
        out.find('\n', out.find("RESULT " + when + " ")) != std::string::npos) {
      during();
      during_ran = true;
      break;
    }
  }
  while (during_ran) {  // the rest of the output, until the process exits
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) {
      if (std::chrono::steady_clock::now() >= deadline) break;
      continue;
    }
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (!child.ok()) return out;
  if (std::chrono::steady_clock::now() >= deadline) child->Kill();
  auto code = child->running() ? child->Wait(std::chrono::seconds(60)) : Result<int>(-1);
  EXPECT_TRUE(code.ok() && *code == 0)
      << args[0] << " " << (args.size() > 1 ? args[1] : "") << " failed:\n"
      << out;
  return out;
}

// Runs the attacker binary `peer` with this process's environment and
// returns its results (see RunAttackerProcess for `when` and `during`).
inline Outcomes RunAttacker(const std::string& peer, const std::string& attack, const std::vector<std::string>& args,
                            const std::string& when = "", const std::function<void()>& during = nullptr) {
  std::vector<std::string> all = {peer, attack};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  const std::string out = RunAttackerProcess(std::move(all), std::move(env), when, during);
  Outcomes results;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("RESULT ", 0) != 0) continue;
    std::istringstream words(line.substr(7));
    std::string name;
    Outcome o;
    words >> name >> o.code;
    std::getline(words, o.text);
    if (!o.text.empty() && o.text[0] == ' ') o.text.erase(0, 1);
    results[name] = o;
  }
  return results;
}

// An engine with one target over shared memory, a victim client (this
// process) with data of its own, and the attacker's own container and
// capability: a tenant with a valid capability, but not for the victim's data.
struct Arena {
  EngineCluster cluster;
  std::unique_ptr<ObjectSession> victim;
  std::unique_ptr<ObjectSession> attacker;  // the attacker's container, seen from here (for checks)
  const ObjectId victim_oid = ObjectId::Make(ObjectType::kKeyValue, ObjectClass::kS1, 0, 1);
  std::vector<std::byte> victim_data = Pattern(64 * 1024, 11);

  TransportKind kind = TransportKind::kShm;  // set before Start

  void Start(const std::string& transport_extra = "") {
    const std::string transport(transport::TransportKindName(kind));
    ASSERT_NO_FATAL_FAILURE(cluster.Start({.transport = transport, .targets = 1, .transport_extra = transport_extra}));
    ROS2_ASSERT_OK(cluster.mgmt->CreatePool("p", uint64_t{8} << 20));
    ROS2_ASSERT_OK(cluster.mgmt->CreateContainer("p", "victim"));
    ROS2_ASSERT_OK(cluster.mgmt->CreateContainer("p", "attacker"));
    auto v = ObjectSession::Open(cluster.engine->control(), cluster.admin, "p", "victim", kind);
    auto a = ObjectSession::Open(cluster.engine->control(), cluster.admin, "p", "attacker", kind);
    ASSERT_TRUE(v.ok() && a.ok()) << v.status().ToString() << a.status().ToString();
    victim = std::move(*v);
    attacker = std::move(*a);
    if (kind == TransportKind::kShm) {
      ASSERT_EQ(victim->endpoint(0).info().bulk_mode, transport::BulkTransfer::kCma);
    }
    ROS2_ASSERT_OK(victim->UpdateArray(victim_oid, "d", "a", 0, victim_data));
  }
  std::string TargetAddress() const { return victim->pool().map.targets(0).worker_address(); }
  // The arguments every attack needs: where to connect, as whom.
  std::vector<std::string> Args(std::vector<std::string> more = {}) const {
    const auto& cont = attacker->container().container;
    std::vector<std::string> args = {"address=" + Hex(TargetAddress()),
                                     "kind=" + std::string(transport::TransportKindName(kind)),
                                     "cap=" + Hex(attacker->capability),
                                     "pool=" + cont.pool_uuid(),
                                     "container=" + cont.uuid(),
                                     "target=0",
                                     "map_version=" + std::to_string(attacker->map().version),
                                     "session=" + attacker->pool().session_uuid,
                                     "session_key=" + Hex(attacker->pool().session_key)};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }
  // The engine's id of the victim's connection, as the victim's requests carry it
  // (the attacker's "leak": the tests give it the real id to test the binding,
  // not the secrecy of ids).
  uint64_t VictimConnectionId() {
    uint64_t id = 0;
    transport::MessageRewriter spy;
    spy.request = [&](transport::wire::Message& m) { id = m.connection_id; };
    transport::SetFaultInjection(victim->worker(), &spy);
    EXPECT_TRUE(victim->FetchArray(victim_oid, "d", "a", 0, 16).ok());
    transport::SetFaultInjection(victim->worker(), nullptr);
    return id;
  }
  // The victim's calls complete with its own data, and a new client is served.
  void ExpectVictimUnaffected() {
    auto f = victim->FetchArray(victim_oid, "d", "a", 0, victim_data.size());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->data, victim_data) << "the victim's data changed";
    auto u = victim->UpdateArray(victim_oid, "d", "b", 0, Pattern(4096, 12));
    EXPECT_TRUE(u.ok()) << u.status().ToString();
    auto fresh = ObjectSession::Open(cluster.engine->control(), cluster.admin, "p", "victim", kind);
    ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
    auto again = (*fresh)->FetchArray(victim_oid, "d", "a", 0, victim_data.size());
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->data, victim_data);
  }
  // Virtual memory of the engine process, in bytes.
  uint64_t EngineVmSize() const { return ProcStatusBytes(cluster.engine->pid(), "VmSize"); }
};

}  // namespace ros2::testing
