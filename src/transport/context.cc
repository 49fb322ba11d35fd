// Context: transport selection, the ucp_context and memory registration.
#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <ucp/api/ucp.h>
#include <ucs/debug/log_def.h>
#include <ucs/sys/string.h>

#include "common/log.h"
#include "transport/cma.h"
#include "transport/connection_auth.h"
#include "transport/ofi/fabric.h"
#include "transport/transport.h"
#include "transport/ucx_util.h"

namespace ros2::transport {

// ---- MemoryRegion -------------------------------------------------------------
MemoryRegion::~MemoryRegion() {
  if (memh_ != nullptr) ucp_mem_unmap(static_cast<ucp_context_h>(context_), static_cast<ucp_mem_h>(memh_));
}

bool MemoryRegion::Contains(const void* p, uint64_t n) const {
  const auto* b = static_cast<const std::byte*>(p);
  if (b < base_ || n > length_) return false;
  return static_cast<uint64_t>(b - base_) <= length_ - n;
}

// ---- Registration counts -------------------------------------------------------
// Registrations of application memory made and still held (registration_stats).
// Each counted region holds it, so a count never outlives what it counts.
struct Context::Counts {
  std::atomic<uint64_t> made{0};
  std::atomic<uint64_t> live{0};
};

namespace {

// Lists "tl/dev" resources of a context from ucp_context_print_info.
std::vector<std::string> ListResources(ucp_context_h ctx) {
  std::string text = CaptureToString([&](FILE* f) { ucp_context_print_info(ctx, f); });
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("resource") == std::string::npos) continue;
    size_t pos = line.find("-- ");
    if (pos == std::string::npos) continue;
    std::string res = line.substr(pos + 3);
    while (!res.empty() && (res.back() == ' ' || res.back() == '\r')) res.pop_back();
    out.push_back(res);
  }
  return out;
}

bool HasTl(const std::vector<std::string>& devices, std::initializer_list<std::string_view> tls) {
  for (const std::string& d : devices) {
    std::string_view tl = std::string_view(d).substr(0, d.find('/'));
    for (std::string_view want : tls) {
      if (tl == want || (tl.size() > want.size() && tl.substr(0, want.size()) == want && tl[want.size()] == '_')) {
        return true;
      }
    }
  }
  return false;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

// UCX prints its warnings and errors on stdout unless UCX_LOG_FILE names
// another file, and stdout is the program's own output: ros2-bench's JSON
// records, an application's. Those lines go through this process's log
// (stderr) instead, at their own level and marked "ucx:". A user who set
// UCX_LOG_FILE keeps UCX's own output.
ucs_log_func_rc_t UcxLogToOurs(const char* file, unsigned line, const char* /*function*/, ucs_log_level_t level,
                               const ucs_log_component_config_t* comp_conf, const char* format, va_list ap) {
  if (level > comp_conf->log_level && level != UCS_LOG_LEVEL_PRINT) return UCS_LOG_FUNC_RC_CONTINUE;
  char text[512];
  va_list copy;
  va_copy(copy, ap);
  std::vsnprintf(text, sizeof text, format, copy);
  va_end(copy);
  const char* base = std::strrchr(file, '/');
  base = base == nullptr ? file : base + 1;
  switch (level) {
    case UCS_LOG_LEVEL_FATAL:
    case UCS_LOG_LEVEL_ERROR: ROS2_LOG_ERROR("ucx: {} ({}:{})", text, base, line); break;
    case UCS_LOG_LEVEL_WARN: ROS2_LOG_WARN("ucx: {} ({}:{})", text, base, line); break;
    case UCS_LOG_LEVEL_DIAG:
    case UCS_LOG_LEVEL_INFO:
    case UCS_LOG_LEVEL_PRINT: ROS2_LOG_INFO("ucx: {} ({}:{})", text, base, line); break;
    default: ROS2_LOG_DEBUG("ucx: {} ({}:{})", text, base, line); break;
  }
  return UCS_LOG_FUNC_RC_STOP;
}

void RouteUcxLogThroughOurs() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* file = std::getenv("UCX_LOG_FILE");
    if (file == nullptr || *file == '\0') ucs_log_push_handler(UcxLogToOurs);
  });
}

