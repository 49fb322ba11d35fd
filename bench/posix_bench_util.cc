#include "bench/posix_bench_util.h"

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bench/process_bench_util.h"

namespace ros2::bench::posix {

Result<FioResult> RunFioArgs(const std::vector<std::string>& args, const std::string& scratch, double limit_s,
                             const std::vector<std::pair<std::string, std::string>>& env) {
  auto fio = FindOnPath("fio");
  if (!fio.ok()) return Status::NotFound("fio is not installed (not on PATH); install the fio package");
  const std::string out_path = scratch + "/fio.json";
  const std::string err_path = scratch + "/fio.err";
  SpawnOptions so;
  so.argv = {*fio};
  so.argv.insert(so.argv.end(), args.begin(), args.end());
  so.argv.push_back("--output-format=json");
  so.argv.push_back("--output=" + out_path);
  so.stdout_path = scratch + "/fio.out";
  so.stderr_path = err_path;
  so.env = env;
  const std::string command = fmt::format("{}", fmt::join(so.argv, " "));
  ROS2_ASSIGN_OR_RETURN(auto child, ChildProcess::Spawn(so));
  auto rc = child.Wait(std::chrono::milliseconds(static_cast<int64_t>(limit_s * 1000)));
  if (!rc.ok()) return rc.status().WithContext(command);
  if (*rc != 0) {
    auto err = ReadWholeFile(err_path);
    return Status::IOError(fmt::format("fio exited with {} ({}): {}", *rc, command, err.ok() ? *err : ""));
  }
  ROS2_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(out_path));
  auto parsed = ParseFioJson(text);
  if (!parsed.ok()) return parsed.status().WithContext(command);
  parsed->command = command;
  return parsed;
}

}  // namespace ros2::bench::posix
