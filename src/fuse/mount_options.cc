#include "client/local_cluster.h"
#include "fuse/mount_options.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

namespace ros2::fuse {

namespace {

// "on"/"off" (and the usual synonyms) as a bool.
bool ParseOnOff(const std::string& value) {
  return value == "on" || value == "yes" || value == "true" || value == "1";
}

}  // namespace

unsigned DefaultMaxThreads() {
  // Measured on 2 vCPUs, nvme pool over shm (docs/fuse.md): 8 threads against
  // 2 took 1 MiB direct writes through the mount from 0.38-0.48 to 0.51-0.68
  // of the fio engine, 1 MiB reads from 0.61-0.66 to 0.88-0.97 and 4 KiB
  // random reads from 0.39-0.50 to 0.51-0.64; 16 gained nothing more.
  return std::clamp(4 * std::max(1u, std::thread::hardware_concurrency()), 8u, 64u);
}

Result<MountConfig> ParseCommandLine(int argc, char** argv, std::string* help) {
  MountConfig c;
  std::string data_cache = "on";
  CLI::App app{"ros2-fuse: mount a ROS2 container's DFS namespace as a POSIX file system (FUSE low-level API)",
               "ros2-fuse"};
  app.add_option("POOL", c.pool, "Pool label or UUID")->required();
  app.add_option("CONT", c.container, "Container label or UUID")->required();
  app.add_option("MOUNTPOINT", c.mountpoint, "Empty directory to mount on")->required();
  app.add_flag("-f,--foreground", c.foreground, "Stay in the foreground (default: return once the mount is live)");
  app.add_option("-d,--data-dir", c.data_dir, "Local cluster directory (cluster.json: control socket, admin secret)")
      ->envname("ROS2_DATA_DIR");
  app.add_option("-c,--control", c.control, "Control endpoint: unix:/path, /path or host:port")
      ->envname("ROS2_CONTROL");
  app.add_option("--tenant", c.tenant, "Tenant to authenticate as")->capture_default_str()->envname("ROS2_TENANT");
  app.add_option("--secret-file", c.secret_file, "File whose first line is the tenant's secret")
      ->envname("ROS2_SECRET_FILE");
  app.add_option("--transport", c.transport, "Data-plane transport")
      ->check(CLI::IsMember({"auto", "shm", "tcp"}))
      ->capture_default_str();
  app.add_option("--net-devices", c.net_devices, "Network devices of the data plane (UCX_NET_DEVICES), e.g. veth0")
      ->capture_default_str();
  app.add_option("--key-file", c.key_file, "Key file of an encrypted container (ros2ctl key create)");
  app.add_option("--reconnect-timeout", c.reconnect_timeout_s,
                 "Seconds a call waits for a restarting engine before failing (0: fail at once)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--attr-timeout", c.cache.attr_timeout_s, "Seconds the kernel caches attributes")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--entry-timeout", c.cache.entry_timeout_s, "Seconds the kernel caches name lookups")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--negative-timeout", c.cache.negative_timeout_s,
                 "Seconds the kernel caches failed lookups (0: not cached)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--data-cache", data_cache, "Kernel page cache for file data (off: direct I/O)")
      ->check(CLI::IsMember({"on", "off", "yes", "no", "true", "false", "1", "0"}))
      ->capture_default_str();
  app.add_flag("--writeback-cache", c.cache.writeback_cache,
               "Let the kernel buffer writes (needs --data-cache on; close() no longer means stored)");
  app.add_option("--max-threads", c.max_threads, "FUSE worker threads (0: four per CPU, 8 to 64)")
      ->check(CLI::Range(0u, 256u))
      ->capture_default_str();
  app.add_flag("--allow-other", c.allow_other, "Let users other than the mounter use the mount");
  app.add_flag("--fuse-debug", c.fuse_debug, "libfuse's request trace on stderr (implies --foreground)");
  app.add_option("--log-level", c.log_level, "trace, debug, info, warn, error or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    *help = app.help();
    return Status::Cancelled("help");
  } catch (const CLI::ParseError& e) {
    return Status::InvalidArgument(fmt::format("{} (see ros2-fuse --help)", e.what()));
  }
  c.cache.data_cache = ParseOnOff(data_cache);
  if (c.cache.writeback_cache && !c.cache.data_cache) {
    return Status::InvalidArgument("--writeback-cache needs --data-cache on");
  }
  if (c.fuse_debug) c.foreground = true;
  if (c.max_threads == 0) c.max_threads = DefaultMaxThreads();
  std::error_code ec;
  if (!std::filesystem::is_directory(c.mountpoint, ec)) {
    return Status::InvalidArgument(fmt::format("mount point '{}' is not a directory", c.mountpoint));
  }
  c.mountpoint = std::filesystem::absolute(c.mountpoint).lexically_normal().string();
  if (c.mountpoint.size() > 1 && c.mountpoint.back() == '/') c.mountpoint.pop_back();
  return c;
}

Result<client::ClientOptions> ResolveClientOptions(const MountConfig& config) {
  client::ClientOptions o;
  o.tenant = config.tenant;
  o.transport = config.transport;
  o.net_devices = config.net_devices;
  o.control = config.control;
  o.secret_file = config.secret_file;
  o.reconnect_timeout = std::chrono::milliseconds(static_cast<int64_t>(config.reconnect_timeout_s * 1000));
  ROS2_RETURN_IF_ERROR(local_cluster::CompleteClientOptions(o, config.data_dir));
  if (o.control.empty()) {
    return Status::InvalidArgument("no control endpoint: pass --data-dir DIR (a local cluster) or --control ENDPOINT");
  }
  if (o.secret_file.empty()) {
    return Status::InvalidArgument(fmt::format(
        "no secret for tenant '{}': pass --secret-file FILE (or --data-dir DIR of a local cluster for admin)",
        o.tenant));
  }
  return o;
}

std::vector<std::string> FuseMountArguments(const MountConfig& config) {
  std::string opts = fmt::format("fsname=ros2:{}/{},subtype=ros2,default_permissions", config.pool, config.container);
  if (config.allow_other) opts += ",allow_other";
  std::vector<std::string> args = {"ros2-fuse", "-o", opts};
  if (config.fuse_debug) args.push_back("-d");
  return args;
}

}  // namespace ros2::fuse