struct UcpContextDeleter {
  void operator()(ucp_context* c) const { ucp_cleanup(c); }
};
using UcpContextPtr = std::unique_ptr<ucp_context, UcpContextDeleter>;

// Creates a ucp_context with the given UCX_TLS and the options' device settings.
Result<UcpContextPtr> MakeUcpContext(const TransportOptions& o, const std::string& tls, bool rma) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return UcsError("transport: ucp_config_read", st);
  auto release = [&] { ucp_config_release(config); };
  auto modify = [&](const char* key, const std::string& value) -> Status {
    ucs_status_t s = ucp_config_modify(config, key, value.c_str());
    if (s != UCS_OK) return UcsError(fmt::format("transport: ucp_config_modify {}={}", key, value), s);
    return Status::Ok();
  };
  Status ms = modify("TLS", tls);
  if (ms.ok() && !o.net_devices.empty()) ms = modify("NET_DEVICES", o.net_devices);
  if (ms.ok()) ms = modify("KEEPALIVE_INTERVAL", fmt::format("{}ms", o.keepalive_interval.count()));
  if (ms.ok() && !o.remote_rma_target && ucp_config_modify(config, "RMA_SW_TARGET", "n") != UCS_OK) {
    ms = Status::NotSupported(
        "transport: this UCX has no RMA_SW_TARGET setting, so any peer could write and read this process's memory; "
        "install the patched libucp (scripts/install-ucx-patch.sh)");
  }
  // UCX's tcp put (uct_tcp_ep_handle_put_req) writes a peer's data to the
  // address its put request names, registered or not. A process that is no
  // RMA target turns it off: its address then offers no put, so no peer's ucp
  // chooses put rendezvous into it, and the patched libuct closes a
  // connection that sends a put request with data anyway (docs/security.md). A
  // transport-level key: ucp keeps it for the tcp interface, and warns of it
  // when a worker opens no tcp interface, hence only with tcp in the list.
  if (ms.ok() && !o.remote_rma_target && tls.find("tcp") != std::string::npos) ms = modify("PUT_ENABLE", "n");
  if (!ms.ok()) {
    release();
    return ms;
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  // RMA only when asked (Context::rma_enabled): the feature also installs
  // UCX's software put/get handlers, which serve any peer any address.
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP | (rma ? UCP_FEATURE_RMA : 0);
  // Each worker has one thread, but the workers of one context run on
  // different threads (engine targets, client threads) and register memory
  // concurrently: the context's own state (UCX's registration cache, memory
  // domains) needs UCX's locking.
  params.mt_workers_shared = 1;
  params.name = "ros2";
  ucp_context_h ctx = nullptr;
  st = ucp_init(&params, config, &ctx);
  release();
  if (st != UCS_OK) return UcsError(fmt::format("transport: ucp_init with UCX_TLS={}", tls), st);
  return UcpContextPtr(ctx);
}

// A UCX memory-units setting ("256k", "1m", "inf") of the environment, or
// nullopt when unset; InvalidArgument naming the variable when UCX could not
// read it either.
Result<std::optional<size_t>> EnvMemunits(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::optional<size_t>();
  size_t n = 0;
  if (ucs_str_to_memunits(v, &n) != UCS_OK) {
    return Status::InvalidArgument(fmt::format("transport: {}={} is not a size (e.g. 256k, 1m)", name, v));
  }
  return std::optional<size_t>(n);
}

