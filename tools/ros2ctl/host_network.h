// The network of `ros2ctl cluster up --hosts N` (docs/cluster.md, "The host
// harness"): a Linux bridge in the caller's network namespace and, per host,
// a network namespace joined to it by a veth pair, with an address on a
// private subnet. Made and removed with iproute2's `ip`. Names carry a short
// cluster id so several clusters can coexist:
//   bridge      r2<id>br            (no address: the hosts talk among themselves)
//   namespace   ros2-<id>-h<i>
//   veth        r2<id>h<i> (bridge side)  <->  veth0 (inside the host)
//   address     10.213.0.<i>/24 on veth0 (every cluster's hosts sit on their own bridge)
// Free functions of ros2ctl's main thread. Removal tolerates what is already
// gone, so it works after a failed or half-made start.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"

namespace ros2::ctl {

// The device name inside every host, for UCX_NET_DEVICES (transport.net_devices).
inline constexpr const char* kHostDevice = "veth0";

struct HostNames {
  std::string netns;     // ros2-<id>-h<i>
  std::string veth;      // r2<id>h<i>, in the caller's namespace, a port of the bridge
  std::string address;   // 10.213.0.<i>
  std::string hostname;  // host<i>: the engine's control.address
};

// The bridge's name for cluster `id`.
std::string BridgeName(const std::string& id);
// The names of host `index` (1-based) of cluster `id`.
HostNames HostNamesFor(const std::string& id, int index);
// A fresh cluster id: 5 lower-case hex digits.
std::string NewClusterId();

// Runs `ip args...`; the error quotes the command and its stderr.
Status RunIp(const std::vector<std::string>& args);

// Creates the bridge (up). AlreadyExists-style failures are errors.
Status CreateBridge(const std::string& bridge);
// Creates the host's namespace and veth pair, attaches it to the bridge,
// addresses veth0 and brings lo and both ends up.
Status CreateHostNetwork(const std::string& bridge, const HostNames& host);
// Sets the bridge side of the host's veth down (a partition: the host reaches
// nobody, nobody reaches it) or up again.
Status SetHostLink(const HostNames& host, bool up);
// Waits until the bridge forwards on the host's port (after SetHostLink up).
Status WaitPortForwarding(const HostNames& host, std::chrono::milliseconds limit);
// Whether the bridge side of the host's veth is administratively up.
Result<bool> HostLinkUp(const HostNames& host);

// Removal: each succeeds when the object does not exist.
Status DeleteHostNetwork(const HostNames& host);
Status DeleteBridge(const std::string& bridge);

// Whether `ip` can be used (an executable on PATH): the error says what to install.
Status CheckIpTool();

}  // namespace ros2::ctl
