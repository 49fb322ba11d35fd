// `ros2-bench paper`: the paper's evaluation (Figs. 3-5) reproduced on this
// machine in one sitting, plus what the paper could not measure (host CPU per
// I/O) and an optional peer (Ceph) on the same shapes.
//
// The suite is thin: it resolves the build tree's binaries and execs Debian's
// Python on the orchestrator bench/paper/paper.py, which runs fio and the
// other suites of this binary (obj, offload or posix) with --json, optionally
// drives the Ceph peer script, and writes records.jsonl, records.csv,
// summary.json, the figures (PNG, matplotlib) and report.md into --out.
// docs/benchmarks.md ("ros2-bench paper") and docs/evaluation.md describe it.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_report.h"
#include "bench/harness.h"

#ifndef ROS2_PAPER_SCRIPT
#define ROS2_PAPER_SCRIPT ""
#endif

namespace ros2::bench {
namespace {

struct PaperSuiteOptions {
  std::string out;
  bool quick = false;
  std::string peer;  // "" or "ceph"
  std::string parts = "fig3,fig4,fig5,peer";
  std::string dir = "/tmp";
  std::string python = "/usr/bin/python3";
  std::string script = ROS2_PAPER_SCRIPT;
  std::string ceph_script;
  std::string offload_records;
  double runtime_s = 0;  // 0: the orchestrator's default for the mode
  int rounds = 0;
  bool progress = true;
  bool redraw = false;
};

PaperSuiteOptions g_opts;

int RunPaper(Reporter& /*reporter*/) {
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) {
    std::fprintf(stderr, "paper: cannot read /proc/self/exe: %s\n", ec.message().c_str());
    return 2;
  }
  if (g_opts.script.empty() || !std::filesystem::exists(g_opts.script)) {
    std::fprintf(stderr, "paper: orchestrator script '%s' not found (--script)\n", g_opts.script.c_str());
    return 2;
  }
  if (!g_opts.peer.empty() && g_opts.peer != "ceph") {
    std::fprintf(stderr, "paper: --peer must be 'ceph'\n");
    return 2;
  }
  std::vector<std::string> args = {g_opts.python, g_opts.script,
                                   "--out",       g_opts.out,
                                   "--bench",     self,
                                   "--dir",       g_opts.dir,
                                   "--parts",     g_opts.parts,
                                   "--ros2ctl",   BuildTreeBinaryPath("tools/ros2ctl/ros2ctl"),
                                   "--engine",    BuildTreeBinaryPath("src/engine/ros2-engine")};
  if (g_opts.quick) args.emplace_back("--quick");
  if (!g_opts.peer.empty()) args.insert(args.end(), {"--peer", g_opts.peer});
  if (!g_opts.ceph_script.empty()) args.insert(args.end(), {"--ceph-script", g_opts.ceph_script});
  if (!g_opts.offload_records.empty()) args.insert(args.end(), {"--offload-records", g_opts.offload_records});
  if (g_opts.runtime_s > 0) args.insert(args.end(), {"--runtime", fmt::format("{}", g_opts.runtime_s)});
  if (g_opts.rounds > 0) args.insert(args.end(), {"--rounds", fmt::format("{}", g_opts.rounds)});
  if (!g_opts.progress) args.emplace_back("--no-progress");
  if (g_opts.redraw) args.emplace_back("--redraw");
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  ::execv(g_opts.python.c_str(), argv.data());
  std::fprintf(stderr, "paper: exec %s: %s\n", g_opts.python.c_str(), std::strerror(errno));
  return 2;
}

const bool registered = RegisterSuite({
    .name = "paper",
    .help = "the paper's evaluation (Figs. 3-5, host CPU, optional Ceph peer): records, figures, report",
    .setup =
        [](CLI::App& app) {
          app.add_option("--out", g_opts.out, "output directory (records, figures, report.md)")->required();
          app.add_flag("--quick", g_opts.quick, "tiny sizes, one round (a smoke run of every part)");
          app.add_option("--peer", g_opts.peer, "peer system measured on the same shapes: ceph");
          app.add_option("--parts", g_opts.parts, "parts to run: fig3,fig4,fig5,peer");
          app.add_option("--dir", g_opts.dir, "parent of the scratch directories (clusters, fio files)");
          app.add_option("--python", g_opts.python, "Python with matplotlib (Debian's python3-matplotlib)");
          app.add_option("--script", g_opts.script,
                         "the orchestrator (default: the source tree's bench/paper/paper.py)");
          app.add_option("--ceph-script", g_opts.ceph_script, "the Ceph peer script (ceph-single-node.sh)");
          app.add_option("--offload-records", g_opts.offload_records,
                         "JSONL of `ros2-bench offload --json` records to use instead of running Fig. 5");
          app.add_option("--runtime", g_opts.runtime_s, "seconds per measured case (default: 3, quick 0.3)");
          app.add_option("--rounds", g_opts.rounds, "rounds of the sub-suites that alternate (default 1)");
          app.add_flag("!--no-progress", g_opts.progress, "no progress bar on stderr");
          app.add_flag("--redraw", g_opts.redraw,
                       "run nothing: targets, CSV, figures and report again from --out's records.jsonl");
        },
    .run = RunPaper,
});

}  // namespace
}  // namespace ros2::bench