// The tcp segment rule (docs/transport.md, "TCP segment sizes"). UCX 1.13
// sets these only through the environment (its ucp_config_modify rejects
// transport-level keys such as TCP_TX_SEG_SIZE). A UCX tcp receiver refuses
// an active message longer than its UCX_TCP_RX_SEG_SIZE and closes that
// connection (scripts/install-ucx-patch.sh), and the longest message a sender
// builds is its UCX_TCP_TX_SEG_SIZE (eager, short) or its own
// UCX_TCP_RX_SEG_SIZE (zero-copy). So every ROS2 process receives exactly
// kTcpSegmentSize and sends at most that: the user's larger TX or other RX
// setting is replaced, with a warning naming it.
Status ApplyTcpSegmentRule(uint64_t tcp_seg_size) {
  if (tcp_seg_size > kTcpSegmentSize) {
    return Status::InvalidArgument(
        fmt::format("transport: tcp_seg_size {} above {}, the tcp segment every ROS2 process receives", tcp_seg_size,
                    kTcpSegmentSize));
  }
  const std::string limit = std::to_string(kTcpSegmentSize);
  ROS2_ASSIGN_OR_RETURN(auto tx, EnvMemunits("UCX_TCP_TX_SEG_SIZE"));
  ROS2_ASSIGN_OR_RETURN(auto rx, EnvMemunits("UCX_TCP_RX_SEG_SIZE"));
  if (tx.has_value() && *tx != UCS_MEMUNITS_AUTO && *tx > kTcpSegmentSize) {
    ROS2_LOG_WARN(
        "transport: UCX_TCP_TX_SEG_SIZE={} is above the {} bytes a ROS2 peer receives over tcp; sending {}-byte "
        "segments",
        std::getenv("UCX_TCP_TX_SEG_SIZE"), kTcpSegmentSize, kTcpSegmentSize);
    setenv("UCX_TCP_TX_SEG_SIZE", limit.c_str(), /*overwrite=*/1);
  } else if (!tx.has_value() && tcp_seg_size != 0) {
    setenv("UCX_TCP_TX_SEG_SIZE", std::to_string(tcp_seg_size).c_str(), /*overwrite=*/0);
  }
  if (rx.has_value() && *rx != kTcpSegmentSize) {
    ROS2_LOG_WARN(
        "transport: UCX_TCP_RX_SEG_SIZE={} replaced by {}: every ROS2 process receives exactly that over tcp (a "
        "larger value would make this process send zero-copy messages its peers refuse)",
        std::getenv("UCX_TCP_RX_SEG_SIZE"), kTcpSegmentSize);
  }
  setenv("UCX_TCP_RX_SEG_SIZE", limit.c_str(), /*overwrite=*/1);
  return Status::Ok();
}

constexpr const char* kTlsTcp = "tcp,self";
constexpr const char* kTlsShm = "posix,sysv,cma,self";
constexpr const char* kTlsRdma = "rc,dc,self";
constexpr const char* kTlsAutoNoRdma = "posix,sysv,cma,tcp,self";
constexpr const char* kTlsAutoRdma = "rc,dc,posix,sysv,cma,self";

}  // namespace

