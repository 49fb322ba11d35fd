#include "common/daemon.h"

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <iostream>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ros2 {

int StartupFailure(std::string_view program, const Status& st) {
  std::cerr << program << ": " << st.ToString() << std::endl;
  return 1;
}

Result<std::string> LeaveRoot(const ProcessConfig& process, std::string_view program,
                              const std::function<Status(const ServiceUser&)>& as_root,
                              const std::function<Status(const ServiceUser&)>& as_user) {
  if (!SwitchesUser(process)) {
    return ::geteuid() == 0 ? std::string("runs as root (process.user: root)") : std::string();
  }
  ROS2_ASSIGN_OR_RETURN(ServiceUser user, LookUpServiceUser(process, program));
  if (as_root) ROS2_RETURN_IF_ERROR(as_root(user));
  ROS2_RETURN_IF_ERROR(SwitchToUser(user, process.capabilities));
  if (as_user) ROS2_RETURN_IF_ERROR(as_user(user));
  std::vector<std::string> names;
  for (int cap : process.capabilities) names.push_back(CapabilityName(cap));
  return fmt::format("switched to user {} (uid {}, gid {}) keeping capabilities [{}]", user.name, user.uid, user.gid,
                     fmt::join(names, ", "));
}

sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return stop_signals;
}

}  // namespace ros2
