#include "demo_workload.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "common/config.h"
#include "common/uuid.h"
#include "format.h"
#include "ros2/client.h"

namespace ros2::ctl {

namespace {

using client::EventQueue;
using client::FetchArgs;
using client::Object;
using client::UpdateArgs;
using ros2::ValueType;
using Clock = std::chrono::steady_clock;

// Deterministic bytes for (seed, n) so a read can be checked without keeping
// a second copy of what was written.
void Fill(std::span<std::byte> out, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < out.size(); i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    size_t n = std::min<size_t>(8, out.size() - i);
    std::memcpy(out.data() + i, &x, n);
  }
}

struct Phase {
  std::string name;
  uint64_t ops = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  double MiBps() const { return seconds > 0 ? static_cast<double>(bytes) / (1 << 20) / seconds : 0; }
};

// Runs `count` operations with up to `depth` in flight on `eq`; submit(i)
// starts operation i with user_data i.
Status RunBatch(EventQueue& eq, uint32_t count, uint32_t depth, const std::function<Status(uint32_t)>& submit) {
  std::vector<client::Event> events(depth);
  uint32_t next = 0, done = 0;
  while (done < count) {
    while (next < count && eq.in_flight() < depth) ROS2_RETURN_IF_ERROR(submit(next++));
    ROS2_ASSIGN_OR_RETURN(size_t n, eq.Wait(events, 1, std::chrono::seconds(60)));
    for (size_t i = 0; i < n; ++i) {
      if (!events[i].result.status.ok()) return events[i].result.status;
      ++done;
    }
  }
  return Status::Ok();
}

class DemoRun {
 public:
  DemoRun(const DemoOptions& o, client::Client& c, client::Container& cont) : o_(o), client_(c), cont_(cont) {}

  Status RunClass(ObjectClass oc, uint64_t object_lo) {
    std::string cls(ObjectClassName(oc));
    ROS2_ASSIGN_OR_RETURN(Object obj, cont_.OpenObject(client::Container::MakeObjectId(oc, 0, object_lo)));
    ROS2_ASSIGN_OR_RETURN(auto eq, client_.CreateEventQueue());
    uint64_t seed_base = object_lo * 1000003 + static_cast<uint64_t>(oc);

    // Single values, blocking.
    {
      Phase w{cls + " single put"}, r{cls + " single get"};
      std::vector<std::byte> value(200);
      auto t0 = Clock::now();
      for (uint32_t i = 0; i < o_.single_values; ++i) {
        Fill(value, seed_base + i);
        ROS2_RETURN_IF_ERROR(obj.Put(fmt::format("single-{}", i), "v", value));
        ++w.ops;
        w.bytes += value.size();
      }
      w.seconds = Seconds(t0);
      t0 = Clock::now();
      std::vector<std::byte> expect(value.size());
      for (uint32_t i = 0; i < o_.single_values; ++i) {
        ROS2_ASSIGN_OR_RETURN(auto got, obj.Get(fmt::format("single-{}", i), "v"));
        Fill(expect, seed_base + i);
        if (got != expect) {
          return Status::Corruption(
              fmt::format("demo: {} single value {} differs from what was written ({} bytes "
                          "read, {} written)",
                          cls, i, got.size(), expect.size()));
        }
        ++r.ops;
        r.bytes += got.size();
        verified_ += got.size();
      }
      r.seconds = Seconds(t0);
      phases_.push_back(w);
      phases_.push_back(r);
    }
    ROS2_RETURN_IF_ERROR(ArrayPhase(obj, *eq, cls, "4KiB", 4096, o_.small_ios, seed_base + 100000));
    ROS2_RETURN_IF_ERROR(ArrayPhase(obj, *eq, cls, "1MiB", 1 << 20, o_.mib, seed_base + 200000));
    return Status::Ok();
  }

  const std::vector<Phase>& phases() const { return phases_; }
  uint64_t verified() const { return verified_; }

 private:
  static double Seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

