#include "testing/background_process.h"

namespace ros2::testing {

Result<std::unique_ptr<BackgroundProcess>> BackgroundProcess::Start(const std::vector<std::string>& argv,
                                                                    const std::string& log_path,
                                                                    const std::vector<std::string>& env) {
  if (argv.empty()) return Status::InvalidArgument("BackgroundProcess: no program");
  std::unique_ptr<BackgroundProcess> p(new BackgroundProcess());
  p->log_path_ = log_path;
  SpawnOptions so;
  so.argv = argv;
  for (const auto& e : env) {
    const size_t eq = e.find('=');
    if (eq == std::string::npos) return Status::InvalidArgument("BackgroundProcess: environment entry '" + e + "'");
    so.env.emplace_back(e.substr(0, eq), e.substr(eq + 1));
  }
  so.stdout_path = so.stderr_path = log_path;
  so.own_process_group = true;  // Stop() signals whatever it started too
  auto child = ChildProcess::Spawn(so);
  if (!child.ok()) return child.status().WithContext("BackgroundProcess");
  p->process_ = std::move(*child);
  return p;
}

BackgroundProcess::~BackgroundProcess() {
  Stop();
}

bool BackgroundProcess::Running() {
  if (!process_.running()) return false;
  auto code = process_.Wait(std::chrono::milliseconds(0));
  if (code.ok()) exit_code_ = *code;
  return process_.running();
}

int BackgroundProcess::Stop(std::chrono::milliseconds grace) {
  if (!Running()) return exit_code_;
  exit_code_ = process_.Stop(grace);
  return exit_code_;
}

std::string BackgroundProcess::Log() const {
  return ReadWholeFile(log_path_);
}

}  // namespace ros2::testing
