// `ros2-bench python`: PyTorch through the Python package `ros2` against the
// same reads and checkpoints through a ros2-fuse mount and on local ext4, in
// one run. The measuring is python/bench/torch_bench.py (docs/python.md,
// "Benchmark"); this suite runs it with Debian's interpreter and the build
// tree's package (<build>/python on PYTHONPATH), ros2ctl, ros2-engine and
// ros2-fuse, passes every option it does not know itself to the script, and
// passes --json on. The script prints the records (bench "python") itself:
// each carries, beside the format of bench_report.h, the spread over its
// rounds (min, max, ratio_min, ratio_max, rounds).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_report.h"
#include "bench/harness.h"


namespace ros2::bench {
namespace {

struct PythonSuiteOptions {
  std::string python = "/usr/bin/python3";
  std::string script;  // default: <build>/python/bench/torch_bench.py
  bool help_script = false;
  CLI::App* app = nullptr;
};

PythonSuiteOptions g_opts;

void SetDefaultEnv(const char* name, const std::string& value) {
  if (!value.empty() && access(value.c_str(), F_OK) == 0) setenv(name, value.c_str(), 0);
}

int RunPythonSuite(Reporter&) {
  const std::string package = BuildTreeBinaryPath("python");
  if (g_opts.script.empty()) g_opts.script = package + "/bench/torch_bench.py";
  if (access(g_opts.script.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "python bench: %s not found (is the Python package built? ninja ros2_python)\n",
                 g_opts.script.c_str());
    return 2;
  }
  const char* old_path = std::getenv("PYTHONPATH");
  const std::string python_path = old_path != nullptr && *old_path != '\0' ? package + ":" + old_path : package;
  setenv("PYTHONPATH", python_path.c_str(), 1);
  setenv("PYTHONDONTWRITEBYTECODE", "1", 0);
  SetDefaultEnv("ROS2CTL", BuildTreeBinaryPath("tools/ros2ctl/ros2ctl"));
  SetDefaultEnv("ROS2_ENGINE", BuildTreeBinaryPath("src/engine/ros2-engine"));
  SetDefaultEnv("ROS2_FUSE", BuildTreeBinaryPath("src/fuse/ros2-fuse"));

  std::vector<std::string> args = {g_opts.python, g_opts.script};
  const CLI::App* top = g_opts.app->get_parent();
  if (top != nullptr && top->get_option("--json")->as<bool>()) args.push_back("--json");
  for (const std::string& extra : g_opts.app->remaining()) args.push_back(extra);
  if (g_opts.help_script) args.push_back("--help");
  std::fflush(stdout);
  SpawnOptions so;
  so.argv = args;
  so.inherit_output = true;  // the script's report is the suite's
  auto child = ChildProcess::Spawn(so);
  if (!child.ok()) {
    std::fprintf(stderr, "python bench: cannot run %s: %s\n", g_opts.python.c_str(), child.status().ToString().c_str());
    return 2;
  }
  auto code = child->Wait(std::chrono::hours(24 * 365));
  if (!code.ok()) {
    std::fprintf(stderr, "python bench: %s\n", code.status().ToString().c_str());
    return 2;
  }
  return *code;
}

const bool registered = RegisterSuite({
    .name = "python",
    .help = "PyTorch DataLoader samples/s and checkpoint GiB/s: the Python API vs a ros2-fuse mount vs local ext4 "
            "(runs python/bench/torch_bench.py; its other options pass through, see --help-script)",
    .setup =
        [](CLI::App& app) {
          g_opts.app = &app;
          app.allow_extras();
          app.add_option("--python", g_opts.python, "interpreter (Debian's: it sees python3-torch)");
          app.add_option("--script", g_opts.script, "the benchmark script (default: the build tree's copy)");
          app.add_flag("--help-script", g_opts.help_script, "print the script's options (runs it with --help)");
        },
    .run = RunPythonSuite,
});

}  // namespace
}  // namespace ros2::bench
