// ros2-demo: the quick start's main job. Opens a versioned object store (VOS)
// in a temporary directory, writes a short mixed workload (single values,
// 4 KiB and 1 MiB array extents) with many updates in flight, reads everything
// back, verifies it byte for byte, and reports what it measured. Exits non-zero
// on any error or mismatch.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/config.h"
#include "common/hlc.h"
#include "common/log.h"
#include "vos/aligned_buffer.h"
#include "vos/vos.h"

namespace {

using ros2::Epoch;
using ros2::ObjectId;
using ros2::Status;
using namespace ros2::vos;

constexpr size_t kMaxInFlight = 32;

// One value of the workload: where it goes and its bytes (4 KiB-aligned, so the
// store can write and read it without bounce copies).
struct Item {
  std::string kind;
  ObjectId oid;
  std::string dkey;
  std::string akey;
  ValueType type = ValueType::kSingle;
  uint64_t index = 0;
  AlignedBuffer data;
  size_t size = 0;
  Epoch epoch = 0;
};

std::vector<Item> MakeWorkload(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Item> items;
  auto fill = [&](Item& it, size_t size) {
    it.size = size;
    it.data = AlignedBuffer(std::max<size_t>(size, 1));
    for (size_t i = 0; i < size; ++i) it.data.data()[i] = static_cast<std::byte>(rng());
  };
  ObjectId kv = ObjectId::Make(ros2::ObjectType::kKeyValue, ros2::ObjectClass::kS1, 1, 1);
  ObjectId file = ObjectId::Make(ros2::ObjectType::kArray, ros2::ObjectClass::kS1, 1, 2);
  for (int i = 0; i < count; ++i) {
    Item& s = items.emplace_back();
    s.kind = "single value";
    s.oid = kv;
    s.dkey = fmt::format("dir{}", i % 8);
    s.akey = fmt::format("entry{}", i);
    fill(s, size_t{16} << (rng() % 13));  // 16 B .. 64 KiB
    Item& small = items.emplace_back();
    small.kind = "4 KiB extent";
    small.oid = file;
    small.dkey = "chunk-small";
    small.akey = "data";
    small.type = ValueType::kArray;
    small.index = uint64_t(i) * 4096;
    fill(small, 4096);
    Item& big = items.emplace_back();
    big.kind = "1 MiB extent";
    big.oid = file;
    big.dkey = fmt::format("chunk{}", i);
    big.akey = "data";
    big.type = ValueType::kArray;
    fill(big, size_t{1} << 20);
  }
  return items;
}

// Runs `submit(i, done)` for every item with up to kMaxInFlight in flight;
// returns the first failure.
Status RunAll(Vos* vos, size_t n, const std::function<void(size_t, std::function<void(Status)>)>& submit) {
  Status first;
  size_t next = 0;
  while (next < n || vos->in_flight() > 0) {
    while (next < n && vos->in_flight() < kMaxInFlight) {
      submit(next++, [&first](Status s) {
        if (!s.ok() && first.ok()) first = std::move(s);
      });
    }
    vos->Progress(/*wait=*/true);
  }
  return first;
}

double MiBps(uint64_t bytes, std::chrono::duration<double> d) {
  return d.count() > 0 ? static_cast<double>(bytes) / (1 << 20) / d.count() : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ros2-demo: write, read back and verify a mixed workload on a ROS2 versioned object store"};
  std::string dir;
  std::string cls = "nvme";
  int count = 32;
  app.add_option("--dir", dir, "directory for the store (default: a new temporary directory, removed at exit)");
  app.add_option("--class", cls, "storage class: nvme (data file, O_DIRECT, io_uring) or ram")
      ->check(CLI::IsMember({"nvme", "ram"}));
  app.add_option("--count", count, "values of each kind to write (single, 4 KiB extent, 1 MiB extent)")
      ->check(CLI::Range(1, 4096));
  CLI11_PARSE(app, argc, argv);
  (void)ros2::InitLogging("demo", "warn");

  bool made_dir = dir.empty();
  if (made_dir) {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/ros2-demo-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) {
      std::fprintf(stderr, "ros2-demo: cannot create a temporary directory under %s\n", tmpl.c_str());
      return 1;
    }
    dir = buf.data();
  }
  struct Cleanup {
    bool on;
    std::string path;
    ~Cleanup() {
      std::error_code ec;
      if (on) std::filesystem::remove_all(path, ec);
    }
  } cleanup{made_dir, dir};

