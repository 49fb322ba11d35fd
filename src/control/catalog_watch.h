// CatalogWatch: how an engine of an etcd cluster learns of pools and
// containers destroyed through another engine (docs/cluster.md, "Destroyed
// pools"). Two etcd watches (etcd's own Watch service, EtcdWatch) of the
// prefixes of the pool records ("pool/<uuid>") and the container records
// ("cont/<pool>/<uuid>"): each deletion is handed to Catalog::ObserveDestroyed,
// which tells the engine (EngineHooks::OnPoolDestroy / OnContainerDestroy,
// once per pool or container), so its targets stop serving it and drop its
// shards, as on the engine that destroyed it.
//
// Start reads the current revision first and watches from the next one;
// each watch re-opens itself on another etcd endpoint after a failure, from
// the revision after the last event it saw (EtcdWatch).
//
// Owned by ControlPlane (after JoinCluster). The destructor stops the watches.
#pragma once

#include <memory>

#include "common/status.h"
#include "control/catalog.h"
#include "control/etcd_client.h"
#include "control/etcd_store.h"

namespace ros2::control {

class CatalogWatch {
 public:
  // REQUIRES: store and catalog outlive the watch.
  static Result<std::unique_ptr<CatalogWatch>> Start(EtcdStore* store, Catalog* catalog);
  ~CatalogWatch();
  CatalogWatch(const CatalogWatch&) = delete;
  CatalogWatch& operator=(const CatalogWatch&) = delete;

 private:
  CatalogWatch() = default;
  std::unique_ptr<EtcdWatch> pools_;
  std::unique_ptr<EtcdWatch> containers_;
};

}  // namespace ros2::control
