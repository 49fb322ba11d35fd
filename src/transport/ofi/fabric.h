// Internal: the libfabric provider of the transport (Provider::kOfi). One
// Fabric per Context: the fi_info chosen by provider name, the fabric and the
// domain; each Worker opens its own endpoint, address vector and completion
// queue on the domain (ofi/worker.h). Not a public header.
//
// How the transport's concepts map onto libfabric (docs/transport.md,
// "Providers"):
//   ucp_context       -> fi_fabric + fi_domain (this class)
//   ucp_worker        -> FI_EP_RDM endpoint + fi_av + fi_cq (FI_WAIT_FD)
//   ucp_ep            -> an fi_addr_t in the worker's address vector
//   active message    -> fi_send of one wire message into a posted buffer
//   AM rendezvous     -> a tagged send matched by a tagged receive posted on
//                        the destination buffer (the provider's rendezvous)
//   ucp_mem_map       -> plain memory; a client's bulk buffers are registered
//                        per worker (fi_mr_reg, remote access) where the
//                        provider offers FI_RMA (ofi/rma.cc)
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "transport/transport.h"

struct fi_info;
struct fid_fabric;
struct fid_domain;

namespace ros2::transport::ofi {

// The first bytes of the provider-specific part of a libfabric worker's
// address blob ("OFI" and a format version): a UCX worker given such an
// address (or a libfabric worker given a UCX one) refuses it at Connect.
inline constexpr uint8_t kAddressTag[4] = {'O', 'F', 'I', 1};

// OK when `inner` (the provider part of a peer's address blob) is of the
// provider `mine`; otherwise NotSupported naming both providers and `peer`.
Status CheckPeerProvider(std::span<const uint8_t> inner, Provider mine, std::string_view peer);

// The libfabric provider name `options` selects: ofi_provider if set, else
// from kind ("tcp;ofi_rxm", "shm", "verbs;ofi_rxm"); empty for auto.
std::string ProviderNameFor(const TransportOptions& options);

class Fabric {
 public:
  // fi_getinfo for FI_EP_RDM with FI_MSG | FI_TAGGED | FI_SOURCE |
  // FI_DIRECTED_RECV and manual progress, restricted to the provider name
  // (and, for tcp, the domain of net_devices), with FI_RMA first except for shm; then fi_fabric.
  // NotSupported names the provider and lists the ones fi_getinfo offers.
  static Result<std::unique_ptr<Fabric>> Open(const TransportOptions& options);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  fi_info* info() const { return info_; }
  fid_fabric* fabric() const { return fabric_; }
  fid_domain* domain() const { return domain_; }
  // "tcp;ofi_rxm", "shm", ...
  const std::string& provider() const { return provider_; }
  // tcp for tcp-based providers, shm for shm, rdma for verbs.
  TransportKind kind() const { return kind_; }
  std::string Describe() const;
  // Whether bulk above the inline limit moves by one-sided fi_read/fi_write
  // (the provider offers FI_RMA and is not shm); rma_target(): whether this
  // process may register memory for remote access (TransportOptions::
  // remote_rma_target: an engine never does).
  bool rma() const { return rma_; }
  bool rma_target() const { return rma_target_; }
  // Memory for bulk buffers. Registrations with remote keys are made per
  // worker (each worker has its own domain), so the region's packed key is
  // empty.
  Result<std::shared_ptr<const MemoryRegion>> MapMemory(void* addr, uint64_t length, bool allocate);

 private:
  Fabric() = default;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  std::string provider_;
  TransportKind kind_ = TransportKind::kTcp;
  bool rma_ = false;
  bool rma_target_ = false;
};

// Context::CreateWorker for a libfabric context.
Result<std::unique_ptr<Worker>> CreateWorker(Context& context, std::string_view name);

}  // namespace ros2::transport::ofi
