// EtcdTestCluster: real etcd members (Debian's /usr/bin/etcd) a cluster test
// starts on loopback, on free ports, with data directories under a TempDir;
// one member or three. Members can be killed (SIGKILL) and started again on
// the same ports and data, to test what the control plane does without etcd
// and after it returns. Test thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "testing/background_process.h"
#include "testing/free_port.h"
#include "testing/temp_dir.h"

namespace ros2::testing {

class EtcdTestCluster {
 public:
  // Starts `members` members and waits (up to 20 s) until the cluster serves.
  static Result<std::unique_ptr<EtcdTestCluster>> Start(int members);
  ~EtcdTestCluster();

  // "etcd://127.0.0.1:p1,127.0.0.1:p2,..." for `control.store`.
  std::string StoreUrl() const;
  const std::vector<std::string>& client_endpoints() const { return client_; }
  void Kill(int member);
  // Starts a killed member again (same ports, same data); waits until it serves.
  Status Restart(int member);
  // Runs `etcdctl` against the cluster; returns its stdout.
  Result<std::string> Etcdctl(const std::vector<std::string>& args) const;

 private:
  EtcdTestCluster() = default;
  Status StartMember(int member, bool fresh);
  Status WaitServing(int member) const;
  TempDir dir_;
  std::vector<std::string> names_;
  std::vector<std::string> client_;  // host:port
  std::vector<std::string> peer_;    // http://host:port
  std::vector<std::unique_ptr<BackgroundProcess>> procs_;
};

}  // namespace ros2::testing
