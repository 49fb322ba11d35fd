#include "host_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "control/certificates.h"
#include "control/control_channel.h"
#include "control/crypto.h"
#include "control/management_client.h"
#include "ctl_context.h"
#include "host_namespaces.h"
#include "host_network.h"
#include "local_cluster.h"

namespace fs = std::filesystem;

namespace ros2::ctl {

namespace {

constexpr int kMaxHosts = 32;
constexpr int kEtcdClientPort = 2379;
constexpr int kEtcdPeerPort = 2380;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `path` atomically (a temporary file renamed over it).
Status WriteText(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) return Status::IOError("cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::IOError(fmt::format("rename {} to {}: {}", tmp, path, ec.message()));
  return Status::Ok();
}

std::string LogTail(const std::string& path, size_t lines = 12) {
  std::vector<std::string> all;
  std::istringstream in(ReadText(path));
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += "\n    " + all[i];
  return out.empty() ? " (empty)" : out;
}

bool ProcessGone(pid_t pid) {
  std::string stat = ReadText(fmt::format("/proc/{}/stat", pid));
  auto paren = stat.rfind(')');
  return stat.empty() || (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

std::string HostsFile(const std::string& dir) {
  return (fs::path(dir) / kHostsFileName).string();
}

Status SaveState(const HostClusterInfo& info) {
  return WriteText(HostsFile(info.data_dir), info.ToJson().dump(2) + "\n");
}

Result<HostClusterInfo> LoadState(const std::string& data_dir) {
  const std::string path = HostsFile(data_dir);
  const std::string text = ReadText(path);
  if (text.empty()) {
    return Status::NotFound(fmt::format("no host cluster in {} ({} is missing)", data_dir, path));
  }
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("id") || !j.contains("hosts")) {
    return Status::Corruption(fmt::format("{} is not a host cluster state file", path));
  }
  HostClusterInfo info;
  info.data_dir = data_dir;
  info.id = j.value("id", "");
  info.bridge = j.value("bridge", "");
  info.control = j.value("control", "");
  info.listen = j.value("listen", "");
  info.tls_ca = j.value("tls_ca", "");
  info.admin_secret_file = j.value("admin_secret_file", "");
  info.net_devices = j.value("net_devices", "");
  info.etcd = j.value("etcd", "");
  for (const auto& h : j["hosts"]) info.hosts.push_back(HostInfo::FromJson(h));
  return info;
}

Status ValidateOptions(const HostClusterOptions& o) {
  if (o.data_dir.empty()) return Status::InvalidArgument("cluster up --hosts: --data-dir is required");
  if (o.hosts < 1 || o.hosts > kMaxHosts) {
    return Status::InvalidArgument(fmt::format("cluster up: --hosts {} (expected 1 to {})", o.hosts, kMaxHosts));
  }
  if (o.targets == 0 || o.targets > 64) {
    return Status::InvalidArgument(fmt::format("cluster up: --targets {} (expected 1 to 64)", o.targets));
  }
  if (::geteuid() != 0) {
    return Status::PermissionDenied(
        "cluster up --hosts: needs root (it makes network, IPC, PID and mount namespaces, a bridge and veth links)");
  }
  return CheckIpTool();
}

// The engine.yaml of host `h`. Without etcd, host 1 embeds the management
// service and listens on its address with TLS; the others join it there. With
// etcd, every engine keeps the management state in the members, serves
// management itself on its own address with its own certificate, and reaches
// the other engines with the cluster CA (docs/cluster.md).
std::string HostEngineYaml(const HostClusterOptions& o, const HostClusterInfo& c, const HostInfo& h) {
  std::string control;
  if (h.index == 1 || !c.etcd.empty()) {
    control = fmt::format(
        "  socket: unix:{dir}/control.sock\n  listen: {address}:{port}\n  tls_cert: {dir}/tls/{cert}\n"
        "  tls_key: {dir}/tls/{key}\n",
        fmt::arg("dir", h.data_dir), fmt::arg("address", h.address), fmt::arg("port", kHostControlPort),
        fmt::arg("cert", control::kEngineCertFile), fmt::arg("key", control::kEngineKeyFile));
  } else {
    control = fmt::format("  join: \"{}\"\n  join_secret_file: {}\n  tls_ca: {}/tls/ca.crt\n", c.listen,
                          c.admin_secret_file, h.data_dir);
  }
  if (!c.etcd.empty()) {
    control += fmt::format("  tls_ca: {dir}/tls/ca.crt\n  store: {store}\n  cluster_key_file: {dir}/cluster.key\n",
                           fmt::arg("dir", h.data_dir), fmt::arg("store", c.etcd));
  }
  return fmt::format(
      "# Generated by `ros2ctl cluster up --hosts` for {host} ({address}).\n"
      "data_dir: {dir}\n"
      "log_level: info\n"
      "targets: {targets}\n"
      "vos:\n  class: {cls}\n"
      "transport:\n  kind: {transport}\n  net_devices: {device}\n"
      "control:\n  address: {host}\n{control}",
      fmt::arg("host", h.hostname), fmt::arg("address", h.address), fmt::arg("dir", h.data_dir),
      fmt::arg("targets", o.targets), fmt::arg("cls", o.storage_class), fmt::arg("transport", o.transport),
      fmt::arg("device", kHostDevice), fmt::arg("control", control));
}

// Creates the bridge and every host's namespaces, recording each in the
// state file before it is made.
Status MakeHosts(const HostClusterOptions& o, HostClusterInfo* c) {
  ROS2_RETURN_IF_ERROR(SaveState(*c));
  ROS2_RETURN_IF_ERROR(CreateBridge(c->bridge).WithContext("cluster up: bridge"));
  for (int i = 1; i <= o.hosts; ++i) {
    HostNames names = HostNamesFor(c->id, i);
    HostInfo h{.index = i,
               .hostname = names.hostname,
               .netns = names.netns,
               .veth = names.veth,
               .address = names.address,
               .data_dir = (fs::path(c->data_dir) / names.hostname).string()};
    c->hosts.push_back(h);
    ROS2_RETURN_IF_ERROR(SaveState(*c));
    ROS2_RETURN_IF_ERROR(CreateHostNetwork(c->bridge, names).WithContext("cluster up: " + names.hostname));
    ROS2_ASSIGN_OR_RETURN(c->hosts.back().init_pid, StartHostInit(names.netns, "ros2-" + names.hostname));
    ROS2_RETURN_IF_ERROR(SaveState(*c));
  }
  return Status::Ok();
}

// Waits until DIR/host<i>/engine.ready names the control endpoint.
Status WaitEngineReady(const HostInfo& h, std::chrono::steady_clock::time_point deadline) {
  const std::string ready = h.data_dir + "/engine.ready";
  const std::string log = h.data_dir + "/engine.log";
  while (std::chrono::steady_clock::now() < deadline) {
    if (ReadText(ready).find("control=") != std::string::npos) return Status::Ok();
    if (ProcessGone(h.engine_pid)) {
      return Status::IOError(
          fmt::format("the engine of {} exited before it was ready; the end of {}:{}", h.hostname, log, LogTail(log)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::TimedOut(
      fmt::format("the engine of {} was not ready in time; the end of {}:{}", h.hostname, log, LogTail(log)));
}

Status StartEngine(const HostClusterOptions& o, const std::string& binary, HostClusterInfo* c, size_t i) {
  HostInfo& h = c->hosts[i];
  std::error_code ec;
  fs::remove(h.data_dir + "/engine.ready", ec);
  const std::string config = h.data_dir + "/engine.yaml";
  ROS2_RETURN_IF_ERROR(WriteText(config, HostEngineYaml(o, *c, h)));
  ROS2_ASSIGN_OR_RETURN(h.engine_pid,
                        SpawnInHost(h.init_pid, {binary, "--config", config}, h.data_dir + "/engine.log"));
  return SaveState(*c);
}

// Polls host 1's management service until it lists every engine with every
// target up.
Status WaitClusterReady(const HostClusterOptions& o, const HostClusterInfo& c,
                        std::chrono::steady_clock::time_point deadline) {
  ROS2_ASSIGN_OR_RETURN(std::string secret, control::ReadSecretFile(c.admin_secret_file));
  ROS2_ASSIGN_OR_RETURN(auto channel, control::MakeControlChannel({.address = c.control.substr(0, c.control.find(','))}));
  control::ManagementClient mgmt(channel, control::Credentials{"admin", secret}, std::chrono::seconds(2));
  const uint32_t want = static_cast<uint32_t>(o.hosts) * o.targets;
  Status last = Status::TimedOut("no answer yet");
  while (std::chrono::steady_clock::now() < deadline) {
    auto st = mgmt.GetEngineStatus();
    if (st.ok()) {
      uint32_t up = 0;
      for (const auto& t : st->targets()) up += t.state() == rpc::TARGET_UP ? 1 : 0;
      if (st->engines_size() >= o.hosts && up >= want) return Status::Ok();
      last = Status::Busy(fmt::format("{} of {} engines, {} of {} targets up", st->engines_size(), o.hosts, up, want));
    } else {
      last = st.status();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status::TimedOut(
      fmt::format("host 1's management service did not see every engine in time (last: {})", last.ToString()));
}

Result<std::string> FindEtcdBinary(const std::string& requested) {
  std::vector<std::string> candidates;
  if (!requested.empty()) candidates.push_back(requested);
  if (const char* path = std::getenv("PATH"); requested.empty() && path != nullptr) {
    std::istringstream in(path);
    for (std::string dir; std::getline(in, dir, ':');) candidates.push_back(dir + "/etcd");
  }
  for (const auto& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0) return c;
  }
  return Status::NotFound(
      requested.empty() ? std::string("cluster up --etcd: no etcd binary on PATH (install Debian's etcd-server, or "
                                      "pass --etcd-binary PATH)")
                        : fmt::format("cluster up --etcd: {} is not an executable file", requested));
}

// Starts one etcd member in each of hosts 1..min(N, 3), forming one cluster,
// and waits until each serves clients.
Status StartEtcdMembers(const HostClusterOptions& o, HostClusterInfo* c,
                        std::chrono::steady_clock::time_point deadline) {
  ROS2_ASSIGN_OR_RETURN(std::string etcd, FindEtcdBinary(o.etcd_binary));
  const size_t members = std::min<size_t>(c->hosts.size(), 3);
  std::string initial, endpoints;
  for (size_t i = 0; i < members; ++i) {
    const HostInfo& h = c->hosts[i];
    initial += fmt::format("{}{}=http://{}:{}", i ? "," : "", h.hostname, h.address, kEtcdPeerPort);
    endpoints += fmt::format("{}{}:{}", i ? "," : "", h.address, kEtcdClientPort);
  }
  c->etcd = "etcd://" + endpoints;
  for (size_t i = 0; i < members; ++i) {
    HostInfo& h = c->hosts[i];
    const std::string client = fmt::format("http://{}:{}", h.address, kEtcdClientPort);
    const std::string peer = fmt::format("http://{}:{}", h.address, kEtcdPeerPort);
    h.etcd_client = fmt::format("{}:{}", h.address, kEtcdClientPort);
    ROS2_ASSIGN_OR_RETURN(
        h.etcd_pid,
        SpawnInHost(h.init_pid,
                    {etcd, "--name", h.hostname, "--data-dir", h.data_dir + "/etcd", "--listen-client-urls",
                     client + fmt::format(",http://127.0.0.1:{}", kEtcdClientPort), "--advertise-client-urls", client,
                     "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", initial,
                     "--initial-cluster-token", "ros2-" + c->id, "--initial-cluster-state", "new"},
                    h.data_dir + "/etcd.log"));
    ROS2_RETURN_IF_ERROR(SaveState(*c));
  }
  for (size_t i = 0; i < members; ++i) {
    const HostInfo& h = c->hosts[i];
    const std::string log = h.data_dir + "/etcd.log";
    for (;;) {
      if (ReadText(log).find("ready to serve client requests") != std::string::npos) break;
      if (ProcessGone(h.etcd_pid)) {
        return Status::IOError(
            fmt::format("the etcd member of {} exited; the end of {}:{}", h.hostname, log, LogTail(log)));
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        return Status::TimedOut(fmt::format("the etcd member of {} did not serve in time; the end of {}:{}", h.hostname,
                                            log, LogTail(log)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return Status::Ok();
}

// Engines on etcd: each host's own certificate (its address and name), and
// one cluster key (it seals the capability key in etcd) copied to every host;
// every engine's control socket is a management endpoint of the cluster.
Status PrepareEtcdEngines(HostClusterInfo* c) {
  ROS2_ASSIGN_OR_RETURN(std::string key, control::RandomHex(32));
  const std::string ca_dir = c->hosts[0].data_dir + "/tls";
  std::string sockets;
  for (size_t i = 0; i < c->hosts.size(); ++i) {
    const HostInfo& h = c->hosts[i];
    if (i > 0) {
      ROS2_RETURN_IF_ERROR(control::IssueCertificate(ca_dir, {.common_name = h.hostname, .names = {h.address, h.hostname}},
                                                     h.data_dir + "/tls/" + control::kEngineCertFile,
                                                     h.data_dir + "/tls/" + control::kEngineKeyFile)
                               .WithContext("cluster up: certificate of " + h.hostname));
    }
    const std::string key_file = h.data_dir + "/cluster.key";
    ROS2_RETURN_IF_ERROR(WriteText(key_file, key + "\n"));
    if (::chmod(key_file.c_str(), 0600) != 0) return Status::FromErrno(errno, "cluster up: chmod " + key_file);
    sockets += fmt::format("{}unix:{}/control.sock", i ? "," : "", h.data_dir);
  }
  c->control = sockets;
  return Status::Ok();
}

// Everything after the namespaces: directories, certificates, etcd, engines.
Status StartHostServices(const HostClusterOptions& o, const std::string& binary, HostClusterInfo* c) {
  const auto deadline = std::chrono::steady_clock::now() + o.ready_timeout;
  for (const HostInfo& h : c->hosts) {
    // Private to root: the engine takes it (and what is in it) for its user.
    if (::mkdir(h.data_dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::FromErrno(errno, "cluster up: create " + h.data_dir);
    }
  }
  const HostInfo& first = c->hosts[0];
  ROS2_RETURN_IF_ERROR(control::EnsureClusterCertificates(first.data_dir + "/tls", {first.address, first.hostname})
                           .WithContext("cluster up: TLS certificates"));
  for (size_t i = 1; i < c->hosts.size(); ++i) {
    // Each joining engine trusts the cluster CA, from its own directory.
    std::error_code ec;
    fs::create_directories(c->hosts[i].data_dir + "/tls", ec);
    fs::copy_file(c->tls_ca, c->hosts[i].data_dir + "/tls/ca.crt", fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::IOError(fmt::format("cluster up: copy {}: {}", c->tls_ca, ec.message()));
  }
  if (o.etcd) {
    ROS2_RETURN_IF_ERROR(StartEtcdMembers(o, c, deadline));
    ROS2_RETURN_IF_ERROR(PrepareEtcdEngines(c));
  }
  ROS2_RETURN_IF_ERROR(StartEngine(o, binary, c, 0));
  ROS2_RETURN_IF_ERROR(WaitEngineReady(c->hosts[0], deadline));
  for (size_t i = 1; i < c->hosts.size(); ++i) ROS2_RETURN_IF_ERROR(StartEngine(o, binary, c, i));
  for (size_t i = 1; i < c->hosts.size(); ++i) ROS2_RETURN_IF_ERROR(WaitEngineReady(c->hosts[i], deadline));
  return WaitClusterReady(o, *c, deadline);
}

}  // namespace

nlohmann::json HostInfo::ToJson() const {
  return {{"index", index},       {"hostname", hostname},       {"netns", netns},       {"veth", veth},
          {"address", address},   {"data_dir", data_dir},       {"init_pid", init_pid}, {"engine_pid", engine_pid},
          {"etcd_pid", etcd_pid}, {"etcd_client", etcd_client}, {"link_up", link_up}};
}

HostInfo HostInfo::FromJson(const nlohmann::json& j) {
  HostInfo h;
  h.index = j.value("index", 0);
  h.hostname = j.value("hostname", "");
  h.netns = j.value("netns", "");
  h.veth = j.value("veth", "");
  h.address = j.value("address", "");
  h.data_dir = j.value("data_dir", "");
  h.init_pid = j.value("init_pid", 0);
  h.engine_pid = j.value("engine_pid", 0);
  h.etcd_pid = j.value("etcd_pid", 0);
  h.etcd_client = j.value("etcd_client", "");
  h.link_up = j.value("link_up", true);
  return h;
}

nlohmann::json HostClusterInfo::ToJson() const {
  nlohmann::json hs = nlohmann::json::array();
  for (const auto& h : hosts) hs.push_back(h.ToJson());
  return {{"data_dir", data_dir},
          {"id", id},
          {"bridge", bridge},
          {"control", control},
          {"listen", listen},
          {"tls_ca", tls_ca},
          {"admin_secret_file", admin_secret_file},
          {"net_devices", net_devices},
          {"etcd", etcd},
          {"hosts", hs}};
}

bool IsHostCluster(const std::string& data_dir) {
  std::error_code ec;
  return !data_dir.empty() && fs::exists(HostsFile(data_dir), ec);
}

Result<HostClusterInfo> HostClusterUp(const HostClusterOptions& options) {
  ROS2_RETURN_IF_ERROR(ValidateOptions(options));
  HostClusterOptions o = options;
  std::error_code ec;
  o.data_dir = fs::absolute(options.data_dir).lexically_normal().string();
  if (o.data_dir.size() > 1 && o.data_dir.back() == '/') o.data_dir.pop_back();
  if (IsHostCluster(o.data_dir)) {
    return Status::AlreadyExists(fmt::format(
        "cluster up: {} already holds a host cluster ({}); remove it with `ros2ctl --data-dir {} cluster down`",
        o.data_dir, HostsFile(o.data_dir), o.data_dir));
  }
  if (RunningEnginePid(o.data_dir) != 0) {
    return Status::AlreadyExists(fmt::format("cluster up: a single-node engine runs in {}", o.data_dir));
  }
  ROS2_ASSIGN_OR_RETURN(std::string binary, FindEngineBinary(o.engine_binary));
  fs::create_directories(o.data_dir, ec);
  // Enterable by the engines' user (each host's own directory is private).
  if (ec || ::chmod(o.data_dir.c_str(), 0711) != 0) {
    return Status::IOError(fmt::format("cluster up: create {}: {}", o.data_dir, ec ? ec.message() : "chmod failed"));
  }

  HostClusterInfo c;
  c.data_dir = o.data_dir;
  do {
    c.id = NewClusterId();
    c.bridge = BridgeName(c.id);
  } while (fs::exists("/sys/class/net/" + c.bridge, ec));
  const HostNames first = HostNamesFor(c.id, 1);
  c.control = fmt::format("unix:{}/{}/control.sock", c.data_dir, first.hostname);
  c.listen = fmt::format("{}:{}", first.address, kHostControlPort);
  c.tls_ca = fmt::format("{}/{}/tls/ca.crt", c.data_dir, first.hostname);
  c.admin_secret_file = fmt::format("{}/{}/admin.secret", c.data_dir, first.hostname);
  c.net_devices = kHostDevice;
  if (c.control.size() - 5 >= 108) {
    return Status::InvalidArgument(
        fmt::format("cluster up: the control socket path {} is too long for a Unix socket; use a shorter --data-dir",
                    c.control.substr(5)));
  }

  Status started = MakeHosts(o, &c);
  if (started.ok()) started = StartHostServices(o, binary, &c);
  if (started.ok()) {
    nlohmann::json client = c.ToJson();
    started = WriteText((fs::path(c.data_dir) / kClusterFileName).string(), client.dump(2) + "\n");
  }
  if (!started.ok()) {
    Status down = HostClusterDown(c.data_dir);
    return started.WithContext(
        down.ok()
            ? fmt::format("cluster up --hosts (cluster {}; everything made was removed)", c.id)
            : fmt::format("cluster up --hosts (cluster {}; removing what was made failed: {})", c.id, down.ToString()));
  }
  return c;
}

Status HostClusterDown(const std::string& data_dir) {
  ROS2_ASSIGN_OR_RETURN(HostClusterInfo c, LoadState(data_dir));
  // Every host at once, through its init (a pid that is not one is left alone).
  std::vector<pid_t> inits;
  for (const HostInfo& h : c.hosts) {
    if (IsHostInit(h.init_pid, h.netns)) inits.push_back(h.init_pid);
  }
  StopHostInits(inits, 8000);
  // Whatever still runs in a host's network (an init whose pid never reached
  // the state file, an interrupted start) is killed too.
  for (const HostInfo& h : c.hosts) KillProcessesInNetns(h.netns);
  Status first_error = Status::Ok();
  for (const HostInfo& h : c.hosts) {
    Status st = DeleteHostNetwork(HostNamesFor(c.id, h.index));
    if (!st.ok() && first_error.ok()) first_error = st;
  }
  if (!c.bridge.empty()) {
    Status st = DeleteBridge(c.bridge);
    if (!st.ok() && first_error.ok()) first_error = st;
  }
  if (!first_error.ok()) return first_error.WithContext("cluster down");
  std::error_code ec;
  fs::remove(HostsFile(data_dir), ec);
  return Status::Ok();
}

Result<HostClusterInfo> HostClusterStatus(const std::string& data_dir) {
  ROS2_ASSIGN_OR_RETURN(HostClusterInfo c, LoadState(data_dir));
  for (HostInfo& h : c.hosts) {
    auto up = HostLinkUp(HostNamesFor(c.id, h.index));
    h.link_up = up.ok() && *up;
    if (!IsHostInit(h.init_pid, h.netns)) h.init_pid = 0;
    if (h.engine_pid > 0 && ProcessGone(h.engine_pid)) h.engine_pid = 0;
    if (h.etcd_pid > 0 && ProcessGone(h.etcd_pid)) h.etcd_pid = 0;
  }
  return c;
}

Result<HostInfo> FindHost(const std::string& data_dir, const std::string& host) {
  ROS2_ASSIGN_OR_RETURN(HostClusterInfo c, LoadState(data_dir));
  std::string digits = host.starts_with("host") ? host.substr(4) : host;
  int index = 0;
  if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos && digits.size() < 4) {
    index = std::stoi(digits);
  }
  for (const HostInfo& h : c.hosts) {
    if (h.index == index && index > 0) return h;
  }
  return Status::NotFound(
      fmt::format("no host '{}' in the cluster of {} (hosts 1 to {}, or host1 ...)", host, data_dir, c.hosts.size()));
}

Status SetHostPartitioned(const std::string& data_dir, const std::string& host, bool partitioned) {
  ROS2_ASSIGN_OR_RETURN(HostInfo h, FindHost(data_dir, host));
  ROS2_ASSIGN_OR_RETURN(HostClusterInfo c, LoadState(data_dir));
  const HostNames names = HostNamesFor(c.id, h.index);
  ROS2_RETURN_IF_ERROR(SetHostLink(names, !partitioned));
  if (partitioned) return Status::Ok();
  // Healed once the bridge forwards on the port again and no host remembers
  // an address it failed to resolve while cut off (a failed neighbour entry
  // answers "no route to host" for a while).
  ROS2_RETURN_IF_ERROR(WaitPortForwarding(names, std::chrono::seconds(10)));
  for (const HostInfo& other : c.hosts) {
    ROS2_RETURN_IF_ERROR(RunIp({"-n", other.netns, "neigh", "flush", "dev", kHostDevice}));
  }
  return Status::Ok();
}

}  // namespace ros2::ctl
