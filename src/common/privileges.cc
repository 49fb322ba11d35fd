// Switching a root-started daemon to its dedicated user (privileges.h).
#include "common/privileges.h"

#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace ros2 {
namespace {

// Every capability name of linux/capability.h, indexed by number.
constexpr std::array<const char*, 41> kCapabilityNames = {"chown",
                                                          "dac_override",
                                                          "dac_read_search",
                                                          "fowner",
                                                          "fsetid",
                                                          "kill",
                                                          "setgid",
                                                          "setuid",
                                                          "setpcap",
                                                          "linux_immutable",
                                                          "net_bind_service",
                                                          "net_broadcast",
                                                          "net_admin",
                                                          "net_raw",
                                                          "ipc_lock",
                                                          "ipc_owner",
                                                          "sys_module",
                                                          "sys_rawio",
                                                          "sys_chroot",
                                                          "sys_ptrace",
                                                          "sys_pacct",
                                                          "sys_admin",
                                                          "sys_boot",
                                                          "sys_nice",
                                                          "sys_resource",
                                                          "sys_time",
                                                          "sys_tty_config",
                                                          "mknod",
                                                          "lease",
                                                          "audit_write",
                                                          "audit_control",
                                                          "setfcap",
                                                          "mac_override",
                                                          "mac_admin",
                                                          "syslog",
                                                          "wake_alarm",
                                                          "block_suspend",
                                                          "audit_read",
                                                          "perfmon",
                                                          "bpf",
                                                          "checkpoint_restore"};

// The highest capability this kernel knows (cap_last_cap).
int LastCapability() {
  std::ifstream in("/proc/sys/kernel/cap_last_cap");
  int last = -1;
  if (in >> last && last >= 0 && last < 64) return last;
  return static_cast<int>(kCapabilityNames.size()) - 1;
}

int ThreadCount() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("Threads:")) return std::atoi(line.c_str() + 8);
  }
  return -1;
}

Status Errno(std::string_view step, const ServiceUser& user) {
  return Status::FromErrno(errno, fmt::format("switching to user {} (uid {}): {}", user.name, user.uid, step));
}

// Sets this thread's permitted and effective sets to `caps`, inheritable none.
int SetCapabilities(uint64_t mask) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  for (int i = 0; i < 2; ++i) {
    data[i].effective = data[i].permitted = static_cast<uint32_t>(mask >> (32 * i));
  }
  return static_cast<int>(::syscall(SYS_capset, &header, data));
}

Result<uint64_t> EffectiveMask() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return Status::FromErrno(errno, "capget");
  return uint64_t{data[0].effective} | uint64_t{data[1].effective} << 32;
}

}  // namespace

std::vector<int> EngineCapabilities() {
  return {CAP_DAC_OVERRIDE, CAP_IPC_OWNER, CAP_SYS_PTRACE};
}

std::vector<int> AgentCapabilities() {
  return {CAP_DAC_OVERRIDE, CAP_SYS_PTRACE};
}

Result<int> ParseCapability(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.starts_with("cap_")) lower.erase(0, 4);
  for (size_t i = 0; i < kCapabilityNames.size(); ++i) {
    if (lower == kCapabilityNames[i]) return static_cast<int>(i);
  }
  return Status::InvalidArgument(fmt::format("'{}' is not a Linux capability (e.g. sys_ptrace, ipc_owner)", name));
}

std::string CapabilityName(int cap) {
  if (cap >= 0 && static_cast<size_t>(cap) < kCapabilityNames.size()) {
    return std::string("cap_") + kCapabilityNames[static_cast<size_t>(cap)];
  }
  return fmt::format("cap_{}", cap);
}

uint64_t CapabilityMask(const std::vector<int>& caps) {
  uint64_t mask = 0;
  for (int c : caps) mask |= uint64_t{1} << c;
  return mask;
}

