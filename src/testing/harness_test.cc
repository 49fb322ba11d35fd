// The harness shared by the tests and ros2-bench (src/testing): processes,
// commands, forked children, temporary directories, and a cluster whose
// ros2ctl is missing (the cluster itself is exercised by every integration
// test that starts one).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "testing/local_cluster.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace ros2::testing {
namespace {

TEST(ChildProcess, ReportsExitCodeAndCapturesOutput) {
  auto dir = TempDir::Create("/tmp", "harness-test-");
  ASSERT_TRUE(dir.ok());
  SpawnOptions opts;
  opts.argv = {"sh", "-c", "echo \"$BENCH_UTIL_TEST\"; exit 3"};
  opts.env = {{"BENCH_UTIL_TEST", "hello"}};
  opts.stdout_path = dir->path() + "/out";
  auto child = ChildProcess::Spawn(opts);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  auto rc = child->Wait(std::chrono::seconds(20));
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(*rc, 3);
  EXPECT_FALSE(child->running());
  auto out = ReadFileOrError(opts.stdout_path);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "hello\n");
}

TEST(ChildProcess, WaitTimesOutAndDestructorKills) {
  pid_t pid = -1;
  {
    SpawnOptions opts;
    opts.argv = {"sleep", "30"};
    auto child = ChildProcess::Spawn(opts);
    ASSERT_TRUE(child.ok());
    pid = child->pid();
    EXPECT_EQ(child->Wait(std::chrono::milliseconds(50)).status().code(), Status::Code::kTimedOut);
    auto cpu = ProcessCpuSeconds(pid);
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    EXPECT_GE(*cpu, 0.0);
  }
  // Reaped by the destructor: the pid no longer exists as our child.
  EXPECT_NE(::kill(pid, 0), 0);
}

TEST(ChildProcess, MissingProgramIsNotFound) {
  SpawnOptions opts;
  opts.argv = {"ros2-no-such-program-xyz"};
  EXPECT_EQ(ChildProcess::Spawn(opts).status().code(), Status::Code::kNotFound);
}

TEST(TempDir, RemovesEverythingOnDestruction) {
  std::string path;
  {
    auto dir = TempDir::Create("/tmp", "harness-test-");
    ASSERT_TRUE(dir.ok());
    path = dir->path();
    std::filesystem::create_directories(path + "/a/b");
    std::ofstream(path + "/a/b/file") << "x";
    EXPECT_TRUE(std::filesystem::exists(path + "/a/b/file"));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(ChildProcess, ForkRunsTheFunctionInAChild) {
  const pid_t parent = ::getpid();
  auto child = ChildProcess::Fork([parent] { return ::getpid() != parent ? 7 : 1; });
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  auto rc = child->Wait(std::chrono::seconds(20));
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(*rc, 7);
  EXPECT_EQ(RunInChild([] { return 0; }), 0);
  EXPECT_EQ(RunInChild([] {
              ::raise(SIGKILL);
              return 0;
            }),
            128 + SIGKILL);
}

TEST(ChildProcess, StdoutIntoAPipeAndStopEscalates) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  SpawnOptions opts;
  opts.argv = {"/bin/sh", "-c", "echo ready; trap '' TERM; sleep 30"};
  opts.stdout_fd = fds[1];
  opts.own_process_group = true;
  auto child = ChildProcess::Spawn(opts);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  ::close(fds[1]);
  char buf[6] = {};
  ASSERT_EQ(::read(fds[0], buf, 6), 6);
  EXPECT_EQ(std::string(buf, 6), "ready\n");
  ::close(fds[0]);
  // SIGTERM is ignored by the shell (its sleep dies with the group): SIGKILL after the grace.
  const int code = child->Stop(std::chrono::milliseconds(200));
  EXPECT_TRUE(code == 128 + SIGKILL || code == 128 + SIGTERM) << code;
  EXPECT_FALSE(child->running());
}

TEST(RunCommand, CapturesBothStreamsAndKillsAtItsLimit) {
  TempDir dir("harness-test");
  CommandResult r = RunCommand({"/bin/sh", "-c", "echo out; echo err >&2; exit 4"}, dir.path());
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  const auto start = std::chrono::steady_clock::now();
  CommandResult slow = RunCommand({"sleep", "30"}, dir.path(), std::chrono::seconds(1));
  EXPECT_EQ(slow.exit_code, -1);
  EXPECT_NE(slow.err.find("still running"), std::string::npos) << slow.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  CommandResult shell = RunShell("echo a; echo b >&2", dir.path());
  EXPECT_EQ(shell.exit_code, 0);
  EXPECT_EQ(shell.out, "a\nb\n");
  CommandResult missing = RunCommand({"/nonexistent/program"}, dir.path());
  EXPECT_EQ(missing.exit_code, -1);
  EXPECT_NE(missing.err.find("/nonexistent/program"), std::string::npos) << missing.err;
}

TEST(TempDir, CreateNamesTheFailure) {
  auto bad = TempDir::Create("/nonexistent-parent", "x-");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/nonexistent-parent"), std::string::npos) << bad.status().ToString();
  TempDir dir("harness-test");
  EXPECT_TRUE(std::filesystem::is_directory(dir.path()));
  TempDir moved = std::move(dir);
  EXPECT_TRUE(std::filesystem::is_directory(moved.path()));
}

TEST(LocalCluster, StartWithoutRos2ctlFailsNamingTheDirectory) {
  TempDir dir("harness-test");
  LocalClusterOptions o;
  o.ros2ctl = "/nonexistent/ros2ctl";
  LocalCluster cluster(o, dir.path() + "/data", dir.path() + "/scratch");
  Status st = cluster.Start();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(dir.path() + "/data"), std::string::npos) << st.ToString();
  EXPECT_FALSE(cluster.running());
  EXPECT_FALSE(cluster.engine_pid().ok());
  auto out = cluster.Ctl({"pool", "list"});
  EXPECT_FALSE(out.ok());
}

}  // namespace
}  // namespace ros2::testing
