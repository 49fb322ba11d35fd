// The libfabric provider's fabric: provider selection, fi_fabric, memory for
// bulk buffers, and Context::CreateOfi.
#include "transport/ofi/fabric.h"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include <sys/mman.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "common/log.h"
#include "transport/ofi/fabric_library.h"
#include "transport/cma.h"

namespace ros2::transport::ofi {
namespace {

constexpr uint32_t kFiVersion = FI_VERSION(1, 17);

std::string FiError(std::string_view what, int rc) {
  return fmt::format("{}: {} ({})", what, Fi().strerror(-rc), rc);
}

// With `rma`, also one-sided reads and writes (initiated always; served, by
// registrations with remote access, only when the process is an RMA target).
fi_info* Hints(const std::string& provider, const TransportOptions& options, bool rma) {
  fi_info* hints = Fi().dupinfo(nullptr);
  if (hints == nullptr) return nullptr;
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV;
  if (rma) {
    hints->caps |= FI_RMA | FI_READ | FI_WRITE;
    if (options.remote_rma_target) hints->caps |= FI_REMOTE_READ | FI_REMOTE_WRITE;
  }
  hints->mode = FI_CONTEXT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
  hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
  // Buffers are used unregistered (no FI_MR_LOCAL). With rma, a provider may
  // have keys name virtual addresses (FI_MR_VIRT_ADDR; tcp;ofi_rxm names
  // offsets into the registration instead); the keys stay the caller's
  // (random: no FI_MR_PROV_KEY, whose keys are a counter).
  hints->domain_attr->mr_mode = rma ? FI_MR_VIRT_ADDR : 0;
  if (!provider.empty()) hints->fabric_attr->prov_name = strdup(provider.c_str());
  const bool nic = provider.find("tcp") != std::string::npos || provider.find("verbs") != std::string::npos;
  if (nic && !options.net_devices.empty() && options.net_devices != "all" &&
      options.net_devices.find(',') == std::string::npos) {
    hints->domain_attr->name = strdup(options.net_devices.c_str());
  }
  return hints;
}

// Every provider fi_getinfo offers for RDM endpoints, for error messages.
std::string Offered() {
  fi_info* hints = Fi().dupinfo(nullptr);
  hints->ep_attr->type = FI_EP_RDM;
  fi_info* list = nullptr;
  std::set<std::string> names;
  if (Fi().getinfo(kFiVersion, nullptr, nullptr, 0, hints, &list) == 0) {
    for (fi_info* i = list; i != nullptr; i = i->next) {
      names.insert(fmt::format("{}/{}", i->fabric_attr->prov_name, i->domain_attr->name));
    }
    Fi().freeinfo(list);
  }
  Fi().freeinfo(hints);
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : " ") + n;
  return out.empty() ? "none" : out;
}

TransportKind KindOf(std::string_view prov) {
  if (prov.find("verbs") != std::string_view::npos) return TransportKind::kRdma;
  if (prov == "shm") return TransportKind::kShm;
  return TransportKind::kTcp;
}

}  // namespace

Status CheckPeerProvider(std::span<const uint8_t> inner, Provider mine, std::string_view peer) {
  const bool peer_ofi = inner.size() >= sizeof(kAddressTag) && std::memcmp(inner.data(), kAddressTag, 4) == 0;
  const Provider theirs = peer_ofi ? Provider::kOfi : Provider::kUcx;
  if (theirs == mine) return Status::Ok();
  return Status::NotSupported(fmt::format(
      "transport: {} runs the data plane on provider '{}', this process on '{}' (set the same transport.provider on "
      "engines, agents and clients)",
      peer, ProviderName(theirs), ProviderName(mine)));
}

std::string ProviderNameFor(const TransportOptions& options) {
  if (!options.ofi_provider.empty()) return options.ofi_provider;
  switch (options.kind) {
    case TransportKind::kTcp: return "tcp;ofi_rxm";
    case TransportKind::kShm: return "shm";
    case TransportKind::kRdma: return "verbs;ofi_rxm";
    case TransportKind::kAuto: break;
  }
  return "";
}

