#include "fuse/fuse_session.h"

#include <fmt/format.h>

#include "common/log.h"

namespace ros2::fuse {

Result<std::unique_ptr<FuseSession>> FuseSession::Create(FuseFilesystem& filesystem,
                                                         const std::vector<std::string>& args) {
  std::vector<std::string> storage = args;
  std::vector<char*> argv;
  for (auto& a : storage) argv.push_back(a.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  fuse_session* session =
      fuse_session_new(&fargs, &FuseFilesystem::Operations(), sizeof(fuse_lowlevel_ops), &filesystem);
  fuse_opt_free_args(&fargs);
  if (session == nullptr) {
    return Status::InvalidArgument(
        fmt::format("fuse_session_new refused the FUSE options '{}'", fmt::join(args.begin() + 1, args.end(), " ")));
  }
  return std::unique_ptr<FuseSession>(new FuseSession(session));
}

FuseSession::~FuseSession() {
  Unmount();
  fuse_session_destroy(session_);
}

Status FuseSession::Mount(const std::string& mountpoint) {
  if (fuse_session_mount(session_, mountpoint.c_str()) != 0) {
    return Status::IOError(
        fmt::format("mounting on {} failed (see the message above; is /dev/fuse there and the "
                    "directory not already a mount?)",
                    mountpoint));
  }
  mounted_ = true;
  if (fuse_set_signal_handlers(session_) != 0) {
    return Status::Internal(fmt::format("installing the signal handlers of the mount on {} failed", mountpoint));
  }
  signals_installed_ = true;
  return Status::Ok();
}

Status FuseSession::Run(unsigned max_threads) {
  fuse_loop_config* config = fuse_loop_cfg_create();
  if (config == nullptr) return Status::Internal("fuse_loop_cfg_create failed");
  fuse_loop_cfg_set_max_threads(config, max_threads);
  // Idle threads stay: each one owns a libros2 transport worker and endpoints,
  // which would otherwise be made again for every burst of requests.
  fuse_loop_cfg_set_idle_threads(config, max_threads);
  fuse_loop_cfg_set_clone_fd(config, 0);
  int rc = fuse_session_loop_mt(session_, config);
  fuse_loop_cfg_destroy(config);
  Unmount();
  // rc > 0: the signal that ended the loop (an orderly stop).
  if (rc < 0) return Status::IOError(fmt::format("FUSE session loop failed: errno {}", -rc));
  if (rc > 0) ROS2_LOG_INFO("ros2-fuse: signal {} received, unmounted", rc);
  return Status::Ok();
}

void FuseSession::Unmount() {
  if (signals_installed_) {
    fuse_remove_signal_handlers(session_);
    signals_installed_ = false;
  }
  if (mounted_) {
    fuse_session_unmount(session_);
    mounted_ = false;
  }
}

}  // namespace ros2::fuse
