// ros2-fuse POOL CONT MOUNTPOINT: mounts a container's DFS namespace with the
// FUSE low-level API. docs/fuse.md describes the options, caching and limits.
//
// Without -f the process forks before it makes any thread (gRPC and UCX do):
// the child connects, mounts and serves; the parent waits on a pipe and exits
// 0 once the mount is live, or 1 with the child's error message.
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "common/log.h"
#include "fuse/fuse_filesystem.h"
#include "fuse/fuse_session.h"
#include "fuse/mount_options.h"
#include "ros2/client.h"
#include "ros2/dfs.h"

namespace ros2::fuse {
namespace {

// The daemon's report to the waiting parent: "OK" or the error text. Closing
// without a report (a crash) also tells the parent the mount failed.
class StartupPipe {
 public:
  StartupPipe() = default;
  ~StartupPipe() {
    if (fd_ >= 0) ::close(fd_);
  }
  StartupPipe(const StartupPipe&) = delete;
  StartupPipe& operator=(const StartupPipe&) = delete;
  void Attach(int fd) { fd_ = fd; }
  void Report(const std::string& message) {
    if (fd_ < 0) return;
    size_t done = 0;
    while (done < message.size()) {
      ssize_t n = ::write(fd_, message.data() + done, message.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// The parent: waits for the child's report and turns it into an exit code.
int WaitForDaemon(int read_fd) {
  std::string report;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(read_fd, buf, sizeof(buf))) > 0) report.append(buf, static_cast<size_t>(n));
  ::close(read_fd);
  if (report == "OK") return 0;
  if (report.empty()) report = "the mount process exited before the mount was live";
  std::fprintf(stderr, "ros2-fuse: %s\n", report.c_str());
  return 1;
}

// The daemon drops its terminal once the mount is live.
void DetachFromTerminal() {
  if (::chdir("/") != 0) return;
  int null_fd = ::open("/dev/null", O_RDWR);
  if (null_fd < 0) return;
  ::dup2(null_fd, STDIN_FILENO);
  ::dup2(null_fd, STDOUT_FILENO);
  ::dup2(null_fd, STDERR_FILENO);
  if (null_fd > STDERR_FILENO) ::close(null_fd);
}

Status Serve(const MountConfig& config, StartupPipe& startup) {
  ROS2_ASSIGN_OR_RETURN(client::ClientOptions options, ResolveClientOptions(config));
  auto client = client::Client::Connect(options);
  if (!client.ok()) return client.status().WithContext("connecting to " + options.control);
  auto pool = (*client)->ConnectPool(config.pool);
  if (!pool.ok()) return pool.status().WithContext("pool " + config.pool);
  auto container = (*pool)->OpenContainer(config.container);
  if (!container.ok()) return container.status().WithContext("container " + config.container);
  dfs::MountOptions mount_options;
  mount_options.uid = ::geteuid();
  mount_options.gid = ::getegid();
  mount_options.encryption_key_file = config.key_file;
  auto fs = dfs::Filesystem::Mount(**container, mount_options);
  if (!fs.ok()) return fs.status().WithContext("DFS on " + config.pool + "/" + config.container);

  FuseFilesystem filesystem(**fs, config.cache);
  {
    ROS2_ASSIGN_OR_RETURN(auto session, FuseSession::Create(filesystem, FuseMountArguments(config)));
    ROS2_RETURN_IF_ERROR(session->Mount(config.mountpoint));
    ROS2_LOG_INFO("ros2-fuse: {}/{} mounted on {} over {}", config.pool, config.container, config.mountpoint,
                  (*client)->DescribeTransport());
    startup.Report("OK");
    if (!config.foreground) DetachFromTerminal();
    ROS2_RETURN_IF_ERROR(session->Run(config.max_threads));
  }
  // The session (and its worker threads) is gone: the DFS, container, pool
  // and client go in reverse order of creation as the locals unwind.
  return Status::Ok();
}

int Main(int argc, char** argv) {
  std::string help;
  auto config = ParseCommandLine(argc, argv, &help);
  if (!config.ok()) {
    if (!help.empty()) {
      std::fputs(help.c_str(), stdout);
      return 0;
    }
    std::fprintf(stderr, "ros2-fuse: %s\n", config.status().message().c_str());
    return 2;
  }
  StartupPipe startup;
  if (!config->foreground) {
    int fds[2];
    if (::pipe(fds) != 0) {
      std::perror("ros2-fuse: pipe");
      return 1;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("ros2-fuse: fork");
      return 1;
    }
    if (pid > 0) {
      ::close(fds[1]);
      return WaitForDaemon(fds[0]);
    }
    ::close(fds[0]);
    ::setsid();
    startup.Attach(fds[1]);
  }
  if (Status s = InitLogging("fuse", config->log_level); !s.ok()) {
    std::fprintf(stderr, "ros2-fuse: %s\n", s.ToString().c_str());
  }
  Status s = Serve(*config, startup);
  if (!s.ok()) {
    std::string message = s.ToString();
    startup.Report(message);  // daemon: the parent prints it
    if (config->foreground) std::fprintf(stderr, "ros2-fuse: %s\n", message.c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace ros2::fuse

int main(int argc, char** argv) {
  return ros2::fuse::Main(argc, argv);
}