Result<std::unique_ptr<Fabric>> Fabric::Open(const TransportOptions& options) {
  ROS2_RETURN_IF_ERROR(LoadFabricLibrary().status());
  // The shm provider moves large messages by cross-memory attach to the pid
  // its peer announced, or through a file the sender names: either way the
  // receiver (an engine) would read or map what a client names. Segmented
  // copies through the shared region it set up itself (SAR) only.
  setenv("FI_SHM_DISABLE_CMA", "1", /*overwrite=*/1);
  // rxm sends a message eagerly only up to its buffer size (16 KiB by
  // default); a longer one takes its segmentation or rendezvous protocol.
  // A batch (up to batch_limit, plus header and integrity trailer) should
  // leave as one eager message: twice the 4 KiB bulk rate of the default over
  // tcp;ofi_rxm (ros2-bench transport, docs/transport.md). A user's own
  // setting stays.
  if (options.batch_limit > 0) {
    const uint64_t eager = std::max<uint64_t>(16384, options.batch_limit + 1024);
    setenv("FI_OFI_RXM_BUFFER_SIZE", std::to_string(eager).c_str(), /*overwrite=*/0);
  }
  const std::string wanted = ProviderNameFor(options);
  std::vector<std::string> candidates;
  if (wanted.empty()) {
    candidates = {"verbs;ofi_rxm", "shm", "tcp;ofi_rxm"};  // auto: the first that fi_getinfo offers
  } else {
    candidates = {wanted};
  }
  auto fabric = std::unique_ptr<Fabric>(new Fabric());
  std::string tried;
  for (const std::string& prov : candidates) {
    // One-sided bulk where the provider offers it, except over shm, whose
    // keys name memory by process id (docs/transport.md, "Remote memory").
    const bool try_rma = prov != "shm";
    fi_info* list = nullptr;
    int rc = -FI_ENODATA;
    for (bool rma : {true, false}) {
      if (rma && !try_rma) continue;
      fi_info* hints = Hints(prov, options, rma);
      if (hints == nullptr) return Status::Internal("transport: fi_allocinfo failed");
      rc = Fi().getinfo(kFiVersion, nullptr, nullptr, 0, hints, &list);
      Fi().freeinfo(hints);
      if (rc == 0 && list != nullptr) break;
    }
    if (rc != 0 || list == nullptr) {
      tried += fmt::format("{}{} ({})", tried.empty() ? "" : ", ", prov, Fi().strerror(-rc));
      continue;
    }
    // fi_getinfo matches a provider name by its first part too ("tcp" offers
    // "tcp;ofi_rxm"): take the exact provider asked for.
    fi_info* pick = nullptr;
    for (fi_info* i = list; i != nullptr; i = i->next) {
      if (prov != i->fabric_attr->prov_name) continue;
      // The domain named by net_devices ("lo"), else the first offered.
      const bool named = i->domain_attr->name != nullptr && options.net_devices == i->domain_attr->name;
      if (pick == nullptr || named) pick = i;
      if (named) break;
    }
    if (pick == nullptr) {
      Fi().freeinfo(list);
      tried += fmt::format("{}{} (offered only as part of a layered provider)", tried.empty() ? "" : ", ", prov);
      continue;
    }
    fabric->info_ = Fi().dupinfo(pick);
    Fi().freeinfo(list);
    fabric->provider_ = prov;
    fabric->kind_ = KindOf(prov);
    fabric->rma_ = (fabric->info_->caps & FI_RMA) != 0 && fabric->kind_ != TransportKind::kShm;
    fabric->rma_target_ = fabric->rma_ && (fabric->info_->caps & FI_REMOTE_READ) != 0;
    break;
  }
  if (fabric->info_ == nullptr) {
    return Status::NotSupported(
        fmt::format("transport ofi: no usable libfabric provider for RDM messages: {} "
                    "(offered: {})",
                    tried, Offered()));
  }
  int rc = Fi().fabric(fabric->info_->fabric_attr, &fabric->fabric_, nullptr);
  if (rc != 0) return Status::Internal(FiError("transport ofi: fi_fabric", rc));
  return fabric;
}

Fabric::~Fabric() {
  if (fabric_ != nullptr) fi_close(&fabric_->fid);
  if (info_ != nullptr) Fi().freeinfo(info_);
}

std::string Fabric::Describe() const {
  return fmt::format("transport=ofi provider={} fabric={} domain={} kind={} bulk={}", provider_,
                     info_->fabric_attr->name ? info_->fabric_attr->name : "?",
                     info_->domain_attr->name ? info_->domain_attr->name : "?", TransportKindName(kind_),
                     rma_ ? "rma" : "tagged");
}

Result<std::shared_ptr<const MemoryRegion>> Fabric::MapMemory(void* addr, uint64_t length, bool allocate) {
  std::shared_ptr<MemoryRegion> region(new MemoryRegion());
  if (allocate) {
    void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return Status::FromErrno(errno, fmt::format("transport ofi: allocate {} bytes", length));
    region->provider_handle_ = std::shared_ptr<void>(p, [length](void* q) { munmap(q, length); });
    addr = p;
  }
  region->base_ = static_cast<std::byte*>(addr);
  region->length_ = length;
  region->ucx_allocated_ = allocate;
  return std::shared_ptr<const MemoryRegion>(std::move(region));
}

}  // namespace ros2::transport::ofi

namespace ros2::transport {

Status Context::InitOfi(const TransportOptions& options) {
  if (options.inline_limit > (1u << 20)) {
    return Status::InvalidArgument(fmt::format("transport: inline_limit {} above 1 MiB", options.inline_limit));
  }
  if (options.max_outstanding_requests == 0 || options.max_outstanding_requests > (1u << 24)) {
    return Status::InvalidArgument("transport: max_outstanding_requests must be in 1 .. 16M");
  }
  if (options.force_rma_bulk) {
    return Status::NotSupported(
        "transport ofi: force_rma_bulk (libfabric moves bulk by RMA wherever the provider offers it, never over shm)");
  }
  options_ = options;
  options_.same_host_cma = false;  // same-host bulk rides the provider (shm) too
  ROS2_ASSIGN_OR_RETURN(ofi_, ofi::Fabric::Open(options));
  resolved_kind_ = ofi_->kind();
  ucx_tls_ = "ofi:" + ofi_->provider();
  devices_ = {fmt::format("{}/{}", ofi_->provider(), ofi_->info()->domain_attr->name)};
  cma_ = std::make_unique<cma::Authority>(options.cma_tokens_per_process);
  ROS2_LOG_INFO("transport: {}", Describe());
  return Status::Ok();
}

}  // namespace ros2::transport
