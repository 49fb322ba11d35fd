// EtcdStore: the StateStore in an etcd v3 cluster (`control.store: etcd://...`),
// shared by every engine of a cluster (docs/cluster.md, "The store").
//
// Every key of the state store schema lives under a namespace prefix
// ("ros2/" unless configured). A Write is one etcd Txn: its compares (a key's
// value equal, or the key absent: create_revision 0), then its deletes and puts,
// so every atomic change of the control plane (a pool and its label, a tenant's
// deletion with its revocation) is applied whole or not at all, and a change
// guarded by the leader key is refused once its writer is no longer leader.
// Errors name etcd and its endpoints.
//
// Thread-safe (EtcdClient is).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "control/etcd_client.h"
#include "control/state_store.h"

namespace ros2::control {

class EtcdStore final : public StateStore {
 public:
  // `client` is shared with the engine's cluster membership.
  EtcdStore(std::shared_ptr<EtcdClient> client, std::string ns);

  Result<std::string> Get(std::string_view key) const override;
  Status Write(const StoreBatch& batch) override;
  Result<std::vector<std::pair<std::string, std::string>>> Scan(std::string_view prefix) const override;
  std::string Describe() const override { return client_->name() + " (namespace '" + ns_ + "')"; }
  bool shared() const override { return true; }

  // The etcd key of a store key (the namespace prepended).
  std::string EtcdKey(std::string_view key) const { return ns_ + std::string(key); }
  EtcdClient& client() { return *client_; }
  const std::string& ns() const { return ns_; }
  // Fills `txn` from `batch` (the caller may add compares of its own).
  void BuildTxn(const StoreBatch& batch, etcdserverpb::TxnRequest* txn) const;
  // While set (this engine leads), every batch that changes a pool record
  // (its map) also compares that `key` still holds `value`, so a deposed
  // leader cannot change a pool map; a batch refused for that fails with
  // Disconnected ("no longer the leader"). nullopt clears it.
  void SetLeaderGuard(std::string key, std::optional<std::string> value);

 private:
  std::shared_ptr<EtcdClient> client_;
  std::string ns_;
  mutable std::mutex guard_mu_;
  std::string guard_key_;                   // GUARDED_BY(guard_mu_)
  std::optional<std::string> guard_value_;  // GUARDED_BY(guard_mu_)
};

}  // namespace ros2::control
