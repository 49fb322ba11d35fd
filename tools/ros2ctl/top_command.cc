// top: a live view of every engine's and target's IOPS, throughput and p50/p99
// latency, from the engines' metrics endpoints (docs/ros2ctl.md, "top";
// docs/observability.md). Scrapes every endpoint each interval and prints the
// rates between two scrapes: a refreshed table on a terminal, one block per
// interval otherwise, or one JSON object per line with --json.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "commands.h"
#include "top_view.h"

namespace ros2::ctl {
namespace {

struct TopArgs {
  std::vector<std::string> endpoints;
  double interval_s = 1.0;
  int64_t count = 0;  // intervals to print; 0: until interrupted (signed: CLI11 would wrap "-2" into a uint64_t)
};

// The metrics endpoint of the local cluster's engine (DIR/engine.ready's metrics= line).
Result<std::string> LocalEndpoint(const std::string& data_dir) {
  const std::string ready = (std::filesystem::path(data_dir) / "engine.ready").string();
  std::ifstream in(ready);
  if (!in) {
    return Status::NotFound(fmt::format("top: {} does not exist: is the cluster of {} up?", ready, data_dir));
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("metrics=", 0) == 0) return line.substr(8);
  }
  return Status::NotFound(fmt::format(
      "top: the engine of {} exports no metrics (set metrics.listen in its engine.yaml), or give --endpoint HOST:PORT",
      data_dir));
}

void Write(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

Result<std::vector<EngineScrape>> ScrapeAll(const std::vector<std::string>& endpoints) {
  std::vector<EngineScrape> all;
  for (const std::string& e : endpoints) {
    auto s = ScrapeEngine(e);
    if (!s.ok()) return s.status().WithContext("top");
    all.push_back(std::move(*s));
  }
  return all;
}

Result<CommandOutput> RunTop(CtlContext& ctx, const TopArgs& a) {
  std::vector<std::string> endpoints = a.endpoints;
  if (endpoints.empty()) {
    if (ctx.options().data_dir.empty()) {
      return Status::InvalidArgument("top: give --endpoint HOST:PORT (each engine's metrics.listen) or --data-dir DIR");
    }
    ROS2_ASSIGN_OR_RETURN(std::string local, LocalEndpoint(ctx.options().data_dir));
    endpoints.push_back(local);
  }
  const int fd = ctx.options().stdout_fd;
  const bool json = ctx.options().json;
  const bool tty = !json && ::isatty(fd) == 1;
  ROS2_ASSIGN_OR_RETURN(std::vector<EngineScrape> before, ScrapeAll(endpoints));
  const auto period = std::chrono::duration<double>(a.interval_s);
  auto next =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
  for (int64_t i = 0; a.count == 0 || i < a.count; ++i) {
    std::this_thread::sleep_until(next);
    next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
    ROS2_ASSIGN_OR_RETURN(std::vector<EngineScrape> after, ScrapeAll(endpoints));
    std::vector<TopRow> rows;
    for (size_t e = 0; e < after.size(); ++e) {
      auto r = TopRows(before[e], after[e]);
      rows.insert(rows.end(), r.begin(), r.end());
    }
    const double interval = std::chrono::duration<double>(after.front().at - before.front().at).count();
    if (json) {
      Write(fd, TopJson(rows, interval).dump() + "\n");
    } else {
      // On a terminal: home the cursor and clear, like top; elsewhere one block per interval.
      Write(fd,
            (tty ? std::string("\033[H\033[2J") : std::string()) + FormatTopTable(rows, interval) + (tty ? "" : "\n"));
    }
    before = std::move(after);
  }
  CommandOutput out;
  out.streamed = true;
  return out;
}

}  // namespace

void AddTopCommand(CLI::App& app, CtlContext& ctx, CommandRunner* selected) {
  auto a = std::make_shared<TopArgs>();
  CLI::App* top = app.add_subcommand(
      "top", "Live IOPS, throughput and p50/p99 latency of every engine and target, from their metrics endpoints");
  top->add_option("--endpoint,-e", a->endpoints,
                  "An engine's metrics endpoint HOST:PORT (repeat for each engine; default: the engine of --data-dir)");
  top->add_option("--interval,-i", a->interval_s, "Seconds between refreshes")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  top->add_option("--count,-n", a->count, "Print this many intervals, then exit (0: until interrupted)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000000}))
      ->capture_default_str();
  top->callback([&ctx, a, selected] { *selected = [&ctx, a] { return RunTop(ctx, *a); }; });
}

}  // namespace ros2::ctl