Result<std::unique_ptr<Context>> Context::Create(const TransportOptions& options) {
  if (options.provider == Provider::kOfi) {
    std::unique_ptr<Context> ctx(new Context());
    ctx->counts_ = std::make_shared<Counts>();
    ROS2_RETURN_IF_ERROR(ctx->InitOfi(options));  // ofi/fabric.cc
    return ctx;
  }
  if (options.inline_limit > (1u << 20)) {
    return Status::InvalidArgument(fmt::format("transport: inline_limit {} above 1 MiB", options.inline_limit));
  }
  if (options.bulk_chunk_size == 0 || options.bulk_chunks_in_flight == 0) {
    return Status::InvalidArgument("transport: bulk_chunk_size and bulk_chunks_in_flight must be positive");
  }
  if (options.max_outstanding_requests == 0 || options.max_outstanding_requests > (1u << 24)) {
    return Status::InvalidArgument("transport: max_outstanding_requests must be in 1 .. 16M");
  }
  RouteUcxLogThroughOurs();
  ROS2_RETURN_IF_ERROR(ApplyTcpSegmentRule(options.tcp_seg_size));
  ROS2_RETURN_IF_ERROR(ReadSameHostIntegrity());
  // A whole batch (TransportOptions::batch_limit) in one shared-memory segment:
  // above the segment size UCX splits an eager message into fragments and
  // copies them once more on the receiver (a 33 KB active message moved at
  // 8 GB/s with 8 KB segments, 75 GB/s with 40 KB ones, ucx_perftest here).
  if (options.batch_limit > (1u << 20)) {
    return Status::InvalidArgument(fmt::format("transport: batch_limit {} above 1 MiB", options.batch_limit));
  }
  if (options.batch_limit > 0) {
    std::string v = std::to_string(std::max<uint64_t>(8256, options.batch_limit + 512));
    setenv("UCX_POSIX_SEG_SIZE", v.c_str(), /*overwrite=*/0);
    setenv("UCX_SYSV_SEG_SIZE", v.c_str(), /*overwrite=*/0);
  }
  // Error handling on the shared-memory transports, so endpoints can use error
  // mode PEER without UCX 1.13 dropping posix/sysv for tcp (which it silently does
  // otherwise: ucp_ep_print_info shows tcp lanes). It drops
  // UCX's cma transport (which has no peer-failure support); same-host bulk uses
  // our own cross-memory attach instead (cma.h). Same environment route as above.
  setenv("UCX_POSIX_ERROR_HANDLING", "y", /*overwrite=*/0);
  setenv("UCX_SYSV_ERROR_HANDLING", "y", /*overwrite=*/0);

  std::unique_ptr<Context> ctx(new Context());
  ctx->options_ = options;
  ctx->counts_ = std::make_shared<Counts>();

  std::string tls;
  TransportKind resolved = options.kind;
  UcpContextPtr ucp;
  switch (options.kind) {
    case TransportKind::kTcp: tls = kTlsTcp; break;
    case TransportKind::kShm: tls = kTlsShm; break;
    case TransportKind::kRdma: tls = kTlsRdma; break;
    case TransportKind::kAuto: {
      // Probe for verbs devices first; fall back to shared memory + tcp. The
      // probe enables "all" rather than "rc,dc": asking UCX for transports that
      // do not exist makes it print a warning on every start of every process.
      auto probe = MakeUcpContext(options, "all", /*rma=*/false);
      if (probe.ok() && HasTl(ListResources(probe->get()), {"rc", "dc"})) {
        tls = kTlsAutoRdma;
        resolved = TransportKind::kRdma;
      } else {
        tls = kTlsAutoNoRdma;
        resolved = TransportKind::kShm;
      }
      break;
    }
  }
  const bool rma = options.force_rma_bulk || options.kind == TransportKind::kRdma;
  auto made = MakeUcpContext(options, tls, rma);
  if (!made.ok() && options.kind != TransportKind::kRdma) return made.status();
  std::vector<std::string> devices = made.ok() ? ListResources(made->get()) : std::vector<std::string>{};

  auto missing = [&](std::string_view what) {
    std::vector<std::string> present;
    if (auto all = MakeUcpContext(options, "all", /*rma=*/false); all.ok()) present = ListResources(all->get());
    return Status::NotSupported(fmt::format("transport {}: no {} device (present: {})", TransportKindName(options.kind),
                                            what, present.empty() ? "none" : Join(present)));
  };
  if (options.kind == TransportKind::kRdma && !HasTl(devices, {"rc", "dc"})) {
    return missing("rc/dc verbs (rc_verbs, rc_mlx5, dc_mlx5)");
  }
  if (options.kind == TransportKind::kShm && !HasTl(devices, {"posix", "sysv", "cma"})) {
    return missing("shared-memory (posix, sysv, cma)");
  }
  if (options.kind == TransportKind::kTcp && !HasTl(devices, {"tcp"})) {
    return missing(fmt::format("tcp on net_devices '{}'", options.net_devices));
  }
  if (resolved == TransportKind::kShm && options.kind == TransportKind::kAuto &&
      !HasTl(devices, {"posix", "sysv", "cma"})) {
    resolved = TransportKind::kTcp;
  }
  ctx->context_ = made->release();
  ctx->ucx_tls_ = tls;
  ctx->devices_ = std::move(devices);
  ctx->resolved_kind_ = resolved;
  ctx->rma_ = rma;
  ctx->cma_ = std::make_unique<cma::Authority>(options.cma_tokens_per_process);
  ROS2_LOG_INFO("transport: {}", ctx->Describe());
  return ctx;
}

Context::~Context() {
  if (context_ != nullptr) ucp_cleanup(static_cast<ucp_context_h>(context_));
}

bool Context::cma_enabled() const {
  return options_.same_host_cma && !options_.force_rma_bulk && resolved_kind_ == TransportKind::kShm;
}

