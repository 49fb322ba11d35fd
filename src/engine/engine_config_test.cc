// Engine configuration: defaults, YAML keys and errors that name the key.
#include "engine/engine_config.h"

#include <sched.h>

#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/config.h"

namespace ros2::engine {
namespace {

Status Apply(std::string_view yaml, EngineConfig* c) {
  auto node = ParseYaml(yaml, "engine.yaml");
  if (!node.ok()) return node.status();
  return ApplyEngineConfig(*node, "engine.yaml", c);
}

TEST(EngineConfig, DefaultsNeedOnlyADataDir) {
  EngineConfig c = DefaultEngineConfig();
  Status st = FinalizeEngineConfig(&c);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("data_dir"), std::string::npos) << st.ToString();
  c.data_dir = "/tmp/x";
  EXPECT_TRUE(FinalizeEngineConfig(&c).ok());
  EXPECT_EQ(c.targets, 2u);
  EXPECT_EQ(c.vos.data_size, uint64_t{256} << 20);
  EXPECT_EQ(ControlSocketAddress(c), "unix:/tmp/x/control.sock");
}

TEST(EngineConfig, ReadsEverySection) {
  EngineConfig c = DefaultEngineConfig();
  ASSERT_TRUE(Apply(R"(
data_dir: /d
targets: 4
log_level: debug
vos: { class: ram, data_size: 64MiB }
transport: { kind: shm, inline_limit: 8KiB, batch_flush: 4MiB, spin: 20us, keepalive: 500ms }
control: { socket: /d/ctl.sock, listen: "127.0.0.1:0" }
shutdown_grace: 2s
limits: { max_epoch_drift: 5s, max_io_size: 16MiB, connection_bytes_in_flight: 64MiB,
          connection_requests_in_flight: 100, target_bytes_in_flight: 128MiB, target_requests_in_flight: 400 }
)",
                    &c)
                  .ok());
  EXPECT_EQ(c.data_dir, "/d");
  EXPECT_EQ(c.targets, 4u);
  EXPECT_EQ(c.vos.storage_class, vos::StorageClass::kRam);
  EXPECT_EQ(c.vos.data_size, uint64_t{64} << 20);
  EXPECT_EQ(c.transport.kind, transport::TransportKind::kShm);
  EXPECT_EQ(c.transport.inline_limit, 8192u);
  EXPECT_EQ(c.transport.batch_flush_bytes, uint64_t{4} << 20);
  EXPECT_EQ(c.transport.spin_budget, std::chrono::microseconds(20));
  EXPECT_EQ(c.transport.keepalive_interval, std::chrono::milliseconds(500));
  EXPECT_EQ(ControlSocketAddress(c), "unix:/d/ctl.sock");
  EXPECT_EQ(c.control.listen, "127.0.0.1:0");
  EXPECT_EQ(c.shutdown_grace, std::chrono::seconds(2));
  EXPECT_EQ(c.limits.max_epoch_drift, std::chrono::seconds(5));
  EXPECT_EQ(c.limits.max_io_size, uint64_t{16} << 20);
  EXPECT_EQ(c.limits.connection_bytes_in_flight, uint64_t{64} << 20);
  EXPECT_EQ(c.limits.connection_requests_in_flight, 100u);
  EXPECT_EQ(c.limits.target_bytes_in_flight, uint64_t{128} << 20);
  EXPECT_EQ(c.limits.target_requests_in_flight, 400u);
}

TEST(EngineConfig, ReadsTheTransportProvider) {
  EngineConfig c = DefaultEngineConfig();
  EXPECT_EQ(c.transport.provider, transport::Provider::kUcx);
  ASSERT_TRUE(Apply("data_dir: /d\ntransport: { provider: ofi, ofi_provider: shm, kind: shm }\n", &c).ok());
  EXPECT_EQ(c.transport.provider, transport::Provider::kOfi);
  EXPECT_EQ(c.transport.ofi_provider, "shm");
  auto bad = Apply("data_dir: /d\ntransport: { provider: psm9 }\n", &c);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("transport.provider"), std::string::npos) << bad.ToString();
  EXPECT_NE(bad.message().find("'psm9'"), std::string::npos) << bad.ToString();
}