Status ApplyProcessConfig(const YAML::Node& root, std::string_view where, ProcessConfig* config) {
  YAML::Node node = root["process"];
  if (!node) return Status::Ok();
  const std::string w = fmt::format("{}.process", where);
  if (!node.IsMap()) return Status::InvalidArgument(fmt::format("{}: expected a map (user, capabilities)", w));
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (key != "user" && key != "capabilities") {
      return Status::InvalidArgument(fmt::format("{}: unknown key '{}' (known: user, capabilities)", w, key));
    }
  }
  if (YAML::Node user = node["user"]) {
    if (!user.IsScalar() || user.Scalar().empty()) {
      return Status::InvalidArgument(fmt::format("{}.user: expected a user name", w));
    }
    config->user = user.Scalar();
  }
  if (YAML::Node caps = node["capabilities"]) {
    if (!caps.IsSequence()) {
      return Status::InvalidArgument(fmt::format("{}.capabilities: expected a list such as [sys_ptrace]", w));
    }
    config->capabilities.clear();
    for (size_t i = 0; i < caps.size(); ++i) {
      auto cap = ParseCapability(caps[i].Scalar());
      if (!cap.ok()) return cap.status().WithContext(fmt::format("{}.capabilities[{}]", w, i));
      config->capabilities.push_back(*cap);
    }
  }
  return Status::Ok();
}

bool SwitchesUser(const ProcessConfig& config) {
  return ::geteuid() == 0 && config.user != "root";
}

Result<ServiceUser> LookUpServiceUser(const ProcessConfig& config, std::string_view program) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  const int rc = ::getpwnam_r(config.user.c_str(), &pw, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr) {
    return Status::NotFound(fmt::format(
        "{} runs as root and switches to user '{}' (process.user), which does not exist{}: create it with "
        "`useradd --system --user-group --no-create-home --shell /usr/sbin/nologin {}` (scripts/install-deps.sh "
        "does), name another user in process.user, or set process.user: root to keep running as root",
        program, config.user, rc != 0 ? fmt::format(" ({})", std::strerror(rc)) : "", config.user));
  }
  return ServiceUser{config.user, pw.pw_uid, pw.pw_gid};
}

Status GiveDirectoryTo(const std::string& dir, mode_t mode, const ServiceUser& user) {
  namespace fs = std::filesystem;
  fs::path partial;
  const fs::path target = fs::absolute(dir).lexically_normal();
  bool created = false;
  for (const auto& part : target) {
    partial /= part;
    if (part.empty() || part == "/") continue;
    const bool last = partial == target;
    if (::mkdir(partial.c_str(), last ? mode : 0755) == 0) {
      created = last;
    } else if (errno != EEXIST) {
      return Status::FromErrno(errno, fmt::format("create directory {}", partial.string()));
    }
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno(errno, fmt::format("stat {}", dir));
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(fmt::format("{} is not a directory", dir));
  // Only a directory private to root is taken: never a shared one such as /tmp.
  if (!created && (st.st_uid != 0 || (st.st_mode & 0077) != 0)) return Status::Ok();
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    struct stat e {};
    if (::lstat(it->path().c_str(), &e) != 0 || e.st_uid != 0) continue;
    if (!S_ISDIR(e.st_mode) && !S_ISLNK(e.st_mode) && e.st_nlink > 1) continue;
    if (::lchown(it->path().c_str(), user.uid, user.gid) != 0) {
      return Status::FromErrno(errno, fmt::format("give {} to user {}", it->path().string(), user.name));
    }
  }
  if (ec) return Status::IOError(fmt::format("walk {}: {}", dir, ec.message()));
  if (::chown(dir.c_str(), user.uid, user.gid) != 0) {
    return Status::FromErrno(errno, fmt::format("give {} to user {}", dir, user.name));
  }
  return Status::Ok();
}