  // `count` extents of `size` bytes, 16 per dkey, written then read back asynchronously.
  Status ArrayPhase(const Object& obj, EventQueue& eq, const std::string& cls, const std::string& label, size_t size,
                    uint32_t count, uint64_t seed) {
    if (count == 0) return Status::Ok();
    std::vector<std::byte> data(size * count);
    for (uint32_t i = 0; i < count; ++i) Fill(std::span(data).subspan(i * size, size), seed + i);
    auto dkey = [&](uint32_t i) { return fmt::format("{}-{}", label, i / 16); };
    Phase w{fmt::format("{} {} update", cls, label)}, r{fmt::format("{} {} fetch", cls, label)};
    auto t0 = Clock::now();
    ROS2_RETURN_IF_ERROR(RunBatch(eq, count, o_.queue_depth, [&](uint32_t i) {
      UpdateArgs a;
      a.dkey = dkey(i);
      a.akey = "data";
      a.kind = ValueType::kArray;
      a.index = (i % 16) * size;
      a.data = std::span<const std::byte>(data).subspan(i * size, size);
      return obj.SubmitUpdate(eq, a, i);
    }));
    w.seconds = Seconds(t0);
    w.ops = count;
    w.bytes = data.size();

    std::vector<std::byte> back(data.size());
    t0 = Clock::now();
    ROS2_RETURN_IF_ERROR(RunBatch(eq, count, o_.queue_depth, [&](uint32_t i) {
      FetchArgs a;
      a.dkey = dkey(i);
      a.akey = "data";
      a.kind = ValueType::kArray;
      a.index = (i % 16) * size;
      a.count = size;
      a.buffer = std::span(back).subspan(i * size, size);
      return obj.SubmitFetch(eq, a, i);
    }));
    r.seconds = Seconds(t0);
    r.ops = count;
    r.bytes = back.size();
    for (uint32_t i = 0; i < count; ++i) {
      if (std::memcmp(back.data() + i * size, data.data() + i * size, size) != 0) {
        return Status::Corruption(
            fmt::format("demo: {} {} extent {} (dkey '{}') differs from what was written", cls, label, i, dkey(i)));
      }
    }
    verified_ += back.size();
    phases_.push_back(w);
    phases_.push_back(r);
    return Status::Ok();
  }

  const DemoOptions& o_;
  client::Client& client_;
  client::Container& cont_;
  std::vector<Phase> phases_;
  uint64_t verified_ = 0;
};

// The client's network devices: --net-devices, else the "net_devices" of
// the cluster's cluster.json (the device inside a host of `cluster up
// --hosts`), else lo.
std::string DemoNetDevices(const CtlContext& ctx, const DemoOptions& o) {
  if (!o.net_devices.empty()) return o.net_devices;
  if (!ctx.options().data_dir.empty()) {
    std::ifstream in(std::filesystem::path(ctx.options().data_dir) / kClusterFileName);
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_object() && j.contains("net_devices") && j["net_devices"].is_string()) {
      return j["net_devices"].get<std::string>();
    }
  }
  return "lo";
}

// Which transport this thread's connection to each target runs over, as UCX
// chose it, with the engine's host name.
nlohmann::json DescribeConnections(const client::Pool& pool, std::string* human) {
  nlohmann::json out = nlohmann::json::array();
  auto conns = pool.Connections();
  if (!conns.ok()) return out;
  for (const auto& c : *conns) {
    out.push_back({{"target", c.target},
                   {"engine", c.engine_uuid},
                   {"host", c.engine_address},
                   {"connected", c.connected},
                   {"transport", c.transport},
                   {"lanes", c.lanes},
                   {"same_host", c.same_host}});
    if (c.connected) {
      *human += fmt::format("  target {} on {}: {} ({})\n", c.target, c.engine_address, c.transport,
                            c.same_host ? "same host" : "another host");
    }
  }
  return out;
}

}  // namespace