// The limits a client cannot push a target past (docs/transport.md, "Limits").
TEST(EngineConfig, ReadsTransportLimits) {
  EngineConfig c = DefaultEngineConfig();
  ASSERT_TRUE(Apply(R"(
data_dir: /d
transport: { max_connections: 100, max_connections_per_peer: 4, unauthenticated_timeout: 5s,
             max_segment_size: 64MiB, max_segment_bytes_per_connection: 256MiB, cma_tokens_per_process: 8 }
)",
                    &c)
                  .ok());
  EXPECT_EQ(c.transport.max_connections, 100u);
  EXPECT_EQ(c.transport.max_connections_per_peer, 4u);
  EXPECT_EQ(c.transport.unauthenticated_timeout, std::chrono::seconds(5));
  EXPECT_EQ(c.transport.max_segment_size, uint64_t{64} << 20);
  EXPECT_EQ(c.transport.max_segment_bytes_per_connection, uint64_t{256} << 20);
  EXPECT_EQ(c.transport.cma_tokens_per_process, 8u);
  for (const char* bad : {"transport: { max_connections: 0 }", "transport: { max_connections_per_peer: 0 }",
                          "transport: { cma_tokens_per_process: 0 }",
                          "transport: { max_segment_size: 8GiB, max_segment_bytes_per_connection: 4GiB }"}) {
    EngineConfig d = DefaultEngineConfig();
    Status st = Apply(std::string("data_dir: /d\n") + bad, &d);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("transport"), std::string::npos) << st.ToString();
  }
}

TEST(EngineConfig, ReadsRebuild) {
  EngineConfig c = DefaultEngineConfig();
  EXPECT_EQ(c.rebuild.delay, std::chrono::seconds(5));
  EXPECT_EQ(c.rebuild.client_share_percent, 50u);
  ASSERT_TRUE(Apply("rebuild: { delay: 1s, client_share: 20 }", &c).ok());
  EXPECT_EQ(c.rebuild.delay, std::chrono::seconds(1));
  EXPECT_EQ(c.rebuild.client_share_percent, 20u);
}

TEST(EngineConfig, ErrorsNameTheKey) {
  struct Case {
    const char* yaml;
    const char* needle;
  } cases[] = {
      {"targets: 0", "targets"},
      {"bogus: 1", "bogus"},
      {"vos: { class: ssd }", "vos.class"},
      {"vos: { path: /x }", "vos.path"},
      {"transport: { kind: carrier-pigeon }", "transport.kind"},
      {"control: { joinn: x }", "control.joinn"},
      {"control: { sync_interval: 10ms }", "control.sync_interval"},
      {"transport: { inline_limit: 2GiB }", "inline_limit"},
      {"transport: { batch_flush: 0 }", "batch_flush"},
      {"transport: { keepalive: 1ms }", "transport.keepalive"},
      {"target_cpus: 1", "target_cpus"},
      {"rebuild: { client_share: 96 }", "rebuild.client_share: 96 percent"},
      {"rebuild: { pace: 1 }", "rebuild.pace"},
      {"target_cpus: []", "target_cpus"},
      {"target_cpus: [0, x]", "target_cpus[1]: 'x'"},
      {"target_cpus: [-1]", "target_cpus[0]: '-1'"},
      {"target_cpus: [0, [1]]", "target_cpus[1]"},
      {"limits: { max_io_size: 2GiB }", "limits.max_io_size"},
      {"limits: { max_io_size: 0 }", "limits.max_io_size"},
      {"limits: { connection_bytes_in_flight: 1MiB }", "limits.connection_bytes_in_flight"},
      {"limits: { target_bytes_in_flight: 1MiB, max_io_size: 1MiB }", "limits.target_bytes_in_flight"},
      {"limits: { connection_requests_in_flight: 0 }", "limits.connection_requests_in_flight"},
      {"limits: { target_requests_in_flight: 1 }", "limits.target_requests_in_flight"},
      {"limits: { max_drift: 1s }", "limits.max_drift"},
  };
  for (const auto& tc : cases) {
    EngineConfig c = DefaultEngineConfig();
    Status st = Apply(tc.yaml, &c);
    EXPECT_FALSE(st.ok()) << tc.yaml;
    EXPECT_NE(st.message().find(tc.needle), std::string::npos) << tc.yaml << " -> " << st.ToString();
    EXPECT_NE(st.message().find("engine.yaml"), std::string::npos) << st.ToString();
  }
  EngineConfig c = DefaultEngineConfig();
  c.data_dir = "/d";
  c.control.join = "unix:/other.sock";
  Status st = FinalizeEngineConfig(&c);
  EXPECT_NE(st.message().find("join_secret_file"), std::string::npos) << st.ToString();
}

