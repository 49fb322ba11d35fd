// The metrics endpoints end to end: a single-node cluster with an agent
// (`ros2ctl cluster up --agent`, which turns both endpoints on at 127.0.0.1:0),
// a paced write workload through the agent, and what reads the endpoints: a
// real Prometheus server (Debian's) scraping both every second and asked
// through its HTTP API, promtool, and `ros2ctl top` (--json, and in tmux).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcntl.h>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "client/offload/host_session.h"
#include "metrics/scrape.h"
#include "testing/background_process.h"
#include "testing/free_port.h"
#include "testing/pattern.h"
#include "testing/status_assert.h"
#include "testing/test_cluster.h"

namespace ros2 {
namespace {

using agent::HostOptions;
using agent::HostSession;
using testing::BackgroundProcess;
using testing::TestCluster;

constexpr const char* kPrometheus = "/usr/bin/prometheus";
constexpr const char* kPromtool = "/usr/bin/promtool";
constexpr const char* kTmux = "/usr/bin/tmux";

// The value after `key=` on the first line of `text` that has it ("" when none).
std::string ValueAfter(const std::string& text, const std::string& key) {
  const size_t at = text.find(key + "=");
  if (at == std::string::npos) return {};
  const size_t start = at + key.size() + 1;
  return text.substr(start, text.find_first_of(" \n", start) - start);
}

// A loopback port free right now (testing/free_port.h); -1 when none could be had.
int FreePort() {
  auto port = ros2::testing::FreeLoopbackPort();
  return port.ok() ? *port : -1;
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Writes `count` blocks of `block` bytes through the agent, one every `period`;
// returns the seconds it took. `stop` ends it early.
struct Workload {
  uint64_t block = 64 * 1024;
  uint64_t count = 0;
  std::chrono::microseconds period{10'000};
};

class MetricsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string error;
    cluster_ = TestCluster::Start("auto", 2, &error, "ram", "64MiB", {"--agent"}).release();
    ASSERT_NE(cluster_, nullptr) << error;
    for (std::vector<std::string> args :
         {std::vector<std::string>{"pool", "create", "p", "--size", "512MiB"}, {"cont", "create", "p", "c"}}) {
      auto r = cluster_->Ctl(args);
      ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    }
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  void SetUp() override { ASSERT_NE(cluster_, nullptr); }

  static std::string EngineEndpoint() {
    return ValueAfter(testing::ReadWholeFile(cluster_->dir() + "/engine.ready"), "metrics");
  }
  static std::string AgentEndpoint() {
    return ValueAfter(testing::ReadWholeFile(cluster_->dir() + "/agent.log"), "metrics");
  }

  // Runs `w` through a new host session; returns the seconds it took.
  static double RunWorkload(const Workload& w, const std::string& file) {
    HostOptions o;
    o.socket = cluster_->dir() + "/agent.sock";
    o.arena_size = uint64_t{16} << 20;
    o.ring_entries = 64;
    o.timeout = std::chrono::seconds(30);
    auto s = HostSession::Connect(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return 0;
    auto m = (*s)->Mount("p", "c");
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) return 0;
    auto f = (*s)->Open(m->index, m->root, file, O_CREAT | O_RDWR, 0600);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    if (!f.ok()) return 0;
    const std::vector<std::byte> data = testing::Pattern(w.block, 7);
    const auto start = std::chrono::steady_clock::now();
    auto next = start;
    for (uint64_t i = 0; i < w.count; ++i) {
      std::this_thread::sleep_until(next);
      next += w.period;
      auto n = (*s)->Write(m->index, *f, i * w.block, data);
      EXPECT_TRUE(n.ok() && *n == w.block) << (n.ok() ? std::to_string(*n) : n.status().ToString());
      if (!n.ok()) break;
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  static inline TestCluster* cluster_ = nullptr;
};

// A Prometheus server of its own (temp dir, loopback, a free port) scraping
// `targets` every second.
class PrometheusServer {
 public:
  static std::unique_ptr<PrometheusServer> Start(const std::string& dir, const std::vector<std::string>& targets,
                                                 std::string* error) {
    auto p = std::unique_ptr<PrometheusServer>(new PrometheusServer());
    std::string list;
    for (const auto& t : targets) list += (list.empty() ? "'" : ", '") + t + "'";
    std::ofstream(dir + "/prometheus.yml") << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                                           << "scrape_configs:\n  - job_name: ros2\n    static_configs:\n"
                                           << "      - targets: [" << list << "]\n";
    for (int attempt = 0; attempt < 3; ++attempt) {
      p->address_ = fmt::format("127.0.0.1:{}", FreePort());
      auto proc = BackgroundProcess::Start(
          {kPrometheus, "--config.file=" + dir + "/prometheus.yml", "--storage.tsdb.path=" + dir + "/data",
           "--web.listen-address=" + p->address_, "--log.level=warn"},
          dir + "/prometheus.log");
      if (!proc.ok()) {
        *error = proc.status().ToString();
        return nullptr;
      }
      p->process_ = std::move(*proc);
      for (int i = 0; i < 300 && p->process_->Running(); ++i) {
        if (metrics::HttpGet(p->address_, "/-/ready").ok()) return p;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      *error = "prometheus did not get ready: " + p->process_->Log();
      p->process_->Stop();  // a port taken meanwhile: try another
    }
    return nullptr;
  }

  // The scalar value of `promql` at unix time `at` (NaN when the answer is empty).
  Result<double> Query(const std::string& promql, double at) const {
    ROS2_ASSIGN_OR_RETURN(std::string body, metrics::HttpGet(address_, fmt::format("/api/v1/query?query={}&time={:.3f}",
                                                                                   UrlEncode(promql), at)));
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded() || j.value("status", "") != "success") return Status::IOError("prometheus: " + body);
    const auto& result = j["data"]["result"];
    if (result.empty()) return std::nan("");
    return std::stod(result[0]["value"][1].get<std::string>());
  }

  // Waits until every target was scraped successfully.
  bool WaitUp(size_t targets) const {
    for (int i = 0; i < 200; ++i) {
      auto up = Query("sum(up)", UnixNow());
      if (up.ok() && *up == static_cast<double>(targets)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  std::string Log() const { return process_->Log(); }

 private:
  std::string address_;
  std::unique_ptr<BackgroundProcess> process_;
};

TEST_F(MetricsTest, BothEndpointsAreAnnouncedAndServeTheirFamilies) {
  const std::string engine = EngineEndpoint(), agent = AgentEndpoint();
  ASSERT_FALSE(engine.empty()) << testing::ReadWholeFile(cluster_->dir() + "/engine.ready");
  ASSERT_FALSE(agent.empty()) << testing::ReadWholeFile(cluster_->dir() + "/agent.log");
  EXPECT_EQ(engine.rfind("127.0.0.1:", 0), 0u);
  EXPECT_NE(engine, "127.0.0.1:0");
  auto e = metrics::HttpGet(engine, "/metrics");
  ROS2_ASSERT_OK(e);
  EXPECT_NE(e->find("ros2_engine_op_latency_seconds_bucket"), std::string::npos);
  auto a = metrics::HttpGet(agent, "/metrics");
  ROS2_ASSERT_OK(a);
  EXPECT_NE(a->find("ros2_agent_sessions"), std::string::npos);
}

TEST_F(MetricsTest, PromtoolAcceptsEveryEndpoint) {
  RunWorkload(Workload{4096, 50, std::chrono::microseconds(0)}, "promtool");
  for (const std::string& endpoint : {EngineEndpoint(), AgentEndpoint()}) {
    auto body = metrics::HttpGet(endpoint, "/metrics");
    ROS2_ASSERT_OK(body);
    const std::string file = cluster_->scratch() + "/scrape.txt";
    std::ofstream(file) << *body;
    auto r = testing::RunCommand({"/bin/sh", "-c", fmt::format("{} check metrics < {}", kPromtool, file)},
                                 cluster_->scratch());
    EXPECT_EQ(r.exit_code, 0) << endpoint << ":\n" << r.out << r.err;
    EXPECT_EQ(r.out + r.err, "") << endpoint;
  }
}

// Prometheus scrapes both endpoints every second during a paced workload; its
// HTTP API must give the bytes the workload wrote exactly (counters read after
// the workload ended), and the ops rate within the error of 1 s scrapes over a
// 3 s window.
TEST_F(MetricsTest, PrometheusSeesTheWorkload) {
  std::string error;
  testing::TempDir dir("ros2-prometheus");
  auto prom = PrometheusServer::Start(dir.path(), {EngineEndpoint(), AgentEndpoint()}, &error);
  ASSERT_NE(prom, nullptr) << error;
  ASSERT_TRUE(prom->WaitUp(2)) << prom->Log();
  const std::string agent_bytes = "sum(ros2_agent_io_bytes_total{kind=\"write\"})";
  const std::string engine_bytes = "sum(ros2_engine_io_bytes_total{kind=\"update\"})";
  const double before = UnixNow();
  auto agent_before = prom->Query(agent_bytes, before);
  auto engine_before = prom->Query(engine_bytes, before);
  ROS2_ASSERT_OK(agent_before);
  ROS2_ASSERT_OK(engine_before);

  const Workload w{64 * 1024, 700, std::chrono::microseconds(10'000)};  // 100 writes/s for 7 s
  const double start = UnixNow();
  const double seconds = RunWorkload(w, "paced");
  ASSERT_GT(seconds, 0);
  const double written = static_cast<double>(w.block * w.count);
  const double rate = static_cast<double>(w.count) / seconds;
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // two more scrapes
  const double after = UnixNow();

  auto agent_after = prom->Query(agent_bytes, after);
  auto engine_after = prom->Query(engine_bytes, after);
  ROS2_ASSERT_OK(agent_after);
  ROS2_ASSERT_OK(engine_after);
  EXPECT_EQ(*agent_after - *agent_before, written);
  // The engine also stores the file's metadata (small updates).
  EXPECT_GE(*engine_after - *engine_before, written);
  EXPECT_LE(*engine_after - *engine_before, written + (1 << 20));

  // The rate over [start + 2 s, start + 5 s], inside the workload.
  const double mid = start + 5;
  auto agent_rate = prom->Query("sum(rate(ros2_agent_ops_total{kind=\"write\"}[3s]))", mid);
  auto engine_rate = prom->Query("sum(rate(ros2_engine_ops_total{kind=\"update\"}[3s]))", mid);
  ROS2_ASSERT_OK(agent_rate);
  ROS2_ASSERT_OK(engine_rate);
  EXPECT_NEAR(*agent_rate, rate, 0.35 * rate) << "measured " << rate << " writes/s over " << seconds << " s";
  EXPECT_GE(*engine_rate, 0.65 * rate) << "every write is at least one update";
  // Latency quantiles come out of the histogram.
  auto p99 = prom->Query(
      "histogram_quantile(0.99, sum by (le) (rate(ros2_engine_op_latency_seconds_bucket{kind=\"update\"}[3s])))", mid);
  ROS2_ASSERT_OK(p99);
  EXPECT_GT(*p99, 0);
  EXPECT_LT(*p99, 5);
}

TEST_F(MetricsTest, TopJsonShowsTheWorkloadsIops) {
  std::atomic<bool> done{false};
  std::thread load([&] {
    RunWorkload(Workload{16 * 1024, 600, std::chrono::microseconds(5'000)}, "top-json");
    done = true;
  });
  auto r = cluster_->Ctl({"--json", "top", "--count", "2"});
  load.join();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int objects = 0;
  double best = 0;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    ++objects;
    ASSERT_EQ(j["engines"].size(), 1u) << line;
    EXPECT_EQ(j["targets"].size(), 2u) << line;
    best = std::max(best, j["engines"][0]["iops"].get<double>());
    EXPECT_GT(j["interval_seconds"].get<double>(), 0.5);
  }
  EXPECT_EQ(objects, 2) << r.out;
  EXPECT_GT(best, 50) << r.out;  // the workload writes 200 blocks/s
}

// `ros2ctl top` on a terminal (tmux): the screen shows the engine's total line
// with the workload's IOPS.
TEST_F(MetricsTest, TopInATerminalShowsTheWorkload) {
  testing::TempDir dir("ros2-top-tmux");
  const std::string socket = dir.path() + "/tmux.sock";
  auto tmux = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kTmux, "-S", socket};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunCommand(argv, dir.path());
  };
  std::atomic<bool> done{false};
  std::thread load([&] {
    RunWorkload(Workload{16 * 1024, 1000, std::chrono::microseconds(5'000)}, "top-tmux");
    done = true;
  });
  auto started = tmux({"new-session", "-d", "-x", "150", "-y", "30", "-s", "top",
                       fmt::format("{} --data-dir {} top", ROS2CTL_PATH, cluster_->dir())});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  std::string screen;
  double iops = 0;
  for (int i = 0; i < 40 && iops <= 0 && !done; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    screen = tmux({"capture-pane", "-p", "-t", "top"}).out;
    std::istringstream lines(screen);
    std::string l;
    while (std::getline(lines, l)) {
      std::istringstream words(l);
      std::string engine, target;
      double v = 0;
      if (words >> engine >> target >> v && target == "all") iops = v;
    }
  }
  tmux({"kill-server"});
  load.join();
  EXPECT_NE(screen.find("IOPS"), std::string::npos) << screen;
  EXPECT_NE(screen.find("P99_us"), std::string::npos) << screen;
  EXPECT_GT(iops, 50) << screen;
}

TEST_F(MetricsTest, TopNamesAnUnreachableEndpointAndRefusesBadFlags) {
  const int port = FreePort();
  auto r = cluster_->Ctl({"top", "--endpoint", fmt::format("127.0.0.1:{}", port), "--count", "1"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find(fmt::format("127.0.0.1:{}", port)), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cannot connect"), std::string::npos) << r.err;
  // Each names the flag; --count 1 keeps a wrongly accepted line short.
  for (std::vector<std::string> bad : {std::vector<std::string>{"top", "--interval", "0", "--count", "1"},
                                       {"top", "--count", "-2"},
                                       {"top", "--cuont", "2", "--count", "1"}}) {
    auto b = cluster_->Ctl(bad);
    EXPECT_EQ(b.exit_code, 2) << bad[1] << ": " << b.out << b.err;
    EXPECT_NE(b.err.find(bad[1]), std::string::npos) << b.err;
  }
}

}  // namespace
}  // namespace ros2