std::string Context::Describe() const {
  if (ofi_) return ofi_->Describe();
  return fmt::format("transport={} (asked {}) tls={} net_devices={} devices=[{}]", TransportKindName(resolved_kind_),
                     TransportKindName(options_.kind), ucx_tls_, options_.net_devices, Join(devices_));
}

Result<std::shared_ptr<const MemoryRegion>> Context::RegisterMemory(void* addr, uint64_t length) {
  if (addr == nullptr || length == 0) {
    return Status::InvalidArgument(fmt::format("transport: register {}+{}: empty range", addr, length));
  }
  ROS2_ASSIGN_OR_RETURN(auto region, MapMemory(addr, length, /*allocate=*/false));
  // Counted while held: the holder's shared_ptr aliases the region, and
  // dropping the last reference drops the count and then the registration.
  struct Held {
    Held(std::shared_ptr<const MemoryRegion> r, std::shared_ptr<Counts> c)
        : region(std::move(r)), counts(std::move(c)) {
      counts->made.fetch_add(1, std::memory_order_relaxed);
      counts->live.fetch_add(1, std::memory_order_relaxed);
    }
    ~Held() { counts->live.fetch_sub(1, std::memory_order_relaxed); }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    std::shared_ptr<const MemoryRegion> region;
    std::shared_ptr<Counts> counts;
  };
  auto held = std::make_shared<Held>(std::move(region), counts_);
  const MemoryRegion* raw = held->region.get();
  return std::shared_ptr<const MemoryRegion>(std::move(held), raw);
}

Result<std::shared_ptr<const MemoryRegion>> Context::AllocateMemory(uint64_t length) {
  if (length == 0) return Status::InvalidArgument("transport: allocate 0 bytes");
  return MapMemory(nullptr, length, /*allocate=*/true);
}

Result<std::shared_ptr<const MemoryRegion>> Context::MapMemory(void* addr, uint64_t length, bool allocate) {
  if (ofi_) return ofi_->MapMemory(addr, length, allocate);
  auto* ucp_ctx = static_cast<ucp_context_h>(context_);
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_PROT;
  if (allocate) {
    params.field_mask |= UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    params.flags = UCP_MEM_MAP_ALLOCATE;
  }
  params.address = addr;
  params.length = length;
  params.prot = UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_LOCAL_WRITE | UCP_MEM_MAP_PROT_REMOTE_READ |
                UCP_MEM_MAP_PROT_REMOTE_WRITE;
  ucp_mem_h memh = nullptr;
  ucs_status_t st = ucp_mem_map(ucp_ctx, &params, &memh);
  if (st != UCS_OK) return UcsError(fmt::format("transport: ucp_mem_map {}+{}", addr, length), st);
  std::shared_ptr<MemoryRegion> region(new MemoryRegion());
  region->context_ = ucp_ctx;
  region->memh_ = memh;
  region->base_ = static_cast<std::byte*>(addr);
  region->length_ = length;
  region->ucx_allocated_ = allocate;
  if (allocate) {
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    st = ucp_mem_query(memh, &attr);
    if (st != UCS_OK) return UcsError("transport: ucp_mem_query of allocated memory", st);
    region->base_ = static_cast<std::byte*>(attr.address);
    region->length_ = std::min<uint64_t>(attr.length, length);
  }
  void* rkey_buf = nullptr;
  size_t rkey_size = 0;
  st = ucp_rkey_pack(ucp_ctx, memh, &rkey_buf, &rkey_size);
  if (st != UCS_OK) return UcsError(fmt::format("transport: ucp_rkey_pack {}+{}", addr, length), st);
  const auto* rb = static_cast<const uint8_t*>(rkey_buf);
  region->packed_rkey_.assign(rb, rb + rkey_size);
  ucp_rkey_buffer_release(rkey_buf);
  return std::shared_ptr<const MemoryRegion>(std::move(region));
}

Context::RegistrationStats Context::registration_stats() const {
  return RegistrationStats{counts_->made.load(std::memory_order_relaxed),
                           counts_->live.load(std::memory_order_relaxed)};
}

}  // namespace ros2::transport
