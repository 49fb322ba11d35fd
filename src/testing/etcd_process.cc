#include "testing/etcd_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>

namespace ros2::testing {

namespace {

// Runs a shell command line; its exit code and stdout (stderr joined).
std::pair<int, std::string> RunCapture(const std::string& command) {
  std::string out;
  FILE* f = ::popen((command + " 2>&1").c_str(), "r");
  if (f == nullptr) return {-1, "popen failed"};
  char buf[4096];
  size_t n;
  while ((n = ::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  int status = ::pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

}  // namespace

Result<std::unique_ptr<EtcdTestCluster>> EtcdTestCluster::Start(int members) {
  if (members < 1) return Status::InvalidArgument("etcd test cluster: at least one member");
  std::unique_ptr<EtcdTestCluster> c(new EtcdTestCluster());
  if (c->dir_.path().empty()) return Status::IOError("etcd test cluster: no temporary directory");
  for (int i = 0; i < members; ++i) {
    ROS2_ASSIGN_OR_RETURN(int cport, FreeLoopbackPort());
    ROS2_ASSIGN_OR_RETURN(int pport, FreeLoopbackPort());
    c->names_.push_back(fmt::format("m{}", i));
    c->client_.push_back(fmt::format("127.0.0.1:{}", cport));
    c->peer_.push_back(fmt::format("http://127.0.0.1:{}", pport));
  }
  c->procs_.resize(members);
  for (int i = 0; i < members; ++i) ROS2_RETURN_IF_ERROR(c->StartMember(i, true));
  for (int i = 0; i < members; ++i) ROS2_RETURN_IF_ERROR(c->WaitServing(i));
  return c;
}

EtcdTestCluster::~EtcdTestCluster() {
  for (auto& p : procs_) {
    if (p) p->Stop(std::chrono::seconds(5));
  }
}

std::string EtcdTestCluster::StoreUrl() const {
  std::string url = "etcd://";
  for (size_t i = 0; i < client_.size(); ++i) url += (i ? "," : "") + client_[i];
  return url;
}

Status EtcdTestCluster::StartMember(int i, bool fresh) {
  std::string initial;
  for (size_t m = 0; m < names_.size(); ++m) initial += fmt::format("{}{}={}", m ? "," : "", names_[m], peer_[m]);
  std::vector<std::string> argv = {
      "/usr/bin/etcd", "--name", names_[i], "--data-dir", fmt::format("{}/{}", dir_.path(), names_[i]),
      "--listen-client-urls", "http://" + client_[i], "--advertise-client-urls", "http://" + client_[i],
      "--listen-peer-urls", peer_[i], "--initial-advertise-peer-urls", peer_[i], "--initial-cluster", initial,
      "--initial-cluster-state", fresh ? "new" : "existing", "--initial-cluster-token", "ros2-test",
      // Small elections for a test on loopback; batches of a forced pool
      // destruction stay one Txn.
      "--heartbeat-interval", "50", "--election-timeout", "500", "--max-txn-ops", "4096", "--logger", "zap",
      "--log-level", "warn"};
  ROS2_ASSIGN_OR_RETURN(procs_[i], BackgroundProcess::Start(argv, fmt::format("{}/{}.log", dir_.path(), names_[i]),
                                                            {"ETCD_UNSUPPORTED_ARCH="}));
  return Status::Ok();
}

Status EtcdTestCluster::WaitServing(int i) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    auto [code, out] =
        RunCapture(fmt::format("/usr/bin/etcdctl --endpoints {} --command-timeout=1s endpoint health", client_[i]));
    if (code == 0) return Status::Ok();
    if (!procs_[i] || !procs_[i]->Running()) {
      return Status::IOError(fmt::format("etcd member {} exited: {}", names_[i], procs_[i] ? procs_[i]->Log() : ""));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status::TimedOut(fmt::format("etcd member {} at {} not serving after 20 s", names_[i], client_[i]));
}

void EtcdTestCluster::Kill(int i) {
  if (procs_[i] && procs_[i]->pid() > 0) ::kill(-procs_[i]->pid(), SIGKILL);
  if (procs_[i]) procs_[i]->Stop(std::chrono::milliseconds(0));  // reaps
  procs_[i].reset();
}

Status EtcdTestCluster::Restart(int i) {
  ROS2_RETURN_IF_ERROR(StartMember(i, false));
  return WaitServing(i);
}

Result<std::string> EtcdTestCluster::Etcdctl(const std::vector<std::string>& args) const {
  std::string eps;
  for (size_t i = 0; i < client_.size(); ++i) eps += (i ? "," : "") + client_[i];
  std::string cmd = "/usr/bin/etcdctl --endpoints " + eps;
  for (const auto& a : args) cmd += " '" + a + "'";  // test-made arguments without quotes
  auto [code, out] = RunCapture(cmd);
  if (code != 0) return Status::IOError(fmt::format("etcdctl {} failed ({}): {}", fmt::join(args, " "), code, out));
  return out;
}

}  // namespace ros2::testing