TEST(EngineConfig, TcpControlNeedsTlsAndJoinedEnginesFailClosed) {
  EngineConfig c = DefaultEngineConfig();
  c.data_dir = "/d";
  c.control.listen = "0.0.0.0:7000";
  Status st = FinalizeEngineConfig(&c);
  EXPECT_NE(st.message().find("needs TLS"), std::string::npos) << st.ToString();
  c.control.tls_cert = "/d/engine.crt";
  c.control.tls_key = "/d/engine.key";
  EXPECT_TRUE(FinalizeEngineConfig(&c).ok());

  EngineConfig j = DefaultEngineConfig();
  j.data_dir = "/d";
  j.control.join = "10.0.0.1:7000";
  j.control.join_secret_file = "/d/admin.secret";
  st = FinalizeEngineConfig(&j);
  EXPECT_NE(st.message().find("cleartext"), std::string::npos) << st.ToString();
  j.control.insecure_tcp = true;
  EXPECT_TRUE(FinalizeEngineConfig(&j).ok());
  j.control.insecure_tcp = false;
  j.control.tls_ca = "/d/ca.crt";
  EXPECT_TRUE(FinalizeEngineConfig(&j).ok());
  j.control.join = "unix:/other/control.sock";
  j.control.tls_ca.clear();
  EXPECT_TRUE(FinalizeEngineConfig(&j).ok()) << "a Unix-socket join is local";

  EngineConfig d = DefaultEngineConfig();
  EXPECT_EQ(d.control.fail_closed_after, std::chrono::seconds(1));
  st = Apply("control: { revocation_sync: 800ms, fail_closed_after: 1s }", &d);
  EXPECT_NE(st.message().find("fail_closed_after"), std::string::npos) << st.ToString();
  ASSERT_TRUE(Apply("control: { revocation_sync: 100ms, fail_closed_after: 500ms, insecure_tcp: true }", &d).ok());
  EXPECT_EQ(d.control.fail_closed_after, std::chrono::milliseconds(500));
  EXPECT_TRUE(d.control.insecure_tcp);
}

TEST(EngineConfig, StoreIsEmbeddedOrEtcdWithAClusterKey) {
  EngineConfig d = DefaultEngineConfig();
  EXPECT_EQ(d.control.store, "embedded") << "the single-engine default needs no etcd";
  EXPECT_EQ(d.control.lease_ttl, std::chrono::seconds(3));
  Status st = Apply("control: { store: http://127.0.0.1:2379 }", &d);
  EXPECT_NE(st.message().find("control.store"), std::string::npos) << st.ToString();
  EngineConfig e = DefaultEngineConfig();
  st = Apply("control: { store: 'etcd://127.0.0.1:2379' }", &e);
  EXPECT_NE(st.message().find("cluster_key_file"), std::string::npos) << st.ToString();
  EngineConfig f = DefaultEngineConfig();
  st = Apply("control: { store: 'etcd://127.0.0.1:2379', cluster_key_file: /k, lease_ttl: 1500ms }", &f);
  EXPECT_NE(st.message().find("lease_ttl"), std::string::npos) << st.ToString();
  EngineConfig g = DefaultEngineConfig();
  ASSERT_TRUE(Apply("data_dir: /d\ncontrol: { store: 'etcd://a:1,b:2', cluster_key_file: /k, lease_ttl: 5s, "
                    "join: 'unix:/x', join_secret_file: /s }",
                    &g)
                  .ok());
  EXPECT_EQ(g.control.lease_ttl, std::chrono::seconds(5));
  st = FinalizeEngineConfig(&g);
  EXPECT_NE(st.message().find("control.join"), std::string::npos) << st.ToString();
}

TEST(EngineConfig, TargetCpusAreListedAndMustBeUsable) {
  EngineConfig c = DefaultEngineConfig();
  ASSERT_TRUE(Apply("data_dir: /d\ntarget_cpus: [1, 0]\n", &c).ok());
  EXPECT_EQ(c.target_cpus, (std::vector<int>{1, 0}));
  EngineConfig unpinned = DefaultEngineConfig();
  EXPECT_TRUE(unpinned.target_cpus.empty()) << "targets are unpinned unless configured";

  // A CPU outside this process's set is refused at start, naming it and the
  // CPUs that are allowed.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  int usable = -1, unusable = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE && (usable < 0 || unusable < 0); ++cpu) {
    if (CPU_ISSET(cpu, &allowed) && usable < 0) usable = cpu;
    if (!CPU_ISSET(cpu, &allowed) && unusable < 0) unusable = cpu;
  }
  ASSERT_GE(usable, 0);
  ASSERT_GE(unusable, 0);
  c.target_cpus = {usable};
  EXPECT_TRUE(FinalizeEngineConfig(&c).ok());
  c.target_cpus = {usable, unusable};
  Status st = FinalizeEngineConfig(&c);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find(fmt::format("target_cpus: CPU {} is not one this process may run on", unusable)),
            std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find(fmt::format("allowed: {}", usable)), std::string::npos) << st.ToString();
}

TEST(EngineConfig, MetricsListenIsOffByDefaultAndChecked) {
  EngineConfig c = DefaultEngineConfig();
  EXPECT_TRUE(c.metrics.listen.empty());
  ASSERT_TRUE(Apply("metrics: { listen: 127.0.0.1:0 }", &c).ok());
  EXPECT_EQ(c.metrics.listen, "127.0.0.1:0");
  for (const char* bad : {"metrics: { listen: localhost }", "metrics: { listen: '127.0.0.1:70000' }",
                          "metrics: { listne: 127.0.0.1:9464 }"}) {
    EngineConfig d = DefaultEngineConfig();
    Status st = Apply(bad, &d);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("metrics"), std::string::npos) << st.ToString();
  }
}

}  // namespace
}  // namespace ros2::engine
