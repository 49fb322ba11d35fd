// ros2ctl end to end: usage errors without a cluster, then every command group
// against a real single-node cluster (`cluster up` in a temporary directory),
// with --json output parsed and checked and error cases giving a non-zero exit
// and a clear message.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "testing/test_cluster.h"

namespace ros2::ctl {
namespace {

using ros2::testing::CommandResult;
using ros2::testing::TestCluster;

#define EXPECT_FAILS_WITH(result, code, text)                                        \
  do {                                                                               \
    const CommandResult& r_ = (result);                                              \
    EXPECT_EQ(r_.exit_code, code) << "stdout: " << r_.out << "\nstderr: " << r_.err; \
    EXPECT_NE(r_.err.find(text), std::string::npos) << "stderr: " << r_.err;         \
  } while (0)

TEST(Ros2ctlCliTest, TyposAndMissingArgumentsAreUsageErrors) {
  auto dir = TestCluster::MakeDirectory();
  ASSERT_NE(dir, nullptr);
  EXPECT_FAILS_WITH(dir->CtlBare({"pool", "craete", "x"}), 2, "craete");
  EXPECT_FAILS_WITH(dir->CtlBare({"poool", "list"}), 2, "poool");
  EXPECT_FAILS_WITH(dir->CtlBare({"pool", "create", "x", "--sise", "1G"}), 2, "--sise");
  EXPECT_FAILS_WITH(dir->CtlBare({"pool", "create", "x"}), 2, "--size");
  EXPECT_FAILS_WITH(dir->CtlBare({"cluster", "up", "--class", "ssd"}), 2, "ssd");
  EXPECT_FAILS_WITH(dir->CtlBare({"cluster", "up", "--target-cpus", "0,x"}), 2, "'x' is not a CPU number");
  EXPECT_FAILS_WITH(dir->CtlBare({"cluster", "up", "--target-cpus=-1"}), 2, "'-1' is not a CPU number");
  EXPECT_FAILS_WITH(dir->CtlBare({}), 2, "ros2ctl --help");
  CommandResult help = dir->CtlBare({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("cluster"), std::string::npos);
  EXPECT_NE(help.out.find("pool"), std::string::npos);
}

TEST(Ros2ctlCliTest, MissingClusterOrEndpointIsAClearError) {
  auto dir = TestCluster::MakeDirectory();
  ASSERT_NE(dir, nullptr);
  EXPECT_FAILS_WITH(dir->CtlBare({"pool", "list"}), 1, "no control endpoint");
  EXPECT_FAILS_WITH(dir->Ctl({"pool", "list"}), 1, "no local cluster");
  EXPECT_FAILS_WITH(dir->Ctl({"cluster", "status"}), 1, "no engine is running");
  CommandResult down = dir->Ctl({"cluster", "down"});
  EXPECT_EQ(down.exit_code, 0) << down.err;
  EXPECT_NE(down.out.find("No engine was running"), std::string::npos) << down.out;
  EXPECT_FAILS_WITH(dir->Ctl({"cluster", "up", "--engine", "/nonexistent/ros2-engine"}), 1, "not an executable");
  // A CPU this machine does not give the engine: the engine's own message, and no engine left running.
  EXPECT_FAILS_WITH(dir->Ctl({"cluster", "up", "--target-cpus", "0,1000"}), 1,
                    "target_cpus: CPU 1000 is not one this process may run on");
  EXPECT_FAILS_WITH(dir->Ctl({"cluster", "status"}), 1, "no engine is running");
  // --json errors are JSON on stdout too.
  CommandResult j = dir->Ctl({"--json", "pool", "list"});
  EXPECT_EQ(j.exit_code, 1);
  auto parsed = j.Json();
  ASSERT_FALSE(parsed.is_discarded()) << j.out;
  EXPECT_EQ(parsed["error"]["code"], "NotFound");
}

// `cluster down` finds its engine by the pid file and the engine's --config,
// not by the binary's name: an engine started from a binary of another name
// (a packaged or renamed build) is stopped too, and status sees it.
TEST(Ros2ctlClusterTest, DownStopsAnEngineWhateverItsBinaryIsCalled) {
  auto c = TestCluster::MakeDirectory();
  const std::string renamed = c->scratch() + "/engine-under-another-name";
  ASSERT_EQ(::symlink(ROS2_ENGINE_PATH, renamed.c_str()), 0);
  CommandResult up = c->Ctl({"--json", "cluster", "up", "--targets", "1", "--class", "ram", "--shard-size", "64MiB",
                             "--engine", renamed, "--timeout", "60"});
  ASSERT_EQ(up.exit_code, 0) << up.err << up.out;
  const int pid = c->EnginePid();
  ASSERT_GT(pid, 0);
  CommandResult status = c->Ctl({"--json", "cluster", "status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(status.Json()["pid"], pid);
  CommandResult down = c->Ctl({"cluster", "down", "--timeout", "30"});
  EXPECT_EQ(down.exit_code, 0) << down.err << down.out;
  bool exited = false;
  for (int i = 0; i < 500 && !(exited = ros2::testing::ProcessExited(pid)); ++i) ::usleep(10'000);
  if (!exited) ::kill(pid, SIGKILL);  // leave nothing behind
  EXPECT_TRUE(exited) << "engine pid " << pid << " still runs after cluster down";
  EXPECT_FALSE(std::filesystem::exists(c->dir() + "/engine.pid"));
}

TEST(Ros2ctlClusterTest, EveryCommandGroupEndToEnd) {
  std::string error;
  auto c = TestCluster::Start("auto", 2, &error);
  ASSERT_NE(c, nullptr) << error;

  // cluster status
  CommandResult status = c->Ctl({"--json", "cluster", "status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  auto st = status.Json();
  EXPECT_GT(st["pid"].get<int>(), 0);
  EXPECT_EQ(st["targets"].size(), 2u);
  EXPECT_EQ(st["targets"][0]["state"], "up");
  EXPECT_FAILS_WITH(c->Ctl({"cluster", "up"}), 1, "already running");

  // pools
  CommandResult created = c->Ctl({"--json", "pool", "create", "data", "--size", "100MiB"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  auto pool = created.Json();
  EXPECT_EQ(pool["label"], "data");
  EXPECT_EQ(pool["size_bytes"], 100u << 20);
  EXPECT_EQ(pool["uuid"].get<std::string>().size(), 36u);
  EXPECT_FAILS_WITH(c->Ctl({"pool", "create", "data", "--size", "64MiB"}), 1, "data");  // duplicate label
  CommandResult dup = c->Ctl({"pool", "create", "data", "--size", "64MiB"});
  EXPECT_NE(dup.err.find("AlreadyExists"), std::string::npos) << dup.err;
  EXPECT_FAILS_WITH(c->Ctl({"pool", "create", "other", "--size", "12XB"}), 1, "bad --size '12XB'");
  EXPECT_FAILS_WITH(c->Ctl({"pool", "create", "other", "--size", "0"}), 1, "bad --size '0'");
  EXPECT_FAILS_WITH(c->Ctl({"pool", "query", "nosuchpool"}), 1, "nosuchpool");
  CommandResult unknown = c->Ctl({"pool", "query", "nosuchpool"});
  EXPECT_NE(unknown.err.find("NotFound"), std::string::npos) << unknown.err;
  CommandResult list = c->Ctl({"--json", "pool", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  ASSERT_EQ(list.Json()["pools"].size(), 1u);
  EXPECT_EQ(list.Json()["pools"][0]["uuid"], pool["uuid"]);
  CommandResult query = c->Ctl({"--json", "pool", "query", pool["uuid"].get<std::string>()});
  ASSERT_EQ(query.exit_code, 0) << query.err;
  EXPECT_EQ(query.Json()["label"], "data");
  EXPECT_EQ(query.Json()["target_count"], 2u);
  CommandResult human = c->Ctl({"pool", "query", "data"});
  EXPECT_NE(human.out.find("Pool data"), std::string::npos) << human.out;

  // containers
  CommandResult cont = c->Ctl(
      {"--json", "cont", "create", "data", "ckpt", "--oclass", "S1", "--checksum", "off", "--chunk-size", "4MiB"});
  ASSERT_EQ(cont.exit_code, 0) << cont.err;
  EXPECT_EQ(cont.Json()["properties"]["oclass"], "S1");
  EXPECT_EQ(cont.Json()["properties"]["checksum"], false);
  EXPECT_EQ(cont.Json()["properties"]["chunk_size"], 4u << 20);
  EXPECT_FAILS_WITH(c->Ctl({"cont", "create", "data", "ckpt"}), 1, "ckpt");
  EXPECT_FAILS_WITH(c->Ctl({"cont", "create", "data", "bad", "--oclass", "S9"}), 1, "S9");
  CommandResult rp = c->Ctl({"--json", "cont", "create", "data", "rp", "--oclass", "RP_2GX", "--rd-fac", "1"});
  ASSERT_EQ(rp.exit_code, 0) << rp.err;
  EXPECT_EQ(rp.Json()["properties"]["oclass"], "RP_2GX");
  EXPECT_EQ(rp.Json()["properties"]["rd_fac"], 1u);
  ASSERT_EQ(c->Ctl({"cont", "destroy", "data", "rp"}).exit_code, 0);
  EXPECT_FAILS_WITH(c->Ctl({"cont", "create", "data", "bad", "--oclass", "S1", "--rd-fac", "1"}), 1, "rd_fac=1");
  EXPECT_FAILS_WITH(c->Ctl({"cont", "create", "data", "bad", "--rd-fac", "3"}), 1, "rd_fac='3'");
  EXPECT_FAILS_WITH(c->Ctl({"cont", "create", "data", "bad", "--property", "noequals"}), 1, "KEY=VALUE");
  EXPECT_FAILS_WITH(c->Ctl({"cont", "create", "nosuchpool", "x"}), 1, "nosuchpool");
  CommandResult cq = c->Ctl({"--json", "cont", "query", "data", "ckpt"});
  ASSERT_EQ(cq.exit_code, 0) << cq.err;
  EXPECT_EQ(cq.Json()["label"], "ckpt");
  EXPECT_EQ(cq.Json()["pool_uuid"], pool["uuid"]);
  CommandResult cl = c->Ctl({"--json", "cont", "list", "data"});
  ASSERT_EQ(cl.exit_code, 0) << cl.err;
  EXPECT_EQ(cl.Json()["containers"].size(), 1u);

  // tenants and ACLs
  std::string secret_file = c->scratch() + "/alice.secret";
  CommandResult alice = c->Ctl({"--json", "tenant", "add", "alice", "--secret-out", secret_file});
  ASSERT_EQ(alice.exit_code, 0) << alice.err;
  EXPECT_FALSE(alice.Json()["secret"].get<std::string>().empty());
  EXPECT_EQ(ros2::testing::ReadWholeFile(secret_file), alice.Json()["secret"].get<std::string>() + "\n");
  EXPECT_FAILS_WITH(c->Ctl({"tenant", "add", "alice"}), 1, "alice");
  CommandResult tenants = c->Ctl({"--json", "tenant", "list"});
  ASSERT_EQ(tenants.exit_code, 0);
  auto names = tenants.Json()["tenants"];
  EXPECT_NE(std::find(names.begin(), names.end(), "alice"), names.end()) << tenants.out;
  // alice cannot administer anything yet.
  CommandResult denied =
      c->Ctl({"--tenant", "alice", "--secret-file", secret_file, "pool", "create", "mine", "--size", "1GiB"});
  EXPECT_EQ(denied.exit_code, 1) << denied.out;
  CommandResult set = c->Ctl({"--json", "acl", "set", "data", "ckpt", "--tenant", "alice", "--rights", "rw"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  CommandResult get = c->Ctl({"--json", "acl", "get", "data", "ckpt"});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  bool found = false;
  const nlohmann::json acl_json = get.Json();
  for (const auto& e : acl_json["acl"]) {
    if (e["tenant"] == "alice") {
      found = true;
      EXPECT_EQ(e["rights"], "rw---");
    }
  }
  EXPECT_TRUE(found) << get.out;
  EXPECT_FAILS_WITH(c->Ctl({"acl", "set", "data", "--tenant", "alice", "--rights", "rwx"}), 1, "rwx");

  // The demo workload through libros2.
  CommandResult demo =
      c->Ctl({"--json", "cluster", "demo", "--pool", "demo", "--cont", "demo", "--pool-size", "16MiB", "--mib", "2"});
  ASSERT_EQ(demo.exit_code, 0) << demo.err << demo.out;
  ASSERT_FALSE(demo.Json().is_discarded()) << "stdout is not only JSON: " << demo.out;
  EXPECT_EQ(demo.Json()["ok"], true);
  EXPECT_GT(demo.Json()["verified_bytes"].get<uint64_t>(), 4u << 20);

  // Destroy.
  CommandResult notempty = c->Ctl({"pool", "destroy", "data"});
  EXPECT_EQ(notempty.exit_code, 1) << notempty.out;
  ASSERT_EQ(c->Ctl({"cont", "destroy", "data", "ckpt"}).exit_code, 0);
  ASSERT_EQ(c->Ctl({"pool", "destroy", "data"}).exit_code, 0);
  EXPECT_FAILS_WITH(c->Ctl({"pool", "query", "data"}), 1, "data");

  // Down, then status says so.
  CommandResult down = c->Ctl({"--json", "cluster", "down"});
  ASSERT_EQ(down.exit_code, 0) << down.err;
  EXPECT_EQ(down.Json()["stopped"], true);
  EXPECT_FAILS_WITH(c->Ctl({"cluster", "status"}), 1, "no engine is running");
}

// `cert` makes a CA and engine certificates (mode 0600); `cluster up --listen`
// serves TCP with TLS only, with certificates it makes itself.
TEST(Ros2ctlCliTest, CertCommandsAndATlsListener) {
  auto dir = TestCluster::MakeDirectory();
  ASSERT_NE(dir, nullptr);
  auto mode = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 0777) : 0u;
  };
  const std::string ca = dir->scratch() + "/ca";
  CommandResult made = dir->CtlBare({"cert", "ca", "--dir", ca});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_EQ(mode(ca + "/ca.key"), 0600u);
  EXPECT_EQ(mode(ca + "/ca.crt"), 0600u);
  EXPECT_FAILS_WITH(dir->CtlBare({"cert", "ca", "--dir", ca}), 1, "already exists");
  CommandResult signed_cert =
      dir->CtlBare({"cert", "engine", "--ca-dir", ca, "--out", dir->scratch() + "/e", "--name", "node1"});
  ASSERT_EQ(signed_cert.exit_code, 0) << signed_cert.err;
  EXPECT_EQ(mode(dir->scratch() + "/e/engine.key"), 0600u);
  EXPECT_EQ(mode(dir->scratch() + "/e/engine.crt"), 0600u);

  CommandResult up =
      dir->Ctl({"--json", "cluster", "up", "--class", "ram", "--targets", "1", "--listen", "127.0.0.1:0"});
  ASSERT_EQ(up.exit_code, 0) << up.err << up.out;
  auto j = up.Json();
  ASSERT_FALSE(j.is_discarded()) << up.out;
  const std::string tcp = j["listen"].get<std::string>();
  const std::string ca_crt = j["tls_ca"].get<std::string>();
  EXPECT_NE(tcp, "127.0.0.1:0");
  EXPECT_EQ(mode(dir->dir() + "/tls/ca.key"), 0600u);
  EXPECT_EQ(mode(dir->dir() + "/tls/engine.key"), 0600u);
  const std::string secret = dir->dir() + "/admin.secret";
  CommandResult tls =
      dir->CtlBare({"--control", tcp, "--tls-ca", ca_crt, "--secret-file", secret, "--json", "pool", "list"});
  EXPECT_EQ(tls.exit_code, 0) << tls.err;
  CommandResult plain = dir->CtlBare({"--control", tcp, "--secret-file", secret, "--rpc-timeout", "3", "pool", "list"});
  EXPECT_NE(plain.exit_code, 0) << "a plaintext client was served on the TCP listener: " << plain.out;
  CommandResult down = dir->Ctl({"cluster", "down", "--timeout", "30", "--force"});
  EXPECT_EQ(down.exit_code, 0) << down.err;
}

}  // namespace
}  // namespace ros2::ctl
