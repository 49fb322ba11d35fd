#include "testing/background_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace ros2::testing {

Result<std::unique_ptr<BackgroundProcess>> BackgroundProcess::Start(const std::vector<std::string>& argv,
                                                                    const std::string& log_path,
                                                                    const std::vector<std::string>& env) {
  if (argv.empty()) return Status::InvalidArgument("BackgroundProcess: no program");
  std::unique_ptr<BackgroundProcess> p(new BackgroundProcess());
  p->log_path_ = log_path;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno(errno, "BackgroundProcess: fork");
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: Stop() signals whatever it started too
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) ::_exit(126);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  p->pid_ = pid;
  return p;
}

BackgroundProcess::~BackgroundProcess() {
  Stop();
}

bool BackgroundProcess::Running() {
  if (pid_ < 0) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    pid_ = -1;
    return false;
  }
  return true;
}

int BackgroundProcess::Stop(std::chrono::milliseconds grace) {
  if (!Running()) return exit_code_;
  ::kill(-pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (Running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (pid_ >= 0) {
    ::kill(-pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    pid_ = -1;
  }
  return exit_code_;
}

std::string BackgroundProcess::Log() const {
  std::ifstream in(log_path_);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ros2::testing
