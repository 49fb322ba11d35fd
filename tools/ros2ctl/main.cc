// ros2ctl: the ROS2 administration tool. See docs/ros2ctl.md for every command.
//
// Exit codes: 0 success, 1 the command failed (the message names the object
// and the cause), 2 bad usage (unknown command or option, missing argument).
#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <exception>
#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "commands.h"
#include "common/log.h"
#include "ctl_context.h"
#ifdef ROS2CTL_WITH_FS
#include "fs_commands.h"
#endif

namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

// CLI11 reports a mistyped sub-command as "A subcommand is required" (the
// word becomes an extra positional) and checks required options before
// unknown ones. Walk argv along the command tree to name the word that is not
// a command (listing what would have been accepted) or the unknown option.
std::string UnknownCommandHint(CLI::App& app, int argc, char** argv) {
  CLI::App* current = &app;
  std::string path = "ros2ctl";
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    // "-2" is a (bad) value, not an option: CLI11's own message names it.
    const bool negative_number = word.size() > 1 && word[0] == '-' && std::isdigit(static_cast<unsigned char>(word[1]));
    if (word.size() > 1 && word[0] == '-' && word != "--" && !negative_number) {
      std::string name = word.substr(0, word.find('='));
      if (name != "-h" && name != "--help" && current->get_option_no_throw(name) == nullptr &&
          app.get_option_no_throw(name) == nullptr) {
        return fmt::format("unknown option '{}' for '{}' (see `{} --help`)", name, path, path);
      }
      continue;
    }
    if (word.empty()) continue;
    auto subs = current->get_subcommands([](CLI::App*) { return true; });
    if (subs.empty()) continue;  // a positional argument of a leaf command
    CLI::App* next = nullptr;
    for (CLI::App* s : subs) {
      if (s->get_name() == word) next = s;
    }
    if (next == nullptr) {
      // An option value ("-d DIR") is not a command: only report words that
      // follow a command name directly or that no option consumed.
      if (i > 1 && argv[i - 1][0] == '-' && std::string(argv[i - 1]).find('=') == std::string::npos) {
        const CLI::Option* opt = current->get_option_no_throw(argv[i - 1]);
        if (opt == nullptr) opt = app.get_option_no_throw(argv[i - 1]);
        if (opt != nullptr && opt->get_expected_min() > 0) continue;
      }
      std::string names;
      for (CLI::App* s : subs) names += (names.empty() ? "" : ", ") + s->get_name();
      return fmt::format("unknown command '{}' for '{}' (expected one of: {})", word, path, names);
    }
    current = next;
    path += " " + word;
  }
  return {};
}

int Run(int argc, char** argv) {
  using namespace ros2::ctl;
  CtlContext ctx(GlobalOptions{});
  GlobalOptions& g = ctx.options();

  CLI::App app{"ros2ctl — administer a ROS2 cluster: local cluster, pools, containers, tenants, ACLs", "ros2ctl"};
  app.require_subcommand(1);
  app.fallthrough();
  app.add_option("--data-dir,-d", g.data_dir,
                 "Data directory of a local cluster (finds its control socket and admin "
                 "credentials)")
      ->envname("ROS2_DATA_DIR");
  app.add_option("--control,-c", g.control,
                 "Control endpoint: unix:/path, /path or host:port; several engines of a cluster: a,b,c")
      ->envname("ROS2_CONTROL");
  app.add_option("--tenant", g.tenant, "Tenant to authenticate as (default admin)")->envname("ROS2_TENANT");
  app.add_option("--secret-file", g.secret_file, "File holding the tenant's secret")->envname("ROS2_SECRET_FILE");
  app.add_option("--tls-ca", g.tls_ca, "CA certificate of a TLS (host:port) control endpoint")->envname("ROS2_TLS_CA");
  app.add_flag("--json", g.json, "Print JSON for scripts instead of text");
  app.add_option("--rpc-timeout", g.timeout_s, "Seconds each control call may take")->capture_default_str();

  CommandRunner selected;
  AddClusterCommands(app, ctx, &selected);
  AddCertCommands(app, ctx, &selected);
  AddPoolCommands(app, ctx, &selected);
  AddContainerCommands(app, ctx, &selected);
  AddTenantCommands(app, ctx, &selected);
  AddAclCommands(app, ctx, &selected);
  AddTopCommand(app, ctx, &selected);
#ifdef ROS2CTL_WITH_FS
  AddKeyCommands(app, ctx, &selected);
  AddFsCommands(app, ctx, &selected);
#endif
#ifdef ROS2CTL_WITH_AGENT
  AddAgentCommands(app, ctx, &selected);
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 names the unexpected or missing argument; say where help is.
    std::string hint = UnknownCommandHint(app, argc, argv);
    std::fprintf(stderr, "ros2ctl: %s\nRun `ros2ctl --help` (or `ros2ctl <command> --help`) for usage.\n",
                 hint.empty() ? e.what() : hint.c_str());
    return kExitUsage;
  }
  if (!selected) {
    std::fprintf(stderr, "ros2ctl: no command given; run `ros2ctl --help`\n");
    return kExitUsage;
  }
  // Libraries may write to stdout while the command runs (UCX prints its
  // warnings there); send that to stderr so stdout carries only the result
  // (--json output stays parseable).
  std::fflush(stdout);
  // CLOEXEC: an engine spawned by `cluster up` must not hold the caller's stdout
  // (a pipe reader such as `ros2ctl cluster up | tail` would never see EOF).
  int saved_stdout = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
  if (saved_stdout >= 0) ::dup2(STDERR_FILENO, STDOUT_FILENO);
  g.stdout_fd = saved_stdout >= 0 ? saved_stdout : STDOUT_FILENO;
  ros2::Result<CommandOutput> out = selected();
  std::fflush(stdout);
  if (saved_stdout >= 0) {
    ::dup2(saved_stdout, STDOUT_FILENO);
    ::close(saved_stdout);
  }
  if (!out.ok()) {
    if (g.json) {
      nlohmann::json err = {
          {"error", {{"code", std::string(ros2::CodeName(out.status().code()))}, {"message", out.status().message()}}}};
      std::printf("%s\n", err.dump(2).c_str());
    }
    std::fprintf(stderr, "ros2ctl: %s\n", out.status().ToString().c_str());
    return kExitFailed;
  }
  if (out->streamed) return 0;
  if (g.json) {
    std::printf("%s\n", out->json.dump(2).c_str());
  } else {
    std::fputs(out->human.c_str(), stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  (void)ros2::InitLogging("ros2ctl", "warn");
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ros2ctl: internal error: %s\n", e.what());
    return kExitFailed;
  }
}