Result<CommandOutput> RunDemo(CtlContext& ctx, const DemoOptions& o) {
  ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
  ROS2_ASSIGN_OR_RETURN(std::string control, ctx.ControlAddress());
  ROS2_ASSIGN_OR_RETURN(auto creds, ctx.TenantCredentials());

  bool created_pool = false, created_cont = false;
  auto pool_info = mgmt->QueryPool(o.pool);
  if (!pool_info.ok() && pool_info.status().IsNotFound()) {
    uint64_t size = 0;
    if (o.pool_size.empty()) {
      // Default: every byte the targets have, at most 1 GiB.
      ROS2_ASSIGN_OR_RETURN(auto status, mgmt->GetEngineStatus());
      for (const auto& t : status.targets()) size += t.state() == rpc::TARGET_UP ? t.capacity_bytes() : 0;
      size = std::min<uint64_t>(size, uint64_t{1} << 30);
      if (size == 0) return Status::NoSpace("demo: the cluster reports no target capacity for a pool");
    } else {
      auto parsed = ParseSize(o.pool_size);
      if (!parsed.ok() || *parsed == 0) {
        return Status::InvalidArgument(fmt::format("demo: bad --pool-size '{}'", o.pool_size));
      }
      size = *parsed;
    }
    pool_info = mgmt->CreatePool(o.pool, size, 0);
    created_pool = true;
  }
  if (!pool_info.ok()) return pool_info.status().WithContext("demo: pool " + o.pool);
  auto cont_info = mgmt->QueryContainer(o.pool, o.container);
  if (!cont_info.ok() && cont_info.status().IsNotFound()) {
    cont_info = mgmt->CreateContainer(o.pool, o.container, {});
    created_cont = true;
  }
  if (!cont_info.ok()) return cont_info.status().WithContext("demo: container " + o.container);

  client::ClientOptions co;
  co.control = control;
  co.tenant = creds.tenant;
  co.secret = creds.secret;
  co.transport = o.transport;
  co.net_devices = DemoNetDevices(ctx, o);
  ROS2_ASSIGN_OR_RETURN(auto c, client::Client::Connect(co));
  ROS2_ASSIGN_OR_RETURN(auto pool, c->ConnectPool(o.pool));
  ROS2_ASSIGN_OR_RETURN(auto cont, pool->OpenContainer(o.container));

  // New objects on every run: the low bits come from a fresh UUID.
  uint64_t lo = 0;
  auto id = Uuid::Generate().bytes();
  std::memcpy(&lo, id.data(), sizeof(lo));
  DemoRun run(o, *c, *cont);
  ROS2_RETURN_IF_ERROR(run.RunClass(ObjectClass::kS1, lo));
  ROS2_RETURN_IF_ERROR(run.RunClass(ObjectClass::kSX, lo + 1));

  std::vector<std::vector<std::string>> rows;
  nlohmann::json phases = nlohmann::json::array();
  uint64_t ops = 0;
  for (const auto& p : run.phases()) {
    rows.push_back({p.name, std::to_string(p.ops), FormatSize(p.bytes), fmt::format("{:.3f}", p.seconds),
                    fmt::format("{:.1f}", p.MiBps())});
    phases.push_back(
        {{"phase", p.name}, {"ops", p.ops}, {"bytes", p.bytes}, {"seconds", p.seconds}, {"mib_per_s", p.MiBps()}});
    ops += p.ops;
  }
  std::string connections_text;
  nlohmann::json connections = DescribeConnections(*pool, &connections_text);
  std::string human = fmt::format(
      "Demo on pool {}{} / container {}{} over {} (pool map: {} targets)\n{}"
      "Connections (the transport UCX chose):\n{}"
      "OK: {} operations, {} read back and verified byte-exact\n",
      o.pool, created_pool ? " (created)" : "", o.container, created_cont ? " (created)" : "", c->DescribeTransport(),
      pool->summary().target_count, Table({"PHASE", "OPS", "BYTES", "SECONDS", "MiB/s"}, rows), connections_text, ops,
      FormatSize(run.verified()));
  return CommandOutput{human,
                       {{"pool", o.pool},
                        {"container", o.container},
                        {"transport", c->DescribeTransport()},
                        {"phases", phases},
                        {"connections", connections},
                        {"operations", ops},
                        {"verified_bytes", run.verified()},
                        {"ok", true}}};
}

}  // namespace ros2::ctl
