// Privileges: how ros2-engine and ros2-agent stop being root (docs/security.md,
// "Privileges").
//
// Started as root (euid 0), a daemon first does what needs root (makes and
// hands over its directories), then switches for good to a dedicated user
// (`process.user`, default `ros2`, made by scripts/install-deps.sh) keeping
// only the Linux capabilities it needs (`process.capabilities`) as permitted
// and effective: none inheritable or ambient, every other one dropped from the
// bounding set, and no_new_privs set, so nothing it executes can gain any.
// Started as another user it changes nothing. `process.user: root` keeps root
// on purpose. Free functions; SwitchToUser must run before the process starts
// its second thread (capabilities are per thread).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/status.h"

namespace ros2 {

// The capabilities ros2-engine keeps by default, each found necessary by
// taking it away (docs/security.md, "Privileges"): UCX's shared-memory
// transports attach a peer's segments themselves, and for a client of another
// user (root, as the tests and tools run) or any process that is not dumpable
// (as a daemon that switched user is not) the kernel asks for
// CAP_SYS_PTRACE: ptrace access to reach /proc/<pid>/fd/<n> (posix) and to
//   copy with process_vm_readv/writev (cma);
// CAP_DAC_OVERRIDE: to search /proc/<pid>/fd of a process not dumpable and
//   open the posix segment UCX made mode 0600 for its owner;
// CAP_IPC_OWNER: to attach a SysV segment UCX made mode 0600 for its owner.
std::vector<int> EngineCapabilities();
// ros2-agent's: it reaches only its engine (posix and cma), whose SysV
// segments are its own user's: CAP_DAC_OVERRIDE and CAP_SYS_PTRACE.
std::vector<int> AgentCapabilities();

// The `process` section of a daemon's configuration.
struct ProcessConfig {
  std::string user = "ros2";      // "root": keep running as root
  std::vector<int> capabilities;  // kept after the switch
};

// Applies the `process` map under `root` (keys user, capabilities: a list of
// names such as sys_ptrace or CAP_SYS_PTRACE); errors name `where` and the key.
Status ApplyProcessConfig(const YAML::Node& root, std::string_view where, ProcessConfig* config);

// "sys_ptrace" or "CAP_SYS_PTRACE" -> 19; InvalidArgument naming the text.
Result<int> ParseCapability(std::string_view name);
// 19 -> "cap_sys_ptrace".
std::string CapabilityName(int cap);
// The mask /proc/<pid>/status shows as CapEff for `caps`.
uint64_t CapabilityMask(const std::vector<int>& caps);

struct ServiceUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Whether a process with `config` switches user: it runs as root and the
// configured user is not root.
bool SwitchesUser(const ProcessConfig& config);

// The account `config.user` names. NotFound naming the user, the program and
// how to make the account (or to keep root on purpose).
Result<ServiceUser> LookUpServiceUser(const ProcessConfig& config, std::string_view program);

// As root: makes `dir` when missing (missing parents 0755, `dir` itself with
// `mode`) and, when it made it or it is private to root (owner root, no group
// or other bits), gives it and everything in it that root owns to `user`
// (symbolic links themselves, never their targets; a file with several hard
// links is left to root). Any other directory (the user's already, another
// user's, a shared one like /tmp) is left as it is: the daemon checks it
// after the switch and refuses what it may not use, naming the fix.
Status GiveDirectoryTo(const std::string& dir, mode_t mode, const ServiceUser& user);

// Switches this process to `user` for good, keeping `capabilities` (see the
// header comment). Internal error when the process already runs several
// threads; the error of any step names it.
Status SwitchToUser(const ServiceUser& user, const std::vector<int>& capabilities);

// After the switch: checks this process can reach `path` with `mode`
// (access(2) bits; every directory above must be searchable). The error names
// `what`, the path, the first directory that stops it and the user.
Status CheckAccessAsUser(const std::string& path, int mode, std::string_view what, const ServiceUser& user);

}  // namespace ros2
