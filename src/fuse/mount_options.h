// MountConfig: everything the ros2-fuse command line says — which container to
// mount where, how to reach the cluster, and the kernel caching policy — and
// the parser that fills it (CLI11). Plain values; one thread (main) builds it.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "ros2/client.h"

namespace ros2::fuse {

struct CachePolicy {
  double attr_timeout_s = 1.0;      // how long the kernel trusts an inode's attributes
  double entry_timeout_s = 1.0;     // how long it trusts a name -> inode mapping
  double negative_timeout_s = 0.0;  // how long it remembers that a name does not exist (0: never)
  bool data_cache = true;           // page cache kept across opens (keep_cache); false: direct_io
  bool writeback_cache = false;     // kernel buffers writes and sends them later (needs data_cache)
};

struct MountConfig {
  std::string pool;
  std::string container;
  std::string mountpoint;

  // Cluster connection: --control + --tenant/--secret-file, or --data-dir of a
  // local cluster (its cluster.json names the control socket and admin secret).
  std::string data_dir;
  std::string control;
  std::string tenant = "admin";
  std::string secret_file;
  std::string transport = "auto";  // auto | shm | tcp
  std::string net_devices = "lo";  // UCX_NET_DEVICES of the client (tcp)
  std::string key_file;            // encrypted containers: dfs::MountOptions::encryption_key_file
  // Seconds a call waits for an engine that went away (restarting) before it
  // fails with ENOTCONN (ClientOptions::reconnect_timeout; docs/fuse.md).
  double reconnect_timeout_s = 60;

  CachePolicy cache;
  // FUSE worker threads (each gets its own data-plane worker); 0 on the
  // command line means DefaultMaxThreads().
  unsigned max_threads = 0;
  bool foreground = false;
  bool allow_other = false;
  bool fuse_debug = false;
  std::string log_level = "warn";
};

// The default --max-threads: four per CPU, at least 8, at most 64. A thread
// waiting on the data plane sleeps on its worker's event fd after a 50 us spin,
// so threads beyond the CPU count cost little and keep several durable writes
// in flight (docs/fuse.md, "Threading and I/O sizes").
unsigned DefaultMaxThreads();

// Parses argv. On --help, fills *exit_code with 0 and *message with the help;
// on bad usage returns InvalidArgument whose message names the offending word.
Result<MountConfig> ParseCommandLine(int argc, char** argv, std::string* help);

// Fills options.control / secret_file from the config (resolving --data-dir
// through DIR/cluster.json); InvalidArgument says what is missing.
Result<client::ClientOptions> ResolveClientOptions(const MountConfig& config);

// The FUSE mount arguments ("ros2-fuse", "-o", "fsname=...,subtype=ros2,...").
std::vector<std::string> FuseMountArguments(const MountConfig& config);

}  // namespace ros2::fuse
