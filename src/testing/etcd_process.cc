#include "testing/etcd_process.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "testing/subprocess.h"

namespace ros2::testing {

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
    CommandResult health = RunCommand(
        {"/usr/bin/etcdctl", "--endpoints", client_[i], "--command-timeout=1s", "endpoint", "health"}, dir_.path());
    if (health.exit_code == 0) return Status::Ok();
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
  std::vector<std::string> argv{"/usr/bin/etcdctl", "--endpoints", eps};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r = RunCommand(argv, dir_.path());
  if (r.exit_code != 0) {
    return Status::IOError(fmt::format("etcdctl {} failed ({}): {}{}", fmt::join(args, " "), r.exit_code, r.err, r.out));
  }
  return r.out;
}

}  // namespace ros2::testing