Status SwitchToUser(const ServiceUser& user, const std::vector<int>& capabilities) {
  if (const int threads = ThreadCount(); threads != 1) {
    return Status::Internal(fmt::format(
        "switching to user {}: the process runs {} threads; capabilities change per thread, so the switch must "
        "come before the first thread starts",
        user.name, threads));
  }
  const uint64_t keep = CapabilityMask(capabilities);
  // Memory the data plane pins (RDMA registrations, io_uring's fixed buffers)
  // counts against RLIMIT_MEMLOCK unless the process holds CAP_IPC_LOCK:
  // raised here, as root, instead of keeping that capability. Unlimited when
  // root may (CAP_SYS_RESOURCE), else the soft limit up to the hard one.
  const rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
  if (::setrlimit(RLIMIT_MEMLOCK, &unlimited) != 0) {
    rlimit current{};
    if (::getrlimit(RLIMIT_MEMLOCK, &current) == 0) {
      current.rlim_cur = current.rlim_max;
      (void)::setrlimit(RLIMIT_MEMLOCK, &current);
    }
  }
  for (int cap = 0; cap <= LastCapability(); ++cap) {
    if ((keep >> cap & 1) == 0 && ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
      return Errno(fmt::format("dropping {} from the bounding set", CapabilityName(cap)), user);
    }
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) return Errno("clearing ambient", user);
  const gid_t groups[1] = {user.gid};
  if (::setgroups(1, groups) != 0) return Errno("setgroups", user);
  if (::setresgid(user.gid, user.gid, user.gid) != 0) return Errno("setresgid", user);
  if (::prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) return Errno("PR_SET_KEEPCAPS", user);
  if (::setresuid(user.uid, user.uid, user.uid) != 0) return Errno("setresuid", user);
  if (::prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) != 0) return Errno("PR_SET_KEEPCAPS", user);
  if (SetCapabilities(keep) != 0) return Errno("capset", user);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return Errno("PR_SET_NO_NEW_PRIVS", user);
  // Checked, not assumed: root must be gone for good.
  uid_t r = 0, e = 0, s = 0;
  if (::getresuid(&r, &e, &s) != 0 || r != user.uid || e != user.uid || s != user.uid || ::setuid(0) == 0) {
    return Status::Internal(fmt::format("switching to user {}: the process could still become root", user.name));
  }
  auto eff = EffectiveMask();
  if (!eff.ok()) return eff.status();
  if (*eff != keep) {
    return Status::Internal(
        fmt::format("switching to user {}: effective capabilities {:#x}, expected {:#x}", user.name, *eff, keep));
  }
  return Status::Ok();
}

Status CheckAccessAsUser(const std::string& path, int mode, std::string_view what, const ServiceUser& user) {
  if (::access(path.c_str(), mode) == 0) return Status::Ok();
  const int err = errno;
  if (err != EACCES) return Status::FromErrno(err, fmt::format("{} {}", what, path));
  // The first directory above `path` this user may not search, if any.
  namespace fs = std::filesystem;
  fs::path partial;
  const fs::path full = fs::absolute(path).lexically_normal();
  for (const auto& part : full.parent_path()) {
    partial /= part;
    if (::access(partial.c_str(), X_OK) == 0) continue;
    struct stat st {};
    ::stat(partial.c_str(), &st);
    return Status::PermissionDenied(fmt::format(
        "{} {}: user {} (uid {}, the process.user this process switched to) cannot search directory {} (mode {:o}, "
        "owner uid {}): make it searchable for that user (e.g. chmod o+x {}) or choose another path",
        what, path, user.name, user.uid, partial.string(), st.st_mode & 07777, st.st_uid, partial.string()));
  }
  struct stat st {};
  ::stat(path.c_str(), &st);
  return Status::PermissionDenied(fmt::format(
      "{} {}: user {} (uid {}, the process.user this process switched to) may not {} it (mode {:o}, owner uid {}): "
      "give it to that user (chown {} {}) or to its group",
      what, path, user.name, user.uid, (mode & W_OK) != 0 ? "write" : "read", st.st_mode & 07777, st.st_uid, user.name,
      path));
}

}  // namespace ros2
