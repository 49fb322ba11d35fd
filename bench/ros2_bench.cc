// ros2-bench: the built-in benchmark. Each suite (vos, transport, obj, ...) is a
// sub-command registered by its own *_suite.cc file; see bench_report.h for the
// record format shared by all of them.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <CLI/CLI.hpp>

#include "bench/bench_report.h"
#include "common/log.h"

int main(int argc, char** argv) {
  // UCX prints "unused env variables" on stdout, which breaks --json, when a
  // suite makes a shm context after a tcp one (the tcp segment sizes go through
  // the environment, docs/transport.md). UCX reads the switch in its library
  // constructor, before main: set it and start again, once.
  if (std::getenv("UCX_WARN_UNUSED_ENV_VARS") == nullptr) {
    setenv("UCX_WARN_UNUSED_ENV_VARS", "n", 0);
    execv("/proc/self/exe", argv);
    std::perror("ros2-bench: re-exec for UCX_WARN_UNUSED_ENV_VARS");  // go on with the warning
  }
  CLI::App app{"ros2-bench: ROS2 benchmarks with same-run baselines"};
  app.require_subcommand(1);
  bool json = false;
  std::string log_level = "warn";
  app.add_flag("--json", json, "print one JSON record per line instead of a table");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off");
  auto& suites = ros2::bench::Suites();
  std::vector<std::pair<CLI::App*, ros2::bench::Suite*>> commands;
  for (auto& s : suites) {
    CLI::App* sub = app.add_subcommand(s.name, s.help);
    if (s.setup) s.setup(*sub);
    commands.emplace_back(sub, &s);
  }
  CLI11_PARSE(app, argc, argv);
  if (auto st = ros2::InitLogging("bench", log_level); !st.ok()) {
    std::fprintf(stderr, "ros2-bench: %s\n", st.ToString().c_str());
    return 2;
  }
  ros2::bench::Reporter reporter(json);
  for (auto& [sub, suite] : commands) {
    if (sub->parsed()) {
      int rc = suite->run(reporter);
      reporter.Flush();
      return rc;
    }
  }
  return 2;
}
