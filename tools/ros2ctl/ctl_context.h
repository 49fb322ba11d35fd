// CtlContext: what every ros2ctl sub-command shares — the global options
// (where the control endpoint is, whose credentials to use, --json) and the
// lazily made management client. A command returns a CommandOutput (a human
// text and a JSON value); main() prints the one the user asked for, or the
// error with a non-zero exit code. Single-threaded: ros2ctl runs one command.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "control/credentials.h"
#include "control/management_client.h"

namespace ros2::ctl {

struct GlobalOptions {
  std::string data_dir;     // a local cluster's directory (cluster.json inside)
  std::string control;      // "unix:/path", "/path" or "host:port"
  std::string tenant;       // default: admin
  std::string secret_file;  // default with --data-dir: the cluster's admin secret
  std::string tls_ca;       // CA certificate of a TLS (host:port) endpoint
  bool json = false;
  int timeout_s = 10;
  // The terminal's stdout while a command runs (main sends fd 1 to stderr
  // then); commands that print as they go (`top`) write here.
  int stdout_fd = 1;
};

struct CommandOutput {
  std::string human;
  nlohmann::json json;
  bool streamed = false;  // the command printed its output as it went (stdout_fd): main prints nothing more
};

// The file a local cluster keeps in its data directory (written by `cluster up`).
inline constexpr const char* kClusterFileName = "cluster.json";

class CtlContext {
 public:
  explicit CtlContext(GlobalOptions options) : options_(std::move(options)) {}
  GlobalOptions& options() { return options_; }
  const GlobalOptions& options() const { return options_; }

  // The control endpoint and credentials from --control/--tenant/--secret-file,
  // or from the local cluster in --data-dir. InvalidArgument says what is missing.
  Result<std::string> ControlAddress() const;
  Result<control::Credentials> TenantCredentials() const;
  // A management client on that endpoint (made once).
  Result<control::ManagementClient*> Management();

 private:
  GlobalOptions options_;
  std::unique_ptr<control::ManagementClient> management_;
};

}  // namespace ros2::ctl