  std::vector<Item> items = MakeWorkload(count, 42);
  uint64_t total_bytes = 0;
  for (const Item& it : items) total_bytes += it.size;

  VosOptions options;
  options.path = dir + "/vos";
  options.storage_class = *ParseStorageClass(cls);
  options.data_size = ros2::vos::AlignUp(total_bytes * 2 + (64 << 20), 1 << 20);
  auto opened = Vos::Open(options);
  if (!opened.ok()) {
    std::fprintf(stderr, "ros2-demo: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  Vos* vos = opened->get();
  ros2::HybridClock clock;
  bool ram = options.storage_class == StorageClass::kRam;
  std::printf("ros2-demo: %s store in %s (extent store of %s%s)\n", cls.c_str(), ram ? "memory" : options.path.c_str(),
              ros2::FormatSize(options.data_size).c_str(), ram ? "" : ", O_DIRECT data file");

  auto t0 = std::chrono::steady_clock::now();
  Status st = RunAll(vos, items.size(), [&](size_t i, std::function<void(Status)> done) {
    Item& it = items[i];
    it.epoch = clock.Now();
    UpdateOp op;
    op.oid = it.oid;
    op.dkey = it.dkey;
    op.akey = it.akey;
    op.epoch = it.epoch;
    op.type = it.type;
    op.index = it.index;
    op.data = {it.data.data(), it.size};
    vos->SubmitUpdate(op, std::move(done));
  });
  auto t1 = std::chrono::steady_clock::now();
  if (!st.ok()) {
    std::fprintf(stderr, "ros2-demo: update failed: %s\n", st.ToString().c_str());
    return 1;
  }

  std::vector<AlignedBuffer> back;
  for (const Item& it : items) back.emplace_back(std::max<size_t>(it.size, 1));
  size_t mismatches = 0;
  st = RunAll(vos, items.size(), [&](size_t i, std::function<void(Status)> done) {
    const Item& it = items[i];
    FetchOp op;
    op.oid = it.oid;
    op.dkey = it.dkey;
    op.akey = it.akey;
    op.type = it.type;
    op.index = it.index;
    op.count = it.type == ValueType::kArray ? it.size : 0;
    op.buffer = {back[i].data(), it.type == ValueType::kArray ? it.size : back[i].size()};
    vos->SubmitFetch(op, [&, i, done = std::move(done)](ros2::Result<FetchResult> r) {
      const Item& item = items[i];
      if (!r.ok()) return done(r.status());
      if (r->size != item.size || std::memcmp(back[i].data(), item.data.data(), item.size) != 0) {
        ++mismatches;
        std::fprintf(stderr, "ros2-demo: MISMATCH in %s dkey=%s akey=%s (%zu bytes, read %llu)\n", item.kind.c_str(),
                     item.dkey.c_str(), item.akey.c_str(), item.size, static_cast<unsigned long long>(r->size));
      }
      done(Status::Ok());
    });
  });
  auto t2 = std::chrono::steady_clock::now();
  if (!st.ok()) {
    std::fprintf(stderr, "ros2-demo: fetch failed: %s\n", st.ToString().c_str());
    return 1;
  }

  SpaceInfo space = vos->Space();
  std::chrono::duration<double> wt = t1 - t0, rt = t2 - t1;
  std::printf("wrote %zu values (%d single values, %d x 4 KiB extents, %d x 1 MiB extents), %s\n", items.size(), count,
              count, count, ros2::FormatSize(total_bytes).c_str());
  std::printf("  write: %.3f s, %.1f MiB/s (%s)\n", wt.count(), MiBps(total_bytes, wt),
              ram ? "ram class: kept in memory, not durable" : "durable: synced before acknowledgement");
  std::printf("  read:  %.3f s, %.1f MiB/s, checksums verified\n", rt.count(), MiBps(total_bytes, rt));
  std::printf("  space: %s of %s used in the extent store, %s of metadata\n", ros2::FormatSize(space.data_used).c_str(),
              ros2::FormatSize(space.data_total).c_str(), ros2::FormatSize(space.metadata_bytes).c_str());
  if (mismatches > 0) {
    std::printf("FAILED: %zu of %zu values did not read back byte-exact\n", mismatches, items.size());
    return 1;
  }
  std::printf("OK: all %zu values read back byte-exact\n", items.size());
  return 0;
}
